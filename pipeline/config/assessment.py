"""What is judged and how it is scored: the data set, the pairs, the prompt, the absolute modes, the scoring,
the leaderboard and the judge's reasons.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.config.enums import (
    AbsoluteMode,
    Calibrate,
    Control,
    Correlation,
    Debias,
    EmptyText,
    LeaderboardGames,
    Orderings,
    ReasonSample,
    Strategy,
    TooLong,
)


@dataclass
class DemoConfig:
    """The demo set the project writes itself: a good text per context and progressively damaged copies."""

    n_contexts: int = 4
    n_candidates: int = 6
    seed: int = 0


@dataclass
class ColumnsConfig:
    """A flat table's columns (:mod:`pipeline.data.tables`): each field the name of its column; None recognises the
    common names (prompt, instruction, question, input; response, output, answer, completion; model, generator;
    model_a, model_b, response_a, response_b, winner: docs/data.md)."""

    # one row per candidate
    context_id: str | None = None
    context: str | None = None
    # a context's further parts, shown to the judge after it: a reference answer (MT-Bench's reference-guided
    # grading), a score rubric (Prometheus 2), a checklist (TICK)
    reference: str | None = None
    rubric: str | None = None
    checklist: str | None = None
    candidate_id: str | None = None
    system: str | None = None
    text: str | None = None
    # people's scores: attribute -> its column (+dataset.columns.scores.quality=rating; an attribute without one: a
    # column named as the attribute)
    scores: dict[str, str] = field(default_factory=dict)
    # one row per pair: the two texts, their models, people's vote (model_a | model_b | tie, A>B, 1 | 2, ...)
    text_a: str | None = None
    text_b: str | None = None
    model_a: str | None = None
    model_b: str | None = None
    winner: str | None = None


@dataclass
class DatasetConfig:
    """Where the contexts and candidates come from: the JSONL layout of ``../shared/datasets`` (one row per context,
    candidates nested), or a flat table (one row per candidate or per pair) in any of the files read."""

    name: str = "demo"
    # A .jsonl, .csv, .tsv or .parquet file, a folder of them, or a Hugging Face datasets folder (save_to_disk);
    # unused for the demo set.
    path: str | None = None
    # A flat table's columns (None: the common names are recognised).
    columns: ColumnsConfig = field(default_factory=ColumnsConfig)
    # meta.json beside the data (attributes, nouns); defaults to ``<dir of path>/meta.json`` when present.
    meta_path: str | None = None
    # Attributes to judge; None means every attribute in meta.json (or the data).
    attributes: list[str] | None = None
    # A folder of split files (``<name>-<split>.jsonl`` or ``.parquet``, e.g. judgebench-gpt.jsonl): the splits to
    # read; a name that begins splits reads all of them ("adversarial": every adversarial-* split). None: every
    # data file of the folder.
    splits: list[str] | None = None
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
    # The candidate field that names the model (system) that wrote it: the leaderboard ranks them, system-level
    # correlations average over them. null: the candidates name none (a judge benchmark's "response_A"/"output_1"
    # say where a candidate is listed, not who wrote it).
    system_field: str | None = "system"
    # The context field read as each context's category (results are split by it where they are: a judge
    # benchmark's sources or subsets), and prefixes that group categories: a category is reported under the first
    # prefix it begins with (JudgeBench's groups its "mmlu-pro-law", "mmlu-pro-math", ... sources as "mmlu-pro").
    category_field: str = "category"
    category_groups: list[str] = field(default_factory=list)
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
    # booleans are accepted (`prompt.chat_template=false`); :func:`pipeline.config.hydra.to_run_config` turns the value into a
    # :class:`pipeline.config.enums.ChatTemplate`.
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


@dataclass
class AbsoluteTemplateConfig:
    """One absolute prompt. Fields: {context}, {candidate}, {attribute}, {Attribute}, {adjective}, {noun},
    {Noun}, {context_noun}, {Context_noun}, {low}, {high}, {criterion}, {options} (mode options), {item} (mode
    checklist: the checklist item asked, which the text must hold). The context goes first so that the prompts of a
    context share a prefix."""

    mode: AbsoluteMode = AbsoluteMode.prompt_score
    text: str = ""
    # Text the answer starts with ("Score:"); the score (or yes/no) is read from what follows.
    answer_prefix: str = "Answer:"
    # The score scale: parsed scores outside it are failures; g_eval reads the tokens low..high.
    low: int = 1
    high: int = 10


# The templates shipped with the product (``absolute.library``): the EACL repository's prompt scoring prompts
# (scoring-1, scoring-2), a G-Eval style prompt and Chen et al. 2023's implicit and explicit prompts.
def absolute_library() -> dict[str, AbsoluteTemplateConfig]:
    def shipped(mode: AbsoluteMode, ask: str, answer_prefix: str, **scale: int) -> AbsoluteTemplateConfig:
        # every shipped prompt shows the context first, then the candidate, then asks
        text = "{Context_noun}: {context}\n\n{Noun}: {candidate}\n\n" + ask
        return AbsoluteTemplateConfig(mode=mode, text=text, answer_prefix=answer_prefix, **scale)

    return {
        "s1": shipped(
            AbsoluteMode.prompt_score,
            "Provide a score between {low} and {high} that measures the {noun}'s {attribute}.",
            "Answer:",
        ),
        "s2": shipped(
            AbsoluteMode.prompt_score,
            "Score the {noun} between {low} and {high} in terms of {attribute}.",
            "Score:",
        ),
        "geval": shipped(
            AbsoluteMode.g_eval,
            "Evaluation criteria: {Attribute} ({low}-{high}): how {adjective} the {noun} is.\n\n"
            "Rate the {noun} on {attribute} from {low} (worst) to {high} (best). Reply with the score only.",
            "{Attribute} score: ",
            low=1,
            high=5,
        ),
        "chen_implicit": shipped(
            AbsoluteMode.implicit, "Is the {noun} {adjective}? Answer Yes or No.", "Answer:"
        ),
        "criterion_options": shipped(
            AbsoluteMode.options,
            "Evaluation criterion: {criterion}\n\nOptions:\n{options}\n\n"
            "Which option describes the {noun} best? Answer with its letter.",
            "Answer: (",
        ),
        "tick": shipped(
            AbsoluteMode.checklist,
            "Checklist question: {item}\n\nDoes the {noun} satisfy it? Answer Yes or No.",
            "Answer:",
        ),
        "chen_explicit": shipped(
            AbsoluteMode.explicit,
            "Score the {noun} with respect to {attribute} on a continuous scale from {low} (worst) to {high} "
            '(best), where a score of {low} means "not {adjective} at all" and a score of {high} means '
            '"perfectly {adjective}".',
            "Score:",
            low=0,
            high=100,
        ),
    }


@dataclass
class AbsoluteConfig:
    """Absolute assessment beside (or instead of, ``workflow=absolute``) the comparisons."""

    # Which absolute modes run (several can): prompt_score | g_eval | implicit | explicit | options | checklist.
    # Empty: none.
    modes: list[AbsoluteMode] = field(default_factory=list)
    # The templates each mode runs, by id in ``library``.
    templates: dict[str, list[str]] = field(
        default_factory=lambda: {
            "prompt_score": ["s1"],
            "g_eval": ["geval"],
            "implicit": ["chen_implicit"],
            "explicit": ["chen_explicit"],
            "options": ["criterion_options"],
            "checklist": ["tick"],
        }
    )
    # Every known template by id; add your own with `+absolute.library.mine={mode: ..., text: ...}`.
    library: dict[str, AbsoluteTemplateConfig] = field(default_factory=absolute_library)
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
    # comparisons (method "combined:<absolute template>", pipeline.methods.scorers.poe_combined): on or off, and their
    # weight (prior precision relative to one comparison's), or None to estimate it per attribute from the data.
    combine: bool = True
    combine_weight: float | None = None


@dataclass
class ScoringConfig:
    # Methods from pipeline.methods.scorers().
    methods: list[str] = field(
        default_factory=lambda: ["win_ratio", "avg_prob", "bradley_terry", "poe_gaussian"]
    )
    # Position-bias removal: average (both orderings, PoE 4.2) | alpha (reweight so P(A) = 0.5, EACL eq. 9)
    # | balanced_threshold (the EACL release's rule: hard decisions at the 0.001-grid threshold that makes half of
    # them "A") | mean_shift (one ordering: PoE-Gaussian expert mean shifted by the observed P(A), PoE A.6; the
    # other methods get the raw probabilities) | none (each ordering is its own comparison).
    debias: Debias = Debias.average
    # Score with probabilities calibrated to people's preferences: none | temperature (a temperature fitted per
    # judge, attribute and template on the pairs people scored apart, cross-fitted over contexts, so no context is
    # calibrated with its own pairs; pipeline.methods.quality.calibration). Needs human scores.
    calibrate: Calibrate = Calibrate.none
    # Correlation with human scores: auto (where the data has them) | required (error if missing) | off.
    correlation: Correlation = Correlation.auto
    # Score the run's jurors (every judge and template that judged the same prompts) together as a jury:
    # jury_poe, jury_majority and jury_mean in the scores, jurors.parquet and juror_agreement.parquet.
    jury: bool = False
    # The false-alarm rate of the test of "no signal" (pipeline.methods.quality.signal): a judge whose slot-A and slot-B
    # verdicts agree beyond chance at this rate is informative; every conclusion from one that is not says so first.
    signal_alpha: float = 0.05
    # Settings of the methods that take them (a plugin's scorer, registered with its settings' dataclass): method ->
    # {setting: value}, e.g. `+scoring.options.copeland.margin=0.1`; each checked against what the method takes.
    options: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class CriterionOption:
    """One option of a criterion (EvalAssist's structured form): its name, what it means, and its score."""

    name: str = ""
    description: str = ""
    score: float = 0.0


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

    # Resampling rounds and the interval's coverage (arena-hard-auto's defaults: 100 rounds, 5-95 %, level 0.90).
    rounds: int = 100
    level: float = 0.90
    seed: int = 0
    # Methods whose mean score over inputs is reported beside the win rate; None: bradley_terry, poe_gaussian and
    # poe_logit where scoring.methods has them, and the absolute modes of the run. A list must name scored methods
    # or modes.
    methods: list[str] | None = None
    # A game: pair (one averaged, debiased verdict per pair and input) | ordering (one per judged ordering, its own
    # verdict: arena-hard-auto's count).
    games: LeaderboardGames = LeaderboardGames.pair
    # The win rate and Bradley-Terry rating with these regressed out, beside the raw ones: length (the texts'
    # characters) and style (headers, lists, bold: arena-hard-auto's markdown features, with the length). Empty:
    # none.
    control: list[Control] = field(default_factory=lambda: [Control.length])
    # AlpacaEval 2's length-controlled win rate of every model against this one (a model's name, e.g. a generator's):
    # ``win_rate:alpaca_eval_lc`` rows, computed as alpaca_eval's glm_winrate.py does (pipeline.methods.quality.alpaca_lc).
    # None: not computed.
    baseline: str | None = None
