"""Typed run configuration: what a user can set, each choice an enum, validated once at the entry point.

Hydra composes YAML from ``conf/`` over these dataclasses (registered as the ``base_config`` schema), so a
misspelt key or a value outside an enum is refused while composing, with the key and the valid values named.
:func:`to_run_config` then converts the result once into a :class:`RunConfig` and :func:`validate` refuses
every combination that could not be applied as written (a ``pairs.k`` that all pairs would ignore, a
debiasing that needs the other ordering, ...). Library code receives these objects, never a ``DictConfig``.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from pipeline.errors import ConfigError


class Workflow(StrEnum):
    """The list of stages a run executes (:mod:`pipeline.workflows`)."""

    comparative = "comparative"
    # Absolute judging only (one prompt per candidate; ``absolute.modes``), no pairs.
    absolute = "absolute"
    # Generate the candidates first: every generator model answers every task input (``generate``), then the
    # outputs of each input are compared against ``criteria``, and the models ranked on a leaderboard.
    generate = "generate"
    # Rank each context (a large pool) in adaptive rounds: fit, choose the pairs worth most, judge them (both
    # orderings), until a budget is spent or the ranking has settled (``adaptive``).
    adaptive = "adaptive"


class EmptyText(StrEnum):
    """A candidate whose text is empty: refuse the input, judge a placeholder text, or leave it out."""

    error = "error"
    placeholder = "placeholder"
    drop = "drop"


class Strategy(StrEnum):
    """How the pairs of a context are chosen (:mod:`pipeline.methods.selection`)."""

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
    On the CPU it starts in 8 s against 32 s (two processes fewer that each import torch and vLLM) and judges
    about as fast, with the same answers to 3e-5 nats. One engine per process; a crash of the engine is a crash
    of the worker (Ray replaces it).

    own: vLLM's default, the engine in processes of its own beside the worker, which watches them
    (pipeline.judge.watchdog); on a GPU they overlap scheduling with the model.

    auto: worker for a CPU engine on a Ray actor (the actor is the engine's own process), own elsewhere (on a
    GPU, and in a process that may host several engines: in-process runs, notebooks, tests)."""

    auto = "auto"
    worker = "worker"
    own = "own"


class Backend(StrEnum):
    """vllm: the product (batched, prefix-cached); hf: Hugging Face transformers, one prompt at a time; api: an
    OpenAI-compatible server (``judge.api``)."""

    vllm = "vllm"
    hf = "hf"
    api = "api"


class Debias(StrEnum):
    """Position-bias removal (:mod:`pipeline.reduce`)."""

    average = "average"
    alpha = "alpha"
    mean_shift = "mean_shift"
    none = "none"


class AbsoluteMode(StrEnum):
    """How one candidate is judged on its own (:mod:`pipeline.absolute`).

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


@dataclass
class DemoConfig:
    """The demo set the project writes itself: a good text per context and progressively damaged copies."""

    n_contexts: int = 4
    n_candidates: int = 6
    seed: int = 0


@dataclass
class DatasetConfig:
    """Where the contexts and candidates come from (the JSONL layout of ``../shared/datasets``, or Parquet)."""

    name: str = "demo"
    # A .jsonl file, a .parquet file or a folder of .parquet files; unused for the demo set.
    path: str | None = None
    # meta.json beside the data (attributes, nouns); defaults to ``<dir of path>/meta.json`` when present.
    meta_path: str | None = None
    # Attributes to judge; None means every attribute in meta.json (or the data).
    attributes: list[str] | None = None
    # Keep only the first N contexts (in file order).
    max_contexts: int | None = None
    # Keep only the first N candidates of each context (in file order).
    max_candidates: int | None = None
    # What the prompt calls a context and a candidate; None takes meta.json's, else "passage" / "summary".
    context_noun: str | None = None
    candidate_noun: str | None = None
    # attribute -> adjective used in the question ("Which summary is more <adjective>?").
    adjectives: dict[str, str] = field(default_factory=dict)
    # Candidates whose text is empty (or equal to one of empty_markers): error | placeholder | drop.
    # placeholder and drop are counted and reported; error names every offending candidate.
    empty_text: EmptyText = EmptyText.error
    empty_markers: list[str] = field(default_factory=list)
    placeholder: str = "(no text)"
    # An empty context is an error unless allowed (a single pool of items may have no shared context).
    allow_empty_context: bool = False
    # true: the candidates of every selected context become one pool (context "pool", no shared text; candidate
    # ids "<context>/<candidate>"), e.g. 656 SummEval summaries ranked as one set; human scores follow them.
    pool: bool = False
    demo: DemoConfig = field(default_factory=DemoConfig)


@dataclass
class PairsConfig:
    """How comparison pairs are chosen per context (and attribute)."""

    # all_pairs (every unordered pair, so N(N-1) ordered prompts) | balanced_random | greedy_optimal | random
    # | no_repeat | symmetric | all_ordered. Ordered selections are folded into unordered pairs.
    strategy: Strategy = Strategy.all_pairs
    # Unordered pairs per context for the sampling strategies, or `fraction` of all N(N-1)/2 pairs; when
    # both are set, k wins (so `pairs=balanced pairs.k=500` overrides the preset's fraction). Refused for
    # all_pairs / all_ordered, which judge every pair.
    k: int | None = None
    fraction: float | None = None
    # both: every pair is judged in both orderings (the product's rule). one: only the selected ordering.
    orderings: Orderings = Orderings.both
    # The same pair set for every attribute of a context (more prefix-cache hits) or a new draw per attribute.
    same_pairs_for_all_attributes: bool = True
    seed: int = 0


@dataclass
class TemplateConfig:
    """One prompt template. Fields: {context}, {a}, {b}, {adjective}, {noun}, {Noun}, {context_noun},
    {Context_noun}. The question goes last so that prompts sharing a context and slot A share a prefix."""

    id: str = "c1"
    text: str = (
        "{Context_noun}: {context}\n\n{Noun} A: {a}\n\n{Noun} B: {b}\n\n"
        "Which {noun} is more {adjective}, {Noun} A or {Noun} B?"
    )
    # Text the answer starts with, so that the next token is the label word ("Summary" -> " A").
    answer_prefix: str = "{Noun}"


@dataclass
class PromptConfig:
    templates: list[TemplateConfig] = field(default_factory=lambda: [TemplateConfig()])
    # auto: use the model's chat template when it has one; true: require it; false: plain text. YAML/CLI
    # booleans are accepted (`prompt.chat_template=false`); :func:`to_run_config` turns the value into a
    # :class:`ChatTemplate`.
    chat_template: str | bool = "auto"
    # The system message (chat template), or the first paragraph of a plain-text prompt.
    system_prompt: str | None = None
    # Label words whose first-token log-probabilities are read; each must be a single token.
    label_words_a: list[str] = field(default_factory=lambda: [" A", "A"])
    label_words_b: list[str] = field(default_factory=lambda: [" B", "B"])
    # A third option "both equally good" (Chen et al. 2023's pairwise prompt): its label words (empty: no tie).
    # Its probability is kept (``p_tie``); P(A wins) splits it evenly between the two candidates.
    label_words_tie: list[str] = field(default_factory=list)
    # A prompt longer than the model's context: truncate (the context text, counted and warned) | refuse.
    too_long: TooLong = TooLong.truncate


# The templates shipped with the product (``absolute.library``): the EACL repository's prompt scoring prompts
# (scoring-1, scoring-2), a G-Eval style prompt and Chen et al. 2023's implicit and explicit prompts.
def _absolute_library() -> dict[str, AbsoluteTemplateConfig]:
    cand = "{Context_noun}: {context}\n\n{Noun}: {candidate}\n\n"
    return {
        "s1": AbsoluteTemplateConfig(
            mode=AbsoluteMode.prompt_score,
            text=cand + "Provide a score between {low} and {high} that measures the {noun}'s {attribute}.",
            answer_prefix="Answer:",
        ),
        "s2": AbsoluteTemplateConfig(
            mode=AbsoluteMode.prompt_score,
            text=cand + "Score the {noun} between {low} and {high} in terms of {attribute}.",
            answer_prefix="Score:",
        ),
        "geval": AbsoluteTemplateConfig(
            mode=AbsoluteMode.g_eval,
            text=cand + "Evaluation criteria: {Attribute} ({low}-{high}): how {adjective} the {noun} is.\n\n"
            "Rate the {noun} on {attribute} from {low} (worst) to {high} (best). Reply with the score only.",
            answer_prefix="{Attribute} score: ",
            low=1,
            high=5,
        ),
        "chen_implicit": AbsoluteTemplateConfig(
            mode=AbsoluteMode.implicit,
            text=cand + "Is the {noun} {adjective}? Answer Yes or No.",
            answer_prefix="Answer:",
        ),
        "criterion_options": AbsoluteTemplateConfig(
            mode=AbsoluteMode.options,
            text=cand + "Evaluation criterion: {criterion}\n\nOptions:\n{options}\n\n"
            "Which option describes the {noun} best? Answer with its letter.",
            answer_prefix="Answer: (",
        ),
        "chen_explicit": AbsoluteTemplateConfig(
            mode=AbsoluteMode.explicit,
            text=cand
            + "Score the {noun} with respect to {attribute} on a continuous scale from {low} (worst) to {high} "
            '(best), where a score of {low} means "not {adjective} at all" and a score of {high} means '
            '"perfectly {adjective}".',
            answer_prefix="Score:",
            low=0,
            high=100,
        ),
    }


@dataclass
class AbsoluteTemplateConfig:
    """One absolute prompt. Fields: {context}, {candidate}, {attribute}, {Attribute}, {adjective}, {noun},
    {Noun}, {context_noun}, {Context_noun}, {low}, {high}. The context goes first so that the prompts of a
    context share a prefix."""

    mode: AbsoluteMode = AbsoluteMode.prompt_score
    text: str = ""
    # Text the answer starts with ("Score:"); the score (or yes/no) is read from what follows.
    answer_prefix: str = "Answer:"
    # The score scale: parsed scores outside it are failures; g_eval reads the tokens low..high.
    low: int = 1
    high: int = 10


@dataclass
class AbsoluteConfig:
    """Absolute assessment beside (or instead of, ``workflow=absolute``) the comparisons."""

    # Which absolute modes run (several can): prompt_score | g_eval | implicit | explicit. Empty: none.
    modes: list[AbsoluteMode] = field(default_factory=list)
    # The templates each mode runs, by id in ``library``.
    templates: dict[str, list[str]] = field(
        default_factory=lambda: {
            "prompt_score": ["s1"],
            "g_eval": ["geval"],
            "implicit": ["chen_implicit"],
            "explicit": ["chen_explicit"],
            "options": ["criterion_options"],
        }
    )
    # Every known template by id; add your own with `+absolute.library.mine={mode: ..., text: ...}`.
    library: dict[str, AbsoluteTemplateConfig] = field(default_factory=_absolute_library)
    # Generated modes (prompt_score, explicit): temperature 0 is greedy (reproducible, the default); above 0 the
    # judge samples ``samples`` answers with ``seed`` and the parsed scores are averaged (EACL: one sample at 1.0
    # with 5 tokens; G-Eval's official code: 20 samples).
    samples: int = 1
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 5
    # g_eval: the words read for each score v ("{v}": the digit itself); each must be one token.
    score_words: list[str] = field(default_factory=lambda: ["{v}"])
    # implicit: the word variants whose exact first-token probabilities are summed.
    yes_words: list[str] = field(default_factory=lambda: [" Yes", "Yes", " yes", "yes"])
    no_words: list[str] = field(default_factory=lambda: [" No", "No", " no", "no"])
    # Absolute scores as Gaussian experts on each candidate's score in the PoE-Gaussian solve of the
    # comparisons (method "combined:<absolute template>", pipeline.methods.combined): on or off, and their
    # weight (prior precision relative to one comparison's), or None to estimate it per attribute from the data.
    combine: bool = True
    combine_weight: float | None = None


class ApiPath(StrEnum):
    """How prompts reach the endpoint (:mod:`pipeline.judge.api`). token_ids: ``/completions`` with the exact
    token ids and the exact log-probability of every label token (vLLM's server); chat: ``/chat/completions``
    with the message and the ``top_logprobs`` alternatives of the first token (any OpenAI-compatible server);
    auto: token_ids if a first request shows the server takes them, else chat."""

    auto = "auto"
    token_ids = "token_ids"
    chat = "chat"


@dataclass
class ApiConfig:
    """The judge behind an OpenAI-compatible API (``judge.backend=api``; :mod:`pipeline.judge.api`)."""

    # The endpoint, e.g. http://127.0.0.1:8000/v1 (a `vllm serve`).
    base_url: str | None = None
    # The model name the server serves; default: the judge's name.
    model: str | None = None
    # The NAME of the environment variable that holds the key (never the key itself); None: no key.
    api_key_env: str | None = None
    # token_ids | chat | auto (see ApiPath); chat reads the label words among the first token's top_logprobs
    # alternatives (20 is most hosted models' limit): a label word not among them gets the smallest returned
    # log-probability (a floor), counted and reported. prefill: the answer prefix ("Summary") goes as a final
    # assistant message continued by the model (vLLM: continue_final_message); false drops it.
    path: ApiPath = ApiPath.auto
    top_logprobs: int = 20
    prefill: bool = True
    # Requests in flight at once.
    concurrency: int = 8
    # Seconds per request; retries on 429, 5xx, timeouts and lost connections, with exponential backoff and
    # jitter (honouring Retry-After), at most max_retries times and retry_for seconds per request.
    timeout: float = 60.0
    max_retries: int = 8
    retry_for: float = 300.0
    backoff: float = 0.5
    backoff_max: float = 30.0
    # Keep every reply in a SQLite file, keyed by endpoint, model, prompt and sampling: cache_path, default
    # paths.cache_dir/api/replies.sqlite (shared by every run of the project).
    cache: bool = True
    cache_path: str | None = None
    # Price per million prompt (input) and completion (output) tokens, for the cost in the summary and MLflow.
    price_input: float | None = None
    price_output: float | None = None


@dataclass
class JudgeConfig:
    """The LLM judge and how its engines are placed."""

    # backend: vllm (the product) | hf (Hugging Face transformers, one prompt at a time: the papers' way).
    backend: Backend = Backend.vllm
    # A model alias known to pipeline.models (e.g. smollm2-135m-instruct), a local folder, or a hub id.
    model: str = "smollm2-135m-instruct"
    # Name recorded in the tables; defaults to the model alias / folder name.
    name: str | None = None
    max_model_len: int = 4096
    # vllm: passed through to vllm.LLM as one mapping (enforce_eager, dtype, enable_prefix_caching, ...; every
    # key is checked against vLLM's EngineArgs). hf: dtype, threads, seed. Without a dtype, a CPU judge runs
    # in bfloat16 where the CPU has native bfloat16 and in float32 elsewhere (pipeline.hardware).
    engine: dict[str, Any] = field(default_factory=dict)
    # Environment of the engine's process, set before the engine is imported (CPU KV cache size, threads).
    env: dict[str, str] = field(default_factory=dict)
    # vllm: where the engine runs: auto | worker (inside the judge worker's process) | own (processes of its own,
    # watched by the worker): see EngineProcess. auto is worker for a CPU engine on a Ray actor, else own.
    engine_process: EngineProcess = EngineProcess.auto
    # Prompts per engine call; larger batches let vLLM schedule more prompts that share a prefix.
    batch_size: int = 256
    num_actors: int = 1
    num_cpus_per_actor: float = 1.0
    num_gpus_per_actor: float = 0.0
    # backend=api: the endpoint, its model name, the key's environment variable, concurrency, retries, cache.
    api: ApiConfig = field(default_factory=ApiConfig)
    # Keep every answer of an in-process judge by content (judge identity, read, exact prompt) in one SQLite
    # file that every run consults before judging (pipeline.judge.memo): store_path, default
    # paths.cache_dir/judgements.sqlite. (A judge behind an API has its reply cache instead.)
    store: bool = True
    store_path: str | None = None


@dataclass
class ScoringConfig:
    # Methods from pipeline.methods.SCORERS.
    methods: list[str] = field(
        default_factory=lambda: ["win_ratio", "avg_prob", "bradley_terry", "poe_gaussian"]
    )
    # Position-bias removal: average (both orderings, PoE 4.2) | alpha (reweight so P(A) = 0.5, EACL eq. 9)
    # | mean_shift (one ordering: PoE-Gaussian expert mean shifted by the observed P(A), PoE A.6; the other
    # methods get the raw probabilities) | none (each ordering is its own comparison).
    debias: Debias = Debias.average
    # Correlation with human scores: auto (where the data has them) | required (error if missing) | off.
    correlation: Correlation = Correlation.auto


@dataclass
class CriterionOption:
    """One option of a criterion (EvalAssist's structured form): its name, what it means, and its score."""

    name: str = ""
    description: str = ""
    score: float = 0.0


@dataclass
class GeneratorConfig:
    """One generator "model": a model and how it is sampled. Generators that share a model and engine settings
    share one engine (they differ only in sampling or system prompt)."""

    # The model's name on the leaderboard (the candidates' ``system``).
    name: str = ""
    # A model alias (smollm2-135m-instruct), a local folder or a hub id.
    model: str = "smollm2-135m-instruct"
    system_prompt: str | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 96
    seed: int = 0
    stop: list[str] = field(default_factory=list)
    # vllm.LLM settings and the engine's environment, over the judge's (judge.engine, judge.env).
    engine: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    # Generate behind an OpenAI-compatible API (base_url, model, api_key_env, concurrency, cache, prices: as
    # judge.api); None: in-process (with the judge's backend, vllm when the judge itself is behind an API).
    api: ApiConfig | None = None


@dataclass
class GenerateConfig:
    """Generate-then-evaluate (``workflow=generate``): task inputs, a task prompt, the generator models."""

    # A .jsonl/.parquet file (or folder) of task records with named fields; None: the demo tasks the project
    # writes (support tickets to summarise).
    inputs: str | None = None
    # The field naming each record (unique); the records' order otherwise.
    id_field: str = "id"
    # The task prompt, with {field} placeholders filled from each record.
    task: str = ""
    max_inputs: int | None = None
    models: list[GeneratorConfig] = field(default_factory=list)
    # Empty outputs and outputs cut off at max_tokens: keep | placeholder | drop (counted and reported).
    empty_output: OutputHandling = OutputHandling.placeholder
    cut_off_output: OutputHandling = OutputHandling.keep
    placeholder: str = "(no output)"
    # Prompts per engine call.
    batch_size: int = 64


class ReasonSample(StrEnum):
    """Which comparisons get the judge's reasons: where the two orderings disagree, the closest calls, at random."""

    disagree = "disagree"
    close = "close"
    random = "random"


@dataclass
class ReasonsConfig:
    """The judge's reasons for a sample of comparisons: generated after the decision, stored beside it, never used
    to change a score."""

    # How many comparisons per attribute and template; None: 8 with workflow=generate, else 0 (off).
    n: int | None = None
    # Filled in this order until n are chosen.
    sample: list[ReasonSample] = field(
        default_factory=lambda: [ReasonSample.disagree, ReasonSample.close, ReasonSample.random]
    )
    max_tokens: int = 64
    seed: int = 0


@dataclass
class LeaderboardConfig:
    """The model leaderboard (candidates that name their ``system``): bootstrap over inputs."""

    # Resampling rounds and the interval's coverage (arena-hard-auto: 100 rounds, 5-95 %, i.e. level 0.90).
    rounds: int = 100
    level: float = 0.90
    seed: int = 0
    # Methods whose mean score over inputs is reported beside the win rate; None: bradley_terry, poe_gaussian and
    # poe_logit where scoring.methods has them, and the absolute modes of the run. A list must name scored methods
    # or modes.
    methods: list[str] | None = None


class RoundStrategy(StrEnum):
    """How adaptive rounds choose their pairs (:mod:`pipeline.methods.rounds`)."""

    # the pairs most likely to be in the wrong order under the PoE-Gaussian posterior (Fathullah & Gales 2025)
    reorder = "reorder"
    # place every item first (a small sample, then each item against the sample's median item, then the items
    # whose answers were at the cap or ambiguous), then reorder: for judges whose answers are graded
    # (:mod:`pipeline.methods.locate`); its first rounds take what they need, up to the call budget
    locate = "locate"
    # neighbours in the current ranking, with exploration (GABRIEL, nanojudge)
    windowed = "windowed"
    # uniformly random unjudged pairs (the baseline)
    random = "random"


class RoundLink(StrEnum):
    """How adaptive rounds read a comparison's probability as a score difference (:mod:`pipeline.methods.posterior`)."""

    # the capped log-odds: a far pair says how far (the Gaussian approximation of PoE-BT); scores in log-odds
    logit = "logit"
    # p - 1/2, PoE-Gaussian as the scoring methods (PoE eq. 9): saturates at +-1/2 for a confident judge
    linear = "linear"


class StopCriterion(StrEnum):
    """The posterior criterion that ends the rounds (:mod:`pipeline.methods.stopping`)."""

    expected_tau = "expected_tau"  # expected Kendall tau with the truth at least the threshold
    max_stderr = "max_stderr"  # largest posterior standard deviation of a score at most the threshold
    change = "change"  # 1 - Spearman between consecutive rounds' scores at most the threshold


@dataclass
class BudgetConfig:
    """What adaptive rounds may spend per context; the rounds stop at the first limit reached (None: no limit).
    A round that would pass a call limit is cut to fit; tokens, money and time are checked between rounds."""

    # judge calls (prompts: two per pair, one per ordering), in total or per item of the context
    calls: int | None = None
    calls_per_item: float | None = 8.0
    prompt_tokens: int | None = None
    # money of an API judge (needs judge.api prices)
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

    def schedule(self, n: int, checkpoints: tuple[int, ...] = ()):
        """The size of the next round of ``n`` items as a function of the pairs judged so far: ``first_round`` x
        items first, then ``max(later_round x items, growth x judged)``, cut so that a round ends at every
        checkpoint (pairs)."""
        from pipeline.methods.rounds import round_schedule

        return round_schedule(
            max(1, round(self.first_round * n)),
            self.growth,
            checkpoints,
            least=max(1, round(self.later_round * n)),
        )


@dataclass
class RuntimeConfig:
    # ray: stages on Ray Data (local ray.init() or an existing cluster). local: in-process, no Ray.
    executor: Executor = Executor.ray
    # Ray address: None starts a local Ray of the run's own (even where a `ray start` cluster runs on this
    # machine); "auto" joins the cluster this job runs on (or the one `ray start` made here).
    address: str | None = None
    num_cpus: int | None = None
    # Contexts per pair-generation shard is balanced by pair count; this caps the number of shards.
    max_shards: int = 64
    # Rows per pair-generation output chunk (bounds memory for one huge pool).
    pair_chunk_rows: int = 4096
    # Resume: judge only what paths.run_dir does not hold yet (refused if its judgments were made with a
    # different judging configuration). false with a run_dir that holds judgments is refused.
    resume: bool = True
    # A judge worker whose engine dies is replaced this many times per worker (its unfinished batch judged
    # again by the new one); one more death stops the run with the error.
    max_engine_restarts: int = 3


@dataclass
class TrackingConfig:
    enabled: bool = True
    # None: a local SQLite store under paths.output_root/mlflow. Or any MLflow tracking URI.
    tracking_uri: str | None = None
    experiment: str = "comparative-assessment"
    run_name: str | None = None
    # Plot files (PNG) are logged with the tables.
    plots: bool = True


@dataclass
class PathsConfig:
    # Root of everything a run writes; relative paths are resolved against the project root.
    output_root: str = "outputs"
    # This run's folder; None makes outputs/runs/<date>/<time>-<dataset>; "latest" continues the latest run
    # folder of the same configuration (after a killed driver: rerun the same command with it), else a new one.
    run_dir: str | None = None
    # Converted model checkpoints and the demo data.
    cache_dir: str = ".cache"


@dataclass
class RunConfig:
    workflow: Workflow = Workflow.comparative
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    pairs: PairsConfig = field(default_factory=PairsConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    absolute: AbsoluteConfig = field(default_factory=AbsoluteConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    leaderboard: LeaderboardConfig = field(default_factory=LeaderboardConfig)
    reasons: ReasonsConfig = field(default_factory=ReasonsConfig)
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    adaptive: AdaptiveConfig = field(default_factory=AdaptiveConfig)
    # Evaluation criteria in plain words (workflow=generate): name -> what the best output does. Each criterion is
    # judged and reported like an attribute; templates use it as {criterion}.
    criteria: dict[str, str] = field(default_factory=dict)
    # EvalAssist's structured form for absolute judging (absolute.modes=[options]): criterion (or attribute) ->
    # its options, each {name, description, score}; the judge picks an option by letter.
    criteria_options: dict[str, list[CriterionOption]] = field(default_factory=dict)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    log_level: LogLevel = LogLevel.INFO
    # true: the engines' and Ray's own output on the console too (by default it goes to the run folder's logs).
    verbose: bool = False


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
# Settings of the hf backend's engine mapping (judge.engine).
HF_ENGINE_KEYS = ("dtype", "seed", "threads")


def _positive(problems: list[str], key: str, value: float | None, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if value is None or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        problems.append(f"config {key}={value!r} must be a positive number")


def validate(cfg: RunConfig) -> None:
    """Refuse every value that could not be applied as written; raise one ConfigError listing them all."""
    from pipeline.methods import SCORERS
    from pipeline.prompts import template_problems

    problems: list[str] = []
    pairs, scoring = cfg.pairs, cfg.scoring
    if pairs.orderings == Orderings.both and pairs.strategy not in BOTH_ORDERINGS:
        problems.append(
            f"config pairs.strategy={pairs.strategy} selects ordered comparisons; with pairs.orderings=both use "
            f"one of {', '.join(sorted(BOTH_ORDERINGS))}, or set pairs.orderings=one"
        )
    if pairs.strategy in SAMPLING:
        if pairs.k is None and pairs.fraction is None:
            problems.append(f"config pairs.strategy={pairs.strategy} needs pairs.k or pairs.fraction")
    else:
        for key, value in (("k", pairs.k), ("fraction", pairs.fraction)):
            if value is not None:
                problems.append(
                    f"config pairs.{key}={value} has no effect with pairs.strategy={pairs.strategy}, which judges "
                    f"every pair; remove it, or choose a sampling strategy ({', '.join(sorted(SAMPLING))})"
                )
    _positive(problems, "pairs.k", pairs.k, allow_none=True)
    if pairs.fraction is not None and not 0 < pairs.fraction <= 1:
        problems.append(f"config pairs.fraction={pairs.fraction} must be in (0, 1]")
    if pairs.orderings == Orderings.one and scoring.debias == Debias.average:
        problems.append(
            "config pairs.orderings=one judges a single ordering, so scoring.debias=average has nothing to "
            "average; use scoring.debias=alpha, mean_shift or none"
        )
    if scoring.debias == Debias.mean_shift and pairs.orderings != Orderings.one:
        problems.append(
            "config scoring.debias=mean_shift is the one-ordering correction (PoE appendix A.6); with both "
            "orderings use scoring.debias=average"
        )
    if not scoring.methods:
        problems.append("config scoring.methods is empty; choose from " + ", ".join(sorted(SCORERS)))
    unknown = [m for m in scoring.methods if m not in SCORERS]
    if unknown:
        problems.append(
            f"config scoring.methods: unknown method(s) {unknown}; choose from {', '.join(sorted(SCORERS))}"
        )
    if len(set(scoring.methods)) != len(scoring.methods):
        problems.append(f"config scoring.methods lists a method twice: {scoring.methods}")

    ids = [t.id for t in cfg.prompt.templates]
    if not ids:
        problems.append("config prompt.templates is empty")
    if len(set(ids)) != len(ids):
        problems.append(f"config prompt.templates has duplicate ids: {ids}")
    for template in cfg.prompt.templates:
        problems += template_problems(template)
    words_a, words_b = cfg.prompt.label_words_a, cfg.prompt.label_words_b
    if not words_a or not words_b:
        problems.append(
            "config prompt.label_words_a and prompt.label_words_b must each name at least one word"
        )
    both = sorted(set(words_a) & set(words_b))
    if both:
        problems.append(f"config prompt.label_words_a and label_words_b both list {both}")

    judge = cfg.judge
    for key in ("max_model_len", "batch_size", "num_actors"):
        value = getattr(judge, key)
        if not isinstance(value, int) or value < 1:
            problems.append(f"config judge.{key}={value!r} must be a positive integer")
    if judge.num_cpus_per_actor < 0 or judge.num_gpus_per_actor < 0:
        problems.append("config judge.num_cpus_per_actor and judge.num_gpus_per_actor must be >= 0")
    for key in ("model", "max_model_len"):
        if key in judge.engine:
            problems.append(f"config judge.engine.{key} is set by judge.{key}; remove it from judge.engine")
    if MULTIPROCESSING_ENV in judge.env:
        problems.append(
            f"config judge.env.{MULTIPROCESSING_ENV} is set by judge.engine_process (auto | worker | own); "
            "remove it from judge.env"
        )
    problems += api_problems(judge)
    if judge.backend == Backend.hf:
        extra = sorted(set(judge.engine) - set(HF_ENGINE_KEYS))
        if extra:
            problems.append(
                f"config judge.engine has {extra}, which the hf backend does not take (it takes "
                f"{', '.join(HF_ENGINE_KEYS)}); use judge=hf's own engine settings or judge.backend=vllm"
            )
    for key, value in (
        ("dataset.max_contexts", cfg.dataset.max_contexts),
        ("dataset.max_candidates", cfg.dataset.max_candidates),
    ):
        if value is not None and value < 1:
            problems.append(f"config {key}={value} must be at least 1")
    if cfg.dataset.max_candidates is not None and cfg.dataset.max_candidates < 2:
        problems.append(
            "config dataset.max_candidates must be at least 2 (a comparison needs two candidates)"
        )
    if cfg.runtime.max_shards < 1 or cfg.runtime.pair_chunk_rows < 1:
        problems.append("config runtime.max_shards and runtime.pair_chunk_rows must be at least 1")
    problems += absolute_problems(cfg)
    problems += generate_problems(cfg)
    problems += adaptive_problems(cfg)
    if cfg.reasons.n is not None and cfg.reasons.n < 0:
        problems.append(f"config reasons.n={cfg.reasons.n} must be >= 0 (0: no reasons)")
    if cfg.reasons.max_tokens < 1:
        problems.append(f"config reasons.max_tokens={cfg.reasons.max_tokens} must be at least 1")
    if not cfg.reasons.sample:
        problems.append("config reasons.sample is empty: choose from disagree, close, random")
    board = cfg.leaderboard
    if not isinstance(board.rounds, int) or board.rounds < 1:
        problems.append(f"config leaderboard.rounds={board.rounds!r} must be a positive integer")
    if not 0 < board.level < 1:
        problems.append(f"config leaderboard.level={board.level} must be in (0, 1) (0.90: a 5-95% interval)")
    if board.methods is not None:
        modes = [str(m) for m in cfg.absolute.modes]
        unscored = [m for m in board.methods if m not in scoring.methods and m not in modes]
        if unscored:
            problems.append(
                f"config leaderboard.methods {unscored} are neither in scoring.methods {scoring.methods} nor in "
                f"absolute.modes {modes}: add them there or remove them"
            )
    if problems:
        raise ConfigError(
            "\n".join(problems) if len(problems) == 1 else "\n  - ".join(["invalid config:", *problems])
        )


def adaptive_problems(cfg: RunConfig) -> list[str]:
    """What in ``adaptive`` could not be applied as written."""
    problems: list[str] = []
    a = cfg.adaptive
    if not 0 < a.first_round <= 64:
        problems.append(f"config adaptive.first_round={a.first_round} must be in (0, 64] (pairs per item)")
    if not 0 < a.later_round <= 64:
        problems.append(f"config adaptive.later_round={a.later_round} must be in (0, 64] (pairs per item)")
    _positive(problems, "adaptive.logit_clip", a.logit_clip)
    _positive(problems, "adaptive.robust", a.robust, allow_none=True)
    if not 0 <= a.growth <= 10:
        problems.append(f"config adaptive.growth={a.growth} must be in [0, 10]")
    if not isinstance(a.window, int) or a.window < 1:
        problems.append(f"config adaptive.window={a.window!r} must be a positive integer")
    if not 0 <= a.explore <= 1:
        problems.append(f"config adaptive.explore={a.explore} must be in [0, 1]")
    _positive(problems, "adaptive.ridge", a.ridge)
    _positive(problems, "adaptive.warm_weight", a.warm_weight)
    b = a.budget
    for key in ("calls", "calls_per_item", "prompt_tokens", "money", "seconds"):
        _positive(problems, f"adaptive.budget.{key}", getattr(b, key), allow_none=True)
    if b.money is not None and cfg.judge.backend != Backend.api:
        problems.append("config adaptive.budget.money needs a judge behind an API with prices (judge.api)")
    if cfg.workflow != Workflow.adaptive:
        return problems
    if all(
        getattr(b, key) is None for key in ("calls", "calls_per_item", "prompt_tokens", "money", "seconds")
    ):
        if a.stop.criterion is None:
            problems.append(
                "config workflow=adaptive has no budget (adaptive.budget) and no stopping rule (adaptive.stop): "
                "the rounds would judge every pair; set one"
            )
    if a.stop.criterion == StopCriterion.expected_tau and not -1 < a.stop.threshold < 1:
        problems.append(
            f"config adaptive.stop.threshold={a.stop.threshold} must be in (-1, 1) for expected_tau"
        )
    elif a.stop.criterion is not None and a.stop.threshold <= 0:
        problems.append(f"config adaptive.stop.threshold={a.stop.threshold} must be positive")
    if cfg.pairs.orderings != Orderings.both:
        problems.append(
            "config workflow=adaptive judges every pair in both orderings: set pairs.orderings=both"
        )
    if len(cfg.prompt.templates) != 1:
        problems.append(
            f"config workflow=adaptive ranks with one comparative template; prompt.templates has "
            f"{len(cfg.prompt.templates)}"
        )
    if a.warm_start is not None and a.warm_start not in [str(m) for m in cfg.absolute.modes]:
        problems.append(
            f"config adaptive.warm_start={a.warm_start} is not among absolute.modes "
            f"{[str(m) for m in cfg.absolute.modes]}: add it there (its scores are the prior)"
        )
    return problems


def generate_problems(cfg: RunConfig) -> list[str]:
    """What in ``generate`` and ``criteria`` could not be applied as written."""
    problems: list[str] = []
    gen = cfg.generate
    if cfg.workflow != Workflow.generate:
        if gen.models or gen.task:
            problems.append(
                "config generate.models / generate.task are set but workflow is not generate; set workflow=generate"
            )
        return problems
    if not gen.task.strip():
        problems.append("config generate.task is empty: write the task prompt, with {field} placeholders")
    if not gen.models:
        problems.append("config generate.models is empty: name at least two generator models")
    names = [m.name for m in gen.models]
    if any(not n for n in names):
        problems.append("config generate.models: every model needs a name (its name on the leaderboard)")
    if len(set(names)) != len(names):
        problems.append(f"config generate.models has repeated names: {names}")
    if len(gen.models) == 1:
        problems.append("config generate.models has one model: comparing outputs needs at least two")
    for m in gen.models:
        if m.api is not None:
            problems += endpoint_problems(m.api, f"generate.models[{m.name}].api")
            if m.engine:
                problems.append(f"config generate.models[{m.name}].engine has no effect with an api")
        if m.max_tokens < 1 or m.temperature < 0 or not 0 < m.top_p <= 1:
            problems.append(
                f"config generate.models {m.name!r}: max_tokens >= 1, temperature >= 0 and top_p in (0, 1] are "
                f"required (got {m.max_tokens}, {m.temperature}, {m.top_p})"
            )
    if not cfg.criteria:
        problems.append(
            "config criteria is empty: write at least one evaluation criterion in plain words, e.g. "
            'criteria.helpful="The best output ..."'
        )
    empty = [name for name, text in cfg.criteria.items() if not str(text).strip()]
    if empty:
        problems.append(f"config criteria {empty} have no description")
    if cfg.dataset.attributes is not None:
        problems.append(
            "config dataset.attributes has no effect with workflow=generate: the criteria are what is judged"
        )
    if gen.batch_size < 1:
        problems.append(f"config generate.batch_size={gen.batch_size} must be at least 1")
    return problems


def reasons_per_group(cfg: RunConfig) -> int:
    """How many comparisons per attribute and template get the judge's reasons (``reasons.n`` or its default)."""
    if cfg.reasons.n is not None:
        return cfg.reasons.n
    return 8 if cfg.workflow == Workflow.generate else 0


def leaderboard_methods(cfg: RunConfig) -> list[str]:
    """The methods whose mean scores the leaderboard reports (``leaderboard.methods``, or its default)."""
    if cfg.leaderboard.methods is not None:
        return list(cfg.leaderboard.methods)
    comparative = [m for m in ("bradley_terry", "poe_gaussian", "poe_logit") if m in cfg.scoring.methods]
    return comparative + [str(m) for m in cfg.absolute.modes]


def absolute_problems(cfg: RunConfig) -> list[str]:
    """What in ``absolute`` (and the workflow's use of it) could not be applied as written."""
    from pipeline.absolute import absolute_template_problems

    problems: list[str] = []
    absolute = cfg.absolute
    if cfg.workflow == Workflow.absolute and not absolute.modes:
        problems.append(
            "config workflow=absolute needs absolute.modes (some of "
            + ", ".join(m.value for m in AbsoluteMode)
            + ")"
        )
    if len(set(absolute.modes)) != len(absolute.modes):
        problems.append(f"config absolute.modes lists a mode twice: {[str(m) for m in absolute.modes]}")
    for mode in absolute.modes:
        ids = absolute.templates.get(str(mode)) or []
        if not ids:
            problems.append(
                f"config absolute.templates.{mode} is empty: name the template(s) mode {mode} runs"
            )
        for template_id in ids:
            template = absolute.library.get(template_id)
            if template is None:
                problems.append(
                    f"config absolute.templates.{mode}: no template {template_id!r} in absolute.library "
                    f"(known: {', '.join(sorted(absolute.library))})"
                )
            elif template.mode != mode:
                problems.append(
                    f"config absolute.templates.{mode}: template {template_id!r} is a {template.mode} template"
                )
    unknown_modes = sorted(set(absolute.templates) - {m.value for m in AbsoluteMode})
    if unknown_modes:
        problems.append(
            f"config absolute.templates has unknown mode(s) {unknown_modes}; modes: "
            + ", ".join(m.value for m in AbsoluteMode)
        )
    used = {t for mode in absolute.modes for t in absolute.templates.get(str(mode)) or []}
    comparative_ids = {t.id for t in cfg.prompt.templates}
    for template_id in sorted(used & set(absolute.library)):
        problems += absolute_template_problems(template_id, absolute.library[template_id])
        if template_id in comparative_ids:
            problems.append(
                f"config absolute template {template_id!r} has the id of a prompt.templates entry; rename one"
            )
    if not isinstance(absolute.samples, int) or absolute.samples < 1:
        problems.append(f"config absolute.samples={absolute.samples!r} must be a positive integer")
    if absolute.samples > 1 and not absolute.temperature > 0:
        problems.append(
            f"config absolute.samples={absolute.samples} averages samples, which needs absolute.temperature > 0 "
            "(temperature 0 is greedy: every sample would be the same)"
        )
    if absolute.temperature < 0:
        problems.append(f"config absolute.temperature={absolute.temperature} must be >= 0")
    if absolute.max_tokens < 1:
        problems.append(f"config absolute.max_tokens={absolute.max_tokens} must be at least 1")
    if not absolute.score_words or any("{v}" not in w for w in absolute.score_words):
        problems.append(f"config absolute.score_words={absolute.score_words} must each contain {{v}}")
    if not absolute.yes_words or not absolute.no_words:
        problems.append("config absolute.yes_words and absolute.no_words must each name at least one word")
    elif set(absolute.yes_words) & set(absolute.no_words):
        problems.append("config absolute.yes_words and absolute.no_words share a word")
    if absolute.combine_weight is not None and not (
        math.isfinite(absolute.combine_weight) and absolute.combine_weight > 0
    ):
        problems.append(
            f"config absolute.combine_weight={absolute.combine_weight} must be positive (or null)"
        )
    if AbsoluteMode.options in absolute.modes and not cfg.criteria_options:
        problems.append(
            "config absolute.modes has options but criteria_options is empty: give each criterion its options "
            "({name, description, score}), e.g. in conf/criteria/"
        )
    for criterion, options in cfg.criteria_options.items():
        if len(options) < 2:
            problems.append(f"config criteria_options.{criterion} needs at least two options")
        names = [o.name for o in options]
        if any(not n.strip() for n in names) or len(set(names)) != len(names):
            problems.append(f"config criteria_options.{criterion}: options need distinct names, got {names}")
        if len(options) > 26:
            problems.append(f"config criteria_options.{criterion}: at most 26 options (one letter each)")
    if cfg.criteria_options and AbsoluteMode.options not in absolute.modes:
        problems.append(
            "config criteria_options is set but absolute.modes has no options: add it or remove them"
        )
    tie = cfg.prompt.label_words_tie
    if tie and set(tie) & (set(cfg.prompt.label_words_a) | set(cfg.prompt.label_words_b)):
        problems.append("config prompt.label_words_tie shares a word with label_words_a / label_words_b")
    if "davidson" in cfg.scoring.methods and not tie:
        problems.append(
            "config scoring.methods has davidson (the tie model) but prompt.label_words_tie is empty: add a tie "
            "option to the prompt (e.g. +prompt=chen_tie) or drop davidson"
        )
    return problems


def register_configs() -> None:
    """Register the schema with Hydra's ConfigStore (conf/config.yaml lists ``base_config`` first)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="base_config", node=RunConfig)


def _option(criterion: str, value: Any) -> CriterionOption:
    """An option of ``criteria_options`` (OmegaConf leaves the items of a dict's lists as plain dicts)."""
    if isinstance(value, CriterionOption):
        return value
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"name", "description", "score"})
        if unknown:
            raise ConfigError(
                f"config criteria_options.{criterion}: unknown option key(s) {unknown}; use name, description, score"
            )
        try:
            return CriterionOption(
                name=str(value.get("name", "")),
                description=str(value.get("description", "")),
                score=float(value.get("score", 0.0)),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"config criteria_options.{criterion}: {exc}") from exc
    raise ConfigError(
        f"config criteria_options.{criterion}: each option is {{name, description, score}}, got {value!r}"
    )


def to_run_config(cfg: Any) -> RunConfig:
    """Convert a composed DictConfig into a validated :class:`RunConfig` (once, at the entry point)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        merged = OmegaConf.merge(OmegaConf.structured(RunConfig), cfg)
        run_cfg = OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"config: {exc}") from exc
    assert isinstance(run_cfg, RunConfig)
    run_cfg.prompt.chat_template = ChatTemplate.parse(run_cfg.prompt.chat_template)
    run_cfg.criteria_options = {
        name: [_option(name, o) for o in options] for name, options in run_cfg.criteria_options.items()
    }
    validate(run_cfg)
    return run_cfg


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted keys of a nested dict / dataclass (lists of dicts are indexed: ``prompt.templates.0.id``)."""
    if hasattr(tree, "__dataclass_fields__"):
        tree = asdict(tree)
    out: dict[str, Any] = {}
    if isinstance(tree, dict):
        if not tree and prefix:
            out[prefix] = "{}"
        for k, v in tree.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(tree, list) and tree and isinstance(tree[0], dict):
        for n, v in enumerate(tree):
            out.update(flatten(v, f"{prefix}.{n}"))
    else:
        out[prefix] = tree
    return out


def to_flat_dict(cfg: RunConfig) -> dict[str, Any]:
    """The resolved config as dotted keys (for MLflow params); enum values as their plain strings."""
    return {k: (str(v) if isinstance(v, StrEnum) else v) for k, v in flatten(cfg).items()}


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def endpoint_problems(api: ApiConfig, key: str) -> list[str]:
    """What is wrong with an endpoint's settings at config ``key`` (never echoing a value that may be a key)."""
    problems = []
    if not api.base_url or not str(api.base_url).startswith(("http://", "https://")):
        problems.append(f"config {key}.base_url must be the endpoint's URL, e.g. http://127.0.0.1:8000/v1")
    if api.api_key_env is not None and not ENV_NAME.match(str(api.api_key_env)):
        problems.append(
            f"config {key}.api_key_env must be the NAME of an environment variable holding the key (e.g. "
            "OPENAI_API_KEY), not the key itself"
        )
    if not 1 <= api.top_logprobs <= 20:
        problems.append(f"config {key}.top_logprobs={api.top_logprobs} must be between 1 and 20")
    if api.concurrency < 1 or api.max_retries < 0 or api.timeout <= 0 or api.retry_for < 0:
        problems.append(
            f"config {key}: concurrency >= 1, max_retries >= 0, timeout > 0 and retry_for >= 0 are required"
        )
    return problems


def api_problems(judge: JudgeConfig) -> list[str]:
    """What is wrong with ``judge.api`` for ``judge.backend=api`` (never echoing a value that may be a key)."""
    if judge.backend != Backend.api:
        return []
    problems = endpoint_problems(judge.api, "judge.api")
    if judge.engine:
        problems.append(f"config judge.engine {sorted(judge.engine)} has no effect with judge.backend=api")
    return problems
