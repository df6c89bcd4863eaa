"""Prediction-powered inference (pipeline.methods.agreement.ppi): equal to ppi_py's own functions on the same inputs
(ppi_mean_ci, ppi_logistic_ci; with and without weights, lam chosen or given), intervals that cover the truth within 2
points of 90% and 95% over 500 simulated worlds (judges good, poor and biased), and never wider than people's own
beyond the noise of estimating lam."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pipeline.methods.agreement.ppi import NotIdentified, ppi_logistic, ppi_mean

WORLDS = 500


def judge_of(rng: np.random.Generator, y: np.ndarray, accuracy: float, bias: float) -> np.ndarray:
    """A judge's hard verdicts: right with probability ``accuracy``, and ``bias`` of its wrong ones saying 1."""
    right = rng.random(len(y)) < accuracy
    wrong_says = (rng.random(len(y)) < bias).astype(float)
    return np.where(right, y, wrong_says)


def games(rng: np.random.Generator, n_games: int, models: int) -> np.ndarray:
    """Bradley-Terry design rows: +1 for the model on side i, -1 for side j, the first model fixed (dropped)."""
    a = rng.integers(0, models, n_games)
    b = (a + 1 + rng.integers(0, models - 1, n_games)) % models
    x = np.zeros((n_games, models))
    x[np.arange(n_games), a] += 1
    x[np.arange(n_games), b] -= 1
    return x[:, 1:]


@pytest.fixture(scope="module")
def ppi_py():
    """ppi_py, its numba functions run as plain Python (compiling them takes longer than these tests)."""
    import numba

    numba.config.DISABLE_JIT = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import ppi_py

    return ppi_py


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("lam", [None, 0.0, 0.4, 1.0])
def test_the_mean_is_ppi_pys(ppi_py, weighted, lam):
    rng = np.random.default_rng(7)
    y_all = (rng.random(3000) < 0.6).astype(float)
    yhat_all = judge_of(rng, y_all, 0.8, 0.7)
    labelled = rng.choice(3000, 250, replace=False)
    w = rng.uniform(0.3, 3.0, 250) if weighted else None
    ours = ppi_mean(y_all[labelled], yhat_all[labelled], yhat_all, level=0.9, w=w, lam=lam)
    lower, upper = ppi_py.ppi_mean_ci(y_all[labelled], yhat_all[labelled], yhat_all, alpha=0.1, w=w, lam=lam)
    assert np.allclose([ours.lower[0], ours.upper[0]], [lower[0], upper[0]], rtol=0, atol=1e-12)
    point = ppi_py.ppi_mean_pointestimate(y_all[labelled], yhat_all[labelled], yhat_all, w=w, lam=ours.lam)
    assert abs(ours.estimate[0] - float(np.squeeze(point))) < 1e-12


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("lam", [None, 0.5, 1.0])
def test_the_bradley_terry_fit_is_ppi_pys_logistic_regression(ppi_py, weighted, lam):
    rng = np.random.default_rng(11)
    theta = np.array([0.6, -0.4, 1.1])
    x_all = games(rng, 2000, 4)
    y_all = (rng.random(2000) < 1 / (1 + np.exp(-x_all @ theta))).astype(float)
    yhat_all = judge_of(rng, y_all, 0.75, 0.5)
    labelled = rng.choice(2000, 300, replace=False)
    w = rng.uniform(0.3, 3.0, 300) if weighted else None
    args = (x_all[labelled], y_all[labelled], yhat_all[labelled], x_all, yhat_all)
    ours = ppi_logistic(*args, level=0.9, w=w, lam=lam)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lower, upper = ppi_py.ppi_logistic_ci(*args, alpha=0.1, w=w, lam=lam)
    # the same convex loss minimised by two optimisers (ours Newton's, ppi_py's L-BFGS at ftol 1e-15)
    assert np.allclose(ours.lower, lower, atol=1e-6) and np.allclose(ours.upper, upper, atol=1e-6)


@pytest.mark.parametrize("level", [0.90, 0.95])
def test_the_mean_covers_the_truth_over_worlds_and_is_no_wider_than_people_alone(level):
    rng = np.random.default_rng([int(level * 100), 1])
    covered = people_covered = 0
    ratios = []
    for _ in range(WORLDS):
        truth = rng.uniform(0.25, 0.75)
        big_n, n = 3000, int(rng.integers(200, 500))
        y_all = (rng.random(big_n) < truth).astype(float)
        yhat_all = judge_of(rng, y_all, rng.uniform(0.5, 0.95), rng.uniform(0.0, 1.0))
        labelled = np.zeros(big_n, dtype=bool)
        labelled[rng.choice(big_n, n, replace=False)] = True
        # the judge's verdicts on the items people did not label (PPI's unlabelled set, apart from the labelled)
        found = ppi_mean(y_all[labelled], yhat_all[labelled], yhat_all[~labelled], level=level)
        covered += found.lower[0] <= truth <= found.upper[0]
        _, lo, hi = found.people(level)
        people_covered += lo[0] <= truth <= hi[0]
        ratios.append((found.upper[0] - found.lower[0]) / (hi[0] - lo[0]))
    assert abs(covered / WORLDS - level) <= 0.02 + 1e-9, covered / WORLDS
    assert abs(people_covered / WORLDS - level) <= 0.03
    ratios = np.array(ratios)
    # PPI++ is never worse than people alone but for the noise of estimating lam
    assert ratios.mean() < 1.0 and np.quantile(ratios, 0.99) <= 1.05, (ratios.mean(), ratios.max())


@pytest.mark.parametrize("level", [0.90, 0.95])
def test_bradley_terry_intervals_cover_the_truth_over_worlds(level):
    rng = np.random.default_rng([int(level * 100), 2])
    covered, total = 0, 0
    widths = []
    for _ in range(WORLDS):
        theta = rng.normal(0, 0.8, 2)
        x_all = games(rng, 1200, 3)
        y_all = (rng.random(1200) < 1 / (1 + np.exp(-x_all @ theta))).astype(float)
        yhat_all = judge_of(rng, y_all, rng.uniform(0.55, 0.95), rng.uniform(0.2, 0.8))
        labelled = np.zeros(1200, dtype=bool)
        labelled[rng.choice(1200, 200, replace=False)] = True
        found = ppi_logistic(
            x_all[labelled],
            y_all[labelled],
            yhat_all[labelled],
            x_all[~labelled],
            yhat_all[~labelled],
            level=level,
        )
        covered += int(((found.lower <= theta) & (theta <= found.upper)).sum())
        total += len(theta)
        widths.append(found.stderr / found.people_stderr)
    assert abs(covered / total - level) <= 0.02 + 1e-9, covered / total
    assert np.mean(widths) < 1.0


def test_labels_that_separate_the_models_have_no_coefficient_rather_than_where_a_solver_stopped():
    """Model 1 always beats model 0 in people's labels: the likelihood grows without bound, so no estimate exists; a
    fit that stopped somewhere would give a number that moves with the solver (and with the names' order)."""
    x = np.ones((6, 1))  # model 1 on side i against the fixed model 0
    y = np.ones(6)
    with pytest.raises(NotIdentified, match="separate"):
        ppi_logistic(x, y, y, np.ones((20, 1)), np.ones(20), lam=0.0)
    mixed = np.array([1.0, 1.0, 0.0, 1.0, 0.0, 1.0])  # one always beating the other no more: a finite fit
    found = ppi_logistic(x, mixed, mixed, np.ones((20, 1)), np.ones(20), lam=0.0)
    assert found.estimate[0] == pytest.approx(np.log(4 / 2))  # the log-odds of 4 wins in 6


@pytest.mark.parametrize("n", [2, 3, 5, 10, 20, 50])
def test_a_win_rate_from_few_labels_is_never_zero_width_and_covers_within_2_points(n):
    """The leaderboard's rule (pipeline.scoring.ppi_board.win_rate): people's exact interval at any number of labels,
    PPI++'s (Student's t, one pseudo-label) from MIN_SIDE labelled wins and losses, people's below that. Over 600
    worlds per case (win rates 0.5, 0.8, 0.95; judges right 95% and 70% of the time; one game in ten a tie), each
    covers the truth at least 88% of the time at level 0.90, and no interval has zero width."""
    from pipeline.scoring.ppi_board import win_rate

    rng = np.random.default_rng(n)
    for truth in (0.5, 0.8, 0.95):
        for accuracy in (0.95, 0.7):
            covered = {"people": 0, "ppi": 0}
            for _ in range(600):
                y = (rng.random(300) < truth).astype(float)
                yhat = np.where(rng.random(300) < accuracy, y, 1 - y)
                tie = rng.random(300) < 0.1
                y[tie] = 0.5
                labelled = np.zeros(300, dtype=bool)
                labelled[rng.choice(300, n, replace=False)] = True
                target = 0.9 * truth + 0.05  # the mean outcome, a tie half a win
                for source, _, lower, upper, *_ in win_rate(
                    np.where(labelled, y, np.nan), yhat, np.ones(300), 0.9
                ):
                    assert upper > lower, (source, n)
                    covered[source] += lower <= target <= upper
            assert min(covered.values()) >= 0.88 * 600, (truth, accuracy, covered)


def test_the_exact_interval_of_weighted_labels_is_clopper_pearsons_at_their_effective_number():
    from scipy.stats import beta

    from pipeline.methods.agreement.selective import exact_mean_interval

    y = np.array([1.0, 1.0, 0.0, 1.0, 0.5])
    lower, upper = exact_mean_interval(y, 0.9)
    assert (lower, upper) == pytest.approx((beta.ppf(0.05, 3.5, 2.5), beta.ppf(0.95, 4.5, 1.5)))
    w = np.array([1.0, 2.0, 4.0, 1.0, 3.0])
    assert exact_mean_interval(y, 0.9, w) == pytest.approx(exact_mean_interval(y, 0.9, 7.5 * w))  # any scale
    assert exact_mean_interval(np.ones(3), 0.9, np.full(3, 4 / 3)) == pytest.approx((0.05 ** (1 / 3), 1.0))
