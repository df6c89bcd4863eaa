"""How far to trust the judges' verdicts, with a guarantee (``trust``; :mod:`pipeline.stages.trust`)."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.config.enums import LabelSample, LabelSource


@dataclass
class TrustConfig:
    """Certified selective verdicts (each judge's verdicts kept above a threshold chosen on people's labels so that
    their agreement with people is at least ``1 - alpha`` with probability ``1 - delta``; a cascade over the judges,
    the rest escalated to people) and prediction-powered leaderboards (people's labels and the judges' verdicts
    together, with valid intervals). Off unless ``enabled``."""

    enabled: bool = False
    # Where people's labels come from: data | review (LabelSource), and how the labelled comparisons are drawn:
    # random | active (LabelSample; with labels=review, the review's own sample and its inclusion probabilities).
    labels: LabelSource = LabelSource.data
    sample: LabelSample = LabelSample.random
    # labels=data: how many comparisons get people's labels (a pair's label is the same for every judge), and the
    # seed of the draw (in the order of their content keys: the same whatever the names and the order of rows).
    n: int = 200
    seed: int = 0
    # labels=review: the review folder (default: the run folder's review/).
    review_folder: str | None = None
    # The guarantee: the agreement with people on the verdicts kept is at least 1 - alpha, with probability at
    # least 1 - delta over the draw of the labels (split evenly over the judges of a cascade).
    alpha: float = 0.1
    delta: float = 0.1
    # The cascade, cheapest judge first: judge names (a judge's every template in order) or judge/template; None:
    # the run's judges in the order they are configured (judge, then jury.judges). Each is calibrated on the labels
    # of the comparisons the ones before it abstained on; what none keeps is escalated to people (the review queue).
    cascade: list[str] | None = None
    # Prediction-powered leaderboards beside the judge-only one (where the candidates name their models).
    ppi: bool = True
