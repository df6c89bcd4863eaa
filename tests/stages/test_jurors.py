"""The jury's further judges (pipeline.stages.jurors) with stand-in stages, no engine: each juror is made ready
before anything is written (resolved: two judges with one name stop the run there), then its stages run in its own
folder of the run with what the run gives them, its outputs written there, its metrics under juror/<name>/, its
judgments joined to the run's judge's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

from pipeline.contracts.errors import ConfigError
from pipeline.contracts.schemas import CANDIDATES, JUDGMENTS, LEFT_OUT
from pipeline.data.records import InputReport
from pipeline.data.source import DatasetInfo
from pipeline.data.words import PromptWords
from pipeline.judge.spec import JudgeSpec
from pipeline.stages import ports
from pipeline.stages.base import Stage, StageContext, WorkflowError
from pipeline.stages.jurors import JudgeJurors, Juror, PrepareJurors
from pipeline.testing.stages import Context


def spec(name: str) -> JudgeSpec:
    return JudgeSpec(backend="vllm", model="m", model_path="/m", name=name, max_model_len=512)


def judgments(judge: str, n: int) -> pa.Table:
    rows = {f.name: [None] * n for f in JUDGMENTS}
    rows |= {
        "context_id": ["c"] * n,
        "attribute": ["quality"] * n,
        "template_id": ["t"] * n,
        "cand_a": [f"a{k}" for k in range(n)],
        "cand_b": [f"b{k}" for k in range(n)],
        "judge": [judge] * n,
        "label_logprobs": [[-0.5, -1.0]] * n,
        "logprob_a": [-0.5] * n,
        "logprob_b": [-1.0] * n,
        "p_a": [0.6] * n,
        "p_tie": [0.0] * n,
        "label_mass": [1.0] * n,
        "prompt_tokens": [10] * n,
        "cached_tokens": [0] * n,
        "seconds": [0.1] * n,
    }
    return pa.table(rows, schema=JUDGMENTS)


@dataclass(frozen=True)
class Resolve(Stage):
    judge_name: str

    name = "resolve_judge"
    writes = (ports.JUDGE,)

    def run(self, ctx: StageContext) -> dict[str, Any]:
        return {"judge": spec(self.judge_name)}


@dataclass(frozen=True)
class FakeJudge(Stage):
    """Judges every candidate pair once; notes where it ran."""

    n: int

    name = "judge"
    reads = (ports.CANDIDATES, ports.JUDGE)
    writes = (ports.JUDGMENTS,)

    def run(self, ctx: StageContext, *, candidates: pa.Table, judge: JudgeSpec) -> dict[str, Any]:
        (ctx.run_dir / "judged.txt").write_text(str(candidates.num_rows))
        ctx.metrics["judge/comparisons"] = float(self.n)
        return {"judgments": judgments(judge.name, self.n)}


def given() -> dict[str, Any]:
    candidates = pa.table(
        {
            "context_id": ["c", "c"],
            "context": ["", ""],
            "candidate_id": ["x", "y"],
            "candidate_index": [0, 1],
            "system": [None, None],
            "text": ["one", "two"],
            "category": [None, None],
            "checklist": [None, None],
        },
        schema=CANDIDATES,
    )
    words = PromptWords("context", "text", {"quality": "good"}, {"quality": "quality"})
    return {
        "candidates": candidates,
        "input_report": InputReport(n_contexts=1, n_candidates=2),
        "dataset": DatasetInfo("test", "-", ("quality",), words),
        "judge": spec("first"),
        "judgments": judgments("first", 3),
    }


def run_jury(stage_jurors: tuple[Juror, ...], ctx: Context) -> dict[str, Any]:
    """The jurors made ready (PrepareJurors), then judging (JudgeJurors), as the workflow runs them."""
    values = given()
    prepared = PrepareJurors(stage_jurors).run(
        ctx, **{k: values[k] for k in ("candidates", "input_report", "dataset", "judge")}
    )
    return JudgeJurors(stage_jurors).run(
        ctx, jury=prepared["jury"], judgments=values["judgments"], left_out=LEFT_OUT.empty_table()
    )


def test_each_juror_judges_in_its_own_folder_and_its_judgments_join_the_runs(tmp_path):
    jurors = (
        Juror("second", (Resolve("second"),), (FakeJudge(2),)),
        Juror("third", (Resolve("third"),), (FakeJudge(4),)),
    )
    ctx = Context(tmp_path)
    out = run_jury(jurors, ctx)
    table = out["judgments"]
    assert table.num_rows == 3 + 2 + 4
    counts = {j: table.column("judge").to_pylist().count(j) for j in ("first", "second", "third")}
    assert counts == {"first": 3, "second": 2, "third": 4}
    for name in ("second", "third"):
        folder = tmp_path / "jurors" / name
        assert (folder / "judged.txt").read_text() == "2"  # the run's candidates
        assert (folder / "judge.json").exists()  # its outputs written in its folder
        assert (folder / "tables" / "judgments.parquet").exists()
    assert ctx.metrics["juror/second/judge/comparisons"] == 2.0
    assert ctx.metrics["juror/third/judge/comparisons"] == 4.0
    assert "judge/comparisons" not in ctx.metrics  # the run's own judge's metrics are its own


def test_jurors_are_made_ready_before_anything_is_written(tmp_path):
    ctx = Context(tmp_path)
    values = given()
    jurors = (Juror("second", (Resolve("second"),), (FakeJudge(2),)),)
    prepared = PrepareJurors(jurors).run(
        ctx, **{k: values[k] for k in ("candidates", "input_report", "dataset", "judge")}
    )
    assert not (tmp_path / "jurors").exists()  # nothing written before the jurors judge
    [ready] = prepared["jury"]
    assert ready.name == "second" and ready.values["judge"].name == "second"
    assert [port.name for port, _ in ready.outputs] == ["judge"]


def test_two_judges_with_one_name_stop_before_any_judge_judges(tmp_path):
    jurors = (
        Juror("second", (Resolve("second"),), (FakeJudge(2),)),
        Juror("again", (Resolve("first"),), (FakeJudge(2),)),
    )
    with pytest.raises(ConfigError, match=r"repeat \['first'\]"):
        run_jury(jurors, Context(tmp_path))
    assert not (tmp_path / "jurors").exists()


def test_a_juror_whose_stages_resolve_no_judge_or_write_no_judgments_is_refused_when_built():
    with pytest.raises(WorkflowError, match="must resolve a judge"):
        PrepareJurors((Juror("second", (), (FakeJudge(2),)),))
    with pytest.raises(WorkflowError, match="must resolve a judge and write its judgments"):
        JudgeJurors((Juror("second", (Resolve("second"),), (Resolve("second"),)),))
