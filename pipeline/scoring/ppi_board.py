"""The prediction-powered leaderboard (the maths is :mod:`pipeline.methods.agreement.ppi`): each model's win rate and
Bradley-Terry coefficient from people's labels and the judge's verdicts together, with intervals that stay valid
whatever the judge's bias, beside the same from people alone.

A **game** is a pair of outputs of two different models (a comparison whose candidates name their ``system``): the
judge's verdict on it is the game as the judge-only leaderboard counts it (the debiased P(i beats j) above one half
wins, exactly one half is half a win; :func:`pipeline.methods.scorers.win_ratio.hard_outcomes`), and people's label,
where the pair has one, is their preference. Labels drawn with unequal chances (an active sample) are weighted by the
inverse of their inclusion probabilities.

- **win rate** of a model: the PPI++ mean of its games' outcomes from its side (the judge's verdicts on the games
  people did not label as the unlabelled set: PPI's assumption that the two sets are apart);
- **Bradley-Terry**: PPI++ logistic regression of the outcome on +1 for the model on side i and -1 for the one on
  side j, with no intercept, one model fixed at 0 (the one whose outputs have the smallest content key: the same
  whatever the models are called), then centred (the coefficients sum to 0) with their covariance.

Per judge, attribute and template: rows ``source=ppi`` (people and the judge), ``people`` (people alone, ``lam = 0``),
each with the labels it rests on and, for PPI, the labels people alone would need for as narrow an interval
(``effective_labels``), and which interval it is (``interval``).

**Intervals no narrower than their data.** A normal interval needs labels of both kinds: with two agreeing labels
its variance is 0. A model's win rate from people alone has Clopper-Pearson's exact binomial interval at any number
of labels; its PPI++ interval (one pseudo-label, Student's t: :func:`pipeline.methods.agreement.ppi.ppi_mean`) is
given once people's labels of its games hold :data:`MIN_SIDE` wins and as many losses, and below that the PPI row
is people's alone (``lam = 0``, the exact interval). Simulated at 2 to 100 labels (``tests/methods/test_ppi.py``),
both hold their coverage within 2 points of the level. The Bradley-Terry coefficients (sandwich intervals) are given
only where every model has :data:`MIN_SIDE` labelled wins and losses; otherwise none (null, with the reason). A model
with fewer than two labelled games has no interval (null); where the labels separate the models (one always beats
another) or leave a model unconnected, no Bradley-Terry coefficient is finite and none is given (null, with the
labels it had).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
from scipy.stats import norm

from pipeline.contracts.keys import content_key, stable_hash
from pipeline.contracts.trust_schema import PPI_LEADERBOARD
from pipeline.methods.agreement.ppi import NotIdentified, ppi_logistic, ppi_mean
from pipeline.methods.agreement.selective import exact_mean_interval
from pipeline.methods.scorers.win_ratio import hard_outcomes
from pipeline.scoring.card_table import with_sides
from pipeline.scoring.trust_table import PAIR, oriented

WIN_RATE, BRADLEY_TERRY = "win_rate", "bradley_terry"
# the fewest labelled games a model's interval needs; the fewest labelled wins, and losses, a normal interval needs
MIN_LABELS = 2
MIN_SIDE = 10
EXACT = "exact binomial (Clopper-Pearson), people alone"
FEW = f"fewer than {MIN_SIDE} labelled wins and {MIN_SIDE} losses"


def _empty() -> pl.DataFrame:
    return pl.from_arrow(PPI_LEADERBOARD.empty_table())


def model_keys(candidates: pa.Table) -> dict[str, int]:
    """Each model's content key: the stable hash of its outputs' content keys, sorted."""
    frame = pl.from_arrow(candidates.select(["system", "text"])).drop_nulls("system")
    out: dict[str, list[int]] = {}
    for system, text in frame.iter_rows():
        out.setdefault(system, []).append(content_key(text))
    return {m: stable_hash("\x1f".join(map(str, sorted(keys)))) for m, keys in out.items()}


def ppi_board(
    comparisons: pl.DataFrame, candidates: pa.Table, labels: pl.DataFrame, level: float
) -> pl.DataFrame:
    """PPI_LEADERBOARD rows (module docstring); empty without models or labels."""
    systems = pl.from_arrow(candidates.select(["context_id", "candidate_id", "system"])).drop_nulls("system")
    if not systems.height or not labels.height or not comparisons.height:
        return _empty()
    keys = model_keys(candidates)
    games = (
        with_sides(oriented(comparisons), systems, {"system": "sys"})
        .filter(
            pl.col("sys_i").is_not_null()
            & pl.col("sys_j").is_not_null()
            & (pl.col("sys_i") != pl.col("sys_j"))
        )
        # only the population the labels were drawn from: PPI's labelled and unlabelled items are draws of one set
        .join(labels.select(*PAIR, "preference", "inclusion"), on=PAIR, how="inner")
    )
    rows = []
    for (judge, attribute, template), group in games.group_by(
        ["judge", "attribute", "template_id"], maintain_order=True
    ):
        group = group.sort(PAIR)
        models = sorted(set(group["sys_i"]) | set(group["sys_j"]), key=lambda m: (keys.get(m, 0), m))
        where = {"judge": judge, "attribute": attribute, "template_id": template}
        rows += _win_rates(group, models, where, level)
        rows += _bradley_terry(group, models, where, level)
    return pl.DataFrame(rows, schema=_empty().schema) if rows else _empty()


def _row(
    where: dict, metric: str, model: str, source: str, est, lo, hi, lam, n_labels, n_games, eff, interval: str
) -> dict:
    def value(x):
        return float(x) if x is not None and np.isfinite(x) else None

    return {
        **where,
        "metric": metric,
        "model": model,
        "source": source,
        "estimate": value(est),
        "lower": value(lo),
        "upper": value(hi),
        "lam": value(lam),
        "n_labels": int(n_labels),
        "n_games": int(n_games),
        "effective_labels": value(eff),
        "interval": interval if value(lo) is not None else f"none: {interval}",
    }


def win_rate(y: np.ndarray, yhat: np.ndarray, w: np.ndarray, level: float) -> list[tuple]:
    """A model's win rate over its games from its side (people's outcome ``y``, NaN where unlabelled; the judge's
    ``yhat``; the labels' weights ``w``): ``(source, estimate, lower, upper, lam, effective labels, interval)`` for
    people alone and PPI++ (module docstring's rule; nothing but a PPI row without interval below MIN_LABELS)."""
    known = ~np.isnan(y)
    n = int(known.sum())
    if n < MIN_LABELS:
        return [("ppi", None, None, None, None, None, f"fewer than {MIN_LABELS} labelled games")]
    lo, hi = exact_mean_interval(y[known], level, w[known])
    people = float(np.average(y[known], weights=w[known]))
    wins = float(np.sum(y[known]))
    if min(wins, n - wins) < MIN_SIDE or known.all():
        why = FEW if not known.all() else "every game labelled"
        ppi = ("ppi", people, lo, hi, 0.0, None, f"{EXACT}: {why}")
    else:  # the judge's verdicts on the games people did not label: PPI's unlabelled set
        found = ppi_mean(y[known], yhat[known], yhat[~known], level, w=w[known], small_sample=True)
        estimate, lower, upper = found.estimate[0], found.lower[0], found.upper[0]
        interval = "PPI++, Student's t with one pseudo-label"
        ppi = ("ppi", estimate, lower, upper, found.lam, found.effective_labels[0], interval)
    return [("people", people, lo, hi, 0.0, None, EXACT), ppi]


def _win_rates(group: pl.DataFrame, models: list[str], where: dict, level: float) -> list[dict]:
    """Each model's PPI++ and people-only win rate over its games (:func:`win_rate`)."""
    yhat_i = hard_outcomes(group["p"].to_numpy())
    pref = group["preference"].fill_null(np.nan).to_numpy()
    weight = 1.0 / group["inclusion"].to_numpy()
    rows = []
    for model in models:
        on_i = (group["sys_i"] == model).to_numpy()
        mine = on_i | (group["sys_j"] == model).to_numpy()
        yhat = np.where(on_i, yhat_i, 1 - yhat_i)[mine]
        y = np.where(on_i, pref, 1 - pref)[mine]
        n = int((~np.isnan(y)).sum())
        for source, est, lo, hi, lam, eff, interval in win_rate(y, yhat, weight[mine], level):
            rows.append(_row(where, WIN_RATE, model, source, est, lo, hi, lam, n, len(yhat), eff, interval))
    return rows


def _bradley_terry(group: pl.DataFrame, models: list[str], where: dict, level: float) -> list[dict]:
    """Centred Bradley-Terry coefficients, PPI++ and from people alone (module docstring)."""
    m = len(models)
    pref = group["preference"].fill_null(np.nan).to_numpy()
    known = ~np.isnan(pref)
    if m < 2 or known.sum() < max(MIN_LABELS, m):
        return []
    index = {model: k for k, model in enumerate(models)}
    x = np.zeros((group.height, m))
    rows_i = np.array([index[s] for s in group["sys_i"]])
    rows_j = np.array([index[s] for s in group["sys_j"]])
    x[np.arange(group.height), rows_i] += 1.0
    x[np.arange(group.height), rows_j] -= 1.0
    x = x[:, 1:]  # the first model (smallest content key) fixed at 0
    yhat = hard_outcomes(group["p"].to_numpy())
    w = 1.0 / group["inclusion"].fill_null(np.nan).to_numpy()[known]
    judged_only = (~known).sum() >= 2  # fewer unlabelled games have no variance to estimate: people alone
    rest = ~known if judged_only else known
    involved = (group["sys_i"].to_numpy()[:, None] == np.array(models)) | (
        group["sys_j"].to_numpy()[:, None] == np.array(models)
    )
    labelled = involved[known].sum(axis=0)  # each model's labelled games
    won = np.where(group["sys_i"].to_numpy()[:, None] == np.array(models), pref[:, None], 1 - pref[:, None])
    sides = np.where(involved[known], won[known], np.nan)
    if min(np.nansum(sides, axis=0).min(), np.nansum(1 - sides, axis=0).min()) < MIN_SIDE:
        return [  # a normal interval from too few wins or losses would be narrower than its data: none
            _row(where, BRADLEY_TERRY, model, source, None, None, None, None, labelled[k], group.height, None,
                 f"{FEW} for every model")
            for source in ("ppi", "people")
            for k, model in enumerate(models)
        ]  # fmt: skip
    try:
        found = ppi_logistic(
            x[known],
            pref[known],
            yhat[known],
            x[rest],
            yhat[rest],
            level,
            w=w,
            lam=None if judged_only else 0.0,
        )
    except (
        np.linalg.LinAlgError,
        NotIdentified,
    ):  # separated by the labels, or a model never labelled against
        return [  # the others: no finite coefficient, so none is given (null), with the labels it had
            _row(where, BRADLEY_TERRY, model, source, None, None, None, None, labelled[k], group.height, None,
                 "the labels separate the models, or leave one unconnected: no finite coefficient")
            for source in ("ppi", "people")
            for k, model in enumerate(models)
        ]  # fmt: skip
    z = norm.ppf((1 + level) / 2)
    lam = {"ppi": found.lam, "people": 0.0}
    theta = {"ppi": found.estimate, "people": found.people_estimate}
    cov = {"ppi": found.covariance, "people": found.people_covariance}
    centred = {source: _centred(theta[source], cov[source], m) for source in lam}
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = found.n_labels * (centred["people"][1] / centred["ppi"][1]) ** 2
    rows = []
    for source, (est, se) in centred.items():
        for k, model in enumerate(models):
            rows.append(
                _row(where, BRADLEY_TERRY, model, source, est[k], est[k] - z * se[k], est[k] + z * se[k],
                     lam[source], labelled[k], group.height, gain[k] if source == "ppi" else None,
                     "PPI++ logistic, normal (sandwich)" if source == "ppi" else "logistic, normal (sandwich)")
            )  # fmt: skip
    return rows


def _centred(theta, cov, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The coefficients with the fixed model's 0 put back, centred to sum to 0, and their standard errors."""
    full = np.concatenate([[0.0], theta])
    sigma = np.zeros((m, m))
    sigma[1:, 1:] = cov
    centre = np.eye(m) - 1.0 / m
    return centre @ full, np.sqrt(np.clip(np.diag(centre @ sigma @ centre.T), 0.0, None))
