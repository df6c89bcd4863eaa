"""The reference runs: four small in-process runs with fixed seeds whose engine answers and tables are kept here,
recorded before the package was reshaped, so that a change of shape can be shown not to change behaviour.

- ``demo``: the demo set, every comparative scorer but the tie model;
- ``absolute``: SummEval with every absolute mode beside the comparisons, Chen's tie option and Davidson's model;
- ``generate``: generate-then-evaluate on the demo tickets (three generators, options, reasons);
- ``adaptive``: a pool of SummEval summaries ranked in adaptive rounds.

Every case computes in float32 (the reference holds across CPUs that differ in bfloat16 support).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline.contracts.engine import ANSWER_FIELDS
from tests.invariance.compare import assert_same

HERE = Path(__file__).resolve().parent

COMMON = [
    "+judge.engine.dtype=float32",
    "judge.env.VLLM_CPU_KVCACHE_SPACE=2",
    "judge.max_model_len=2048",
    "tracking.enabled=false",
]

CASES: dict[str, list[str]] = {
    "demo": [
        "dataset.demo.n_contexts=2",
        "dataset.demo.n_candidates=4",
        "scoring.methods=[win_ratio,avg_prob,bradley_terry,poe_gaussian,poe_gaussian_hard,poe_bt,poe_laplace,"
        "poe_logit,ml_ranking]",
    ],
    "absolute": [
        "experiment=absolute_3ctx",
        "dataset.max_contexts=2",
        "dataset.max_candidates=4",
        "+prompt=chen_tie",
        "scoring.methods=[win_ratio,avg_prob,bradley_terry,poe_gaussian,davidson]",
    ],
    "generate": ["experiment=generate_demo", "generate.max_inputs=2"],
    "adaptive": [
        "experiment=summeval_pool",
        "dataset.max_contexts=2",
        "adaptive.budget.calls_per_item=4",
        "adaptive.stop.criterion=null",
    ],
}

# Columns that measure the engine (time, the process, what its prefix cache held: two prompts with the same text are
# one answer of the judgement store, two engine calls without it): not part of what a run computes.
TIMING = frozenset({"seconds", "worker", "fit_seconds", "select_seconds", "cached_tokens", "cache_share"})
# Tables a run computes (the ports with a schema), compared with the reference's.
TABLES = (
    "candidates",
    "human_scores",
    "judgments",
    "ratings",
    "comparisons",
    "position_bias",
    "scores",
    "unscored",
    "absolute_scores",
    "rating_failures",
    "leaderboard",
    "correlations",
    "cost",
    "assessment",
    "reasons",
    "rounds",
    "round_pairs",
    "tasks",
    "generations",
)
# The columns of the answers file: the prompt, how it was read, the frame around it, and the engine's answer.
ANSWER_COLUMNS = ("prompt", "request", "frame", *ANSWER_FIELDS[: ANSWER_FIELDS.index("reasoning")])


def folder(case: str) -> Path:
    return HERE / case


def meta() -> dict:
    return json.loads((HERE / "meta.json").read_text())


def table_frame(value) -> pl.DataFrame:
    """A table port's value as a frame without its timing columns, in a canonical row order."""
    frame = value if isinstance(value, pl.DataFrame) else pl.from_arrow(value)
    frame = frame.drop([c for c in frame.columns if c in TIMING])
    keys = [c for c, t in frame.schema.items() if t in (pl.String, pl.Int32, pl.Int64, pl.Boolean)]
    return frame.sort(keys, nulls_last=True) if keys else frame


# Columns added after the reference runs were recorded, null in every run without the setting that fills them
# (judge.reasoning): a table that has them and the reference does not is compared without them, once checked null.
ADDED_LATER = (
    "reasoning",
    "reasoning_tokens",
    "reasoning_cut",
    # issue 45: a context's category, and the judge benchmarks' numbers on the card (null without them)
    "category",
    "benchmark_accuracy",
    "ordering_accuracy",
    "positional_agreement",
    # issue 75: a context's checklist (null without one)
    "checklist",
)
# Columns added later that a run computes from what the reference holds (system-level correlations, issue 30): a
# table that has them and the reference does not is compared on the reference's columns; their own values are
# tested where they are computed.
COMPUTED_LATER = ("spearman_system", "pearson_system", "kendall_system", "n_systems", "n_objective_pairs")


def assert_tables_equal(name: str, got: pl.DataFrame, want: pl.DataFrame, tol: float = 1e-9) -> None:
    """The same rows, strings and integers equal, floats (and lists of floats) within ``tol``."""
    later = [c for c in ADDED_LATER if c in got.columns and c not in want.columns]
    for column in later:
        assert got[column].null_count() == got.height, f"{name}.{column}: not null in a run without it"
    got = got.drop(later + [c for c in COMPUTED_LATER if c in got.columns and c not in want.columns])
    if "metric" in got.columns:  # the leaderboard's controlled metrics, added later (issue 30)
        got = got.filter(pl.col("metric").is_in(want["metric"].unique().to_list()))
    if name == "leaderboard":  # changed on purpose (issue 73): every reference model has 2 inputs
        got, want = without_intervals(got, want)
    assert_same(name, got, want, tol)


# The leaderboard's columns that changed on purpose since the references were recorded (issue 73): a model of fewer
# than MIN_UNITS units has no bootstrap interval (the percentile interval of two inputs was far narrower than its
# data), so it is tied with every model. Checked so, then the rest compared as recorded.
UNRESAMPLED = ("lower", "upper", "rank", "tied_with")


def without_intervals(got: pl.DataFrame, want: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    from pipeline.scoring.leaderboard import MIN_UNITS

    assert (want["n_inputs"] < MIN_UNITS).all() and (got["n_inputs"] < MIN_UNITS).all()
    assert got["lower"].null_count() == got["upper"].null_count() == got.height and (got["rank"] == 1).all()
    return table_frame(got.drop(UNRESAMPLED)), table_frame(want.drop(UNRESAMPLED))
