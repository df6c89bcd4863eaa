"""The review items of a finished run (one per judged pair of candidates) and the seeded sample drawn from them.

An item is one row of the run's ``comparisons`` table: a group (judge, attribute, template), a context and two
candidates ``i < j``. The judge's verdict on it is read from the debiased probabilities the scorers saw:
``p`` (i beats j, the tie probability split evenly) and ``p_tie``, so the three outcomes have probability
``p - p_tie/2`` (i), ``p_tie`` (tie) and ``1 - p - p_tie/2`` (j); the verdict is the most likely of them (an
exact 50/50 with no tie mass is a tie), and its probability is the judge's *confidence*.

Sampling strategies (seeded; the same run, strategy, size and seed give the same sample):

- ``stratified`` (default): equal shares from the confidence bands (:data:`BANDS`), a band with too few items
  giving its share to the others, random within a band; so agreement can be read per band.
- ``disagreements``: every pair whose two orderings the judge decided differently (it chose the first slot
  both times, or the second both times): the position-driven verdicts; ``n`` caps it (a random subset).
- ``random``: a uniform sample, each item drawn with probability ``n / N``;
- ``escalated``: the pairs no judge of the run's trust cascade kept (``trust``), each once: people's queue;
- ``active``: more items where the judge is unsure (Poisson sampling, each item with a known probability: about ``n``
  in all; :mod:`pipeline.methods.agreement.sampling`).

With ``random`` and ``active`` every item's probability of being drawn is known: it is kept beside the sample
(``inclusion`` on each drawn item, ``inclusion.parquet`` for every item) and with the answers (``labels.csv``), so
that the labels can certify a threshold (random) and power unbiased leaderboards (both) in ``trust``.

What a reviewer sees is blind: the context, the criterion and the two texts; never the judge's verdict, the
candidate ids or the models' names. Which candidate goes in slot 1 and the order of the items are drawn per
reviewer from the seed, the same on every visit.

The items are drawn in the order of their content keys (``key``: the context's and the two candidates' texts,
:mod:`pipeline.contracts.keys`, then the criterion and the judge's answers on the pair), and which candidate a
reviewer sees first is seeded by that key: the sample, the slots and so the agreement do not move when the run's
contexts, candidates, judges or templates are renamed, its rows reordered or a pair read the other way round.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.contracts.errors import UserError
from pipeline.contracts.keys import content_key, pair_key, stable_hash
from pipeline.data.contexts import group_by_context
from pipeline.data.words import DEFAULT_ADJECTIVES
from pipeline.methods.agreement import sampling
from pipeline.methods.verdicts.outcomes import (
    LABELS,
    TIE,
    WIN_I,
    WIN_J,
    judge_verdicts,
    outcome_probabilities,
)
from pipeline.scoring.reduce import in_pair_order

__all__ = ["LABELS", "TIE", "WIN_I", "WIN_J", "judge_verdicts", "outcome_probabilities"]


class Strategy(StrEnum):
    STRATIFIED = "stratified"
    DISAGREEMENTS = "disagreements"
    RANDOM = "random"
    ACTIVE = "active"
    ESCALATED = "escalated"


# The strategies whose every item has a known probability of being drawn (``inclusion``): their labels can certify a
# threshold (random) and power unbiased estimates (both) in ``trust``.
KNOWN_INCLUSION = (Strategy.RANDOM, Strategy.ACTIVE)


# Outcome codes, shared by the judge's verdicts and the reviewers' answers: candidate i, a tie, candidate j; a
# verdict and its probability (the judge's confidence): pipeline.methods.verdicts.outcomes, the one definition.
# Confidence bands: the probability of the judge's verdict.
BAND_EDGES = (0.6, 0.75, 0.9)
BANDS = ("0.00-0.60", "0.60-0.75", "0.75-0.90", "0.90-1.00")
DEFAULT_N, DEFAULT_SEED = 40, 0
# Every item's probability of being drawn, beside a sample drawn by a strategy that knows it.
INCLUSION_FILE = "inclusion.parquet"


def confidence_band(confidence: np.ndarray) -> np.ndarray:
    return np.asarray(BANDS)[np.searchsorted(BAND_EDGES, confidence, side="right")]


def item_id(judge: str, attribute: str, template_id: str, context_id: str, cand_i: str, cand_j: str) -> str:
    """A short stable id of a judged pair (the form posts it back; it reveals nothing of the pair)."""
    key = "\x1f".join((judge, attribute, template_id, context_id, cand_i, cand_j))
    return hashlib.sha256(key.encode()).hexdigest()[:16]


ITEM_COLUMNS = ["judge", "attribute", "template_id", "context_id", "cand_i", "cand_j"]


def item_keys(items: pl.DataFrame, candidates: pl.DataFrame | None) -> tuple[list[int], list[bool]]:
    """Each item's content key: its context's and its pair's (the same whichever candidate is i), its criterion,
    and the judge's two answers on it as a set (what tells two judges of one pair apart without their names); and
    whether candidate i's text has the smaller content key (it is shown first unless the reviewer's coin swaps).
    Without ``candidates`` the context and the pair are read by name."""
    texts: dict[tuple[str, str], int] = {}
    contexts: dict[str, int] = {}
    if candidates is not None and candidates.height:
        table = candidates.to_arrow()
        for context in group_by_context(table):
            contexts[context.context_id] = context.key
            for cand, text in zip(context.candidate_ids, context.texts, strict=True):
                texts[(context.context_id, cand)] = content_key(text)
    keys, lead = [], []
    for row in items.iter_rows(named=True):
        cid = row["context_id"]
        ki = texts.get((cid, row["cand_i"]), stable_hash(row["cand_i"]))
        kj = texts.get((cid, row["cand_j"]), stable_hash(row["cand_j"]))
        answers = sorted(repr(v) for v in (row["p_ij"], row["p_ji"]))
        parts = [contexts.get(cid, stable_hash(cid)), pair_key(ki, kj), row["attribute"], *answers]
        keys.append(stable_hash("\x1f".join(map(str, parts))))
        lead.append(ki <= kj)
    return keys, lead


def review_items(comparisons: pl.DataFrame, candidates: pl.DataFrame | None = None) -> pl.DataFrame:
    """One item per judged pair, with the judge's verdict, confidence, band, whether its orderings disagree and its
    content key (``candidates``: the run's CANDIDATES; without them the key reads the names), in key order.

    Rows of one pair in both orientations (``debias=none`` keeps each ordering as its own comparison) become
    one item with ``i < j`` and their mean probability.
    """
    oriented = in_pair_order(comparisons)
    items = oriented.group_by(ITEM_COLUMNS, maintain_order=True).agg(
        pl.col("p_ij").drop_nulls().first(),
        pl.col("p_ji").drop_nulls().first(),
        pl.col("p").mean(),
        pl.col("p_tie").mean(),
    )
    keys, lead = item_keys(items, candidates)
    items = items.with_columns(
        key=pl.Series(keys, dtype=pl.UInt64), i_first=pl.Series(lead, dtype=pl.Boolean)
    ).sort(["key", *ITEM_COLUMNS])
    verdict, confidence = judge_verdicts(items["p"].to_numpy(), items["p_tie"].to_numpy())
    p_ij, p_ji = items["p_ij"].to_numpy(), items["p_ji"].to_numpy()
    both = ~(np.isnan(p_ij.astype(float)) | np.isnan(p_ji.astype(float)))
    with np.errstate(invalid="ignore"):
        # i first: the judge prefers i iff p_ij > 1/2; j first: it prefers i iff p_ji < 1/2.
        disagree = both & ((p_ij > 0.5) != (p_ji < 0.5))
    ids = [item_id(*row) for row in items.select(ITEM_COLUMNS).iter_rows()]
    if len(set(ids)) != len(ids):  # 64-bit ids: a collision means a bug, not bad luck
        raise RuntimeError("review item ids collide")
    return items.with_columns(
        pl.Series("item_id", ids),
        pl.Series("judge_verdict", np.asarray(LABELS)[verdict]),
        pl.Series("confidence", confidence),
        pl.Series("band", confidence_band(confidence)),
        pl.Series("orderings_disagree", disagree),
    )


def _stratified(items: pl.DataFrame, n: int, rng: np.random.Generator) -> list[int]:
    """Equal shares from the bands, smallest band first so its unused share goes to the others."""
    by_band = {band: np.flatnonzero(items["band"].to_numpy() == band) for band in BANDS}
    by_band = {band: rows for band, rows in by_band.items() if rows.size}
    chosen: list[int] = []
    left = n
    for k, (_, rows) in enumerate(sorted(by_band.items(), key=lambda kv: kv[1].size)):
        take = min(rows.size, left // (len(by_band) - k))
        chosen.extend(rng.choice(rows, size=take, replace=False).tolist())
        left -= take
    return chosen


def draw(items: pl.DataFrame, strategy: Strategy, n: int, seed: int) -> pl.DataFrame:
    """The sample: ``n`` items (all of them if fewer) by ``strategy``, with the stratum each came from."""
    rng = np.random.default_rng(seed)
    if strategy is Strategy.DISAGREEMENTS:
        rows = np.flatnonzero(items["orderings_disagree"].to_numpy())
        if rows.size == 0:
            both = items.filter(pl.col("p_ij").is_not_null() & pl.col("p_ji").is_not_null()).height
            raise UserError(
                f"no pair in this run was decided differently in its two orderings ({both} of {items.height} "
                "pairs were judged in both); use --strategy stratified or random"
            )
        chosen = rng.choice(rows, size=min(n, rows.size), replace=False).tolist()
    elif strategy is Strategy.ESCALATED:  # the escalated pairs (the caller's items): the first n in key order
        chosen = list(range(min(n, items.height)))
    elif strategy in KNOWN_INCLUSION:
        inclusion = item_inclusion(items, strategy, n)
        chosen = np.flatnonzero(sampling.draw(inclusion, n, strategy is Strategy.RANDOM, rng)).tolist()
    else:
        chosen = _stratified(items, min(n, items.height), rng)
    stratum = "disagreement" if strategy is Strategy.DISAGREEMENTS else strategy.value
    sample = items[sorted(chosen)]
    known = item_inclusion(items, strategy, n)[sorted(chosen)] if strategy in KNOWN_INCLUSION else None
    return sample.with_columns(
        (pl.col("band") if strategy is Strategy.STRATIFIED else pl.lit(stratum)).alias("stratum"),
        inclusion=pl.Series(known, dtype=pl.Float64) if known is not None else pl.lit(None, pl.Float64),
    )


def item_inclusion(items: pl.DataFrame, strategy: Strategy, n: int) -> np.ndarray:
    """Every item's probability of being drawn by a strategy that knows it (:data:`KNOWN_INCLUSION`): ``n / N``
    uniformly, or more where the judge is unsure (:mod:`pipeline.methods.agreement.sampling`)."""
    if strategy is Strategy.RANDOM:
        return sampling.uniform_inclusion(items.height, n)
    return sampling.active_inclusion(sampling.uncertainty(items["confidence"].to_numpy()), n)


def _reviewer_rng(seed: int, reviewer: str, salt: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{reviewer}\x1f{salt}".encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


def reviewer_order(item_ids: list[str], reviewer: str, seed: int) -> list[str]:
    """The order in which ``reviewer`` sees the items (a seeded shuffle of its own)."""
    order = _reviewer_rng(seed, reviewer, "order").permutation(len(item_ids))
    return [item_ids[k] for k in order]


def swapped(item: str, reviewer: str, seed: int) -> bool:
    """Whether ``reviewer`` sees the item's candidates the other way round (a seeded coin per reviewer and item;
    ``item``: the item's content key, as a string)."""
    return bool(_reviewer_rng(seed, reviewer, item).random() < 0.5)


def shown(item: dict, reviewer: str, seed: int) -> tuple[str, str]:
    """The candidates ``reviewer`` sees in slot 1 and slot 2 of ``item``: in content-key order (``i_first``), then
    turned by the reviewer's coin (:func:`swapped`); names play no part."""
    first, second = item["cand_i"], item["cand_j"]
    if not item.get("i_first", True):
        first, second = second, first
    if swapped(str(item.get("key", item["item_id"])), reviewer, seed):
        first, second = second, first
    return first, second


def criterion_text(config: dict, attribute: str) -> str:
    """The criterion in plain words, as the run states it: its ``criteria`` entry, else the question on the
    attribute's adjective, else the attribute's name."""
    criteria = config.get("criteria") or {}
    if attribute in criteria:
        return str(criteria[attribute])
    adjectives = {**DEFAULT_ADJECTIVES, **((config.get("dataset") or {}).get("adjectives") or {})}
    if attribute in adjectives:
        return f"Which one is more {adjectives[attribute]}?"
    return f"Which one is better on {attribute}?"


@dataclass(frozen=True)
class SampleSpec:
    strategy: Strategy
    n: int
    seed: int


@dataclass
class ReviewSample:
    """A run's review sample, saved in its review folder (``sample.parquet`` and ``sample.json``) when first drawn
    and read back on every later start, so every reviewer and every restart sees the same items."""

    run_dir: Path
    folder: Path
    spec: SampleSpec
    items: pl.DataFrame  # the sampled items (see :func:`review_items`, plus ``stratum``)
    n_pairs: int  # pairs in the run

    @property
    def ids(self) -> list[str]:
        return self.items["item_id"].to_list()


def escalated_items(run_dir: Path, items: pl.DataFrame) -> pl.DataFrame:
    """One item per pair that no judge of the run's trust cascade kept (``tables/accepted.parquet``): the pairs
    escalated to people, each shown once (its first item in key order)."""
    path = run_dir / "tables" / "accepted.parquet"
    if not path.exists():
        raise UserError(
            f"--strategy escalated reviews what the run's trust cascade escalated, and {path} is missing: run with "
            "trust.enabled=true first"
        )
    pair = ["attribute", "context_id", "cand_i", "cand_j"]
    escalated = pl.read_parquet(path).filter(pl.col("accepted_by") == "escalated").select(pair)
    if not escalated.height:
        raise UserError(f"the run's trust cascade escalated no comparison ({path}): nothing to review")
    return items.join(escalated, on=pair, how="semi").unique(subset=pair, keep="first", maintain_order=True)


def load_candidates(run_dir: Path) -> pl.DataFrame | None:
    """The run's candidates (for the items' content keys); None for a run folder without them."""
    path = run_dir / "tables" / "candidates.parquet"
    return pl.read_parquet(path) if path.exists() else None


def load_comparisons(run_dir: Path) -> pl.DataFrame:
    path = run_dir / "tables" / "comparisons.parquet"
    if not (run_dir / "config.json").exists():
        raise UserError(f"{run_dir} is not a run folder (no config.json)")
    comparisons = pl.read_parquet(path) if path.exists() else pl.DataFrame()
    if comparisons.height == 0:
        raise UserError(
            f"run {run_dir.name} has no comparisons to review ({path} is missing or empty: an absolute-only "
            "run, or a run that stopped before scoring); review needs a run with pairwise comparisons"
        )
    return comparisons


def open_sample(
    run_dir: Path,
    folder: Path,
    strategy: Strategy | None = None,
    n: int | None = None,
    seed: int | None = None,
) -> ReviewSample:
    """The saved sample of ``folder``, or a new one drawn from the run (defaults: stratified, 40, seed 0).

    Asking a folder that holds a sample for another strategy, size or seed is refused: its answers belong to
    the saved sample (review into another ``--folder`` to draw a different one).
    """
    items = review_items(load_comparisons(run_dir), load_candidates(run_dir))
    if strategy is Strategy.ESCALATED:
        items = escalated_items(run_dir, items)
    meta_path, table_path = folder / "sample.json", folder / "sample.parquet"
    if meta_path.exists() and table_path.exists():
        meta = json.loads(meta_path.read_text())
        saved = SampleSpec(Strategy(meta["strategy"]), int(meta["n"]), int(meta["seed"]))
        asked = {"strategy": strategy, "n": n, "seed": seed}
        differs = {k: v for k, v in asked.items() if v is not None and v != getattr(saved, k)}
        if differs:
            raise UserError(
                f"{folder} holds a review sample drawn with strategy={saved.strategy.value}, n={saved.n}, "
                f"seed={saved.seed}; asked {', '.join(f'{k}={v}' for k, v in differs.items())}. Leave those "
                "options out to continue it, or pass --folder to draw another sample elsewhere"
            )
        sample = pl.read_parquet(table_path)
        unknown = set(sample["item_id"]) - set(items["item_id"])
        if unknown:
            raise UserError(
                f"{table_path} names {len(unknown)} pair(s) that the run's comparisons no longer hold "
                f"(e.g. {sorted(unknown)[0]}): the run was changed after the sample was drawn"
            )
        if "key" not in sample.columns:  # a sample drawn before items had content keys
            sample = sample.join(items.select("item_id", "key", "i_first"), on="item_id", how="left")
        return ReviewSample(run_dir, folder, saved, sample, items.height)
    spec = SampleSpec(
        strategy or Strategy.STRATIFIED, DEFAULT_N if n is None else n, DEFAULT_SEED if seed is None else seed
    )
    if spec.n < 1:
        raise UserError(f"--n must be at least 1; got {spec.n}")
    sample = draw(items, spec.strategy, spec.n, spec.seed)
    folder.mkdir(parents=True, exist_ok=True)
    if (
        spec.strategy in KNOWN_INCLUSION
    ):  # every item's chance, drawn or not (trust reads a pair's from its items')
        every = items.select(*ITEM_COLUMNS, "item_id").with_columns(
            inclusion=pl.Series(item_inclusion(items, spec.strategy, spec.n), dtype=pl.Float64)
        )
        every.write_parquet(folder / INCLUSION_FILE)
    tmp = table_path.with_suffix(".tmp")
    sample.write_parquet(tmp)
    tmp.replace(table_path)
    meta = {
        **asdict(spec),
        "strategy": spec.strategy.value,
        "drawn": datetime.now(UTC).isoformat(timespec="seconds"),
        "run_dir": str(run_dir),
        "pairs_in_run": items.height,
        "sampled": sample.height,
        "per_stratum": dict(sample.group_by("stratum").len().sort("stratum").iter_rows()),
    }
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return ReviewSample(run_dir, folder, spec, sample, items.height)
