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

import numpy as np
import polars as pl

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
ANSWER_COLUMNS = (
    "prompt",
    "request",
    "frame",
    "token_logprobs",
    "texts",
    "prompt_tokens",
    "cached_tokens",
    "generated_tokens",
    "finish_reasons",
)


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
    assert got.columns == want.columns, f"{name}: columns {got.columns} != {want.columns}"
    assert got.height == want.height, f"{name}: {got.height} rows, the reference has {want.height}"
    for column in want.columns:
        a, b = got[column], want[column]
        if a.dtype in (pl.Float64, pl.Float32) or a.dtype == pl.List(pl.Float64):
            x = _floats(a)
            y = _floats(b)
            assert x.shape == y.shape, f"{name}.{column}: shapes {x.shape} != {y.shape}"
            same_nan = np.isnan(x) == np.isnan(y)
            assert same_nan.all(), (
                f"{name}.{column}: nulls/NaN differ at rows {np.flatnonzero(~same_nan)[:5]}"
            )
            ok = np.isnan(y) | np.isclose(x, y, rtol=tol, atol=tol)
            assert ok.all(), (
                f"{name}.{column}: {int((~ok).sum())} value(s) differ beyond {tol:g}, e.g. "
                f"{x[~ok][:3]} against {y[~ok][:3]}"
            )
        else:
            differ = [k for k, (p, q) in enumerate(zip(a.to_list(), b.to_list(), strict=True)) if p != q]
            assert not differ, (
                f"{name}.{column}: {len(differ)} value(s) differ, e.g. row {differ[0]}: "
                f"{a[differ[0]]!r} against {b[differ[0]]!r}"
            )


def _floats(series: pl.Series) -> np.ndarray:
    if series.dtype == pl.List(pl.Float64):
        lengths = series.list.len().fill_null(0).to_numpy()
        flat = series.explode().cast(pl.Float64).fill_null(np.nan).to_numpy()
        return np.concatenate([lengths.astype(np.float64), flat])
    return series.cast(pl.Float64).fill_null(np.nan).to_numpy()
