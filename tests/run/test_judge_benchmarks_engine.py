"""The default judge (the real CPU vLLM engine, SmolLM2-135M) on JudgeBench end to end (``experiment=judgebench``,
three pairs), with a recorded judge beside it in one jury (o1-mini's released verdicts, its answers for the pairs this
run does not hold not read): both measured the benchmark's way from the product's own judgments, and the summary says
what a number near one half means."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.methods.quality.benchmark import pair_right, votes
from tests.conftest import DATASETS, run_fresh

pytestmark = [pytest.mark.ray, pytest.mark.engine, pytest.mark.slow]

O1 = DATASETS / "judgebench" / "recorded" / "gpt" / "arena_hard:o1-mini-2024-09-12.jsonl"


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory, ray_cluster):
    jury = f"jury.judges=[{{backend: recorded, model: '{O1}', engine: {{match: partial}}}}]"
    overrides = [
        "experiment=judgebench",
        "dataset.max_contexts=3",
        "judge.env.VLLM_CPU_KVCACHE_SPACE=2",
        jury,
    ]
    return run_fresh(tmp_path_factory, overrides)[1]


def test_a_live_judge_and_a_recorded_one_sit_in_one_jury_and_are_measured_alike(mixed_run):
    tables = mixed_run.run_dir / "tables"
    judgments = pl.read_parquet(tables / "judgments.parquet")
    assert dict(judgments.group_by("judge").len().iter_rows()) == {
        "smollm2-135m-instruct": 6,
        "o1-mini-2024-09-12": 6,
    }
    candidates = pl.read_parquet(tables / "candidates.parquet")
    people = pl.read_parquet(tables / "human_scores.parquet")
    right = set(people.filter(pl.col("human_score") == 1.0)["candidate_id"])
    listed_first = set(candidates.filter(pl.col("candidate_index") == 0)["candidate_id"])
    meta = pl.read_parquet(tables / "meta_evaluation.parquet").filter(pl.col("category").is_null())
    for judge in ("smollm2-135m-instruct", "o1-mini-2024-09-12"):
        # the benchmark's count, from the product's own judgments: each ordering's vote about the right candidate
        own = judgments.filter(pl.col("judge") == judge).sort("context_id")
        first = own.filter(pl.col("cand_a").is_in(listed_first))
        second = own.filter(~pl.col("cand_a").is_in(listed_first))
        v1 = votes(first["p_a"].to_numpy(), first["cand_a"].is_in(list(right)).to_numpy())
        v2 = votes(second["p_a"].to_numpy(), second["cand_a"].is_in(list(right)).to_numpy())
        row = meta.filter(pl.col("judge") == judge).row(0, named=True)
        assert row["n_pairs"] == 3
        assert abs(row["accuracy"] - pair_right(v1, v2).mean()) < 1e-12
        assert abs(row["accuracy_listed_first"] - float(np.mean(v1 == 1))) < 1e-12
        assert abs(row["accuracy_listed_second"] - float(np.mean(v2 == 1))) < 1e-12
    # the recorded juror read its file's answers for these pairs only, and said so
    assert (
        mixed_run.metrics["juror/arena_hard:o1-mini-2024-09-12.jsonl/judge/answers_for_other_contexts"]
        == 694.0
    )
    assert "no engine" not in mixed_run.summary  # the run's judge judged with its engine


def test_the_summary_says_what_a_number_near_one_half_means(mixed_run):
    summary = mixed_run.summary
    assert "meta-evaluation correct" in summary
    assert (
        "near 50% is chance" in summary
        or "their votes cancel and JudgeBench counts those pairs wrong" in summary
    )
