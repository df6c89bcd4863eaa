"""Which comparisons get the judge's reasons: disagreeing orderings first, then the closest calls, then random."""

from __future__ import annotations

import polars as pl

from pipeline.config.enums import ReasonSample
from pipeline.prompts.reasons import choose


def comparisons() -> pl.DataFrame:
    # (p_ij, p_ji): c1 and c3 disagree (slot A wins both orderings); c2 is the closest call among the others
    rows = [
        ("c0", 0.9, 0.2),
        ("c1", 0.7, 0.6),
        ("c2", 0.55, 0.5),
        ("c3", 0.3, 0.2),
        ("c4", 0.95, 0.05),
        ("c5", 0.1, 0.85),
    ]
    return pl.DataFrame(
        {
            "judge": "j",
            "attribute": "useful",
            "template_id": "t",
            "context_id": [r[0] for r in rows],
            "cand_i": "a",
            "cand_j": "b",
            "p_ij": [r[1] for r in rows],
            "p_ji": [r[2] for r in rows],
            "p": [(r[1] + 1 - r[2]) / 2 for r in rows],
        }
    )


def test_disagreements_then_close_calls_then_random():
    order = [ReasonSample.disagree, ReasonSample.close, ReasonSample.random]
    picked = choose(comparisons(), 3, order, seed=0)
    assert picked["context_id"].to_list() == ["c1", "c2", "c3"]
    assert dict(zip(picked["context_id"], picked["why"], strict=True)) == {
        "c1": "disagree",
        "c3": "disagree",
        "c2": "close",
    }
    assert choose(comparisons(), 0, order, 0).height == 0
    everything = choose(comparisons(), 10, order, 0)
    assert everything.height == 6 and everything["context_id"].n_unique() == 6


def test_random_sampling_is_seeded():
    only_random = [ReasonSample.random]
    a = choose(comparisons(), 2, only_random, seed=1)["context_id"].to_list()
    assert a == choose(comparisons(), 2, only_random, seed=1)["context_id"].to_list()
    draws = {tuple(choose(comparisons(), 2, only_random, seed=s)["context_id"].to_list()) for s in range(6)}
    assert len(draws) > 1  # other seeds draw other comparisons
