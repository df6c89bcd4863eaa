"""Ratings with the length (and style) of the texts regressed out: what a model's rating would be if its texts were
as long (and as formatted) as its opponents'.

A game is model ``a[k]`` against model ``b[k]`` with outcome ``y[k]`` in [0, 1] (the judge's verdict for ``a``, soft
or hard). The texts' features enter as differences, as arena-hard-auto's style control does
(``show_result.py: print_leaderboard_with_style_features``; ``utils/add_markdown_info.py``):

- **length**: ``(L_a - L_b) / (L_a + L_b)`` with ``L`` the text's characters (AlpacaEval's length measure;
  arena-hard-auto counts tokens);
- **style** (optional): for headers, list items and bold spans, the density ``d = count / (L + 1)`` and
  ``(d_a - d_b) / (d_a + d_b + 1)``;

each divided by its root mean square over the games and **not centred**: a game read the other way round (``b``
against ``a``, ``1 - y``) has the opposite feature, so the fit does not depend on which model of a game is called
``a``, and a feature of 0 means equal length (arena-hard-auto centres its features: there every game is a model
against one baseline on a fixed side, so its "controlled" rating is read at the mean length difference from the
baseline, not at equal length; here games between any two models come oriented however the candidates' ids sort,
and a centred feature would move every rating with the names). A constant-zero feature is left at 0.

The model is a Bradley-Terry logistic regression with the features beside the models::

    logit P(a beats b) = theta_a - theta_b + gamma . x_ab

fitted by Newton's method on the log loss (soft outcomes allowed) with the raw Bradley-Terry's prior
(:mod:`pipeline.methods.scorers.bradley_terry`): each model plays ``prior`` virtual wins and ``prior`` virtual losses
against a reference of rating 0 (a standard logistic density on each ``theta``), so that a model that won or lost
every game of a bootstrap round keeps a finite rating. Ratings are reported centred (mean 0). Where a feature is a
function of the models alone (every text of a model exactly as much longer than its opponents' in every game), the
data cannot tell length from quality: the fit says so (``identified`` False) and its ratings are NaN ("not
defined").

The controlled win rate of a model is its mean predicted win over its own games with the features at 0, i.e. at
equal length: ``mean sigmoid(theta_a - theta_b)``, beside its raw win rate, the mean of its outcomes. This is the
Bradley-Terry model's win rate, not AlpacaEval's length-controlled win rate (a GLM per model against one baseline:
:mod:`pipeline.methods.quality.alpaca_lc`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "STYLE_FEATURES",
    "CONFOUNDED",
    "PRIOR",
    "bootstrap_controlled",
    "Controlled",
    "confounded",
    "feature_differences",
    "fit_controlled",
    "logistic_fit",
    "model_columns",
    "text_features",
    "win_rates",
]

# Markdown elements counted per text (code blocks removed first), as arena-hard-auto counts them.
STYLE_FEATURES = ("headers", "lists", "bold")
_CODE = re.compile(r"```[^`]*```")
_PATTERNS = {
    "headers": re.compile(r"^#{1,6}\s", re.MULTILINE),
    "lists": re.compile(r"^\s*(?:\d+\.|[-*+])\s", re.MULTILINE),
    "bold": re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__"),
}


def text_features(texts: list[str]) -> NDArray[np.float64]:
    """Per text: its characters, then its headers, list items and bold spans (``len(texts) x 4``)."""
    rows = []
    for text in texts:
        plain = _CODE.sub("", text)
        rows.append([len(text), *(len(_PATTERNS[f].findall(plain)) for f in STYLE_FEATURES)])
    return np.asarray(rows, dtype=np.float64).reshape(len(texts), 1 + len(STYLE_FEATURES))


def _scaled(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each column divided by its root mean square (not centred: module docstring); an all-zero column stays 0."""
    scale = np.sqrt(np.mean(x**2, axis=0)) if x.shape[0] else np.zeros(x.shape[1])
    out = np.zeros_like(x)
    ok = scale > 0
    out[:, ok] = x[:, ok] / scale[ok]
    return out


def feature_differences(fa: ArrayLike, fb: ArrayLike, style: bool = False) -> NDArray[np.float64]:
    """The games' scaled feature differences (module docstring) from each side's :func:`text_features`: the length
    column, and with ``style`` the three density columns. Antisymmetric: ``feature_differences(fb, fa)`` is the
    negative."""
    a = np.asarray(fa, dtype=np.float64)
    b = np.asarray(fb, dtype=np.float64)
    la, lb = a[:, 0], b[:, 0]
    total = la + lb
    length = np.divide(la - lb, total, out=np.zeros_like(la), where=total > 0)
    columns = [length]
    if style:
        da = a[:, 1:] / (la[:, None] + 1)
        db = b[:, 1:] / (lb[:, None] + 1)
        columns += list(((da - db) / (da + db + 1)).T)
    return _scaled(np.stack(columns, axis=1))


#: Virtual wins (and losses) of every model against the reference of rating 0: the raw Bradley-Terry's prior.
PRIOR = 1.0
#: A feature whose part outside the span of the models' columns is below this share of its norm is read as a
#: function of the models alone (not identified).
CONFOUNDED = 1e-8


@dataclass(frozen=True)
class Controlled:
    """The fit: each model's rating (centred; NaN where not identified), each feature's coefficient, the
    iterations it took, and whether the data could tell the features from the models."""

    theta: NDArray[np.float64]
    gamma: NDArray[np.float64]
    iterations: int
    identified: bool = True


def model_columns(a: ArrayLike, b: ArrayLike, n_models: int) -> NDArray[np.float64]:
    """The games' model columns: +1 at ``a[k]``, -1 at ``b[k]``."""
    ai = np.asarray(a, dtype=np.int64)
    bi = np.asarray(b, dtype=np.int64)
    design = np.zeros((len(ai), n_models))
    rows = np.arange(len(ai))
    np.add.at(design, (rows, ai), 1.0)
    np.add.at(design, (rows, bi), -1.0)
    return design


def confounded(models: NDArray[np.float64], x: NDArray[np.float64], weights: NDArray[np.float64]) -> bool:
    """Whether a non-zero feature column of ``x`` lies in the span of the (weighted) model columns: a feature that
    is a function of the models alone, which no fit can tell from their ratings."""
    if not x.shape[1] or not x.shape[0]:
        return False
    root = np.sqrt(weights)[:, None]
    m, xx = models * root, x * root
    fitted = m @ np.linalg.lstsq(m, xx, rcond=None)[0]
    norm = np.linalg.norm(xx, axis=0)
    rest = np.linalg.norm(xx - fitted, axis=0)
    return bool(np.any((norm > 0) & (rest <= CONFOUNDED * norm)))


def fit_controlled(
    a: ArrayLike,
    b: ArrayLike,
    y: ArrayLike,
    x: ArrayLike,
    n_models: int,
    prior: float = PRIOR,
    tol: float = 1e-10,
    max_iter: int = 100,
    weights: ArrayLike | None = None,
) -> Controlled:
    """Newton's method on ``sum_k w_k -[y log s + (1 - y) log (1 - s)]`` with ``s = sigmoid(theta_a - theta_b +
    gamma . x)``, plus ``prior`` virtual wins and losses of every model against a reference of rating 0 (module
    docstring; ``weights`` ``w``: 1 each by default, a bootstrap round's draw counts otherwise); an empty ``x`` (no
    columns) is Bradley-Terry with the raw Bradley-Terry's prior on soft outcomes."""
    ai = np.asarray(a, dtype=np.int64)
    xx = np.asarray(x, dtype=np.float64).reshape(len(ai), -1)
    ww = np.ones(len(ai)) if weights is None else np.asarray(weights, dtype=np.float64)
    k = xx.shape[1]
    models = model_columns(ai, b, n_models)
    if confounded(models, xx, ww):
        return Controlled(np.full(n_models, np.nan), np.full(k, np.nan), 0, identified=False)
    # the virtual games: each model once won and once lost against the reference, each of weight ``prior``
    virtual = np.zeros((2 * n_models, n_models + k))
    virtual[np.arange(2 * n_models), np.tile(np.arange(n_models), 2)] = 1.0
    design = np.vstack([np.hstack([models, xx]), virtual])
    outcome = np.concatenate([np.asarray(y, dtype=np.float64), np.ones(n_models), np.zeros(n_models)])
    weight = np.concatenate([ww, np.full(2 * n_models, prior)])
    w, iterations = _newton(design, outcome, weight, np.zeros(n_models + k), tol, max_iter)
    theta = w[:n_models] - w[:n_models].mean()
    return Controlled(theta, w[n_models:].copy(), iterations)


def logistic_fit(x: ArrayLike, y: ArrayLike, ridge: float = 1e-6) -> NDArray[np.float64]:
    """The coefficients of ``logit P(y = 1) = beta . x`` (no intercept: a verdict on a pair read the other way round
    is ``1 - y`` with ``-x``), fitted by the same Newton's method on soft or hard ``y``."""
    xx = np.asarray(x, dtype=np.float64)
    return _newton(xx, y, None, np.full(xx.shape[1], ridge), 1e-10, 100)[0]


def _newton(
    design: NDArray[np.float64],
    y: ArrayLike,
    weights: ArrayLike | None,
    penalty: NDArray[np.float64],
    tol: float,
    max_iter: int,
) -> tuple[NDArray[np.float64], int]:
    """Newton's method on ``sum_k w_k -[y log s + (1 - y) log (1 - s)] + sum_j penalty_j/2 w_j^2``,
    ``s = sigmoid(design @ w)``: the coefficients and the iterations taken."""
    from scipy.special import expit

    yy = np.asarray(y, dtype=np.float64)
    ww = np.ones(design.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    w = np.zeros(design.shape[1])
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (the iterations taken are reported)
        s = expit(design @ w)
        grad = design.T @ (ww * (s - yy)) + penalty * w
        hess = (design * (ww * s * (1 - s))[:, None]).T @ design + np.diag(penalty + 1e-12)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < tol:
            break
    return w, it


def win_rates(
    a: ArrayLike,
    b: ArrayLike,
    n_models: int,
    theta: ArrayLike | None = None,
    y: ArrayLike | None = None,
    weights: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Each model's (weighted) mean win over its games: the outcomes ``y`` (raw), or with ``theta`` the predicted
    ``sigmoid(theta_a - theta_b)`` with the features at 0 (controlled); NaN for a model without games."""
    from scipy.special import expit

    ai = np.asarray(a, dtype=np.int64)
    bi = np.asarray(b, dtype=np.int64)
    ww = np.ones(len(ai)) if weights is None else np.asarray(weights, dtype=np.float64)
    if theta is not None:
        t = np.asarray(theta, dtype=np.float64)
        win = expit(t[ai] - t[bi])
    elif y is not None:
        win = np.asarray(y, dtype=np.float64)
    else:
        raise ValueError("win_rates needs the outcomes y or the ratings theta")
    wins = np.bincount(ai, weights=ww * win, minlength=n_models) + np.bincount(
        bi, weights=ww * (1 - win), minlength=n_models
    )
    games = np.bincount(ai, weights=ww, minlength=n_models) + np.bincount(bi, weights=ww, minlength=n_models)
    with np.errstate(invalid="ignore", divide="ignore"):
        return wins / games


def bootstrap_controlled(
    a: ArrayLike,
    b: ArrayLike,
    y: ArrayLike,
    x: ArrayLike,
    n_models: int,
    game_counts: ArrayLike,
) -> tuple[Controlled, NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """The controlled fit on every game, and per bootstrap round (``game_counts``: rounds x games, how often each
    game's unit was drawn) the ratings and the controlled win rates: ``(fit, theta_rounds, win_rate_rounds,
    win_rate)`` with the rounds' arrays of shape (rounds, models); a round in which a model has no game gives it
    NaN."""
    fit = fit_controlled(a, b, y, x, n_models)
    counts = np.asarray(game_counts, dtype=np.float64)
    thetas = np.full((counts.shape[0], n_models), np.nan)
    rates = np.full((counts.shape[0], n_models), np.nan)
    ai = np.asarray(a, dtype=np.int64)
    bi = np.asarray(b, dtype=np.int64)
    for r, w in enumerate(counts):
        drawn = w > 0
        fitted = fit_controlled(ai[drawn], bi[drawn], np.asarray(y)[drawn], np.asarray(x)[drawn], n_models,
                                weights=w[drawn])  # fmt: skip
        present = np.bincount(ai[drawn], minlength=n_models) + np.bincount(bi[drawn], minlength=n_models) > 0
        thetas[r, present] = fitted.theta[present] - fitted.theta[present].mean()
        rates[r] = win_rates(ai[drawn], bi[drawn], n_models, theta=fitted.theta, weights=w[drawn])
    return fit, thetas, rates, win_rates(ai, bi, n_models, theta=fit.theta)
