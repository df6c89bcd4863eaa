"""Ratings with the length (and style) of the texts regressed out: what a model's rating would be if its texts were
as long (and as formatted) as its opponents'.

A game is model ``a[k]`` against model ``b[k]`` with outcome ``y[k]`` in [0, 1] (the judge's verdict for ``a``, soft
or hard). The texts' features enter as differences, as arena-hard-auto's style control does
(``show_result.py: print_leaderboard_with_style_features``; ``utils/add_markdown_info.py``):

- **length**: ``(L_a - L_b) / (L_a + L_b)`` with ``L`` the text's characters (AlpacaEval's length measure;
  arena-hard-auto counts tokens);
- **style** (optional): for headers, list items and bold spans, the density ``d = count / (L + 1)`` and
  ``(d_a - d_b) / (d_a + d_b + 1)``;

each standardised over the games (mean 0, standard deviation 1; a constant feature is left at 0). The model is a
Bradley-Terry logistic regression with the features beside the models::

    logit P(a beats b) = theta_a - theta_b + gamma . x_ab

fitted by Newton's method on the log loss (soft outcomes allowed) with a small ridge on ``theta`` (its level is not
identified; ratings are centred to mean 0). The controlled ratings are ``theta``; the controlled win rate of a model
is its mean predicted win over its own games with the features at 0 (AlpacaEval 2's length-controlled win rate:
the GLM's prediction at a zero length difference, ``alpaca_eval/metrics/glm_winrate.py``), beside its raw win rate,
the mean of its outcomes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "STYLE_FEATURES",
    "bootstrap_controlled",
    "Controlled",
    "feature_differences",
    "fit_controlled",
    "logistic_fit",
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


def _standardised(x: NDArray[np.float64]) -> NDArray[np.float64]:
    sd = x.std(axis=0)
    out = np.zeros_like(x)
    ok = sd > 0
    out[:, ok] = (x[:, ok] - x[:, ok].mean(axis=0)) / sd[ok]
    return out


def feature_differences(fa: ArrayLike, fb: ArrayLike, style: bool = False) -> NDArray[np.float64]:
    """The games' standardised feature differences (module docstring) from each side's :func:`text_features`: the
    length column, and with ``style`` the three density columns."""
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
    return _standardised(np.stack(columns, axis=1))


@dataclass(frozen=True)
class Controlled:
    """The fit: each model's rating (centred), each feature's coefficient, and the iterations it took."""

    theta: NDArray[np.float64]
    gamma: NDArray[np.float64]
    iterations: int


def fit_controlled(
    a: ArrayLike,
    b: ArrayLike,
    y: ArrayLike,
    x: ArrayLike,
    n_models: int,
    ridge: float = 1e-4,
    tol: float = 1e-10,
    max_iter: int = 100,
    weights: ArrayLike | None = None,
) -> Controlled:
    """Newton's method on ``sum_k w_k -[y log s + (1 - y) log (1 - s)] + ridge/2 |theta|^2`` with
    ``s = sigmoid(theta_a - theta_b + gamma . x)`` (``weights`` ``w``: 1 each by default, a bootstrap round's draw
    counts otherwise); an empty ``x`` (no columns) is plain Bradley-Terry."""
    ai = np.asarray(a, dtype=np.int64)
    bi = np.asarray(b, dtype=np.int64)
    xx = np.asarray(x, dtype=np.float64).reshape(len(ai), -1)
    k = xx.shape[1]
    design = np.zeros((len(ai), n_models + k))
    rows = np.arange(len(ai))
    design[rows, ai] += 1.0
    design[rows, bi] -= 1.0
    design[:, n_models:] = xx
    penalty = np.zeros(n_models + k)
    penalty[:n_models] = ridge
    w, iterations = _newton(design, y, weights, penalty, tol, max_iter)
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
