"""Validate context records and turn them into the CANDIDATES and HUMAN_SCORES tables.

Every problem is collected and raised together as an :class:`InputError` naming the context, the candidate
and the field, before any judging starts. The documented handlings (``dataset.empty_text`` placeholder/drop,
missing human scores under ``scoring.correlation=auto``) are counted in :class:`InputReport`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from pipeline.config.enums import Correlation, EmptyText
from pipeline.contracts.errors import InputError, Problem
from pipeline.contracts.schemas import CANDIDATES, HUMAN_SCORES
from pipeline.data.load import Record


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


def _identifier(value: object) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip() and not any(ch in value for ch in "\t\n\r\x1f"):
        return value
    return None


def _score(value: object) -> float | None:
    """A finite number, or None if the value is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def validate_records(records: Iterable[Record], rules: ValidationRules) -> ValidatedInput:
    problems: list[Problem] = []
    report = InputReport()
    cand_rows: dict[str, list] = {name: [] for name in CANDIDATES.names}
    score_rows: dict[str, list] = {name: [] for name in HUMAN_SCORES.names}
    seen_contexts: dict[str, str] = {}
    with_score = dict.fromkeys(rules.attributes, 0)
    without_score = dict.fromkeys(rules.attributes, 0)

    for record in records:
        data = record.data
        if not isinstance(data, dict):
            problems.append(Problem(None, None, None, "is not a JSON object", location=record.location))
            continue
        cid = _identifier(data.get("context_id"))
        if cid is None:
            problems.append(
                Problem(
                    None,
                    None,
                    "context_id",
                    f"missing or not a valid id: {data.get('context_id')!r}",
                    location=record.location,
                )
            )
            continue
        if cid in seen_contexts:
            problems.append(
                Problem(cid, None, "context_id", f"duplicate context id (also at {seen_contexts[cid]})")
            )
            continue
        seen_contexts[cid] = record.location
        context = data.get("context")
        if context is None:
            context = ""
        if not isinstance(context, str):
            problems.append(Problem(cid, None, "context", f"not a string: {type(context).__name__}"))
            continue
        if not context.strip() and not rules.allow_empty_context:
            problems.append(
                Problem(
                    cid,
                    None,
                    "context",
                    "missing or empty text (set dataset.allow_empty_context=true for a pool)",
                )
            )
        candidates = data.get("candidates")
        if not isinstance(candidates, list):
            problems.append(Problem(cid, None, "candidates", "missing or not a list"))
            continue
        if rules.max_candidates is not None:
            candidates = candidates[: rules.max_candidates]

        kept: list[tuple[str, str | None, str, dict]] = []
        seen_candidates: set[str] = set()
        for n, cand in enumerate(candidates):
            if not isinstance(cand, dict):
                problems.append(Problem(cid, f"#{n}", None, "candidate is not a JSON object"))
                continue
            cand_id = _identifier(cand.get("candidate_id"))
            if cand_id is None:
                problems.append(
                    Problem(
                        cid,
                        f"#{n}",
                        "candidate_id",
                        f"missing or not a valid id: {cand.get('candidate_id')!r}",
                    )
                )
                continue
            if cand_id in seen_candidates:
                problems.append(
                    Problem(cid, cand_id, "candidate_id", "duplicate candidate id in this context")
                )
                continue
            seen_candidates.add(cand_id)
            text = cand.get("text")
            if text is not None and not isinstance(text, str):
                problems.append(Problem(cid, cand_id, "text", f"not a string: {type(text).__name__}"))
                continue
            if text is None or not text.strip() or text.strip() in rules.empty_markers:
                if rules.empty_text == "placeholder":
                    report.empty_text_replaced.append(f"{cid}/{cand_id}")
                    text = rules.placeholder
                elif rules.empty_text == "drop":
                    report.empty_text_dropped.append(f"{cid}/{cand_id}")
                    continue
                else:
                    problems.append(
                        Problem(
                            cid,
                            cand_id,
                            "text",
                            f"missing or empty text ({text!r}); set dataset.empty_text=placeholder or drop "
                            "to handle such candidates",
                        )
                    )
                    continue
            system = cand.get("system")
            scores = cand.get("scores") if rules.correlation != "off" else None
            if scores is None:
                scores = {}
            if not isinstance(scores, dict):
                problems.append(Problem(cid, cand_id, "scores", f"not an object: {type(scores).__name__}"))
                continue
            kept.append((cand_id, None if system is None else str(system), text, scores))

        if len(kept) < 2:
            problems.append(
                Problem(
                    cid,
                    None,
                    "candidates",
                    f"has {len(kept)} usable candidate(s); a comparison needs at least 2",
                )
            )
            continue

        for index, (cand_id, system, text, scores) in enumerate(kept):
            cand_rows["context_id"].append(cid)
            cand_rows["context"].append(context)
            cand_rows["candidate_id"].append(cand_id)
            cand_rows["candidate_index"].append(index)
            cand_rows["system"].append(system)
            cand_rows["text"].append(text)
            for attribute in rules.attributes:
                raw = scores.get(attribute)
                if raw is None:
                    without_score[attribute] += 1
                    continue
                value = _score(raw)
                if value is None:
                    problems.append(
                        Problem(cid, cand_id, f"scores.{attribute}", f"not a finite number: {raw!r}")
                    )
                    continue
                with_score[attribute] += 1
                score_rows["context_id"].append(cid)
                score_rows["candidate_id"].append(cand_id)
                score_rows["attribute"].append(attribute)
                score_rows["human_score"].append(value)
        report.n_contexts += 1
        report.n_candidates += len(kept)

    if rules.correlation == "required":
        for attribute in rules.attributes:
            if without_score[attribute]:
                problems.append(
                    Problem(
                        None,
                        None,
                        f"scores.{attribute}",
                        f"{without_score[attribute]} candidate(s) have no human score for {attribute!r} but "
                        "scoring.correlation=required; use scoring.correlation=auto to report scores without it",
                    )
                )
    if not seen_contexts and not problems:
        problems.append(Problem(None, None, None, "the dataset holds no contexts"))
    if problems:
        raise InputError(problems)

    if rules.correlation != "off":
        report.missing_scores = {a: n for a, n in without_score.items() if n}
        report.attributes_without_scores = [a for a in rules.attributes if with_score[a] == 0]
    return ValidatedInput(
        candidates=pa.table(cand_rows, schema=CANDIDATES),
        human_scores=pa.table(score_rows, schema=HUMAN_SCORES),
        attributes=list(rules.attributes),
        report=report,
    )
