"""How far reviewers agree with the judge, and with each other.

Each answer is mapped back from what was shown (slot 1, slot 2, tie) to the pair's outcome codes (candidate
i, tie, candidate j: :data:`pipeline.review.sample.LABELS`) and set beside the judge's verdict on that pair.
The statistics (:mod:`pipeline.methods.agreement.raters`), each with a 95 % percentile bootstrap interval over the
answered items (from 10 items, and none where the resamples do not vary; the raw agreement, a share, with
Clopper-Pearson's exact interval at any number):

- judge vs each reviewer, and vs all answers pooled: raw agreement, Cohen's kappa over the three outcomes, its
  linearly weighted form (the outcomes are ordered, i < tie < j: a tie against a side is half a disagreement), and
  Cohen's kappa without ties (the answers where neither the judge nor the reviewer chose a tie, i vs j);
- the same, pooled, per criterion (attribute) and per judge confidence band;
- each reviewer's slot-1 share (of the answers that chose a side) and tie share: a reviewer's own position bias;
- with two or more reviewers, on the items answered by at least two: Krippendorff's alpha between reviewers
  (nominal, and ordinal beside it),
  Fleiss' kappa on the items every reviewer answered, the mean pairwise Cohen's kappa between reviewers beside
  the mean judge-reviewer kappa on the same items, and alpha with the judge counted as one more rater.

Verdicts are coded for the pair's candidates i and j, which the run orients by their ids: every statistic reads each
item both ways round (:func:`pipeline.methods.agreement.raters.both_ways`), so none moves when a pair is read the other way
round or its candidates renamed; the answers are taken in the order of the items' content keys (then the reviewer),
so neither do the bootstrap intervals.

Written to the review folder (``agreement.csv``, ``confusion.csv``, ``labels.csv``; :mod:`pipeline.review.results`)
and logged to MLflow in a child run of the run's own MLflow run (``review/mlflow.json`` keeps its id, so later reports update it).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.contracts.errors import UserError
from pipeline.methods.agreement.raters import (
    MISSING,
    bootstrap_interval,
    both_ways,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    raw_agreement,
    weighted_kappa,
)
from pipeline.methods.agreement.selective import exact_mean_interval
from pipeline.review.answers import Answers
from pipeline.review.sample import BANDS, LABELS, TIE, ReviewSample

K = len(LABELS)
ROUNDS, LEVEL = 1000, 0.95
AGREEMENT_COLUMNS = ["scope", "group", "statistic", "value", "ci_low", "ci_high", "n"]


def answer_labels(sample: ReviewSample, answers: Answers) -> pl.DataFrame:
    """One row per answer: the item's group, band and the judge's verdict beside the reviewer's outcome."""
    items = {row["item_id"]: row for row in sample.items.iter_rows(named=True)}
    rows = []
    for answer in answers.rows:
        item = items.get(answer["item_id"])
        where = f"{sample.folder / 'answers.jsonl'}: reviewer {answer.get('reviewer')!r}, item {answer['item_id']!r}"
        if item is None:
            raise UserError(f"{where}: the item is not in this folder's sample")
        shown = {answer.get("slot1"), answer.get("slot2")}
        if shown != {item["cand_i"], item["cand_j"]}:
            raise UserError(
                f"{where}: fields 'slot1'/'slot2' {sorted(map(str, shown))} are not the item's pair"
            )
        choice = answer.get("choice")
        chosen = {"1": answer["slot1"], "2": answer["slot2"]}.get(choice, "tie" if choice == "tie" else None)
        if chosen is None:
            raise UserError(f"{where}: field 'choice' is {choice!r}; expected '1', '2' or 'tie'")
        human = "tie" if chosen == "tie" else ("i" if chosen == item["cand_i"] else "j")
        rows.append(
            {
                "reviewer": answer["reviewer"],
                "item_id": item["item_id"],
                "judge": item["judge"],
                "attribute": item["attribute"],
                "template_id": item["template_id"],
                "context_id": item["context_id"],
                "cand_i": item["cand_i"],
                "cand_j": item["cand_j"],
                "band": item["band"],
                "confidence": item["confidence"],
                "judge_verdict": item["judge_verdict"],
                "human": human,
                "choice": choice,
                "slot1": answer["slot1"],
                "note": answer.get("note") or "",
                "answered_at": answer.get("answered_at"),
                "key": item.get("key"),
                # the item's probability of being drawn (random and active samples; null: not known)
                "inclusion": item.get("inclusion"),
            }
        )
    schema = {
        "reviewer": pl.String,
        "item_id": pl.String,
        "judge": pl.String,
        "attribute": pl.String,
        "template_id": pl.String,
        "context_id": pl.String,
        "cand_i": pl.String,
        "cand_j": pl.String,
        "band": pl.String,
        "confidence": pl.Float64,
        "judge_verdict": pl.String,
        "human": pl.String,
        "choice": pl.String,
        "slot1": pl.String,
        "note": pl.String,
        "answered_at": pl.String,
        "key": pl.UInt64,
        "inclusion": pl.Float64,
    }
    # in the items' content-key order: the bootstrap draws the answers in this order
    return pl.DataFrame(rows, schema=schema, orient="row").sort(
        ["key", "reviewer", "item_id"], nulls_last=True
    )


def codes(column: pl.Series) -> np.ndarray:
    return np.array([LABELS.index(v) for v in column.to_list()], dtype=np.int64)


def _row(scope: str, group: str, statistic: str, value: float, ci: tuple[float, float], n: int) -> dict:
    return {
        "scope": scope,
        "group": group,
        "statistic": statistic,
        "value": value,
        "ci_low": ci[0],
        "ci_high": ci[1],
        "n": n,
    }


def _exact(agree: np.ndarray) -> tuple[float, float]:
    return exact_mean_interval(agree.astype(float), LEVEL) if agree.size else (float("nan"), float("nan"))


def _with_interval(
    scope: str, group: str, name: str, stat: Callable[[np.ndarray], float], n: int, seed: int
) -> dict:
    """``stat`` on all ``n`` items and its bootstrap interval (``stat`` takes the index of the items used)."""
    everything = np.arange(n)
    ci = bootstrap_interval(stat, n, np.random.default_rng(seed), ROUNDS, LEVEL)
    return _row(scope, group, name, stat(everything) if n else float("nan"), ci, n)


def judge_vs_human(scope: str, group: str, judge: np.ndarray, human: np.ndarray, seed: int) -> list[dict]:
    """Raw agreement, kappa and kappa without ties of the judge's verdicts against reviewers' answers, every item
    read both ways round (module docstring)."""
    n = judge.size
    sided = np.flatnonzero((judge != TIE) & (human != TIE))

    def two_way(stat: Callable, a: np.ndarray, b: np.ndarray) -> Callable[[np.ndarray], float]:
        return lambda k: stat(*both_ways(a[k], b[k]), K)

    js, hs = judge[sided], human[sided]
    return [
        # a share of items: Clopper-Pearson's exact interval, valid at any number of answers
        _row(scope, group, "raw_agreement", raw_agreement(judge, human), _exact(judge == human), n),
        _with_interval(scope, group, "kappa", two_way(cohen_kappa, judge, human), n, seed),
        # the labels are ordered (i < tie < j): a tie against a side is half a disagreement
        _with_interval(scope, group, "weighted_kappa", two_way(weighted_kappa, judge, human), n, seed),
        _with_interval(scope, group, "kappa_no_ties", two_way(cohen_kappa, js, hs), sided.size, seed),
    ]


def reviewer_habits(reviewer: str, labels: pl.DataFrame) -> list[dict]:
    """The reviewer's slot-1 share among the answers that chose a side (0.5 is no position bias) and tie share."""
    sided = labels.filter(pl.col("choice") != "tie")
    slot1 = (sided["choice"] == "1").to_numpy()
    tie = (labels["choice"] == "tie").to_numpy()
    none = (float("nan"), float("nan"))
    return [
        _row(
            "reviewer",
            reviewer,
            "slot1_share",
            float(slot1.mean()) if slot1.size else float("nan"),
            none,
            slot1.size,
        ),
        _row(
            "reviewer", reviewer, "tie_share", float(tie.mean()) if tie.size else float("nan"), none, tie.size
        ),
    ]


def shared_items(labels: pl.DataFrame) -> list[str]:
    """The items answered by at least two reviewers, in the order of their content keys."""
    return (
        labels.group_by("item_id")
        .agg(pl.len(), pl.col("key").first())
        .filter(pl.col("len") >= 2)
        .sort(["key", "item_id"], nulls_last=True)["item_id"]
        .to_list()
    )


def between_reviewers(labels: pl.DataFrame, seed: int) -> list[dict]:
    """Reviewer-reviewer agreement on the items answered by at least two, beside the judge's on the same items."""
    reviewers = sorted(labels["reviewer"].unique())
    shared = shared_items(labels)
    n = len(shared)
    nan2 = (float("nan"), float("nan"))
    if len(reviewers) < 2 or n == 0:
        why = "reviewers" if len(reviewers) < 2 else "shared items"
        return [
            _row("reviewers", f"needs two {why}", stat, float("nan"), nan2, n)
            for stat in (
                "alpha",
                "fleiss_kappa",
                "mean_pairwise_kappa",
                "judge_mean_kappa",
                "alpha_with_judge",
            )
        ]
    column = {item: k for k, item in enumerate(shared)}
    ratings = np.full((len(reviewers), n), MISSING, dtype=np.int64)
    judge = np.full(n, MISSING, dtype=np.int64)
    for row in labels.filter(pl.col("item_id").is_in(shared)).iter_rows(named=True):
        k = column[row["item_id"]]
        ratings[reviewers.index(row["reviewer"]), k] = LABELS.index(row["human"])
        judge[k] = LABELS.index(row["judge_verdict"])
    everyone = np.flatnonzero((ratings != MISSING).all(axis=0))

    def fleiss(k: np.ndarray) -> float:
        sub = both_ways(ratings[:, everyone[k]])[0]
        counts = np.stack([(sub == c).sum(axis=0) for c in range(K)], axis=1)
        return fleiss_kappa(counts)

    def mean_pairwise(k: np.ndarray, raters: np.ndarray) -> float:
        values = []
        for a, b in itertools.combinations(range(raters.shape[0]), 2):
            both = k[(raters[a, k] != MISSING) & (raters[b, k] != MISSING)]
            if both.size:
                values.append(cohen_kappa(*both_ways(raters[a, both], raters[b, both]), K))
        values = [v for v in values if np.isfinite(v)]
        return float(np.mean(values)) if values else float("nan")

    def judge_mean(k: np.ndarray) -> float:
        values = []
        for r in range(len(reviewers)):
            seen = k[ratings[r, k] != MISSING]
            if seen.size:
                values.append(cohen_kappa(*both_ways(judge[seen], ratings[r, seen]), K))
        values = [v for v in values if np.isfinite(v)]
        return float(np.mean(values)) if values else float("nan")

    with_judge = np.vstack([ratings, judge[None, :]])
    group = f"{len(reviewers)} reviewers"
    return [
        _with_interval(
            "reviewers", group, "alpha", lambda k: krippendorff_alpha(both_ways(ratings[:, k])[0], K), n, seed
        ),
        _with_interval(
            "reviewers",
            group,
            "ordinal_alpha",
            lambda k: krippendorff_alpha(both_ways(ratings[:, k])[0], K, "ordinal"),
            n,
            seed,
        ),
        _with_interval("reviewers", group, "fleiss_kappa", fleiss, everyone.size, seed),
        _with_interval(
            "reviewers", group, "mean_pairwise_kappa", lambda k: mean_pairwise(k, ratings), n, seed
        ),
        _with_interval("reviewers", group, "judge_mean_kappa", judge_mean, n, seed),
        _with_interval(
            "reviewers",
            group,
            "alpha_with_judge",
            lambda k: krippendorff_alpha(both_ways(with_judge[:, k])[0], K),
            n,
            seed,
        ),
    ]


@dataclass
class Agreement:
    labels: pl.DataFrame  # one row per answer (answer_labels)
    table: pl.DataFrame  # AGREEMENT_COLUMNS
    confusion: pl.DataFrame  # per reviewer (and "all"): the judge's verdict x the reviewer's answer
    sample: ReviewSample
    torn: int

    @property
    def reviewers(self) -> list[str]:
        return sorted(self.labels["reviewer"].unique())

    def value(self, scope: str, group: str, statistic: str) -> float:
        row = self.table.filter(
            (pl.col("scope") == scope) & (pl.col("group") == group) & (pl.col("statistic") == statistic)
        )
        return float(row["value"][0]) if row.height and row["value"][0] is not None else float("nan")

    def metrics(self) -> dict[str, float]:
        """MLflow metrics: ``review.<statistic>.<scope>.<group>`` for every defined value, and the counts."""
        out = {"review.answers": float(self.labels.height), "review.reviewers": float(len(self.reviewers))}
        for row in self.table.iter_rows(named=True):
            if row["value"] is not None:
                name = f"review.{row['statistic']}.{row['scope']}.{row['group']}"
                out[re.sub(r"[^A-Za-z0-9_.\- /]", "_", name)] = float(row["value"])
        return out

    def headline(self) -> str:
        s = self.sample
        line = (
            f"review of {s.run_dir.name}: {self.labels.height} answer(s) from {len(self.reviewers)} reviewer(s) "
            f"on a {s.spec.strategy.value} sample of {s.items.height} of {s.n_pairs} pairs (seed {s.spec.seed})"
        )
        if self.torn:
            line += f"; {self.torn} torn line(s) in answers.jsonl skipped (writes cut short by a crash)"
        return line

    def notes(self) -> list[str]:
        """Between reviewers, and each reviewer's own position and tie habits."""
        if self.labels.height == 0:
            return ["no answers yet"]
        reviewers = self.table.filter(pl.col("scope") == "reviewers")
        group = reviewers["group"][0]
        if group.startswith("needs"):
            lines = [f"between reviewers: {group} answering the same items"]
        else:
            n_shared = reviewers.filter(pl.col("statistic") == "alpha")["n"][0]
            lines = [
                f"between reviewers on {n_shared} shared item(s): Krippendorff's alpha "
                f"{self.cell('reviewers', group, 'alpha')} (ordinal {self.cell('reviewers', group, 'ordinal_alpha')})"
                f", Fleiss' kappa {self.cell('reviewers', group, 'fleiss_kappa')}"
                f", mean pairwise kappa {self.cell('reviewers', group, 'mean_pairwise_kappa')}; the judge's mean "
                f"kappa with each reviewer on the same items {self.cell('reviewers', group, 'judge_mean_kappa')}, "
                f"alpha with the judge as one more rater {self.cell('reviewers', group, 'alpha_with_judge')}"
            ]
        for reviewer in self.reviewers:
            lines.append(
                f"{reviewer} chose slot 1 in {self.value('reviewer', reviewer, 'slot1_share'):.0%} of the answers "
                f"with a side, and a tie in {self.value('reviewer', reviewer, 'tie_share'):.0%}"
            )
        return lines

    def text(self) -> str:
        """The report for the console: the headline, judge against reviewers (95 % intervals), the notes."""
        lines = [self.headline()]
        if self.labels.height:
            lines.append(
                f"  {'judge vs':<22}{'n':>5}  {'agreement':<22}{'kappa':<22}{'weighted kappa':<22}kappa without ties"
            )
            for scope, group in self.judge_rows():
                cells = [
                    self.cell(scope, group, stat)
                    for stat in ("raw_agreement", "kappa", "weighted_kappa", "kappa_no_ties")
                ]
                n = self.table.filter((pl.col("scope") == scope) & (pl.col("group") == group))["n"][0]
                label = {"overall": "all answers", "reviewer": group}.get(scope, f"{scope} {group}")
                lines.append((f"  {label:<22}{n:>5}  " + "".join(f"{c:<22}" for c in cells)).rstrip())
        lines += [f"  {note}" for note in self.notes()]
        return "\n".join(lines)

    def judge_rows(self) -> list[tuple[str, str]]:
        kappa = self.table.filter(pl.col("statistic") == "kappa")
        return [(sc, g) for sc, g in kappa.select("scope", "group").iter_rows() if sc != "reviewers"]

    def cell(self, scope: str, group: str, statistic: str) -> str:
        row = self.table.filter(
            (pl.col("scope") == scope) & (pl.col("group") == group) & (pl.col("statistic") == statistic)
        )
        if not row.height or row["value"][0] is None:  # undefined values are stored as null
            return "n/a"
        value, low, high = row["value"][0], row["ci_low"][0], row["ci_high"][0]
        interval = f" [{low:.2f}, {high:.2f}]" if low is not None else ""
        return f"{value:.2f}{interval}"


def agreement(sample: ReviewSample, answers: Answers, seed: int = 0) -> Agreement:
    labels = answer_labels(sample, answers)
    rows: list[dict] = []
    judge, human = codes(labels["judge_verdict"]), codes(labels["human"])
    rows += judge_vs_human("overall", "all", judge, human, seed)
    for reviewer in sorted(labels["reviewer"].unique()):
        part = labels.filter(pl.col("reviewer") == reviewer)
        rows += judge_vs_human("reviewer", reviewer, codes(part["judge_verdict"]), codes(part["human"]), seed)
    for scope, column, groups in (
        ("criterion", "attribute", sorted(labels["attribute"].unique())),
        ("confidence", "band", [b for b in BANDS if b in set(labels["band"])]),
    ):
        for group in groups:
            part = labels.filter(pl.col(column) == group)
            rows += judge_vs_human(scope, group, codes(part["judge_verdict"]), codes(part["human"]), seed)
    for reviewer in sorted(labels["reviewer"].unique()):
        rows += reviewer_habits(reviewer, labels.filter(pl.col("reviewer") == reviewer))
    rows += between_reviewers(labels, seed)
    table = pl.DataFrame(
        rows,
        schema={
            "scope": pl.String,
            "group": pl.String,
            "statistic": pl.String,
            "value": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "n": pl.Int64,
        },
        orient="row",
    ).with_columns(pl.col("value", "ci_low", "ci_high").fill_nan(None))
    return Agreement(labels, table, confusion_table(labels), sample, answers.torn)


def confusion_table(labels: pl.DataFrame) -> pl.DataFrame:
    """Rows (reviewer or "all", the judge's verdict), columns the reviewer's answer: i, tie, j counts."""
    frames = [labels, labels.with_columns(pl.lit("all").alias("reviewer"))]
    both = pl.concat(frames)
    grid = pl.DataFrame(
        [(r, v) for r in [*sorted(labels["reviewer"].unique()), "all"] for v in LABELS],
        schema={"reviewer": pl.String, "judge_verdict": pl.String},
        orient="row",
    )
    counts = (
        both.group_by("reviewer", "judge_verdict")
        .agg([(pl.col("human") == label).sum().alias(f"human_{label}") for label in LABELS])
        .with_columns(pl.col(f"human_{label}").cast(pl.Int64) for label in LABELS)
    )
    return grid.join(counts, on=["reviewer", "judge_verdict"], how="left").fill_null(0)
