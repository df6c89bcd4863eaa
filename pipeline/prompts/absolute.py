"""Absolute templates as settled for the judge: their text, scale, the words read and what each is worth (score
tokens, yes/no words, option letters), checked to be one token each.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.config.assessment import AbsoluteConfig, AbsoluteTemplateConfig
from pipeline.config.enums import AbsoluteMode
from pipeline.contracts.engine import Request
from pipeline.contracts.errors import ConfigError
from pipeline.contracts.keys import item_template

# Modes whose score is generated as text and parsed; the others read first-token log-probabilities.
GENERATED = frozenset({AbsoluteMode.prompt_score, AbsoluteMode.explicit})
# Modes that read yes and no words (a checklist: each item's question).
YES_NO = frozenset({AbsoluteMode.implicit, AbsoluteMode.checklist})


class AbsoluteLabelError(ConfigError):
    """A score, yes or no word is not a single token for the judge's tokenizer."""


@dataclass(frozen=True)
class AbsoluteTemplate:
    """One absolute template as settled for the judge: its text, scale, read words and what they are worth."""

    id: str
    mode: AbsoluteMode
    text: str
    answer_prefix: str
    low: int
    high: int
    # The words whose first-token log-probabilities are read (g_eval: score words; implicit, checklist: yes then no
    # words).
    words: tuple[str, ...]
    # The value of each word: the score it stands for (g_eval, options), 1.0 for yes and 0.0 for no (YES_NO modes).
    values: tuple[float, ...]
    request: Request
    # options: the one criterion (attribute) this template asks about, and its options as the prompt lists them.
    attribute: str | None = None
    options: str = ""

    def asks(self, attribute: str) -> bool:
        """Whether this template makes a prompt for ``attribute`` (every attribute, or its own criterion)."""
        return self.attribute is None or self.attribute == attribute

    @property
    def n_yes(self) -> int:
        return sum(1 for v in self.values if v == 1.0) if self.mode in YES_NO else 0

    def asked(self, attributes: Sequence[str], checklist: Sequence[str]) -> Iterator[tuple[str, str, str]]:
        """(attribute, template id, checklist item) of every prompt this template makes for one candidate of a
        context with ``checklist``: one per attribute it asks about; for mode checklist one per item, each known
        by :func:`pipeline.contracts.keys.item_template` (none without a checklist)."""
        items = list(enumerate(checklist, 1)) if self.mode == AbsoluteMode.checklist else [(0, "")]
        for attribute in attributes:
            if self.asks(attribute):
                for k, item in items:
                    yield attribute, item_template(self.id, k) if k else self.id, item


def _single_tokens(tokenizer: Any, words: Sequence[str], model: str, what: str) -> list[int]:
    from pipeline.prompts.labels import encode_words

    ids = []
    for word, encoded in zip(words, encode_words(tokenizer, words), strict=True):
        if len(encoded) != 1:
            raise AbsoluteLabelError(
                f"{what}: {word!r} is {len(encoded)} tokens {encoded} for judge model {model}"
            )
        ids.append(encoded[0])
    if len(set(ids)) != len(ids):
        raise AbsoluteLabelError(
            f"{what}: words {list(words)} map to repeated token ids {ids} for judge model {model}"
        )
    return ids


def one_token_scales(
    tokenizer: Any, score_words: Sequence[str], low: int, limit: int = 100
) -> tuple[int, int]:
    """The widest scale from ``low`` (or from 1 if ``low`` itself is not one token) whose every score word is one
    token: for the refusal message."""

    def single(v: int) -> bool:
        return all(len(tokenizer.encode(w.format(v=v), add_special_tokens=False)) == 1 for w in score_words)

    start = low if single(low) else 1
    high = start
    while high + 1 <= start + limit and single(high + 1):
        high += 1
    return start, high


OPTION_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def option_templates(
    template_id: str,
    t: AbsoluteTemplateConfig,
    options: Mapping[str, Sequence[Any]],
    tokenizer: Any,
    model: str,
) -> list[AbsoluteTemplate]:
    """One template per criterion with options (EvalAssist's direct assessment): the options listed by letter, the
    letters read, each worth its option's score."""
    out = []
    for criterion, opts in options.items():
        letters = tuple(OPTION_LETTERS[: len(opts)])
        ids = _single_tokens(
            tokenizer, letters, model, f"absolute template {template_id!r} (options of {criterion})"
        )
        listed = "\n".join(
            f"({letter}) {o.name}" + (f": {o.description}" if o.description else "")
            for letter, o in zip(letters, opts, strict=True)
        )
        out.append(
            AbsoluteTemplate(
                f"{template_id}:{criterion}",
                AbsoluteMode.options,
                t.text,
                t.answer_prefix,
                int(min(o.score for o in opts)),
                int(max(o.score for o in opts)),
                letters,
                tuple(float(o.score) for o in opts),
                Request(token_ids=tuple(ids), max_tokens=1),
                attribute=criterion,
                options=listed,
            )
        )
    return out


def resolve_absolute(
    cfg: AbsoluteConfig,
    tokenizer: Any,
    model: str,
    criteria_options: Mapping[str, Sequence[Any]] | None = None,
) -> tuple[AbsoluteTemplate, ...]:
    """The templates of ``cfg.modes`` with their token ids and reads; refuses a score, yes or no word that is
    not one token (naming the word, the template and a scale that works). ``criteria_options``: the options of
    each criterion (mode ``options``)."""
    out = []
    for mode in cfg.modes:
        for template_id in cfg.templates[str(mode)]:
            t = cfg.library[template_id]
            if mode == AbsoluteMode.options:
                out += option_templates(template_id, t, criteria_options or {}, tokenizer, model)
                continue
            words: tuple[str, ...] = ()
            values: tuple[float, ...] = ()
            if mode == AbsoluteMode.g_eval:
                scores = range(t.low, t.high + 1)
                words = tuple(w.format(v=v) for v in scores for w in cfg.score_words)
                values = tuple(float(v) for v in scores for _ in cfg.score_words)
                try:
                    ids = _single_tokens(
                        tokenizer, words, model, f"absolute template {template_id!r} (g_eval)"
                    )
                except AbsoluteLabelError as exc:
                    low, high = one_token_scales(tokenizer, cfg.score_words, t.low)
                    raise AbsoluteLabelError(
                        f"{exc}. G-Eval reads the first-token probability of every score, so each score must be "
                        f"one token: scale {t.low}-{t.high} does not work with this judge; {low}-{high} does "
                        f"(set absolute.library.{template_id}.low={low} absolute.library.{template_id}.high={high}"
                        f", or change absolute.score_words={list(cfg.score_words)})"
                    ) from None
                request = Request(token_ids=tuple(ids), max_tokens=1)
            elif mode in YES_NO:
                words = tuple(cfg.yes_words) + tuple(cfg.no_words)
                values = (1.0,) * len(cfg.yes_words) + (0.0,) * len(cfg.no_words)
                try:
                    ids = _single_tokens(
                        tokenizer, words, model, f"absolute template {template_id!r} ({mode})"
                    )
                except AbsoluteLabelError as exc:
                    raise AbsoluteLabelError(
                        f"{exc}: each yes/no word must be one token; change absolute.yes_words / absolute.no_words"
                    ) from None
                request = Request(token_ids=tuple(ids), max_tokens=1)
            else:
                sampled = cfg.temperature > 0
                request = Request(
                    max_tokens=cfg.max_tokens,
                    n=cfg.samples,
                    temperature=cfg.temperature,
                    seed=cfg.seed if sampled else None,
                )
            out.append(
                AbsoluteTemplate(
                    template_id, mode, t.text, t.answer_prefix, t.low, t.high, words, values, request
                )
            )
    return tuple(out)
