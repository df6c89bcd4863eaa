"""Workflows are declared lists of stages: wiring checked when built, outputs checked when run, docs in sync."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from pipeline.contracts.errors import ConfigError
from pipeline.contracts.schemas import HUMAN_SCORES, SchemaError
from pipeline.stages import ports
from pipeline.stages.base import Port, Stage
from pipeline.workflows.catalog import assessment, build
from pipeline.workflows.core import Segment, Workflow, WorkflowError
from pipeline.workflows.describe import EXAMPLES, describe
from tests.conftest import ROOT, compose

NUMBER = Port("number", "a number", type=int)
HUMAN = Port("human_scores", "human scores", schema=HUMAN_SCORES, file="human_scores")


def flow(*stages: Stage) -> Workflow:
    """A workflow of one segment."""
    return Workflow("w", (Segment("all", stages),))


class Ctx:
    def __init__(self):
        self.metrics: dict[str, float] = {}
        self.files: list[Path] = []


@dataclass(frozen=True)
class MakeNumber(Stage):
    """Write a number."""

    value: int
    name = "make_number"
    writes = (NUMBER,)

    def run(self, ctx):
        return {"number": self.value}


@dataclass(frozen=True)
class MakeScores(Stage):
    """Write one human score per number."""

    bad: str = ""
    name = "make_scores"
    reads = (NUMBER,)
    writes = (HUMAN,)

    def run(self, ctx, *, number: int):
        frame = pl.DataFrame(
            {
                "context_id": ["c"] * number,
                "candidate_id": [f"k{n}" for n in range(number)],
                "attribute": ["a"] * number,
                "human_score": [float(n) for n in range(number)],
            }
        )
        if self.bad == "extra":
            frame = frame.with_columns(surprise=pl.lit(1))
        if self.bad == "type":
            frame = frame.with_columns(human_score=pl.lit("high"))
        if self.bad == "undeclared":
            return {"human_scores": frame, "other": 1}
        return {"human_scores": frame}


def test_the_comparative_workflow_is_its_declared_list():
    # every optional part on: reasons, the jury's scores (of two templates), trust
    on = ["trust.enabled=true", "reasons.n=4", "experiment=jury_templates", "scoring.jury=true"]
    workflow = assessment(compose(on), ROOT)
    assert [s.name for s in workflow.stages] == [
        "load_input",
        "resolve_judge",
        "prepare_prompts",
        "check_answers",
        "check_trust",
        "open_store",
        "shard_contexts",
        "judge",
        "reduce",
        "reasons",
        "score",
        "rate",
        "combine",
        "jury",
        "leaderboard",
        "correlate",
        "meta_evaluate",
        "draw_labels",
        "certify",
        "ppi_leaderboard",
        "card",
        "cost",
        "report",
    ]
    # every table a stage writes has the schema of pipeline/schemas.py and a file in the run folder
    written = {p.name: p for s in workflow.stages for p in s.writes}
    for name in (
        "candidates",
        "judgments",
        "ratings",
        "comparisons",
        "position_bias",
        "scores",
        "absolute_scores",
        "correlations",
        "cost",
        "assessment",
        "leaderboard",
        "meta_evaluation",
        "left_out",
        "labels",
        "trust",
        "accepted",
        "risk_coverage",
        "ppi_leaderboard",
    ):
        assert written[name].schema is not None and written[name].file == name
    assert written["prompt_plan"].type is not None and written["judge"].file == "judge"
    # an optional part the run does not use is not in the workflow (the default: no reasons on the comparative
    # workflow, no jury, no trust; trust.ppi=false: no PPI leaderboard): pipeline.config.keys.PARTS decides
    optional = {"reasons", "jury", "check_trust", "draw_labels", "certify", "ppi_leaderboard"}
    assert not optional & {s.name for s in assessment(compose(), ROOT).stages}
    no_ppi = {s.name for s in assessment(compose([*on, "trust.ppi=false"]), ROOT).stages}
    assert optional - no_ppi == {"ppi_leaderboard"}


def test_a_port_of_a_part_a_workflow_leaves_out_is_read_as_its_empty_table_and_written_all_the_same(tmp_path):
    from pipeline.stages.base import check_wiring, run_stages

    @dataclass(frozen=True)
    class Reads(Stage):
        name = "reads_trust"
        reads = (ports.TRUST,)
        writes = (ports.SUMMARY,)

        def run(self, ctx, *, trust):
            return {"summary": f"{trust.num_rows} rows, columns {trust.schema.names}"}

    @dataclass(frozen=True)
    class ReadsComparisons(Reads):
        name = "reads_comparisons"
        reads = (ports.COMPARISONS,)

        def run(self, ctx, *, comparisons):
            return {"summary": ""}

    @dataclass(frozen=True)
    class Writes(Stage):
        name = "writes_trust"
        writes = (ports.TRUST, ports.ACCEPTED, ports.RISK_COVERAGE)

        def run(self, ctx):
            return {p.name: p.schema.empty_table() for p in self.writes}

    written = []

    class Ctx:
        metrics: dict = {}

    values = run_stages([Reads()], Ctx(), {}, lambda port, value: written.append((port.name, value.num_rows)))
    assert values["summary"] == f"0 rows, columns {ports.TRUST.schema.names}"
    assert written == [("trust", 0)]
    with pytest.raises(WorkflowError, match="writes 'trust', which an earlier stage read"):
        check_wiring([Reads(), Writes()], {}, "test")
    with pytest.raises(WorkflowError, match="reads 'comparisons', which no earlier stage writes"):
        check_wiring([ReadsComparisons()], {}, "test")  # a port that is not optional must be written


def test_an_adaptive_run_without_the_rounds_model_among_its_methods_is_warned(caplog):
    from pipeline.workflows.catalog import adaptive

    with caplog.at_level("WARNING", logger="pipeline"):
        adaptive(compose(["workflow=adaptive", "adaptive.budget.calls_per_item=4"]), ROOT)
    assert "has no poe_logit: the report ranks by poe_gaussian" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="pipeline"):
        workflow = adaptive(compose(["experiment=summeval_pool"]), ROOT)
    assert "poe_logit" not in caplog.text
    report = next(s for s in workflow.stages if s.name == "report")
    assert report.plot_method == "poe_logit"  # the preset's report draws the rounds' model


def test_an_adaptive_run_scores_poe_logit_with_the_rounds_settings():
    """The rounds' adaptive.* model settings reach the score stage's poe_logit; other workflows keep the
    defaults."""
    from pipeline.methods.scorers import poe_logit
    from pipeline.workflows.catalog import adaptive, assessment

    overrides = [
        "experiment=summeval_pool",
        "adaptive.logit_clip=6",
        "adaptive.robust=null",
        "adaptive.censor=false",
        "adaptive.ridge=0.1",
        "adaptive.drop_contradicted=false",
    ]
    score = next(s for s in adaptive(compose(overrides), ROOT).stages if s.name == "score")
    assert score.logit == poe_logit.Settings(6.0, None, False, 0.1, False)
    plain = next(s for s in assessment(compose([]), ROOT).stages if s.name == "score")
    assert plain.logit == poe_logit.DEFAULTS
    # the rounds' settings in a run without rounds: refused, not ignored
    with pytest.raises(ConfigError, match="adaptive.logit_clip=6.0 is set, but this run does not use it"):
        compose(overrides[1:])


def test_the_workflows_page_lists_every_workflow_as_declared():
    page = (ROOT / "docs" / "workflows.md").read_text()
    assert describe() in page, "docs/workflows.md is out of date: paste `make stages` into it"
    for name in ("comparative", "generate", "adaptive"):
        assert f"Workflow `{name}` (input → prompts → judge → score → report)" in page


def test_every_workflow_is_composed_of_named_segments():
    for overrides in EXAMPLES.values():
        cfg = compose(overrides)
        flow = build(cfg, ROOT)
        jury = ["jurors"] if cfg.jury.judges else []  # a jury's further judges after the run's judge
        assert [s.name for s in flow.segments] == ["input", "prompts", "judge", *jury, "score", "report"]
        assert flow.segment("judge").stages == tuple(
            s for s in flow.stages if s in flow.segment("judge").stages
        )
    with pytest.raises(WorkflowError, match="segment names repeat"):
        Workflow("w", (Segment("a", (MakeNumber(1),)), Segment("a", ())))


def test_a_read_no_earlier_stage_writes_is_refused():
    with pytest.raises(WorkflowError, match="make_scores reads 'number', which no earlier stage writes"):
        flow(MakeScores())


def reading_number(name: str, run) -> Stage:
    """A stage reading the number and writing human scores by ``run``."""

    @dataclass(frozen=True)
    class Reader(Stage):
        reads = (NUMBER,)
        writes = (HUMAN,)

    Reader.name, Reader.run = name, run
    return Reader()


def test_run_must_take_exactly_the_declared_reads():
    def run(self, ctx, *, number: int, other: int = 0):
        return {}

    with pytest.raises(
        WorkflowError, match=r"sloppy.run takes \['number', 'other'\] but declares reads \['number'\]"
    ):
        flow(MakeNumber(2), reading_number("sloppy", run))


def test_a_run_passing_its_inputs_on_takes_every_declared_read():
    def passes_on(self, ctx, **given):
        return MakeScores().run(ctx, **given)

    def unread(self, ctx, *, other: int = 0, **given):
        return {}

    values = flow(MakeNumber(2), reading_number("pass_on", passes_on)).run(Ctx())
    assert values["human_scores"].num_rows == 2
    with pytest.raises(WorkflowError, match=r"unread.run takes \['other'\] but declares reads \['number'\]"):
        flow(MakeNumber(2), reading_number("unread", unread))


def test_outputs_are_checked_and_persisted():
    persisted = []
    values = flow(MakeNumber(3), MakeScores()).run(Ctx(), persist=lambda p, v: persisted.append(p.name))
    assert isinstance(values["human_scores"], pa.Table) and values["human_scores"].schema.equals(HUMAN_SCORES)
    assert persisted == ["human_scores"]


@pytest.mark.parametrize(
    "bad,error,message",
    [
        (
            "extra",
            SchemaError,
            r"stage make_scores: table 'human_scores': column\(s\) \['surprise'\] are not in",
        ),
        ("type", SchemaError, "stage make_scores: table 'human_scores': column 'human_score' has type"),
        ("undeclared", WorkflowError, r"returned \['human_scores', 'other'\], declared \['human_scores'\]"),
    ],
)
def test_an_output_that_breaks_its_declaration_names_the_stage(bad, error, message):
    with pytest.raises(error, match=message):
        flow(MakeNumber(3), MakeScores(bad)).run(Ctx())


def test_stop_after_and_stage_timings():
    ctx = Ctx()
    values = flow(MakeNumber(3), MakeScores()).run(ctx, stop_after="make_number")
    assert values == {"number": 3} and set(ctx.metrics) == {"stage/make_number/seconds"}
    with pytest.raises(KeyError, match="no stage 'nope'"):
        flow(MakeNumber(3)).run(Ctx(), stop_after="nope")


def test_every_port_is_documented_once():
    declared = [v for v in vars(ports).values() if isinstance(v, Port)]
    assert len({p.name for p in declared}) == len(declared)
    assert all(p.doc and not re.search(r"\bTODO\b", p.doc) for p in declared)


def test_every_registered_workflow_is_composed_by_the_function_its_entry_names():
    """Workflows register by entry points as backends and scorers do (pipeline.config.workflows); each names the
    function composing its segments by text (``module:function``), loaded when the run is built, so nothing in the
    config imports up the layers; an unknown name is refused when the config is converted, listing the valid ones."""
    import importlib.metadata

    from pipeline.config.workflows import workflows
    from pipeline.workflows import catalog

    entries = workflows()
    points = importlib.metadata.entry_points(group="llm_comparative_assessment.workflows")
    assert set(entries) == {"comparative", "absolute", "generate", "adaptive"} == {p.name for p in points}
    assert {e.name: e.composer() for e in entries.values()} == {
        "comparative": catalog.assessment,
        "absolute": catalog.assessment,
        "generate": catalog.generate,
        "adaptive": catalog.adaptive,
    }
    assert "import pipeline.workflows" not in (ROOT / "pipeline" / "config" / "workflows.py").read_text()
    with pytest.raises(ConfigError, match="config workflow: unknown workflow 'pairwise'; valid: "):
        compose(["workflow=pairwise"])
