"""Behaviour kept: the reference runs (:mod:`tests.reference.cases`, recorded before the package was reshaped).

1. The engine: every prompt a reference run asked (comparisons, absolute reads, generations, reasons) is asked
   again, as recorded (the same text, read and frame): the read log-probabilities lie within 1e-4 nats of the
   reference's, the prompt tokens are the same, and the generated texts are equal (on a CPU with the reference
   machine's instruction set: float32 sums in another order may break a near-tie between two tokens).
2. The tables: each case runs again, on a local Ray, with a judgement store that holds the reference's answers;
   every prompt is answered from it (so the prompts are rendered as before, to the character), and every table
   the run computes equals the reference's (floats within 1e-9).

The same engine (one start) also counts what a run's prompts make it compute: the estimate that carries the engine
modes' rates over to a run (pipeline.judge.prefill) equals the engine's own count, prompt by prompt.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from tests.conftest import ROOT, compose
from tests.reference.cases import CASES, COMMON, TABLES, assert_tables_equal, folder, meta, table_frame

pytestmark = [pytest.mark.engine, pytest.mark.ray, pytest.mark.slow]

LOGPROB_TOLERANCE = 1e-4


def answers(case: str) -> pl.DataFrame:
    return pl.read_parquet(folder(case) / "answers.parquet")


def same_instruction_set() -> bool:
    from pipeline.judge.hardware import read_cpu

    return sorted(read_cpu().speed_flags()) == meta()["cpu_flags"]


def case_config(case: str, output_root, *more: str):
    return compose([*COMMON, *CASES[case], f"paths.output_root={output_root}", *more])


@pytest.fixture(scope="module")
def judge_spec(cache_dir):
    from pipeline.judge.models import resolve_judge

    # the engine where an in-process run has it, in vLLM's own processes (tests/conftest.compose would put it inside
    # this process: 20 s sooner to start, but about as much slower to judge the cases' 258 prompts)
    return resolve_judge(compose([*COMMON, "judge.engine_process=own"]).judge, cache_dir)


@pytest.fixture(scope="module")
def engine(judge_spec):
    from pipeline.judge.vllm.engine import VLLMEngine

    made = VLLMEngine(judge_spec)
    yield made
    made.close()


@pytest.mark.parametrize("case", list(CASES))
def test_the_engine_answers_every_reference_prompt_as_recorded(case, engine):
    from pipeline.contracts.engine import Request
    from pipeline.contracts.frame import PromptFrame

    recorded = answers(case)
    texts_checked = same_instruction_set()
    for (request, frame), group in recorded.group_by(["request", "frame"], maintain_order=True):
        fields = json.loads(request)
        read = Request(**{**fields, "token_ids": tuple(fields["token_ids"]), "stop": tuple(fields["stop"])})
        frame_ = PromptFrame(**json.loads(frame))
        prompts = group["prompt"].to_list()
        results = engine.run(frame_.encode(engine.tokenizer, prompts), read)
        assert [r.prompt_tokens for r in results] == group["prompt_tokens"].to_list()
        if read.token_ids:
            got = np.array([r.token_logprobs for r in results])
            want = np.array(group["token_logprobs"].to_list())
            worst = float(np.abs(got - want).max())
            assert worst <= LOGPROB_TOLERANCE, f"{case}: a read log-probability moved by {worst:.2e} nats"
        if texts_checked:
            assert [r.texts for r in results] == group["texts"].to_list()


@pytest.mark.parametrize("case", list(CASES))
def test_every_table_computed_from_the_reference_answers_equals_the_reference(
    case, judge_spec, tmp_path, ray_cluster
):
    from pipeline.contracts.engine import Request, Result
    from pipeline.run.context import run
    from pipeline.storage.judgements import JudgementStore

    store_path = tmp_path / "judgements.sqlite"
    store = JudgementStore(store_path, judge_spec.identity())
    for request, group in answers(case).group_by("request", maintain_order=True):
        fields = json.loads(request[0])
        read = Request(**{**fields, "token_ids": tuple(fields["token_ids"]), "stop": tuple(fields["stop"])})
        results = [
            Result(
                **{k: row[k] for k in ("token_logprobs", "texts", "finish_reasons")},
                **{k: row[k] for k in ("prompt_tokens", "cached_tokens", "generated_tokens")},
            )
            for row in group.iter_rows(named=True)
        ]
        store.put(group["prompt"].to_list(), read, results)
    store.close()

    result = run(case_config(case, tmp_path / "outputs", f"judge.store_path={store_path}"), ROOT)
    stats = result.judge_stats
    assert stats is not None and stats.judged_now == stats.reused, (
        f"{case}: {stats.judged_now - stats.reused} prompt(s) were not among the reference's: a prompt's text changed"
    )
    want = {p.stem for p in (folder(case) / "tables").glob("*.parquet")}
    got = {name for name in TABLES if result.values.get(name) is not None and result.values[name].num_rows}
    assert got == want
    for name in sorted(want):
        reference = pl.read_parquet(folder(case) / "tables" / f"{name}.parquet")
        assert_tables_equal(name, table_frame(result.values[name]), reference)
