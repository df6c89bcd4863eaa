"""Reasoning, then the verdict (judge.reasoning), end to end on the real CPU vLLM engine through the in-process
executor: comparisons in both orderings and G-Eval ratings each get a reasoning text and a verdict; each verdict's
label log-probabilities equal a direct vLLM call on the same whole text; a rerun after losing part of the results
judges only what was lost; the reasoning's tokens are in the cost."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from pipeline.contracts.engine import Request
from pipeline.judge.vllm.engine import VLLMEngine
from pipeline.run.context import run
from tests.conftest import compose

pytestmark = [pytest.mark.engine, pytest.mark.slow]

BUDGET = 24


@pytest.fixture(scope="module")
def reasoning_run(datasets, tmp_path_factory):
    out = tmp_path_factory.mktemp("reasoning")
    cfg = compose(
        [
            "experiment=absolute_3ctx",
            "runtime=inprocess",
            f"dataset.path={datasets / 'summeval' / 'summeval.jsonl'}",
            "dataset.max_contexts=1",
            "dataset.max_candidates=3",
            "absolute.modes=[g_eval]",
            "judge.reasoning.enabled=true",
            f"judge.reasoning.max_tokens={BUDGET}",
            "judge.store=false",
            # float32: bfloat16 results depend on how prompts are batched (0.1 nats here), float32's by 3e-5
            "+judge.engine.dtype=float32",
            "judge.env.VLLM_CPU_KVCACHE_SPACE=2",
            f"paths.output_root={out}",
            "tracking.plots=false",
        ]
    )
    return cfg, run(cfg)


def test_every_prompt_has_its_reasoning_and_verdict(reasoning_run):
    _, result = reasoning_run
    j = pl.from_arrow(result.values["judgments"])
    r = pl.from_arrow(result.values["ratings"])
    assert j.height == 3 * 2 and r.height == 3  # both orderings of 3 pairs; one G-Eval rating per candidate
    for table in (j, r):
        assert table["reasoning"].null_count() == 0 and (table["reasoning"].str.len_chars() > 0).all()
        assert table["reasoning_tokens"].is_between(1, BUDGET).all()
        # a reasoning cut at the budget is marked, and its verdict is still read
        np.testing.assert_array_equal(table["reasoning_cut"], table["reasoning_tokens"] == BUDGET)
    assert j["p_a"].is_finite().all() and r["score"].is_not_null().all()
    cost = pl.from_arrow(result.values["cost"])
    compare = cost.filter(pl.col("mode") == "compare")
    assert compare["generated_tokens"][0] == j.height + j["reasoning_tokens"].sum()


def test_each_verdict_is_the_engines_read_on_the_whole_text(reasoning_run):
    """Rebuild every comparison's whole text (prompt message, the stored reasoning, the closing text and the answer
    prefix) and read the label words on it with vLLM directly: the same log-probabilities within 1e-4 nats."""
    cfg, result = reasoning_run
    plan = result.values["prompt_plan"]
    candidates = pl.from_arrow(result.values["candidates"])
    text = dict(zip(candidates["candidate_id"], candidates["text"], strict=True))
    context = candidates["context"][0]
    j = pl.from_arrow(result.values["judgments"])
    template = plan.templates[0]
    whole = []
    for row in j.iter_rows(named=True):
        prompt = plan.prompt(template, row["attribute"], context, text[row["cand_a"]], text[row["cand_b"]])
        message, prefix = plan.frame.split(prompt)
        r = cfg.judge.reasoning
        whole.append(plan.frame.wrap(message) + r.open + row["reasoning"] + r.close + prefix)
    engine = VLLMEngine(result.values["judge"])
    try:
        direct = engine.answer(whole, plan.frame, Request(token_ids=plan.labels.token_ids, max_tokens=1))
    finally:
        engine.close()
    got = np.array(j["label_logprobs"].to_list())
    want = np.array([d.token_logprobs for d in direct])
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_a_rerun_judges_only_the_lost_results(reasoning_run):
    cfg, result = reasoning_run
    before = pl.from_arrow(result.values["judgments"])
    parts = sorted((result.run_dir / "judgments").glob("part-*.parquet"))
    kept = pq.read_table(parts[0])
    pq.write_table(kept.slice(0, 2), parts[0])  # lose all but two comparisons
    for part in parts[1:]:
        part.unlink()
    cfg.paths.run_dir = str(result.run_dir)
    cfg.tracking.enabled = False
    again = run(cfg)
    assert again.judge_stats.judged_now == before.height - 2
    after = pl.from_arrow(again.values["judgments"])
    keys = ["context_id", "cand_a", "cand_b"]
    joined = before.join(after, on=keys, suffix="_again")
    assert joined.height == before.height
    # greedy reasoning and an exact read: the same reasoning and verdict again
    assert (joined["reasoning"] == joined["reasoning_again"]).all()
    np.testing.assert_allclose(joined["p_a"], joined["p_a_again"], atol=1e-4)
