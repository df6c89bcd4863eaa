"""A pair's verdict as one of three outcomes and the judge's confidence in it: the one definition the review, the
certified verdicts and the prediction-powered leaderboards share.

From the debiased probability ``p`` that candidate i beats j (a tie's probability split evenly in it) and the tie
probability ``p_tie``, the three outcomes have probability ``p - p_tie/2`` (i), ``p_tie`` (tie) and
``1 - p - p_tie/2`` (j); the verdict is the most likely of them (an exact 50/50 with no more tie mass is a tie), and
its probability is the judge's **confidence** (in [1/3, 1]; in [1/2, 1] without a tie option: the probability of the
preference averaged over both orderings, whose entropy SCOPE reads). People's preference for i (1, a tie 1/2, 0) has
the outcome its sign says.
"""

from __future__ import annotations

import numpy as np

# Outcome codes: candidate i, a tie, candidate j.
LABELS = ("i", "tie", "j")
WIN_I, TIE, WIN_J = range(3)


def outcome_probabilities(p: np.ndarray, p_tie: np.ndarray) -> np.ndarray:
    """Rows of (p(i), p(tie), p(j)) from the debiased ``p`` (i beats j, ties split evenly) and ``p_tie``."""
    p, p_tie = np.asarray(p, dtype=np.float64), np.asarray(p_tie, dtype=np.float64)
    return np.column_stack([p - p_tie / 2, p_tie, 1.0 - p - p_tie / 2])


# A confidence is read to this many decimals: its last ulps move with the order of a sum and the side a pair is read
# from, and would move a verdict across a threshold (0.75 against 0.7499999999999999).
CONFIDENCE_DECIMALS = 9


def judge_verdicts(p: np.ndarray, p_tie: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The judge's verdict codes (:data:`LABELS`) and their probabilities (the confidence, to
    :data:`CONFIDENCE_DECIMALS`)."""
    probs = outcome_probabilities(p, p_tie)
    verdict = probs.argmax(axis=1)
    verdict[np.isclose(probs[:, WIN_I], probs[:, WIN_J]) & (probs[:, TIE] < probs[:, WIN_I])] = (
        TIE  # an exact 50/50
    )
    return verdict, np.round(probs.max(axis=1), CONFIDENCE_DECIMALS)


def preference_outcomes(preference: np.ndarray) -> np.ndarray:
    """People's outcome codes from their preference for i (above 1/2: i, below: j, exactly 1/2: a tie)."""
    pref = np.asarray(preference, dtype=np.float64)
    return np.where(pref > 0.5, WIN_I, np.where(pref < 0.5, WIN_J, TIE))
