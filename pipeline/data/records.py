"""Validate context records and turn them into the CANDIDATES and HUMAN_SCORES tables.

Every problem is collected and raised together as an :class:`InputError` naming the context, the candidate
and the field, before any judging starts. The documented handlings (``dataset.empty_text`` placeholder/drop,
missing human scores under ``scoring.correlation=auto``) are counted in :class:`InputReport`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from pipeline.config.enums import Correlation, EmptyText
from pipeline.contracts.errors import InputError, Problem
from pipeline.contracts.schemas import CANDIDATES, HUMAN_SCORES
from pipeline.contracts.values import finite_number, identifier, shown
from pipeline.data.load import Record

# Fields that look like people's judgements where only "scores" is read (never silently dropped).
JUDGEMENT_LIKE = (
    "score",
    "scores",
    "rating",
    "ratings",
    "human_score",
    "human_rating",
    "grade",
    "label",
    "vote",
    "votes",
)


@dataclass
class InputReport:
    """Counts of everything validation changed or could not use; logged and written with the run."""

    n_contexts: int = 0
    n_candidates: int = 0
    empty_text_replaced: list[str] = field(default_factory=list)
    empty_text_dropped: list[str] = field(default_factory=list)
    # attribute -> number of candidates without a human score for it
    missing_scores: dict[str, int] = field(default_factory=dict)
    # attributes judged without any human score: no correlation is reported for them
    attributes_without_scores: list[str] = field(default_factory=list)
    # context ids whose text was truncated to fit the model's context length (filled by preflight)
    truncated_contexts: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "input.contexts": self.n_contexts,
            "input.candidates": self.n_candidates,
            "input.empty_text_replaced": len(self.empty_text_replaced),
            "input.empty_text_dropped": len(self.empty_text_dropped),
            "input.missing_human_scores": sum(self.missing_scores.values()),
            "input.attributes_without_scores": len(self.attributes_without_scores),
            "input.contexts_truncated": len(self.truncated_contexts),
        }


@dataclass
class ValidatedInput:
    candidates: pa.Table
    human_scores: pa.Table
    attributes: list[str]
    report: InputReport


@dataclass(frozen=True)
class ValidationRules:
    """What validation enforces; built from DatasetConfig and ScoringConfig by the caller."""

    attributes: tuple[str, ...]
    empty_text: EmptyText = EmptyText.error
    empty_markers: tuple[str, ...] = ()
    placeholder: str = "(no text)"
    allow_empty_context: bool = False
    correlation: Correlation = Correlation.auto
    max_candidates: int | None = None
    # The context field read as its category, and the prefixes that group categories (the first one a category
    # begins with names its group).
    category_field: str = "category"
    category_groups: tuple[str, ...] = ()
    # The candidate field naming its model (None: the candidates name none).
    system_field: str | None = "system"

    def category(self, value: str) -> str:
        """The category ``value`` is reported under: the first of ``category_groups`` it begins with, else itself."""
        return next((group for group in self.category_groups if value.startswith(group)), value)


# A context's further parts, shown to the judge after its text in this order, each under its heading: a reference
# answer (MT-Bench's reference-guided grading), a score rubric (Prometheus 2's per-item rubric: a text, or each score
# with its description), a checklist (TICK's: the items, numbered).
PARTS = {"reference": "Reference answer:", "rubric": "Score rubric:", "checklist": "Checklist:"}
PART_KINDS = {
    "reference": "a text",
    "rubric": "a text or a mapping of scores to descriptions",
    "checklist": "a list of items (texts), or a text with one item per line",
}


def part_text(value: object) -> str | None:
    """A context part as the judge reads it (:data:`PARTS`), or None when it is none of the kinds it may be."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
        return "\n".join(f"Score {k}: {v}" for k, v in value.items())
    if isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
        return "\n".join(f"{n}. {item}" for n, item in enumerate(value, start=1))
    return None


def checklist_items(value: object) -> object:
    """A checklist's items: a list as it is, a text (a CSV's cell) its non-empty lines."""
    if isinstance(value, str):
        return [line.strip() for line in value.splitlines() if line.strip()] or None
    return value


# A conversation's roles as the transcript names them.
ROLES = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


def transcript(turns: object) -> str | tuple[str, str]:
    """A conversation (a list of ``{"role", "content"}`` turns) as the text a judge reads, each turn its own paragraph
    after its role (``User: ...``, ``Assistant: ...``); or (where, why) when it is not one."""
    if not isinstance(turns, list) or not turns:
        return "", f"not a text or a conversation (a list of {{role, content}} turns): {shown(turns)}"
    out = []
    for n, turn in enumerate(turns):
        role = turn.get("role") if isinstance(turn, dict) else None
        content = turn.get("content") if isinstance(turn, dict) else None
        if role not in ROLES or not isinstance(content, str):
            return f"[{n}]", f"not a turn {{role: {'|'.join(ROLES)}, content: text}}: {shown(turn)}"
        out.append(f"{ROLES[role]}: {content}")
    return "\n\n".join(out)


def validate_records(records: Iterable[Record], rules: ValidationRules) -> ValidatedInput:
    """CANDIDATES and HUMAN_SCORES from the records, every problem collected and raised at once."""
    check = Validation(rules)
    for record in records:
        check.record(record)
    return check.finish()


# A candidate kept: its id, its system, its text, its human scores.
Kept = tuple[str, str | None, str, dict]


class Validation:
    """The checks of one input, record by record: what is kept, what is wrong (:class:`Problem`), what was changed
    by a documented handling (:class:`InputReport`)."""

    def __init__(self, rules: ValidationRules):
        self.rules = rules
        self.problems: list[Problem] = []
        self.report = InputReport()
        self.cand_rows: dict[str, list] = {name: [] for name in CANDIDATES.names}
        self.score_rows: dict[str, list] = {name: [] for name in HUMAN_SCORES.names}
        self.seen_contexts: dict[str, str] = {}
        self.with_score = dict.fromkeys(rules.attributes, 0)
        self.without_score = dict.fromkeys(rules.attributes, 0)

    def record(self, record: Record) -> None:
        """One context's record: its id and text, then every candidate."""
        data = record.data
        if not isinstance(data, dict):
            self.problems.append(Problem(None, None, None, "is not a JSON object", location=record.location))
            return
        cid = identifier(data.get("context_id"))
        if cid is None:
            message = f"missing or not a valid id: {shown(data.get('context_id'))}"
            self.problems.append(Problem(None, None, "context_id", message, location=record.location))
            return
        if cid in self.seen_contexts:
            message = f"duplicate context id (also at {self.seen_contexts[cid]})"
            self.problems.append(Problem(cid, None, "context_id", message))
            return
        self.seen_contexts[cid] = record.location
        context = self.text(cid, None, "context", data.get("context"))
        if context is None:
            return
        parts = [context] if context.strip() else []
        for name, head in PARTS.items():
            value = data.get(name)
            if value is None:
                continue
            if name == "checklist":
                value = checklist_items(value)
            shown_part = part_text(value)
            if shown_part is None:
                self.problems.append(Problem(cid, None, name, f"not {PART_KINDS[name]}: {shown(data[name])}"))
                return
            parts.append(f"{head}\n{shown_part}")
        items = checklist_items(data.get("checklist"))
        checklist = items if isinstance(items, list) else None
        context = "\n\n".join(parts)
        if not context.strip() and not self.rules.allow_empty_context:
            message = "missing or empty text (set dataset.allow_empty_context=true for a pool)"
            self.problems.append(Problem(cid, None, "context", message))
        category = data.get(self.rules.category_field)
        if category is not None and not (isinstance(category, str) and category.strip()):
            message = f"not a category name: {shown(category)}"
            self.problems.append(Problem(cid, None, self.rules.category_field, message))
            return
        candidates = data.get("candidates")
        if not isinstance(candidates, list):
            self.problems.append(Problem(cid, None, "candidates", "missing or not a list"))
            return
        if self.rules.max_candidates is not None:
            candidates = candidates[: self.rules.max_candidates]
        kept: list[Kept] = []
        seen: set[str] = set()
        for n, cand in enumerate(candidates):
            candidate = self.candidate(cid, n, cand, seen)
            if candidate is not None:
                kept.append(candidate)
        if len(kept) < 2:
            message = f"has {len(kept)} usable candidate(s); a comparison needs at least 2"
            self.problems.append(Problem(cid, None, "candidates", message))
            return
        self.keep(cid, context, kept, None if category is None else self.rules.category(category), checklist)

    def candidate(self, cid: str, n: int, cand: object, seen: set[str]) -> Kept | None:
        """One candidate of context ``cid`` (the ``n``-th), or None when it is wrong or dropped."""
        if not isinstance(cand, dict):
            self.problems.append(Problem(cid, f"#{n}", None, "candidate is not a JSON object"))
            return None
        cand_id = identifier(cand.get("candidate_id"))
        if cand_id is None:
            message = f"missing or not a valid id: {shown(cand.get('candidate_id'))}"
            self.problems.append(Problem(cid, f"#{n}", "candidate_id", message))
            return None
        if cand_id in seen:
            self.problems.append(
                Problem(cid, cand_id, "candidate_id", "duplicate candidate id in this context")
            )
            return None
        seen.add(cand_id)
        text = self.text(cid, cand_id, "text", cand.get("text"))
        if text is None and cand.get("text") is not None:
            return None
        if text is None or not text.strip() or text.strip() in self.rules.empty_markers:
            text = self.empty_text(cid, cand_id, text)
            if text is None:
                return None
        system = cand.get(self.rules.system_field) if self.rules.system_field else None
        stray = [
            k for k in cand if k != "scores" and (k.lower() in JUDGEMENT_LIKE or k in self.rules.attributes)
        ]
        if stray:
            example = self.rules.attributes[0] if self.rules.attributes else "quality"
            message = (
                f'people\'s scores are read from "scores", not {stray[0]!r}: write '
                f'"scores": {{"{example}": {shown(cand[stray[0]])}}}'
            )
            self.problems.append(Problem(cid, cand_id, stray[0], message))
            return None
        scores = cand.get("scores") if self.rules.correlation != "off" else None
        if scores is None:
            scores = {}
        if not isinstance(scores, dict):
            self.problems.append(Problem(cid, cand_id, "scores", f"not an object: {type(scores).__name__}"))
            return None
        return cand_id, None if system is None else str(system), text, scores

    def text(self, cid: str, cand_id: str | None, name: str, value: object) -> str | None:
        """A context's or candidate's text: a string, or a conversation (a list of ``{role, content}`` turns, as
        OpenAI's messages) as its transcript (:func:`transcript`); "" for none; None with a problem noted."""
        if value is None:
            return "" if cand_id is None else None
        if isinstance(value, str):
            return value
        turns = transcript(value)
        if isinstance(turns, str):
            return turns
        where, why = turns
        self.problems.append(Problem(cid, cand_id, f"{name}{where}", why))
        return None

    def empty_text(self, cid: str, cand_id: str, text: str | None) -> str | None:
        """An empty candidate as ``dataset.empty_text`` says: its placeholder, None when dropped or refused."""
        if self.rules.empty_text == "placeholder":
            self.report.empty_text_replaced.append(f"{cid}/{cand_id}")
            return self.rules.placeholder
        if self.rules.empty_text == "drop":
            self.report.empty_text_dropped.append(f"{cid}/{cand_id}")
            return None
        message = f"missing or empty text ({shown(text)}); set dataset.empty_text=placeholder or drop to handle such candidates"
        self.problems.append(Problem(cid, cand_id, "text", message))
        return None

    def keep(
        self, cid: str, context: str, kept: list[Kept], category: str | None, checklist: list[str] | None
    ) -> None:
        """A context's candidates as rows (its category and checklist on each), and their human scores."""
        for index, (cand_id, system, text, scores) in enumerate(kept):
            row = (cid, context, cand_id, index, system, text, category, checklist)
            for name, value in zip(CANDIDATES.names, row, strict=True):
                self.cand_rows[name].append(value)
            for attribute in self.rules.attributes:
                raw = scores.get(attribute)
                if raw is None:
                    self.without_score[attribute] += 1
                    continue
                value = finite_number(raw)
                if value is None:
                    message = f"not a finite number: {shown(raw)}"
                    self.problems.append(Problem(cid, cand_id, f"scores.{attribute}", message))
                    continue
                self.with_score[attribute] += 1
                for name, field_value in zip(
                    HUMAN_SCORES.names, (cid, cand_id, attribute, value), strict=True
                ):
                    self.score_rows[name].append(field_value)
        self.report.n_contexts += 1
        self.report.n_candidates += len(kept)

    def finish(self) -> ValidatedInput:
        """The tables, or an :class:`InputError` listing every problem."""
        rules = self.rules
        if rules.correlation == "required":
            for attribute in rules.attributes:
                if self.without_score[attribute]:
                    message = (
                        f"{self.without_score[attribute]} candidate(s) have no human score for {attribute!r} but "
                        "scoring.correlation=required; use scoring.correlation=auto to report scores without it"
                    )
                    self.problems.append(Problem(None, None, f"scores.{attribute}", message))
        if not self.seen_contexts and not self.problems:
            self.problems.append(Problem(None, None, None, "the dataset holds no contexts"))
        if self.problems:
            raise InputError(self.problems)
        if rules.correlation != "off":
            self.report.missing_scores = {a: n for a, n in self.without_score.items() if n}
            self.report.attributes_without_scores = [a for a in rules.attributes if self.with_score[a] == 0]
        return ValidatedInput(
            candidates=pa.table(self.cand_rows, schema=CANDIDATES),
            human_scores=pa.table(self.score_rows, schema=HUMAN_SCORES),
            attributes=list(rules.attributes),
            report=self.report,
        )
