"""Flat tables made into context records: one row per candidate (a context, a candidate's text, its model, people's
scores as columns) or one row per pair (a context, two texts, their models, people's vote), as pandas, polars, Hugging
Face ``datasets``, Chatbot Arena and MT-Bench's human judgements export them. The columns are found by
``dataset.columns`` (:class:`pipeline.config.assessment.ColumnsConfig`), whose defaults recognise the common names.

Without a context id column a context is known by its text (its id a digest of it); a candidate without an id column
by its model, else by a digest of its text. A pair's rows become one context of two candidates ``<context>:<model>``
where the rows name the two models (whichever side a row lists each on), else ``<context>:A`` and ``<context>:B`` (the
first row's sides); a context with several pairs is one context per pair (``<context>/<one> vs <other>``, the sides'
names in sorted order). People's votes become their scores for every attribute judged: the share of the
votes each won (a tie half to each), so that a pair's preference is the majority, a tie where the votes split
evenly, as the rest of the product reads people's scores. Every row's problem names the file, the row and the column,
with the layout expected in one line.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from pipeline.config.assessment import ColumnsConfig
from pipeline.contracts.errors import ConfigError, InputError, Problem
from pipeline.contracts.keys import stable_hash
from pipeline.contracts.values import identifier, shown
from pipeline.data.load import Record, data_files, file_rows
from pipeline.data.records import JUDGEMENT_LIKE, PARTS

log = logging.getLogger(__name__)

# The names each field's column is recognised by (case apart), first match wins.
RECOGNISED: dict[str, tuple[str, ...]] = {
    "context_id": ("context_id", "prompt_id", "question_id", "pair_id", "instruction_id", "conversation_id"),
    "context": (
        "context",
        "prompt",
        "instruction",
        "question",
        "input",
        "query",
        "article",
        "document",
        "source_text",
        "messages",
        "conversation",
    ),
    "reference": ("reference", "reference_answer", "ref_answer", "gold_answer"),
    "rubric": ("rubric", "score_rubric", "rubrics"),
    "checklist": ("checklist", "checklists"),
    "candidate_id": ("candidate_id", "response_id", "answer_id", "output_id"),
    "system": ("system", "model", "generator", "model_name", "model_id"),
    "text": ("text", "response", "output", "answer", "completion", "summary", "candidate"),
    "text_a": ("text_a", "response_a", "output_1", "answer_a", "completion_a", "output_a"),
    "text_b": ("text_b", "response_b", "output_2", "answer_b", "completion_b", "output_b"),
    "model_a": ("model_a", "system_a", "generator_a"),
    "model_b": ("model_b", "system_b", "generator_b"),
    "winner": ("winner", "label", "preference", "human_preference"),
}
# A vote's values (case apart): the first side wins, the second, a tie.
VOTES = {
    **dict.fromkeys(("a", "model_a", "response_a", "output_1", "1", "a>b", "a>>b", "first"), 1.0),
    **dict.fromkeys(("b", "model_b", "response_b", "output_2", "2", "b>a", "b>>a", "second"), 0.0),
    **dict.fromkeys(("tie", "tie (bothbad)", "tie (both bad)", "both_bad", "a=b", "="), 0.5),
}
CANDIDATE_LAYOUT = (
    'one row per candidate, e.g. {"prompt": "...", "model": "m1", "response": "...", "quality": 4}'
)
PAIR_LAYOUT = 'one row per pair, e.g. {"prompt": "...", "model_a": "m1", "model_b": "m2", "response_a": "...", ' \
    '"response_b": "...", "winner": "model_a"}'  # fmt: skip
NESTED_LAYOUT = 'one row per context, e.g. {"context_id": "c1", "context": "...", "candidates": [{"candidate_id": ' \
    '"a", "text": "...", "scores": {"quality": 4}}]}'  # fmt: skip


def read_records(
    path: Path,
    limit: int | None = None,
    splits: Sequence[str] | None = None,
    columns: ColumnsConfig | None = None,
    attributes: Sequence[str] = (),
) -> Iterator[Record]:
    """The context records at ``path`` (of ``splits``, for a folder) in file order, at most ``limit``: a file's rows
    as they are where they nest their candidates, else made into context records (module docstring)."""
    count = 0
    for file in data_files(path, splits):
        rows = file_rows(file)
        first = next(rows, None)
        if first is None:
            continue
        if isinstance(first.data, dict) and "candidates" in first.data or not isinstance(first.data, dict):
            records: Iterator[Record] = _chain(first, rows)
        else:
            records = context_records([first, *rows], columns or ColumnsConfig(), attributes, file.name)
        for record in records:
            if limit is not None and count >= limit:
                return
            count += 1
            yield record


def _chain(first: Record, rest: Iterator[Record]) -> Iterator[Record]:
    yield first
    yield from rest


def mapped(names: Sequence[str], columns: ColumnsConfig, where: str) -> dict[str, str]:
    """Field -> column for a table with the columns ``names``: what ``dataset.columns`` names (it must be there), else
    the first recognised name."""
    lower = {n.lower(): n for n in names}
    out: dict[str, str] = {}
    for f in fields(ColumnsConfig):
        given = getattr(columns, f.name)
        if f.name == "scores":
            continue
        if given is not None:
            if given not in names:
                raise ConfigError(
                    f"config dataset.columns.{f.name}={given!r}: {where} has no such column ({_listed(names)})"
                )
            out[f.name] = given
        else:
            found = next((lower[n] for n in RECOGNISED[f.name] if n in lower), None)
            if found is not None:
                out[f.name] = found
    return out


def _listed(names: Sequence[str]) -> str:
    return "its columns: " + ", ".join(list(names)[:30]) + (" ..." if len(names) > 30 else "")


def score_columns(names: Sequence[str], columns: ColumnsConfig, attributes: Sequence[str], where: str,
                  used: Iterable[str]) -> dict[str, str]:  # fmt: skip
    """Attribute -> the column of people's scores for it: ``dataset.columns.scores``, else a column named as the
    attribute. A column that looks like people's judgements and is read by nothing is refused."""
    lower = {n.lower(): n for n in names}
    out = {}
    for attribute in attributes:
        given = columns.scores.get(attribute)
        if given is not None and given not in names:
            raise ConfigError(
                f"config dataset.columns.scores.{attribute}={given!r}: {where} has no such column ({_listed(names)})"
            )
        column = given or lower.get(attribute.lower())
        if column is not None:
            out[attribute] = column
    read = set(out.values()) | set(used)
    unread = [n for n in names if n not in read and n.lower() in JUDGEMENT_LIKE]
    if unread:
        example = attributes[0] if attributes else "<attribute>"
        raise ConfigError(
            f"{where}: column {unread[0]!r} looks like people's judgements, but nothing reads it: say which attribute "
            f"it scores, +dataset.columns.scores.{example}={unread[0]} (or rename it to the attribute, or drop it)"
        )
    return out


def _key(prefix: str, text: str) -> str:
    """``<prefix>-`` and a digest of ``text`` (12 hex digits): an id made from content."""
    return f"{prefix}-{stable_hash(text) % 16**12:012x}"


def _text(value: Any) -> Any:
    """A text as it is (a string, or a conversation's turns: pipeline.data.records reads both), a number as its digits."""
    return value if isinstance(value, str | list) or value is None else str(value)


def context_records(
    rows: list[Record], columns: ColumnsConfig, attributes: Sequence[str], where: str
) -> Iterator[Record]:
    """The context records of one flat table's rows (module docstring)."""
    names = list(rows[0].data) if rows else []
    m = mapped(names, columns, where)
    pairwise = "text_a" in m and "text_b" in m
    needed = ("context", "text_a", "text_b") if pairwise else ("context", "text")
    missing = [f for f in needed if f not in m]
    if missing:
        layout = PAIR_LAYOUT if pairwise else CANDIDATE_LAYOUT
        raise InputError([Problem(None, None, missing[0], (
            f"no column for the {missing[0]} ({_listed(names)}); name it with dataset.columns.{missing[0]}=<column>. "
            f"Expected {layout}, or {NESTED_LAYOUT}"), location=where)])  # fmt: skip
    scores = score_columns(names, columns, [] if pairwise else attributes, where, m.values())
    carried = [n for n in names if n not in m.values() and n not in scores.values()]
    log.info(
        "%s: %s (%s)%s", where, "one row per pair" if pairwise else "one row per candidate",
        ", ".join(f"{f}={c}" for f, c in m.items()) + "".join(f", scores.{a}={c}" for a, c in scores.items()),
        f"; carried with each context, not judged: {', '.join(carried)}" if carried else "",
    )  # fmt: skip
    problems: list[Problem] = []
    build = _pairs if pairwise else _candidates
    records = build(rows, m, scores, attributes, problems)
    if problems:
        raise InputError(problems)
    return iter(records)


def _context_of(
    record: Record, m: dict[str, str], read: Iterable[str], problems: list[Problem]
) -> tuple | None:
    """A row's context: its id (the id column's, else a digest of its text), its text, and the fields carried with it
    (every column not ``read``, and its parts under their own names); None, with a problem noted, for a bad id."""
    data = record.data
    context = _text(data.get(m["context"])) or ""
    given = identifier(data.get(m["context_id"])) if "context_id" in m else None
    if "context_id" in m and given is None:
        problems.append(Problem(None, None, m["context_id"], f"not an id: {shown(data.get(m['context_id']))}",
                                location=record.location))  # fmt: skip
        return None
    extra = {k: v for k, v in data.items() if k not in m.values() and k not in read}
    extra |= {part: data[m[part]] for part in PARTS if part in m}
    return given or _key("c", str(context)), context, extra


def _candidates(rows: list[Record], m: dict[str, str], scores: dict[str, str], attributes: Sequence[str],
                problems: list[Problem]) -> list[Record]:  # fmt: skip
    contexts: dict[str, Record] = {}
    for record in rows:
        data, found = record.data, _context_of(record, m, scores.values(), problems)
        if found is None:
            continue
        cid, context, extra = found
        system = _text(data.get(m["system"])) if "system" in m else None
        text = _text(data.get(m["text"]))
        cand_id = data.get(m["candidate_id"]) if "candidate_id" in m else system or _key("r", str(text or ""))
        candidate = {"candidate_id": cand_id, "text": text, "system": system,
                     "scores": {a: data.get(c) for a, c in scores.items()}}  # fmt: skip
        if cid not in contexts:
            contexts[cid] = Record(
                record.location, {**extra, "context_id": cid, "context": context, "candidates": []}
            )
        contexts[cid].data["candidates"].append(candidate)
    if "candidate_id" not in m:  # a model with several answers in a context: each known by its model and text
        for record in contexts.values():
            made = Counter(c["candidate_id"] for c in record.data["candidates"])
            for c in record.data["candidates"]:
                if made[c["candidate_id"]] > 1:
                    c["candidate_id"] = _key(f"{c['candidate_id']}:r", str(c["text"] or ""))
    return list(contexts.values())


def vote(value: Any) -> float | None | str:
    """A vote's share for the first side (1, 0, 0.5 for a tie), None for no vote, or the value's text if unreadable."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        return str(value)
    text = str(int(value)) if isinstance(value, (int, float)) and float(value).is_integer() else str(value)
    return VOTES.get(text.strip().lower(), text)


def _pairs(rows: list[Record], m: dict[str, str], scores: dict[str, str], attributes: Sequence[str],
           problems: list[Problem]) -> list[Record]:  # fmt: skip
    pairs: dict[tuple, dict] = {}
    for record in rows:
        data, found = record.data, _context_of(record, m, (), problems)
        if found is None:
            continue
        base, context, extra = found
        sides = []
        for s in ("a", "b"):
            text = _text(data.get(m[f"text_{s}"]))
            model = _text(data.get(m[f"model_{s}"])) if f"model_{s}" in m else None
            sides.append((model or _key("r", str(text or "")), model, text))
        won = vote(data.get(m["winner"])) if "winner" in m else None
        if isinstance(won, str):
            problems.append(Problem(None, None, m["winner"], (
                f"{shown(won)} is not a vote: the first side (model_a, A, 1, A>B), the second (model_b, B, 2, B>A), "
                "a tie (tie, A=B), or empty for none"), location=record.location))  # fmt: skip
            continue
        key = (base, frozenset(s[0] for s in sides))
        pair = pairs.get(key)
        if pair is None:
            pair = pairs[key] = {"record": record, "base": base, "context": context, "sides": sides, "votes": [],
                                 "extra": extra}  # fmt: skip
        if won is not None:  # turned to the first row's sides
            pair["votes"].append(won if sides[0][0] == pair["sides"][0][0] else 1.0 - won)
    per_context = Counter(pair["base"] for pair in pairs.values())
    out = []
    for pair in pairs.values():
        a, b = pair["sides"]
        cid = (
            pair["base"]
            if per_context[pair["base"]] == 1
            else f"{pair['base']}/{' vs '.join(sorted((a[0], b[0])))}"
        )
        # in half votes, so that a side's share is the same number whichever side the first row lists it on
        halves, whole = round(2 * sum(pair["votes"])), 2 * len(pair["votes"])
        shares = (halves / whole, (whole - halves) / whole) if whole else (None, None)
        # a side is known by its model where the rows name one (whichever side a row lists it on), else as the first
        # row lists it (A, B)
        candidates = [
            {"candidate_id": f"{cid}:{side[1] if a[1] and b[1] and a[1] != b[1] else name}", "system": side[1],
             "text": side[2], "scores": {} if won is None else dict.fromkeys(attributes, won)}
            for name, side, won in zip("AB", (a, b), shares, strict=True)
        ]  # fmt: skip
        data = {**pair["extra"], "context_id": cid, "context": pair["context"], "candidates": candidates}
        out.append(Record(pair["record"].location, data))
    return out
