"""AlpacaEval 2's length-controlled win rate, as tatsu-lab/alpaca_eval computes it
(``src/alpaca_eval/metrics/glm_winrate.py: get_length_controlled_winrate``, Dubois et al. 2024, "Length-Controlled
AlpacaEval"), for a model against one baseline.

Each game is the model's output against the baseline's on one input (instruction) ``x``, with the judge's preference
``y`` in [0, 1] for the model (soft). The GLM of one model (``length_controlled_v1``'s formula)::

    logit P(model beats baseline on x) = theta + phi tanh(delta_x / sd(delta)) + psi gamma_x

with ``delta_x = L_baseline - L_model`` (characters), ``sd`` the sample standard deviation of the model's
``delta`` (not centred), ``gamma_x`` the instruction's difficulty, no intercept beyond ``theta``. It is fitted as
``fit_LogisticRegressionCV`` does: L1-penalised logistic regression (liblinear, ``fit_intercept=False``,
``random_state=123``), soft labels read as each row twice (label 1 weighted ``y``, label 0 weighted ``1 - y``), the
penalty chosen among scikit-learn's 10 default ``Cs`` by 5-fold ``GroupKFold`` cross-validation on the
soft-label log loss (the two copies of a row in one fold). The length-controlled win rate is the mean predicted
preference with the length term at 0: ``mean_x sigmoid(theta + psi gamma_x)``; its standard error is the standard
error of those predictions' mean (``lc_standard_error``). The baseline's own is 1/2.

Where this differs from the released code, and why:

- **Instruction difficulty**: AlpacaEval downloads ``instruction_difficulty.csv``, fitted once on its 805
  instructions and its leaderboard's models. A run's own inputs have none, so it is fitted here the way AlpacaEval's
  notebook fitted it (``notebooks/instruction_difficulty.ipynb``: a joint GLM over every model against the baseline
  with a length slope and a bias per model and a coefficient per instruction, the same L1 cross-validated fit; the
  first instruction, in content-key order, is the reference at 0). With fewer models than AlpacaEval's leaderboard
  the difficulties are noisier.
- **No regularisation towards gamed baselines**: ``length_controlled_v1`` adds AlpacaEval's own annotations of the
  baseline asked to be verbose and concise (``df_gamed.csv``) with weight 0.2; a run has none, so this is
  AlpacaEval's ``length_controlled_noreg`` with the difficulty above.
- **Determinism**: the rows are given to the fit in content-key order (the folds and liblinear's coordinate order
  follow the rows), and the preferences are read to 12 decimals, so that names, row order and which side a game's
  model is on move no number (AlpacaEval's rows come in its data set's order).

scikit-learn is imported when this runs (it is AlpacaEval's own solver).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["LengthControlled", "instruction_difficulty", "lc_win_rate"]

#: AlpacaEval's ``fit_LogisticRegressionCV`` defaults.
SPLITS = 5
RANDOM_STATE = 123
#: Preferences are read to this many decimals (module docstring: determinism).
DECIMALS = 12


@dataclass(frozen=True)
class LengthControlled:
    """One model's length-controlled win rate against the baseline, its standard error, and the GLM's weights
    (``theta``: the model, ``phi``: the length term, ``psi``: the instruction difficulty)."""

    win_rate: float
    standard_error: float
    theta: float
    phi: float
    psi: float


def _soft_fit(features: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    """The coefficients of ``fit_LogisticRegressionCV(..., is_ytrue_proba=True, n_splits=5)`` on these rows (in this
    order): each row twice, label 1 weighted ``y`` and label 0 weighted ``1 - y``, grouped by row for
    ``GroupKFold``, scored by the soft-label log loss."""
    import sklearn
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import GroupKFold

    n = features.shape[0]
    x = np.vstack([features, features])
    labels = np.concatenate([np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64)])
    true_prob = np.concatenate([y, 1.0 - y])  # the weight of each copy: the probability of its label
    groups = np.tile(np.arange(n), 2)

    def loss(y_true, y_pred, true_prob):
        p = np.clip(y_pred, 1e-15, 1 - 1e-15)
        target = np.where(y_true == 1, true_prob, 1 - true_prob)
        return -np.mean(target * np.log(p) + (1 - target) * np.log(1 - p))

    with sklearn.config_context(enable_metadata_routing=True), warnings.catch_warnings():
        # liblinear's 100 iterations, as AlpacaEval runs it; its warning that they did not suffice is AlpacaEval's too
        warnings.simplefilter("ignore", ConvergenceWarning)
        scorer = make_scorer(loss, response_method="predict_proba", greater_is_better=False)
        scorer = scorer.set_score_request(true_prob=True)
        model = LogisticRegressionCV(
            cv=GroupKFold(n_splits=min(SPLITS, n)),
            scoring=scorer,
            l1_ratios=(1.0,),
            solver="liblinear",
            fit_intercept=False,
            random_state=RANDOM_STATE,
            use_legacy_attributes=False,
        )
        model.set_fit_request(sample_weight=True)
        model.fit(x, labels, sample_weight=true_prob, groups=groups, true_prob=true_prob)
    return np.asarray(model.coef_, dtype=np.float64).reshape(-1)


def _scaled_tanh(delta: NDArray[np.float64]) -> NDArray[np.float64]:
    """``tanh(delta / sd(delta))`` with the sample standard deviation (pandas' ``std``), not centred; 0 where the
    lengths never differ."""
    sd = float(np.std(delta, ddof=1)) if delta.size > 1 else 0.0
    return np.tanh(delta / sd) if sd > 0 else np.zeros_like(delta)


def lc_win_rate(
    y: ArrayLike, length_model: ArrayLike, length_baseline: ArrayLike, difficulty: ArrayLike
) -> LengthControlled:
    """One model's length-controlled win rate against the baseline (module docstring) from its games: the judge's
    preference for the model, the two outputs' characters and the input's difficulty, one game per row in content-key
    order."""
    yy = np.round(np.clip(np.asarray(y, dtype=np.float64), 0.0, 1.0), DECIMALS)
    delta = np.asarray(length_baseline, dtype=np.float64) - np.asarray(length_model, dtype=np.float64)
    gamma = np.asarray(difficulty, dtype=np.float64)
    if yy.size < 2:
        raise ValueError(f"a length-controlled win rate needs at least 2 games, got {yy.size}")
    features = np.column_stack([_scaled_tanh(delta), gamma, np.ones_like(gamma)])
    phi, psi, theta = _soft_fit(features, yy)
    predicted = 1.0 / (1.0 + np.exp(-(theta + psi * gamma)))
    se = float(np.std(predicted, ddof=1) / np.sqrt(predicted.size))
    return LengthControlled(float(predicted.mean()), se, float(theta), float(phi), float(psi))


def instruction_difficulty(
    model: ArrayLike, unit: ArrayLike, y: ArrayLike, length_model: ArrayLike, length_baseline: ArrayLike
) -> NDArray[np.float64]:
    """Each instruction's difficulty from the joint GLM of every model against the baseline (module docstring):
    per model a length slope (on its own ``tanh(delta / sd)``) and a bias, per instruction a coefficient, the first
    instruction (``unit`` 0) the reference at 0. ``model`` and ``unit``: integer codes per game, the units in
    content-key order; the games in content-key order."""
    m = np.asarray(model, dtype=np.int64)
    u = np.asarray(unit, dtype=np.int64)
    yy = np.round(np.clip(np.asarray(y, dtype=np.float64), 0.0, 1.0), DECIMALS)
    delta = np.asarray(length_baseline, dtype=np.float64) - np.asarray(length_model, dtype=np.float64)
    n_models, n_units = int(m.max()) + 1, int(u.max()) + 1
    slope = np.zeros((m.size, n_models))
    for k in range(n_models):
        mine = m == k
        slope[mine, k] = _scaled_tanh(delta[mine])
    bias = np.eye(n_models)[m]
    units = np.eye(n_units)[u][:, 1:]  # the first instruction is the reference
    coef = _soft_fit(np.hstack([slope, bias, units]), yy)
    return np.concatenate([[0.0], coef[2 * n_models :]])
