"""Refuse every combination of settings that could not be applied as written, naming the key and the valid
values (once, when the run starts): :data:`CHECKS`, each a function of the config giving its problems (those of
the workflow-specific sections in :mod:`pipeline.config.checks`).
"""

from __future__ import annotations

import dataclasses

from pipeline.config.backends import BackendEntry, Trait, backend
from pipeline.config.checks import (
    absolute_problems,
    adaptive_problems,
    counting,
    generate_problems,
    positive,
    within,
)
from pipeline.config.derived import judge_label
from pipeline.config.enums import (
    BOTH_ORDERINGS,
    MULTIPROCESSING_ENV,
    SAMPLING,
    ApiPath,
    Calibrate,
    Correlation,
    Debias,
    Orderings,
)
from pipeline.config.judging import JudgeConfig
from pipeline.config.keys import unused_settings
from pipeline.config.run import RunConfig
from pipeline.config.stage_plugins import stage_plugin
from pipeline.config.templates import template_problems
from pipeline.config.workflows import workflow, workflows
from pipeline.contracts.errors import ConfigError
from pipeline.contracts.values import MAX_ID_CHARS, identifier, name_part, shown


def validate(cfg: RunConfig) -> None:
    """Refuse every value that could not be applied as written; raise one ConfigError listing them all."""
    problems = [problem for check in CHECKS for problem in check(cfg)]
    if problems:
        raise ConfigError(
            "\n".join(problems) if len(problems) == 1 else "\n  - ".join(["invalid config:", *problems])
        )


def pairs_problems(cfg: RunConfig) -> list[str]:
    """What in ``pairs`` (and the debiasing its orderings allow) could not be applied as written."""
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
    positive(problems, "pairs.k", pairs.k, allow_none=True)
    if pairs.fraction is not None:
        within(problems, "pairs.fraction", pairs.fraction, "(0, 1]")
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
    return problems


def scoring_problems(cfg: RunConfig) -> list[str]:
    """The scoring methods: known (:func:`pipeline.methods.scorers`), each once."""
    from pipeline.methods import scorers

    known = scorers()
    problems: list[str] = []
    methods = cfg.scoring.methods
    if not methods:
        problems.append("config scoring.methods is empty; choose from " + ", ".join(sorted(known)))
    unknown = [m for m in methods if m not in known]
    if unknown:
        problems.append(
            f"config scoring.methods: unknown method(s) {unknown}; choose from {', '.join(sorted(known))}"
        )
    if len(set(methods)) != len(methods):
        problems.append(f"config scoring.methods lists a method twice: {methods}")
    if cfg.scoring.calibrate != Calibrate.none and (
        workflow(cfg.workflow).generated or cfg.scoring.correlation == Correlation.off
    ):
        problems.append(
            f"config scoring.calibrate={cfg.scoring.calibrate} fits a temperature to people's preferences, and this "
            f"run has no human scores to fit it to (workflow={cfg.workflow}, scoring.correlation="
            f"{cfg.scoring.correlation}); use scoring.calibrate=none"
        )
    within(problems, "scoring.signal_alpha", cfg.scoring.signal_alpha, "(0, 0.5]")
    for method, given in cfg.scoring.options.items():
        if method not in methods:
            problems.append(
                f"config scoring.options.{method} is set, but {method} is not among scoring.methods ({methods}); add "
                "it there, or remove its options"
            )
        elif method in known:
            from pipeline.methods.scorers.registry import scorer

            try:
                scorer(method).options(dict(given))
            except ValueError as exc:
                problems.append(f"config scoring.options.{method}: {exc}")
    return problems


def prompt_problems(cfg: RunConfig) -> list[str]:
    """The comparative templates (ids, fields) and the label words."""
    problems: list[str] = []
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
    return problems


def judge_problems(cfg: RunConfig) -> list[str]:
    """The judge's sizes, engine settings and environment, its endpoint and its templates; what the run asks of the
    judge's backend beyond its verdicts (absolute scores, reasons)."""
    problems = judge_config_problems(cfg.judge, "judge", cfg)
    try:
        entry = backend(cfg.judge.backend)
    except ValueError:
        return problems  # named above
    name = f"judge.backend={entry.name}"
    if cfg.absolute.modes and Trait.ABSOLUTE not in entry.traits:
        problems.append(
            f"config absolute.modes={[str(m) for m in cfg.absolute.modes]}: {name} cannot rate a candidate on its own; "
            "remove absolute.modes (or judge them with another backend)"
        )
    if cfg.reasons.n and Trait.GENERATION not in entry.traits:
        problems.append(
            f"config reasons.n={cfg.reasons.n}: {name} cannot generate its reasons; set reasons.n=0"
        )
    return problems


def judge_config_problems(judge: JudgeConfig, key: str, cfg: RunConfig) -> list[str]:
    """What is wrong with one judge's config at ``key`` (``judge``, or a juror's ``jury.judges[k]``)."""
    problems = named(f"{key}.name", judge.name)
    for name in ("max_model_len", "batch_size"):
        counting(problems, f"{key}.{name}", getattr(judge, name))
    actors = judge.num_actors
    single = isinstance(actors, int) and not isinstance(actors, bool) and actors >= 1
    ranged = (
        isinstance(actors, list | tuple)
        and len(actors) == 2
        and all(isinstance(a, int) and not isinstance(a, bool) for a in actors)
        and 1 <= actors[0] <= actors[1]
    )
    if not (single or ranged):
        problems.append(
            f"config {key}.num_actors={actors!r} must be a positive integer or a range [least, most] with "
            "1 <= least <= most"
        )
    if judge.num_cpus_per_actor < 0 or judge.num_gpus_per_actor < 0:
        problems.append(f"config {key}.num_cpus_per_actor and {key}.num_gpus_per_actor must be >= 0")
    for name in ("model", "max_model_len"):
        if name in judge.engine:
            problems.append(f"config {key}.engine.{name} is set by {key}.{name}; remove it from {key}.engine")
    if MULTIPROCESSING_ENV in judge.env:
        problems.append(
            f"config {key}.env.{MULTIPROCESSING_ENV} is set by {key}.engine_process (auto | worker | own); "
            f"remove it from {key}.env"
        )
    try:
        problems += backend_problems(backend(judge.backend), judge, key)
    except ValueError as exc:
        problems.append(f"config {key}.backend: {exc}")
    r = judge.reasoning
    if r.enabled and not (isinstance(r.max_tokens, int) and 1 <= r.max_tokens < judge.max_model_len):
        problems.append(
            f"config {key}.reasoning.max_tokens={r.max_tokens!r} must be a positive integer below "
            f"{key}.max_model_len={judge.max_model_len} (the reasoning's budget of tokens)"
        )
    if judge.templates is not None:
        ids = [t.id for t in cfg.prompt.templates]
        unknown = [t for t in judge.templates if t not in ids]
        if unknown or not judge.templates:
            problems.append(
                f"config {key}.templates={list(judge.templates)} must name one or more of prompt.templates' "
                f"ids {ids} (None: every one)"
            )
    return problems


def jury_problems(cfg: RunConfig) -> list[str]:
    """The jury: its further judges (``jury.judges``), each a judge config over ``judge``'s, with a name of its
    own; the workflows a jury of judges runs in; and ``scoring.jury``'s need of two jurors."""
    extra = cfg.jury.judges
    problems: list[str] = []
    for k, juror in enumerate(extra):
        problems += judge_config_problems(juror, f"jury.judges[{k}]", cfg)
    names = [judge_label(j) for j in [cfg.judge, *extra]]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        problems.append(
            f"config jury.judges: judge name(s) {repeated} repeat (a judge is named by its name, else its model); "
            "give each juror its own jury.judges[k].name"
        )
    if extra and not workflow(cfg.workflow).jury:
        problems.append(
            f"config jury.judges: a jury of judges judges comparisons in workflow="
            f"{' or '.join(str(w) for w, entry in workflows().items() if entry.jury)}, not "
            f"workflow={cfg.workflow}"
        )
    ids = [t.id for t in cfg.prompt.templates]
    seats = sum(len(j.templates if j.templates is not None else ids) for j in [cfg.judge, *extra])
    if cfg.scoring.jury and seats < 2:
        problems.append(
            "config scoring.jury=true needs at least two jurors (a juror is a judge with one of its templates): "
            f"prompt.templates has {len(ids)} and jury.judges {len(extra)} (add a template, e.g. "
            "experiment=jury_templates, or a judge, e.g. experiment=jury_judges)"
        )
    return problems


def named(key: str, value: str | None, segment: bool = False) -> list[str]:
    """A name given in the config (a judge's, a data set's): non-blank, without control characters, at most
    MAX_ID_CHARS long; ``segment``: also one plain segment of a path (it names a folder)."""
    if value is None:
        return []
    if identifier(value) is None or (segment and name_part(value) != value):
        what = (
            "a plain name (letters, digits, _ - . : and spaces)"
            if segment
            else "a name without control characters"
        )
        return [f"config {key}={shown(value)} is not {what}, of at most {MAX_ID_CHARS} characters"]
    return []


def dataset_problems(cfg: RunConfig) -> list[str]:
    """The data set's name, its limits and the runtime's sizes."""
    problems = named("dataset.name", cfg.dataset.name, segment=True)
    for key, value in (
        ("dataset.max_contexts", cfg.dataset.max_contexts),
        ("dataset.max_candidates", cfg.dataset.max_candidates),
    ):
        if value is not None:
            counting(problems, key, value)
    if cfg.dataset.max_candidates is not None and cfg.dataset.max_candidates < 2:
        problems.append(
            "config dataset.max_candidates must be at least 2 (a comparison needs two candidates)"
        )
    counting(problems, "runtime.max_shards", cfg.runtime.max_shards)
    counting(problems, "runtime.pair_chunk_rows", cfg.runtime.pair_chunk_rows)
    return problems


def report_problems(cfg: RunConfig) -> list[str]:
    """The judge's reasons and the leaderboard."""
    problems: list[str] = []
    if cfg.reasons.n is not None and cfg.reasons.n < 0:
        problems.append(f"config reasons.n={cfg.reasons.n} must be >= 0 (0: no reasons)")
    counting(problems, "reasons.max_tokens", cfg.reasons.max_tokens)
    if not cfg.reasons.sample:
        problems.append("config reasons.sample is empty: choose from disagree, close, random")
    board = cfg.leaderboard
    counting(problems, "leaderboard.rounds", board.rounds)
    within(problems, "leaderboard.level", board.level, "(0, 1)", "0.90: a 5-95% interval")
    models = [g.name for g in cfg.generate.models]
    if board.baseline is not None and workflow(cfg.workflow).generated and board.baseline not in models:
        problems.append(
            f"config leaderboard.baseline={board.baseline!r} is not one of the generators {models}: AlpacaEval's "
            "length-controlled win rate compares every model with one of them"
        )
    if board.methods is not None:
        modes = [str(m) for m in cfg.absolute.modes]
        unscored = [m for m in board.methods if m not in cfg.scoring.methods and m not in modes]
        if unscored:
            problems.append(
                f"config leaderboard.methods {unscored} are neither in scoring.methods {cfg.scoring.methods} nor "
                f"in absolute.modes {modes}: add them there or remove them"
            )
    return problems


def backend_problems(entry: BackendEntry, judge: JudgeConfig, key: str) -> list[str]:
    """What ``judge`` asks of its backend that the backend's entry does not support, then the backend's own checks."""
    problems = []
    name = f"{key}.backend={entry.name}"
    if judge.reasoning.enabled and Trait.PREFILL not in entry.traits:
        problems.append(
            f"config {key}.reasoning: {name} cannot continue a prefilled answer; turn reasoning off"
        )

    if Trait.ENDPOINT in entry.traits:
        api, path = judge.endpoint, judge.endpoint.path
        if api.batch and Trait.BATCH not in entry.traits:
            problems.append(
                f"config {key}.endpoint.batch: {name} has no batch jobs; set {key}.endpoint.batch=false"
            )
        if path == ApiPath.sampled and Trait.SAMPLED not in entry.traits:
            problems.append(f"config {key}.endpoint.path=sampled: {name} does not sample verdicts")
        if path == ApiPath.token_ids and Trait.TOKEN_IDS not in entry.traits:
            problems.append(
                f"config {key}.endpoint.path=token_ids: {name} takes no token ids; use {key}.endpoint.path=chat"
            )
        if path != ApiPath.sampled and Trait.LOGPROBS not in entry.traits:
            problems.append(
                f"config {key}.endpoint.path={path}: {name} gives no log-probabilities; set {key}.endpoint.path=sampled (the "
                "verdict sampled and its words counted)"
            )
    return problems + entry.problems(judge, key)


def extra_stage_problems(cfg: RunConfig) -> list[str]:
    """The stages from outside (``extra_stages``): registered, each once."""
    problems = []
    for name in cfg.extra_stages:
        try:
            stage_plugin(name)
        except ValueError as exc:
            problems.append(f"config extra_stages: {exc}")
    if len(set(cfg.extra_stages)) != len(cfg.extra_stages):
        problems.append(f"config extra_stages lists a stage twice: {list(cfg.extra_stages)}")
    return problems


def trust_problems(cfg: RunConfig) -> list[str]:
    """``trust``: a guarantee that means something (alpha and delta strictly between 0 and 1), labels to draw, a
    cascade naming each judge once."""
    trust, problems = cfg.trust, []
    for name in ("alpha", "delta"):
        value = getattr(trust, name)
        if not 0.0 < value < 1.0:
            problems.append(f"config trust.{name}={value} must be strictly between 0 and 1")
    if trust.n < 1:
        problems.append(f"config trust.n={trust.n} must be a positive number of labelled comparisons")
    if trust.cascade is not None and len(set(trust.cascade)) != len(trust.cascade):
        problems.append(f"config trust.cascade names a judge twice: {list(trust.cascade)}")
    if trust.cascade is not None and not trust.cascade:
        problems.append(
            "config trust.cascade is empty; name the judges in order, or leave it unset (every judge)"
        )
    return problems


def seed_problems(cfg: RunConfig) -> list[str]:
    """Every ``seed`` of the config (a section's, a juror's, a generator's, an engine's settings) a non-negative
    integer, as numpy's and vLLM's generators take it: refused here, not after the judging."""
    problems: list[str] = []

    def visit(value: object, key: str) -> None:
        if key.rpartition(".")[2] == "seed" and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            problems.append(f"config {key}={value!r} must be a non-negative integer (a seed)")
        elif dataclasses.is_dataclass(value):
            for f in dataclasses.fields(value):
                visit(getattr(value, f.name), f"{key}.{f.name}" if key else f.name)
        elif isinstance(value, dict):
            for name, item in value.items():
                visit(item, f"{key}.{name}")
        elif isinstance(value, list):
            for k, item in enumerate(value):
                visit(item, f"{key}[{k}]")

    visit(cfg, "")
    return problems


# Every check, in the order its problems are listed.
CHECKS = (
    seed_problems,
    pairs_problems,
    scoring_problems,
    prompt_problems,
    judge_problems,
    jury_problems,
    dataset_problems,
    absolute_problems,
    generate_problems,
    adaptive_problems,
    report_problems,
    trust_problems,
    extra_stage_problems,
    unused_settings,
)
