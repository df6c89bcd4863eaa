"""Adaptive rounds (workflow=adaptive): the strategy, the fit, the budget and the stopping rule."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.config.enums import RoundLink, RoundStrategy, StopCriterion
from pipeline.methods.adaptive.loop import RoundSettings, Schedule
from pipeline.methods.adaptive.stopping import StopRule
from pipeline.methods.scorers.model_fit import Model


@dataclass
class BudgetConfig:
    """What adaptive rounds may spend per context; the rounds stop at the first limit reached (None: no limit).
    A round that would pass a call limit is cut to fit; tokens, money and time are checked between rounds."""

    # judge calls (prompts: two per pair, one per ordering), in total or per item of the context
    calls: int | None = None
    calls_per_item: float | None = 8.0
    prompt_tokens: int | None = None
    # money of an API judge (needs judge.endpoint prices)
    money: float | None = None
    seconds: float | None = None


@dataclass
class StopConfig:
    # None: stop on the budget only
    criterion: StopCriterion | None = StopCriterion.expected_tau
    threshold: float = 0.9


@dataclass
class AdaptiveConfig:
    """Adaptive rounds (workflow=adaptive): each context is ranked by rounds of fit, select, judge."""

    strategy: RoundStrategy = RoundStrategy.reorder
    # The first round's pairs per item (0.5: a random matching, every item once; 1: a random cycle through every
    # item); each later round takes max(later_round x items, growth x the pairs judged so far).
    first_round: float = 0.5
    later_round: float = 0.125
    growth: float = 0.25
    # How each round's fit reads the comparisons: the link (logit: capped at +-logit_clip log-odds; linear) and
    # Huber's threshold of the robust fit, in studentised residuals (null: Gaussian experts, no reweighting).
    link: RoundLink = RoundLink.logit
    logit_clip: float = 10.0
    robust: float | None = 1.345
    # Under the logit link, an answer at the cap reads as "at least logit_clip log-odds" (true) or as exactly the
    # cap (false, which pulls a far pair towards the cap).
    censor: bool = True
    # A pair whose two orderings contradict each other (each confidently for the other item, after the position
    # bias: a flipped answer) is left out of the fit (true; counted in rounds.parquet) or read as the average of
    # its orderings, about 1/2, a tie (false).
    drop_contradicted: bool = True
    # Candidates within this many places in the current ranking (reorder, locate, windowed); exploration share
    # (windowed).
    window: int = 8
    explore: float = 0.1
    # Prior precision of every score relative to one comparison (keeps the first rounds' fit defined).
    ridge: float = 0.01
    # Warm start: an absolute mode of the run (absolute.modes) whose scores are the first rounds' prior, and its
    # weight relative to one comparison; None: no warm start. Its prompts (one per item) count in the budget.
    warm_start: str | None = None
    warm_weight: float = 1.0
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    stop: StopConfig = field(default_factory=StopConfig)
    seed: int = 0

    def round_settings(self, variance: str = "auto") -> RoundSettings:
        """How the rounds choose and fit (:class:`pipeline.methods.adaptive.loop.RoundSettings`): the one conversion the
        rounds stage and ``make bench-adaptive`` share."""
        model = Model(
            link=str(self.link),
            clip=self.logit_clip,
            robust=self.robust,
            censor=self.censor,
            drop_contradicted=self.drop_contradicted,
        )
        return RoundSettings(
            strategy=str(self.strategy),
            schedule=Schedule(self.first_round, self.later_round, self.growth),
            model=model,
            ridge=self.ridge,
            window=self.window,
            explore=self.explore,
            seed=self.seed,
            variance=variance,
        )

    def stop_rule(self) -> StopRule | None:
        """The stopping rule (None: the budget only)."""
        if self.stop.criterion is None:
            return None
        return StopRule(str(self.stop.criterion), self.stop.threshold)  # type: ignore[arg-type]
