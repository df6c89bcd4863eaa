"""Refuse every combination of settings that could not be applied as written, naming the key and the valid
values (once, when the run starts).
"""

from __future__ import annotations

import math
import re

from pipeline.config.enums import (
    BOTH_ORDERINGS,
    HF_ENGINE_KEYS,
    MULTIPROCESSING_ENV,
    SAMPLING,
    AbsoluteMode,
    Backend,
    Debias,
    Orderings,
    StopCriterion,
    Workflow,
)
from pipeline.config.judging import ApiConfig, JudgeConfig
from pipeline.config.run import RunConfig
from pipeline.contracts.errors import ConfigError


def _positive(problems: list[str], key: str, value: float | None, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if value is None or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        problems.append(f"config {key}={value!r} must be a positive number")


def validate(cfg: RunConfig) -> None:
    """Refuse every value that could not be applied as written; raise one ConfigError listing them all."""
    from pipeline.config.templates import template_problems
    from pipeline.methods import SCORERS

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


def absolute_problems(cfg: RunConfig) -> list[str]:
    """What in ``absolute`` (and the workflow's use of it) could not be applied as written."""
    from pipeline.config.templates import absolute_template_problems

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
