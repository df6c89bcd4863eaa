"""Every choice a user makes in the config, as an enum (a value outside one is refused while composing)."""

from __future__ import annotations

from enum import StrEnum

from pipeline.contracts.errors import ConfigError


class EmptyText(StrEnum):
    """A candidate whose text is empty: refuse the input, judge a placeholder text, or leave it out."""

    error = "error"
    placeholder = "placeholder"
    drop = "drop"


class Strategy(StrEnum):
    """How the pairs of a context are chosen (:mod:`pipeline.methods.adaptive.selection`)."""

    all_pairs = "all_pairs"
    balanced_random = "balanced_random"
    greedy_optimal = "greedy_optimal"
    random = "random"
    no_repeat = "no_repeat"
    symmetric = "symmetric"
    all_ordered = "all_ordered"


class Orderings(StrEnum):
    """both: every pair judged with each candidate in slot A; one: only the selected ordering."""

    both = "both"
    one = "one"


class ChatTemplate(StrEnum):
    """auto: the judge's chat template when it has one; true: require it; false: plain text."""

    auto = "auto"
    true = "true"
    false = "false"

    @classmethod
    def parse(cls, value: object, key: str = "prompt.chat_template") -> ChatTemplate:
        """The choice for a YAML/CLI value: booleans (``prompt.chat_template=false``) or one of the names."""
        if isinstance(value, bool):
            return cls.true if value else cls.false
        if isinstance(value, str) and value in cls.__members__:
            return cls(value)
        raise ConfigError(f"config {key}={value!r} is not one of auto, true, false")


class TooLong(StrEnum):
    """A prompt longer than the judge's context: cut the context text (counted, warned) or stop."""

    truncate = "truncate"
    refuse = "refuse"


# vLLM's switch between its engine in this process ("0") and in processes of its own ("1", its default).
MULTIPROCESSING_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"


class EngineProcess(StrEnum):
    """Where a vLLM engine runs (``judge.engine_process``).

    worker: inside the judge worker's own process (vLLM without its engine-core and engine-worker processes).
    On the CPU it starts in 3-9 s against 20-35 s (two processes fewer that each import torch and vLLM), judges as
    fast in a process started with PyTorch's OpenMP preloaded (a judge's Ray actor), the same answers to 3e-5 nats.
    It changes its process (environment, ``torch.set_num_threads``); its crash ends the worker (Ray replaces it).

    own: vLLM's default, the engine in processes of its own beside the worker, which watches them
    (pipeline.judge.hosting.watchdog); on a GPU they overlap scheduling with the model.

    auto: worker for a CPU engine on a Ray actor (the engine's own process), own elsewhere: on a GPU, and in a
    process not the engine's alone (an in-process run, a notebook), which it would slow (~20%), change and end."""

    auto = "auto"
    worker = "worker"
    own = "own"


class Debias(StrEnum):
    """Position-bias removal (:mod:`pipeline.methods.verdicts.debias`, applied in :mod:`pipeline.scoring.reduce`)."""

    average = "average"
    alpha = "alpha"
    # The EACL release's rule: hard decisions at the threshold (0.001 grid) that makes half of them "A".
    balanced_threshold = "balanced_threshold"
    mean_shift = "mean_shift"
    none = "none"


class Calibrate(StrEnum):
    """Probabilities scored as the judge gives them (none), or calibrated to people's preferences by a cross-fitted
    temperature (:mod:`pipeline.methods.quality.calibration`)."""

    none = "none"
    temperature = "temperature"


class LeaderboardGames(StrEnum):
    """What a leaderboard game is: one pair's averaged verdict per input, or one per judged ordering."""

    pair = "pair"
    ordering = "ordering"


class Control(StrEnum):
    """What a controlled leaderboard regresses out: the texts' length, or their length and markdown style."""

    length = "length"
    style = "style"


class AbsoluteMode(StrEnum):
    """How one candidate is judged on its own (:mod:`pipeline.prompts.absolute`, scored by :mod:`pipeline.methods.verdicts.absolute_scores`).

    prompt_score: a score generated as text and parsed (EACL 4.3.2); g_eval: the probability-weighted mean of
    the score tokens' first-token probabilities (G-Eval); implicit: p(yes) / (p(yes) + p(no)) for a yes/no
    question (Chen et al. 2023, 2.1); explicit: a 0-100 score generated and parsed (Chen et al.).
    """

    prompt_score = "prompt_score"
    g_eval = "g_eval"
    implicit = "implicit"
    explicit = "explicit"
    # EvalAssist's direct assessment: the criterion's options (criteria_options), each with a description and a
    # score; the expected score over the first-token probabilities of the option letters.
    options = "options"
    # TICK: each item of the context's checklist asked as a yes/no question, read as the implicit mode reads it; the
    # candidate's score is the mean over the items of p(yes) (its expected pass rate; TICK counts YES answers).
    checklist = "checklist"


class OutputHandling(StrEnum):
    """A generated output that is empty or was cut off at max_tokens: judge it as it is, judge a placeholder
    text instead, or leave it out (each counted and reported)."""

    keep = "keep"
    placeholder = "placeholder"
    drop = "drop"


class Correlation(StrEnum):
    """Correlation with human scores: where the data has them, required for every candidate, or off."""

    auto = "auto"
    required = "required"
    off = "off"


class Executor(StrEnum):
    """ray: the stages on Ray Data (a local Ray or a cluster); local: in this process, no Ray."""

    ray = "ray"
    local = "local"


class LogLevel(StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"


class ApiPath(StrEnum):
    """How prompts reach the endpoint (:mod:`pipeline.judge.endpoint`). token_ids: ``/completions`` with the exact
    token ids and the exact log-probability of every label token (vLLM's server); chat: ``/chat/completions``
    with the message and the ``top_logprobs`` alternatives of the first token (any OpenAI-compatible server);
    auto: token_ids if a first request shows the server takes them, else chat; sampled: ``/chat/completions``
    without log-probabilities, the verdict sampled ``judge.endpoint.samples`` times and its words' probabilities
    counted (:mod:`pipeline.judge.endpoint.sampled`; a hosted model that returns no logprobs)."""

    auto = "auto"
    token_ids = "token_ids"
    chat = "chat"
    sampled = "sampled"


class ReasonSample(StrEnum):
    """Which comparisons get the judge's reasons: where the two orderings disagree, the closest calls, at random."""

    disagree = "disagree"
    close = "close"
    random = "random"


class RoundStrategy(StrEnum):
    """How adaptive rounds choose their pairs (:mod:`pipeline.methods.adaptive.loop`)."""

    # the pairs most likely to be in the wrong order under the PoE-Gaussian posterior (Fathullah & Gales 2025)
    reorder = "reorder"
    # place every item first (a small sample, then each item against the sample's median item, then the items
    # whose answers were at the cap or ambiguous), then reorder: for judges whose answers are graded
    # (:mod:`pipeline.methods.adaptive.locate`); its first rounds take what they need, up to the call budget
    locate = "locate"
    # neighbours in the current ranking, with exploration (GABRIEL, nanojudge)
    windowed = "windowed"
    # uniformly random unjudged pairs (the baseline)
    random = "random"


class RoundLink(StrEnum):
    """How adaptive rounds read a comparison's probability as a score difference (:mod:`pipeline.methods.scorers.posterior`)."""

    # the capped log-odds: a far pair says how far (the Gaussian approximation of PoE-BT); scores in log-odds
    logit = "logit"
    # p - 1/2, PoE-Gaussian as the scoring methods (PoE eq. 9): saturates at +-1/2 for a confident judge
    linear = "linear"


class StopCriterion(StrEnum):
    """The posterior criterion that ends the rounds (:mod:`pipeline.methods.adaptive.stopping`)."""

    expected_tau = "expected_tau"  # expected Kendall tau with the truth at least the threshold
    max_stderr = "max_stderr"  # largest posterior standard deviation of a score at most the threshold
    change = "change"  # 1 - Spearman between consecutive rounds' scores at most the threshold


class LabelSource(StrEnum):
    """Where people's labels come from for certified verdicts and prediction-powered leaderboards (``trust``)."""

    # the data's human scores (a preference where they differ, a tie where they are equal; a judge benchmark's
    # objective label), on a sample the run draws (trust.sample, trust.n)
    data = "data"
    # the run folder's blind review (review/labels.csv, written by `make review-report`), on the sample the review drew
    review = "review"


class LabelSample(StrEnum):
    """How the labelled comparisons are drawn, each with its known inclusion probability (``trust.sample``)."""

    # uniformly over the run's comparisons: what certifies a threshold (Trust or Escalate needs an i.i.d. sample)
    random = "random"
    # more where the judge is unsure (Confidence-Driven Inference, Gligoric et al. 2024): each comparison's
    # probability grows with the judge's uncertainty, never below a uniform floor; for prediction-powered
    # leaderboards, weighted by the inverse probabilities; it certifies no threshold
    active = "active"


# Strategies whose pairs are judged in both orderings (ordered selections are for one-ordering runs).
BOTH_ORDERINGS = frozenset(
    {Strategy.all_pairs, Strategy.balanced_random, Strategy.greedy_optimal, Strategy.all_ordered}
)


# Strategies that draw k comparisons per context (the others judge every pair).
SAMPLING = frozenset(
    {
        Strategy.balanced_random,
        Strategy.greedy_optimal,
        Strategy.random,
        Strategy.no_repeat,
        Strategy.symmetric,
    }
)
