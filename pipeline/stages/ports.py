"""Every value passed between stages: its name, what it holds, its schema or type, and its file in the run folder."""

from __future__ import annotations

from pipeline.contracts import card_schema as card
from pipeline.contracts import jury_schema as jury
from pipeline.contracts import schemas
from pipeline.contracts import trust_schema as trust
from pipeline.contracts.stats import JudgeStats
from pipeline.data.records import InputReport
from pipeline.data.source import DatasetInfo
from pipeline.judge.spec import JudgeSpec
from pipeline.prompts.plan import PromptPlan
from pipeline.stages.base import Port
from pipeline.storage.parts import JudgmentParts, RatingParts

CANDIDATES = Port(
    "candidates",
    "one row per candidate, its context text repeated",
    schema=schemas.CANDIDATES,
    file="candidates",
)
HUMAN_SCORES = Port(
    "human_scores",
    "one row per candidate and attribute with a human score",
    schema=schemas.HUMAN_SCORES,
    file="human_scores",
)
INPUT_REPORT = Port(
    "input_report",
    "counts of everything the input checks changed or could not use",
    type=InputReport,
    file="input_report",
)
DATASET = Port("dataset", "what was read: attributes and the words prompts use", type=DatasetInfo)
JUDGE = Port("judge", "the judge: model, engine settings, dtype and why", type=JudgeSpec, file="judge")
JUDGES = Port(
    "judges", "the run's judges' names, in the order configured (judge, then jury.judges)", type=tuple
)
PROMPT_PLAN = Port(
    "prompt_plan",
    "the text around every message, answer prefixes, label token ids",
    type=PromptPlan,
    file="prompt_plan",
)
PARTS = Port(
    "parts",
    "the run folder's judgments on disk, checked against this run's judging identity",
    type=JudgmentParts,
)
JUDGED = Port("judged", "the prompts already judged in the run folder (skipped)", schema=schemas.JUDGED_KEYS)
LEFT_OUT = Port(
    "left_out",
    "the prompts the judge leaves out: a recorded judge's file lacks an ordering of their pair (match=partial)",
    schema=schemas.LEFT_OUT,
    file="left_out",
)
JURY = Port(
    "jury",
    "the jury's further judges, each resolved, its prompts settled and what it answers checked before anything runs",
    type=tuple,
)
CONTEXTS = Port(
    "contexts",
    "the contexts to judge, candidates nested, with shard and skipped prompts",
    schema=schemas.CONTEXTS,
)
JUDGMENTS = Port(
    "judgments",
    "one row per judged comparison: label log-probabilities, p(A wins) and p(tie)",
    schema=schemas.JUDGMENTS,
    file="judgments",
)
ROUNDS = Port(
    "rounds",
    "one row per context and adaptive round: pairs and calls so far, the stopping criterion, Spearman",
    schema=schemas.ROUNDS,
    file="rounds",
)
ROUND_PAIRS = Port(
    "round_pairs",
    "every prompt adaptive rounds chose (both orderings of each pair) with its round",
    schema=schemas.ROUND_PAIRS,
    file="round_pairs",
)
JUDGE_STATS = Port(
    "judge_stats", "prompts judged, rates, engine start-up and prefix-cache share", type=JudgeStats
)
COMPARISONS = Port(
    "comparisons",
    "one row per unordered pair: both orderings and the debiased P(i beats j)",
    schema=schemas.COMPARISONS,
    file="comparisons",
)
POSITION_BIAS = Port(
    "position_bias",
    "P(A) per judge, attribute and template, before and after debiasing",
    schema=schemas.POSITION_BIAS,
    file="position_bias",
)
SCORES = Port(
    "scores",
    "one row per candidate, attribute, template and method (comparative; then absolute and combined too): "
    "score, rank, human score",
    schema=schemas.SCORES,
    file="scores",
)
UNSCORED = Port(
    "unscored", "contexts a method could not score, with the reason", schema=schemas.UNSCORED, file="unscored"
)
JURORS = Port(
    "jurors",
    "a jury's jurors (judge, template) per attribute: scale, bias and noise of each, its share of the jury's "
    "information, its position bias",
    schema=jury.JURORS,
    file="jurors",
    optional=True,
)
JUROR_AGREEMENT = Port(
    "juror_agreement",
    "every two jurors: Cohen's kappa and raw agreement of their verdicts, Spearman of their scores",
    schema=jury.JUROR_AGREEMENT,
    file="juror_agreement",
    optional=True,
)
CORRELATIONS = Port(
    "correlations",
    "agreement with human scores per attribute, template and method",
    schema=schemas.CORRELATIONS,
    file="correlations",
)
SUMMARY = Port("summary", "the table printed at the end (summary.txt)", type=str)
RATING_PARTS = Port(
    "rating_parts",
    "the run folder's absolute ratings on disk, checked against this run's rating identity",
    type=RatingParts,
)
RATINGS = Port(
    "ratings",
    "one row per absolute prompt: generated texts, parsed values, read log-probabilities and the score",
    schema=schemas.RATINGS,
    file="ratings",
)
ABSOLUTE_SCORES = Port(
    "absolute_scores",
    "one row per candidate, attribute, absolute template and mode: score, rank, human score",
    schema=schemas.SCORES,
    file="absolute_scores",
)
RATING_FAILURES = Port(
    "rating_failures",
    "every absolute generation that did not parse, with its text and why",
    schema=schemas.RATING_FAILURES,
    file="rating_failures",
)
COST = Port(
    "cost",
    "per attribute, template and mode: prompts, tokens, prefix-cache share, engine seconds",
    schema=schemas.COST,
    file="cost",
)
ASSESSMENT = Port(
    "assessment",
    "per attribute, each method's agreement with people beside the prompts and seconds it cost",
    schema=schemas.ASSESSMENT,
    file="assessment",
)
LEADERBOARD = Port(
    "leaderboard",
    "per model (the candidates' system) and metric: win rate and mean scores with bootstrap intervals over inputs "
    "(a pool's items)",
    schema=schemas.LEADERBOARD,
    file="leaderboard",
)
TASKS = Port(
    "tasks",
    "one row per task input: its id and the task prompt filled from its record",
    schema=schemas.TASKS,
    file="tasks",
)
GENERATIONS = Port(
    "generations",
    "one row per task input and generator model: the output, why it ended, its tokens",
    schema=schemas.GENERATIONS,
    file="generations",
)
GENERATORS = Port(
    "generators", "the generator models: model, dtype, sampling, system prompt", type=list, file="generators"
)
REASONS = Port(
    "reasons",
    "the judge's reasons for a sample of comparisons, generated after the decision (never used to score)",
    schema=schemas.REASONS,
    file="reasons",
    optional=True,
)
JUDGE_CARD = Port(
    "judge_card",
    "per judge, attribute and template: calibration against people (and after a cross-fitted temperature), position "
    "consistency, length preference, self-preference, agreement with people",
    schema=card.JUDGE_CARD,
    file="judge_card",
)
META_EVALUATION = Port(
    "meta_evaluation",
    "per judge, attribute, template and category, where the human scores are an objective label (one right candidate "
    "per pair): the judge benchmarks' numbers (JudgeBench's accuracy with an interval and the judges' rank, LLMBar's "
    "accuracy of each ordering, their mean, the positional agreement)",
    schema=card.META_EVALUATION,
    file="meta_evaluation",
)
JUDGE_RELIABILITY = Port(
    "judge_reliability",
    "per judge, attribute and template: the reliability diagram of P(i beats j) against people's preferences, raw "
    "and calibrated",
    schema=card.JUDGE_RELIABILITY,
    file="judge_reliability",
)
LABELS = Port(
    "labels",
    "the pairs people labelled (from the data's human scores, or the blind review), each with its chance of being drawn",
    schema=trust.LABELS,
    file="labels",
    optional=True,
)
TRUST = Port(
    "trust",
    "per judge of the cascade and attribute: the threshold certified on people's labels (agreement at least 1 - alpha "
    "with probability 1 - delta), what it keeps, its bound and agreement",
    schema=trust.TRUST,
    file="trust",
    optional=True,
)
ACCEPTED = Port(
    "accepted",
    "per pair and attribute: the judge that keeps its verdict, or escalated (to people: the review's queue)",
    schema=trust.ACCEPTED,
    file="accepted",
    optional=True,
)
RISK_COVERAGE = Port(
    "risk_coverage",
    "per judge of the cascade: its disagreement with people and the bound at each threshold (the risk-coverage curve)",
    schema=trust.RISK_COVERAGE,
    file="risk_coverage",
    optional=True,
)
PPI_LEADERBOARD = Port(
    "ppi_leaderboard",
    "per model: win rate and Bradley-Terry coefficient from people's labels and the judge's verdicts together (PPI++ "
    "intervals), beside people's alone, and the labels people alone would need",
    schema=trust.PPI_LEADERBOARD,
    file="ppi_leaderboard",
    optional=True,
)
