"""One loop per algorithm: the adaptive rounds stage and ``make bench-adaptive`` run the same round loop
(:func:`pipeline.methods.adaptive.loop.run_rounds`). With the same seeded simulated judge, the stage (its run folder,
its judge stage streaming prompts in-process, its store of judgments) and the benchmark's arm choose the same pairs
round by round.

The simulated judge stands in for the engine here (a mock, and the only one): a real engine has no known truth to
compare the benchmark's simulation with. It answers each prompt's two label words with the log-probabilities of
:class:`pipeline.methods.simulation.simulate.PoolJudge`'s P(slot A wins) for the prompt's two candidates.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from benchmarks import adaptive_arms as bench
from pipeline.config.adaptive_rounds import AdaptiveConfig, BudgetConfig, StopConfig
from pipeline.config.assessment import PairsConfig, PromptConfig
from pipeline.config.enums import RoundStrategy
from pipeline.contracts.engine import Result
from pipeline.contracts.keys import content_key, context_key
from pipeline.contracts.schemas import (
    CANDIDATES,
    HUMAN_SCORES,
    PROMPTS,
    check_schema,
)
from pipeline.data.words import PromptWords
from pipeline.judge.hosting.worker import responses
from pipeline.judge.spec import JudgeSpec, Placement
from pipeline.methods.simulation.simulate import PoolJudge, pool_truth
from pipeline.prompts.labels import Labels
from pipeline.prompts.plan import plan_prompts
from pipeline.runtime.local import LocalExecutor
from pipeline.stages.judging import Judge
from pipeline.stages.rounds import Rounds
from pipeline.stages.rounds_files import ROUNDS_DIR, read_round_pairs
from pipeline.storage.parts import JudgmentParts, RatingParts
from pipeline.testing.stages import Context

N, CALLS_PER_ITEM = 40, 4
LABELS = Labels(words=(" A", " B"), token_ids=(1, 2), n_a=1)


class SimulatedWorker:
    """The judge worker's place in the stream: PROMPTS in, RESPONSES out, answered by a :class:`PoolJudge`."""

    def __init__(self, judge: PoolJudge, **_: object):
        self.judge = judge

    def __call__(self, batch: pa.Table, **_: object) -> pa.Table:
        batch = check_schema(batch, PROMPTS, "simulated judge input")
        a = np.array([int(c[1:]) for c in batch.column("cand_a").to_pylist()], dtype=np.int64)
        b = np.array([int(c[1:]) for c in batch.column("cand_b").to_pylist()], dtype=np.int64)
        p = self.judge.ordered(a, b)
        results = [Result([float(np.log(q)), float(np.log1p(-q))], [" A"], 10, 0, 1, ["length"]) for q in p]
        return responses(batch, "sim", results, [0.0] * batch.num_rows, "sim")


class SimulatedExecutor(LocalExecutor):
    """The in-process executor, with the simulated judge where the engine's worker would be."""

    def __init__(self, judge: PoolJudge):
        super().__init__()
        self.judge = judge

    def stream(self, blocks, steps):
        swapped = [
            dataclasses.replace(step, fn=SimulatedWorker, kwargs={"judge": self.judge})
            if step.name == "judge"
            else step
            for step in steps
        ]
        yield from super().stream(blocks, swapped)


def pool_texts(n: int) -> list[str]:
    """The items' texts in the order of their content keys: item ``k{m}`` is the ``m``-th of the stage's content
    order (:mod:`pipeline.contracts.keys`), as it is the ``m``-th of the benchmark's."""
    return sorted((f"item {k}" for k in range(n)), key=content_key)


def pool_tables(truth: np.ndarray) -> tuple[pa.Table, pa.Table]:
    ids = [f"k{k}" for k in range(len(truth))]
    candidates = pa.table(
        {
            "context_id": ["pool"] * len(ids),
            "context": [""] * len(ids),
            "candidate_id": ids,
            "candidate_index": list(range(len(ids))),
            "system": [None] * len(ids),
            "text": pool_texts(len(ids)),
            "category": [None] * len(ids),
            "checklist": [None] * len(ids),
        },
        schema=CANDIDATES,
    )
    human = pa.table(
        {
            "context_id": ["pool"] * len(ids),
            "candidate_id": ids,
            "attribute": ["quality"] * len(ids),
            "human_score": truth.tolist(),
        },
        schema=HUMAN_SCORES,
    )
    return candidates, human


class PlainTokenizer:
    chat_template = None


def stage_choices(
    adaptive: AdaptiveConfig, judge: PoolJudge, truth: np.ndarray, folder: Path
) -> list[np.ndarray]:
    """The pairs the rounds stage chose, round by round, as it wrote them to its run folder."""
    candidates, human = pool_tables(truth)
    words = PromptWords("pool", "item", {"quality": "good"})
    plan = plan_prompts(
        PromptConfig(chat_template=False), ["quality"], words, PlainTokenizer(), LABELS, "sim"
    )
    spec = JudgeSpec("vllm", "sim", "", "sim", 512, placement=Placement(batch_size=64))  # type: ignore[arg-type]
    judge_stage = Judge(PairsConfig(), 4096, 0, None)
    identity = {"test": "rounds"}
    ctx = Context(folder, SimulatedExecutor(judge))
    Rounds(adaptive, judge_stage).run(
        ctx,
        candidates=candidates,
        human_scores=human,
        prompt_plan=plan,
        judge=spec,
        parts=JudgmentParts(folder / "judgments", identity, LABELS.words),
        rating_parts=RatingParts(folder / "ratings", identity),
    )
    chosen = read_round_pairs(folder / ROUNDS_DIR)
    out = []
    for r in sorted(set(chosen.column("round").to_pylist())):
        rows = chosen.filter(pa.compute.equal(chosen.column("round"), r))
        half = rows.slice(0, rows.num_rows // 2)
        a = [int(c[1:]) for c in half.column("cand_a").to_pylist()]
        b = [int(c[1:]) for c in half.column("cand_b").to_pylist()]
        out.append(np.stack([a, b], axis=1))
    return out


@pytest.mark.parametrize("strategy", [RoundStrategy.reorder, RoundStrategy.locate])
def test_the_stage_and_the_benchmark_choose_the_same_pairs_round_by_round(strategy, tmp_path):
    adaptive = AdaptiveConfig(
        strategy=strategy,
        budget=BudgetConfig(calls_per_item=CALLS_PER_ITEM),
        stop=StopConfig(criterion=None),
        seed=7,
    )

    def judge() -> tuple[PoolJudge, np.ndarray]:
        rng = np.random.default_rng(3)
        truth = pool_truth("normal", N, rng)
        return PoolJudge(truth, rng, scale=8.0, item_noise=0.2, call_noise=0.5, flip=0.05), truth

    simulated, truth = judge()
    by_stage = stage_choices(adaptive, simulated, truth, tmp_path)

    settings = adaptive.round_settings()
    arm = bench.settings(str(strategy), settings.model, settings.ridge, settings.seed, settings.variance)
    key = context_key("", pool_texts(N))  # the pool's content key seeds its randomness
    records = bench.rounds_arm(N, judge()[0], arm, CALLS_PER_ITEM * N // 2, key=key)
    by_bench = [r.chosen for r in records if r.chosen.shape[0]]

    assert arm == settings  # the benchmark's arm runs the rounds' own settings
    assert len(by_stage) == len(by_bench) >= 4
    for r, (stage_pairs, bench_pairs) in enumerate(zip(by_stage, by_bench, strict=True)):
        assert np.array_equal(stage_pairs, bench_pairs), (
            f"round {r}: the stage and the benchmark chose differently"
        )
    assert sum(p.shape[0] for p in by_stage) == CALLS_PER_ITEM * N // 2
