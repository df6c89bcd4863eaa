"""Prediction-powered inference (PPI++: Angelopoulos, Duchi and Zrnic, 2023; for judges, Boyeau et al., "AutoEval
done right", 2024): an estimate that is unbiased for what people would say, with a valid interval, from a few people's
labels and many judge verdicts.

With people's labels ``Y`` and the judge's verdicts ``Yhat`` on ``n`` labelled items, and the judge's verdicts
``Yhat_all`` on all ``N`` items, the power-tuned mean is::

    theta = lam * mean_w(Yhat_all) + mean_w(Y - lam * Yhat)

(the judge's mean, rectified by how far people differ from it where both are known); ``lam = 0`` is people alone,
``lam = 1`` plain PPI, and the default ``lam`` minimises the estimate's variance (clipped to [0, 1]), so PPI++ is never
worse than people alone beyond the noise of estimating ``lam``. Its standard error is
``sqrt(var_w(lam * Yhat_all) / N + var_w(Y - lam * Yhat) / n)`` and the interval is normal. Weights ``w`` (normalised
to mean 1) are the inverse of each label's inclusion probability where the labelled items were not drawn uniformly
(an active sample, Gligoric et al. 2024).

The logistic version fits Bradley-Terry coefficients (the rectified logistic loss, its sandwich covariance). Both
follow ``ppi_py`` (``ppi_mean_ci``, ``ppi_logistic_ci``: the same steps, the same ``lam``), against which they are
tested; the logistic fit is our own Newton's method on the same convex loss, not ``ppi_py``'s L-BFGS.

**Few labels.** The normal interval needs enough labels of each kind: with 2 agreeing labels the sample variance is 0
and the interval has no width. :func:`ppi_mean` with ``small_sample`` adds one pseudo-label at the rectifier's largest
variance (``((1 + lam) / 2)^2``, its range ``[-lam, 1]`` halved, squared) to the labels' sum of squares and takes
Student's t with ``n - 1`` degrees of freedom in place of the normal quantile;
:func:`pipeline.methods.agreement.selective.exact_mean_interval` is Clopper-Pearson's exact interval for people's alone. Which to use at which size is the caller's rule,
set by simulated coverage (:mod:`pipeline.scoring.ppi_board`).

The ceiling is known: a judge no better than the models judged saves at most half the labels (Dorner, Nastl and
Hardt, ICLR 2025); the effective sample size says what it saved here (:attr:`PPIEstimate.effective_labels`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.stats import norm
from scipy.stats import t as student

# a logistic coefficient beyond this (odds of e^25) means the labels separate the items: no finite fit
MAX_COEFFICIENT = 25.0


class NotIdentified(ValueError):
    """The logistic fit has no finite minimiser (labels that separate the items, a model never labelled against the
    others): no estimate and no interval exist, whatever a solver would stop at."""


@dataclass(frozen=True)
class PPIEstimate:
    """Estimates (one per coordinate) with their standard errors and normal intervals at ``level``; the ``lam`` used;
    the standard errors people's labels alone would give (``lam = 0``) and the number of labels."""

    estimate: NDArray[np.float64]
    stderr: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    lam: float
    people_stderr: NDArray[np.float64]
    n_labels: int
    # the estimates' covariance; people's alone, their estimates and covariance (what a linear transform needs)
    covariance: NDArray[np.float64] | None = None
    people_estimate: NDArray[np.float64] | None = None
    people_covariance: NDArray[np.float64] | None = None

    def people(self, level: float) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """People's estimates alone and their normal interval at ``level``."""
        est = (
            self.people_estimate if self.people_estimate is not None else np.full_like(self.estimate, np.nan)
        )
        lower, upper = _interval(est, self.people_stderr, level)
        return est, lower, upper

    @property
    def effective_labels(self) -> NDArray[np.float64]:
        """How many people's labels alone would give intervals this narrow: ``n (se_people / se_ppi)^2``."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.n_labels * (self.people_stderr / self.stderr) ** 2


def _weights(n: int, w: NDArray[np.float64] | None) -> NDArray[np.float64]:
    """Weights normalised to mean 1 (ones without)."""
    return np.ones(n) if w is None else np.asarray(w, dtype=np.float64) / np.sum(w) * n


def _interval(
    estimate, stderr, level: float, dof: int | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    z = norm.ppf((1 + level) / 2) if dof is None else student.ppf((1 + level) / 2, dof)
    return estimate - z * stderr, estimate + z * stderr


def _lam(grads, grads_hat, grads_hat_all, inv_hessian) -> float:
    """The variance-minimising ``lam`` (PPI++ eq. 13, ``ppi_py._calc_lam_glm`` with ``clip``): the trace of the
    sandwiched covariance of the labelled gradients with the predicted ones, over twice (1 + n/N) the trace of the
    predicted gradients' sandwiched variance, clipped to [0, 1]."""
    g, gh, ga = (
        np.asarray(x, dtype=np.float64).reshape(len(x), -1) for x in (grads, grads_hat, grads_hat_all)
    )
    n, big_n = g.shape[0], ga.shape[0]
    gc, ghc = g - g.mean(axis=0), gh - gh.mean(axis=0)
    cov = (gc.T @ ghc + ghc.T @ gc) / n
    var_hat = np.atleast_2d(np.cov(np.concatenate([gh, ga]).T))
    num = np.trace(inv_hessian @ cov @ inv_hessian)
    den = 2 * (1 + n / big_n) * np.trace(inv_hessian @ var_hat @ inv_hessian)
    lam = num / den if den > 0 else 0.0
    return float(np.clip(lam, 0.0, 1.0))


def ppi_mean(
    y: NDArray[np.float64],
    yhat: NDArray[np.float64],
    yhat_all: NDArray[np.float64],
    level: float = 0.90,
    w: NDArray[np.float64] | None = None,
    w_all: NDArray[np.float64] | None = None,
    lam: float | None = None,
    small_sample: bool = False,
) -> PPIEstimate:
    """The PPI++ mean (module docstring) of people's labels ``y`` (with the judge's ``yhat`` on the same items) and the
    judge's ``yhat_all`` on every item; ``lam`` None: the variance-minimising one; ``small_sample``: one pseudo-label
    and Student's t (module docstring)."""
    y, yhat, yhat_all = (np.asarray(a, dtype=np.float64) for a in (y, yhat, yhat_all))
    n, big_n = len(y), len(yhat_all)
    wl, wa = _weights(n, w), _weights(big_n, w_all)
    if lam is None:
        theta = np.mean(wa * yhat_all) + np.mean(wl * (y - yhat))
        lam = _lam(wl * (y - theta), wl * (yhat - theta), wa * (yhat_all - theta), np.eye(1))
    estimate = np.mean(wa * lam * yhat_all) + np.mean(wl * (y - lam * yhat))
    rectifier = wl * (y - lam * yhat)
    spread = np.sum((rectifier - rectifier.mean()) ** 2) + (((1 + lam) / 2) ** 2 if small_sample else 0.0)
    stderr = np.sqrt(np.std(wa * lam * yhat_all) ** 2 / big_n + spread / n / n)
    people = np.std(wl * y) / np.sqrt(n)
    lower, upper = _interval(np.array([estimate]), np.array([stderr]), level, n - 1 if small_sample else None)
    return PPIEstimate(
        np.array([estimate]),
        np.array([stderr]),
        lower,
        upper,
        float(lam),
        np.array([people]),
        n,
        np.array([[stderr**2]]),
        np.array([np.mean(wl * y)]),
        np.array([[people**2]]),
    )


def _log1pexp(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.logaddexp(0.0, x)


def _expit(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.exp(-np.logaddexp(0.0, -x))


def _rectified_fit(
    x, y, yhat, x_all, yhat_all, wl, wa, lam: float, tol: float = 1e-12
) -> NDArray[np.float64]:
    """The minimiser of the rectified logistic loss ``lam/N sum w_all (-yhat_all x.t + log(1 + e^(x.t))) - lam/n sum
    w (-yhat x.t + ...) + 1/n sum w (-y x.t + ...)`` by Newton's method with backtracking (the loss is convex where
    its Hessian ``lam H_all + (1 - lam) H_labelled`` is positive)."""
    n, big_n, d = len(y), len(yhat_all), x.shape[1]
    theta = np.zeros(d)

    def loss(t: NDArray[np.float64]) -> float:
        za, zl = x_all @ t, x @ t
        return float(
            lam / big_n * np.sum(wa * (-yhat_all * za + _log1pexp(za)))
            - lam / n * np.sum(wl * (-yhat * zl + _log1pexp(zl)))
            + 1 / n * np.sum(wl * (-y * zl + _log1pexp(zl)))
        )

    for _ in range(200):
        mu_a, mu_l = _expit(x_all @ theta), _expit(x @ theta)
        grad = (
            lam / big_n * x_all.T @ (wa * (mu_a - yhat_all))
            - lam / n * x.T @ (wl * (mu_l - yhat))
            + 1 / n * x.T @ (wl * (mu_l - y))
        )
        hess = (
            lam / big_n * (x_all.T * (wa * mu_a * (1 - mu_a))) @ x_all
            + (1 - lam) / n * (x.T * (wl * mu_l * (1 - mu_l))) @ x
        )
        step = np.linalg.solve(hess + 1e-12 * np.eye(d), grad)
        current, scale = loss(theta), 1.0
        while loss(theta - scale * step) > current + 1e-15 and scale > 1e-8:
            scale /= 2
        theta = theta - scale * step
        if np.max(np.abs(theta)) > MAX_COEFFICIENT:
            raise NotIdentified(f"a coefficient passed {MAX_COEFFICIENT:g}: the labels separate the items")
        if np.max(np.abs(scale * step)) < tol:
            return theta
    raise NotIdentified("Newton's method did not converge in 200 steps")


def _logistic_stats(theta, x, y, yhat, x_all, yhat_all, wl, wa, use_all: bool = True):
    """The labelled gradients, their predicted counterparts, the predicted gradients on every item and the inverse
    Hessian over both sets, or over the labelled ones alone for ``lam = 0`` (``ppi_py._logistic_get_stats``)."""
    n, big_n = len(y), len(yhat_all)
    mu_l, mu_a = _expit(x @ theta), _expit(x_all @ theta)
    if use_all:
        hessian = (x_all.T * (wa * mu_a * (1 - mu_a))) @ x_all / (big_n + n) + (
            x.T * (wl * mu_l * (1 - mu_l))
        ) @ x / (big_n + n)
    else:
        hessian = (x.T * (wl * mu_l * (1 - mu_l))) @ x / n
    grads = (wl * (mu_l - y))[:, None] * x
    grads_hat = (wl * (mu_l - yhat))[:, None] * x
    grads_all = (wa * (mu_a - yhat_all))[:, None] * x_all
    return grads, grads_hat, grads_all, np.linalg.inv(hessian)


def ppi_logistic(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    yhat: NDArray[np.float64],
    x_all: NDArray[np.float64],
    yhat_all: NDArray[np.float64],
    level: float = 0.90,
    w: NDArray[np.float64] | None = None,
    w_all: NDArray[np.float64] | None = None,
    lam: float | None = None,
) -> PPIEstimate:
    """PPI++ logistic regression coefficients (no intercept: the columns of ``x`` are the coefficients, a game's row
    +1 for one model and -1 for the other gives Bradley-Terry) of people's outcomes ``y`` (the judge's ``yhat``) on the
    labelled games ``x``, with the judge's ``yhat_all`` on every game ``x_all``; ``lam`` None: as ``ppi_logistic_ci``
    chooses it (once at the plain PPI fit, again at the fit with that ``lam``)."""
    x, x_all = np.asarray(x, dtype=np.float64), np.asarray(x_all, dtype=np.float64)
    y, yhat, yhat_all = (np.asarray(a, dtype=np.float64) for a in (y, yhat, yhat_all))
    n, big_n = len(y), len(yhat_all)
    wl, wa = _weights(n, w), _weights(big_n, w_all)
    data = (x, y, yhat, x_all, yhat_all, wl, wa)
    if lam is None:
        first = _rectified_fit(*data, lam=1.0)
        lam = _lam(*_logistic_stats(first, *data))
        second = _rectified_fit(*data, lam=lam)
        lam = _lam(*_logistic_stats(second, *data))
    theta = _rectified_fit(*data, lam=lam)
    grads, grads_hat, grads_all, inv_hessian = _logistic_stats(theta, *data, use_all=lam != 0)
    var_all = np.atleast_2d(np.cov((lam * grads_all).T))
    var = np.atleast_2d(np.cov((grads - lam * grads_hat).T))
    sigma = inv_hessian @ (n / big_n * var_all + var) @ inv_hessian
    if not np.isfinite(sigma).all():
        raise NotIdentified(f"{n} labelled and {big_n} judged games: too few to estimate the fit's variance")
    stderr = np.sqrt(np.diag(sigma) / n)
    people_theta, people = _people_logistic(x, y, wl)
    lower, upper = _interval(theta, stderr, level)
    return PPIEstimate(
        theta, stderr, lower, upper, float(lam), np.sqrt(np.diag(people)), n, sigma / n, people_theta, people
    )


def _people_logistic(x, y, wl) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The logistic fit on people's labels alone (``lam = 0``) and its sandwich covariance."""
    data = (x, y, y, x, y, wl, wl)
    theta = _rectified_fit(*data, lam=0.0)
    grads, _, _, inv = _logistic_stats(theta, *data, use_all=False)
    return theta, inv @ np.atleast_2d(np.cov(grads.T)) @ inv / len(y)
