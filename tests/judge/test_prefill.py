"""The tokens an engine computes for prompts with its prefix cache (pipeline.judge.prefill): a hand-worked case, a
brute-force reference under hypothesis, and a SummEval run's prompts sampled by the product's own stages (the real
engine's count of the same prompts: tests/run/test_reference.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.judge.prefill import computed_tokens, per_prompt, shared_prefix


def test_a_hand_worked_order_of_prompts():
    prompts = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 6], [1, 2, 9], [1, 2, 3, 4, 5], [7]]
    # blocks of 2: the second shares 4 (two blocks), the third 2 (one block, its last token computed), the fourth
    # is the first again (all but its last token held: two blocks), the fifth shares nothing
    assert computed_tokens(prompts, 2) == [5, 1, 1, 1, 1]
    # blocks of 3: 4 shared tokens hold one block
    assert computed_tokens(prompts, 3) == [5, 2, 3, 2, 1]
    assert computed_tokens(prompts, 1) == [5, 1, 1, 1, 1]
    assert per_prompt(prompts, 2) == pytest.approx(9 / 5) and per_prompt([], 2) is None
    with pytest.raises(ValueError, match="at least one token"):
        computed_tokens(prompts, 0)


def brute_force(prompts: list[list[int]], block: int) -> list[int]:
    out = []
    for k, p in enumerate(prompts):
        longest = max((shared_prefix(p, q) for q in prompts[:k]), default=0)
        out.append(len(p) - (min(longest, len(p) - 1) // block) * block)
    return out


PROMPTS = st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=12), max_size=25)


@given(PROMPTS, st.integers(1, 5))
def test_the_sorted_neighbours_give_the_longest_prefix_shared_with_any_earlier_prompt(prompts, block):
    computed = computed_tokens(prompts, block)
    assert computed == brute_force(prompts, block)
    assert all(1 <= c <= len(p) for c, p in zip(computed, prompts, strict=True))
    if prompts:
        assert computed[0] == len(prompts[0])  # an empty cache holds nothing


@given(PROMPTS, st.integers(1, 5))
def test_a_prompt_judged_again_computes_less_than_a_block_more_than_its_last_token(prompts, block):
    again = computed_tokens([*prompts, *prompts], block)[len(prompts) :]
    assert all(1 <= c <= block for c in again)


def test_a_summeval_run_s_sample_computes_what_the_engine_computed_for_the_whole_run(datasets, tmp_path):
    """Nine SummEval articles, 2,160 prompts: the real engine (vLLM 0.32 on the CPU, blocks of 128, the run's 9
    shards in one judging) computed 148.4 tokens a prompt of 816.5 (81.8% from its prefix cache; BENCHMARKS.md,
    2026-12-02); the estimate from the 16-context sample the judge stage takes (here all nine contexts) is that. A
    sample of fewer contexts is spread over them and capped in prompts, each context's first ones."""
    from pipeline import PROJECT_ROOT
    from pipeline.judge.prefill import work_of
    from pipeline.prompts.pairs import sample_prompts
    from pipeline.run.context import run
    from tests.conftest import compose

    cfg = compose(
        [
            "experiment=summeval_3ctx",
            "dataset.max_contexts=9",
            f"dataset.path={datasets / 'summeval' / 'summeval.jsonl'}",
            f"paths.output_root={tmp_path}",
            "tracking.enabled=false",
            "runtime=inprocess",
        ]
    )
    values = run(cfg, PROJECT_ROOT, stop_after="shard_contexts").values
    plan = values["prompt_plan"]
    sample = sample_prompts(values["contexts"], cfg.pairs, plan)
    assert len(sample) == 2160
    assert work_of(values["judge"], plan.frame, lambda: sample)(128) == pytest.approx(148.4, abs=0.5)
    # three contexts spread over the nine (the first, fourth and seventh), whole; then at most 30 prompts in all: each
    # context's first ten, in judging order
    three = sample_prompts(values["contexts"], cfg.pairs, plan, n=3)
    assert three == sample[:240] + sample[720:960] + sample[1440:1680]
    capped = sample_prompts(values["contexts"], cfg.pairs, plan, n=3, most=30)
    assert capped == sample[:10] + sample[720:730] + sample[1440:1450]
