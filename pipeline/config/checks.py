"""The checks of the workflow-specific sections (absolute, generate, adaptive) and the helpers every check uses:
each returns the problems it found, naming the key and the valid values (:func:`pipeline.config.validate.validate`
lists them all at once).
"""

from __future__ import annotations

import math
import re

from pipeline.config.backends import Trait, backends, generator_backend
from pipeline.config.enums import AbsoluteMode, ApiPath, Orderings, StopCriterion
from pipeline.config.judging import EndpointConfig
from pipeline.config.run import RunConfig
from pipeline.config.templates import absolute_template_problems
from pipeline.config.workflows import workflow
from pipeline.contracts.values import identifier
from pipeline.methods.scorers.registry import scorers


def positive(problems: list[str], key: str, value: float | None, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if value is None or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        problems.append(f"config {key}={value!r} must be a positive number")


def counting(problems: list[str], key: str, value: object) -> None:
    """Refuse anything but a positive integer at config ``key`` (a count: of tokens, samples, rounds)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        problems.append(f"config {key}={value!r} must be a positive integer")


_INTERVAL = re.compile(r"^([\[(])(-?[0-9.]+), (-?[0-9.]+|inf)([\])])$")


def within(problems: list[str], key: str, value: object, interval: str, why: str = "") -> None:
    """Refuse ``value`` at config ``key`` outside ``interval`` ("(0, 64]": above 0, at most 64; "[0, inf]": any
    number from 0, infinity included), the message showing the interval that is checked."""
    match = _INTERVAL.match(interval)
    if match is None:
        raise ValueError(f"not an interval: {interval!r}")
    left, low, high, right = match.groups()
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
    if ok:
        number = float(value)  # type: ignore[arg-type]
        ok = (float(low) <= number if left == "[" else float(low) < number) and (
            number <= float(high) if right == "]" else number < float(high)
        )
    if not ok:
        problems.append(f"config {key}={value!r} must be in {interval}" + (f" ({why})" if why else ""))


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What a key pasted where a variable's name belongs looks like: a provider's key prefix, or a long run of letters and
# digits in both cases (a variable's name is upper case by convention: OPENAI_API_KEY).
_KEY_PREFIX = re.compile(
    r"^(sk|hf|gsk|xai|ghp|gho|github_pat|pk|rk|r8|nvapi|pplx|AIza|key|api|csk|fw|tgp)[-_]", re.I
)


def looks_like_key(text: str) -> bool:
    """Whether ``text`` (given as an environment variable's name) looks like a key itself: never echoed then."""
    mixed = (
        any(c.islower() for c in text) and any(c.isupper() for c in text) and any(c.isdigit() for c in text)
    )
    return bool(_KEY_PREFIX.match(text)) or (mixed and len(text) >= 20) or not ENV_NAME.match(text)


def url_problems(url: str, key: str) -> list[str]:
    """A URL that holds credentials (``https://user:key@host``) is refused without echoing them: they would be stored
    in config.json, the judge's record and MLflow, and printed."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        has_credentials = parts.username is not None or parts.password is not None
    except ValueError:
        return [f"config {key} is not a URL"]
    if has_credentials:
        return [
            f"config {key} holds credentials (user:key@ before the host: {parts.scheme}://***@{parts.hostname}); "
            "give the endpoint's URL without them and the key in the variable api_key_env names"
        ]
    return []


def endpoint_problems(api: EndpointConfig, key: str) -> list[str]:
    """What is wrong with an endpoint's settings at config ``key`` (never echoing a value that may be a key)."""
    problems = []
    if not api.base_url or not str(api.base_url).startswith(("http://", "https://")):
        problems.append(f"config {key}.base_url must be the endpoint's URL, e.g. http://127.0.0.1:8000/v1")
    problems += url_problems(str(api.base_url or ""), f"{key}.base_url")
    if api.api_key_env is not None and looks_like_key(str(api.api_key_env)):
        problems.append(
            f"config {key}.api_key_env must be the NAME of an environment variable holding the key (e.g. "
            "OPENAI_API_KEY), not the key itself"
        )
    within(problems, f"{key}.top_logprobs", api.top_logprobs, "[1, 20]")
    if api.batch and not (
        0 < api.batch_discount <= 1
        and api.batch_wait > 0
        and 0 < api.batch_poll <= api.batch_poll_max
        and api.batch_rounds >= 1
    ):
        problems.append(
            f"config {key}.batch needs {key}.batch_discount in (0, 1] (got {api.batch_discount}), batch_wait > 0 "
            f"(got {api.batch_wait}), 0 < batch_poll <= batch_poll_max (got {api.batch_poll}, {api.batch_poll_max}) "
            f"and batch_rounds >= 1 (got {api.batch_rounds})"
        )
    if api.path == ApiPath.sampled and not (
        api.samples >= 2 and api.sample_temperature > 0 and api.sample_tokens >= 1
    ):
        problems.append(
            f"config {key}.path=sampled needs {key}.samples >= 2 (got {api.samples}), sample_temperature > 0 "
            f"(got {api.sample_temperature}) and sample_tokens >= 1 (got {api.sample_tokens})"
        )
    counting(problems, f"{key}.concurrency", api.concurrency)
    within(problems, f"{key}.max_retries", api.max_retries, "[0, inf)")
    within(problems, f"{key}.timeout", api.timeout, "(0, inf]")
    within(problems, f"{key}.retry_for", api.retry_for, "[0, inf]")
    return problems


def adaptive_problems(cfg: RunConfig) -> list[str]:
    """What in ``adaptive`` could not be applied as written."""
    problems: list[str] = []
    a = cfg.adaptive
    within(problems, "adaptive.first_round", a.first_round, "(0, 64]", "pairs per item")
    within(problems, "adaptive.later_round", a.later_round, "(0, 64]", "pairs per item")
    positive(problems, "adaptive.logit_clip", a.logit_clip)
    positive(problems, "adaptive.robust", a.robust, allow_none=True)
    within(problems, "adaptive.growth", a.growth, "[0, 10]")
    counting(problems, "adaptive.window", a.window)
    within(problems, "adaptive.explore", a.explore, "[0, 1]")
    positive(problems, "adaptive.ridge", a.ridge)
    positive(problems, "adaptive.warm_weight", a.warm_weight)
    b = a.budget
    for key in ("calls", "calls_per_item", "prompt_tokens", "money", "seconds"):
        positive(problems, f"adaptive.budget.{key}", getattr(b, key), allow_none=True)
    judge = backends().get(cfg.judge.backend)
    if b.money is not None and not (judge is not None and Trait.ENDPOINT in judge.traits):
        problems.append(
            "config adaptive.budget.money needs a judge behind an API with prices (judge.endpoint)"
        )
    if not workflow(cfg.workflow).rounds:
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
    if not workflow(cfg.workflow).generated:
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
    if any(identifier(n) is None for n in names):
        problems.append(
            "config generate.models: every model needs a name (its name on the leaderboard), without control "
            "characters"
        )
    if len(set(names)) != len(names):
        problems.append(f"config generate.models has repeated names: {names}")
    if len(gen.models) == 1:
        problems.append("config generate.models has one model: comparing outputs needs at least two")
    for m in gen.models:
        key = f"generate.models[{m.name}]"
        if m.backend is not None and m.backend not in backends():
            problems.append(
                f"config {key}.backend={m.backend} is not a registered backend: {', '.join(backends())}"
            )
            continue
        entry = generator_backend(m, cfg.judge)
        if Trait.GENERATION not in entry.traits:
            able = [n for n, e in backends().items() if Trait.GENERATION in e.traits]
            problems.append(
                f"config {key}.backend={entry.name} cannot generate; one of {', '.join(able)} can"
            )
        if Trait.ENDPOINT in entry.traits:
            problems += endpoint_problems(m.endpoint or EndpointConfig(), f"{key}.endpoint")
            if m.engine:
                problems.append(f"config {key}.engine has no effect behind an endpoint ({entry.name})")
        elif m.endpoint is not None:
            problems.append(
                f"config {key}.endpoint has no effect: backend {entry.name} generates on this machine; remove it, or "
                "name a backend behind an endpoint (backend: api, anthropic)"
            )
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
    counting(problems, "generate.batch_size", gen.batch_size)
    return problems


def absolute_problems(cfg: RunConfig) -> list[str]:
    """What in ``absolute`` (and the workflow's use of it) could not be applied as written."""
    return [
        *absolute_template_choices(cfg),
        *absolute_sampling_problems(cfg),
        *criteria_options_problems(cfg),
        *tie_problems(cfg),
    ]


def absolute_template_choices(cfg: RunConfig) -> list[str]:
    """The absolute modes and the templates each runs: known, of that mode, well formed, ids of their own."""
    problems: list[str] = []
    absolute = cfg.absolute
    if not workflow(cfg.workflow).pairs and not absolute.modes:
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
    return problems


def absolute_sampling_problems(cfg: RunConfig) -> list[str]:
    """How absolute prompts are read and generated: samples, temperature, tokens, the read words, the weight."""
    problems: list[str] = []
    absolute = cfg.absolute
    counting(problems, "absolute.samples", absolute.samples)
    if absolute.samples > 1 and not absolute.temperature > 0:
        problems.append(
            f"config absolute.samples={absolute.samples} averages samples, which needs absolute.temperature > 0 "
            "(temperature 0 is greedy: every sample would be the same)"
        )
    within(problems, "absolute.temperature", absolute.temperature, "[0, inf)")
    counting(problems, "absolute.max_tokens", absolute.max_tokens)
    if not absolute.score_words or any("{v}" not in w for w in absolute.score_words):
        problems.append(f"config absolute.score_words={absolute.score_words} must each contain {{v}}")
    if not absolute.yes_words or not absolute.no_words:
        problems.append("config absolute.yes_words and absolute.no_words must each name at least one word")
    elif set(absolute.yes_words) & set(absolute.no_words):
        problems.append("config absolute.yes_words and absolute.no_words share a word")
    positive(problems, "absolute.combine_weight", absolute.combine_weight, allow_none=True)
    return problems


def criteria_options_problems(cfg: RunConfig) -> list[str]:
    """The options of structured criteria (absolute mode options)."""
    problems: list[str] = []
    absolute = cfg.absolute
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
    return problems


def tie_problems(cfg: RunConfig) -> list[str]:
    """A tie option's words, and the tie model that needs them."""
    problems: list[str] = []
    tie = cfg.prompt.label_words_tie
    if tie and set(tie) & (set(cfg.prompt.label_words_a) | set(cfg.prompt.label_words_b)):
        problems.append("config prompt.label_words_tie shares a word with label_words_a / label_words_b")
    readers = [m for m in cfg.scoring.methods if m in scorers() and scorers()[m].ties]
    if readers and not tie:
        named = ", ".join(readers)
        problems.append(
            f"config scoring.methods has {named} (a tie model, reading the tie probability) but "
            f"prompt.label_words_tie is empty: add a tie option to the prompt (e.g. +prompt=chen_tie) or drop {named}"
        )
    return problems
