"""A file of verdicts that a judge gave elsewhere, read and checked line by line (``judge.backend=recorded``).

Three layouts, told apart by the first line's fields; every line of a file is of one layout.

**The verdict layout** (this project's, one line per ordering of a pair)::

    {"context_id": "q17", "first": "q17:A", "second": "q17:B", "verdict": "first"}
    {"context_id": "q17", "first": "q17:B", "second": "q17:A", "p_first": 0.31}
    {"context_id": "q17", "first": "q17:A", "second": "q17:B", "scores": [2.5, -0.75]}

``first`` is the candidate shown first (in slot A), ``second`` the one shown second; each line gives exactly one
of ``verdict`` (``"first"``, ``"second"``, ``"tie"``, or ``null``: the judge gave none), ``p_first`` (the
probability that the first wins, in [0, 1]) or ``scores`` (a reward model's score of each candidate, in the order
shown). ``attribute`` and ``template`` (optional) say what was judged and with which of the run's prompt templates
(a line without one answers every attribute, every template); ``judge`` (optional) names the judge, the same on
every line. Other fields are not read (counted).

**JudgeBench's released verdicts**, as ``../shared/datasets/judgebench/recorded/`` holds them (one line per pair
and ordering)::

    {"pair_id": "e302...", "order": "AB", "decision": "A>B", "scores": [19.875, 19.5]}

and as the authors' repository writes them (one line per pair, ``judgments`` in the orders AB and BA)::

    {"pair_id": "e302...", "judgments": [{"decision": "A>B", "judgment": {"judge_model": "...", ...}}, {...}]}

In order ``AB`` response A (``<pair_id>:A``) was shown first; in ``BA`` response B was. The decision names the
responses by the positions they were shown in: ``A>B`` prefers the first shown, ``B>A`` the second, ``A=B`` is a
tie, ``null`` (or a judgment that is ``null``) no verdict. Where a line has ``scores`` (a reward model), they decide
and the decision beside them must agree with them (where they differ).

Every problem of a file is collected and refused at once (:class:`VerdictFileError`), each naming the file, the
line and the field: a line that is not JSON, a missing or wrong field, a verdict that is not one, a probability
outside [0, 1] or a score that is not a finite number, a judge name that changes, two lines for one ordering.

A line is read within the limits a server's reply is (:mod:`pipeline.judge.endpoint.parse`: at most
:data:`~pipeline.judge.endpoint.parse.MAX_BYTES`, nesting, digits, no lone surrogate), as UTF-8 (a byte that is
not is refused by kind, with its place), with ids and names of at most
:data:`~pipeline.contracts.values.MAX_ID_CHARS` characters; every problem is counted, the first
:data:`~pipeline.contracts.errors.MAX_LISTED` kept with values cut short, so reading a file of bad lines takes memory
bounded by what it holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.contracts.errors import MAX_LISTED, UserError
from pipeline.contracts.values import finite_number, identifier, shown
from pipeline.judge.endpoint.parse import MAX_BYTES, parse_json
from pipeline.judge.endpoint.replies import Refused

# The verdict words of the verdict layout (None: the judge gave no verdict).
VERDICTS = ("first", "second", "tie")
# JudgeBench's decisions, by the positions shown (``A>>B`` and ``B>>A``: arena-hard's strong verdicts).
DECISIONS = {"A>B": "first", "A>>B": "first", "B>A": "second", "B>>A": "second", "A=B": "tie"}
# The fields of the verdict layout; the answer is exactly one of ANSWER_FIELDS.
KEY_FIELDS = ("context_id", "first", "second")
ANSWER_FIELDS = ("verdict", "p_first", "scores")
OPTIONAL_FIELDS = ("attribute", "template", "judge")
# A JudgeBench order: which response is shown first.
ORDERS = {"AB": ("A", "B"), "BA": ("B", "A")}

# (context, the candidate shown first, the one shown second, the attribute and the template: None for every one)
Key = tuple[str, str, str, "str | None", "str | None"]


@dataclass(frozen=True)
class Verdict:
    """One ordering's answer: a verdict (``first``, ``second``, ``tie``; None: none given), or the probability that
    the first candidate wins, or a reward model's two scores; and the line it is on."""

    line: int
    verdict: str | None = None
    p_first: float | None = None
    scores: tuple[float, float] | None = None

    @property
    def kind(self) -> str:
        if self.scores is not None:
            return "scores"
        return "probability" if self.p_first is not None else "verdict"


@dataclass(frozen=True)
class Verdicts:
    """A file's verdicts by key (context, first, second, attribute, template), its layout, the judge's name it gives (None:
    none), its digest, and the fields it has that are not read (with the lines that have them)."""

    path: Path
    layout: str
    answers: Mapping[Key, Verdict]
    sha256: str
    judge: str | None = None
    lines: int = 0
    unread: Mapping[str, int] = field(default_factory=dict)

    def kinds(self) -> dict[str, int]:
        """How many answers are verdicts, probabilities and scores."""
        out: dict[str, int] = {}
        for verdict in self.answers.values():
            out[verdict.kind] = out.get(verdict.kind, 0) + 1
        return out


class VerdictFileError(UserError, ValueError):
    """A file of verdicts that cannot be read as written: every problem, each naming the file, the line and the
    field (the first :data:`MAX_LISTED` in the message)."""

    def __init__(
        self, path: Path, problems: list[str], what: str = "problem(s) in the verdict file", count: int = 0
    ):
        self.path, self.problems = path, list(problems)
        count = max(count, len(self.problems))
        lines = [f"  - {p}" for p in self.problems[:MAX_LISTED]]
        if count > MAX_LISTED:
            lines.append(f"  ... and {count - MAX_LISTED} more")
        super().__init__(f"{count} {what} {path}:\n" + "\n".join(lines))


def digest(path: Path) -> str:
    """The file's SHA-256 (part of the judge's identity: a changed file is another judge)."""
    sha = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def read_verdicts(path: Path) -> Verdicts:
    """The verdicts of ``path`` (module docstring), or a :class:`VerdictFileError` listing every problem."""
    reader = Reader(path)
    for lineno, data in reader.lines():
        reader.read(lineno, data)
    return reader.finish()


class Reader:
    """The checks of one file, line by line: what it answers, what is wrong with it."""

    def __init__(self, path: Path):
        self.path = path
        self.problems: list[str] = []  # the first MAX_LISTED
        self.n_problems = 0
        self.answers: dict[Key, Verdict] = {}
        # (context, first, second) -> (attribute, template) (None: every one) -> its answer
        self.orderings: dict[tuple[str, str, str], dict[tuple[str | None, str | None], Verdict]] = {}
        self.layout: str | None = None
        self.judge: str | None = None
        self.judge_line = 0
        self.count = 0
        self.unread: dict[str, int] = {}

    def problem(self, lineno: int, name: str | None, message: str) -> None:
        self.n_problems += 1
        if len(self.problems) < MAX_LISTED:
            where = f"line {lineno}" + (f", field {shown(name)}" if name else "")
            self.problems.append(f"{where}: {message[:300]}")

    def lines(self) -> Iterator[tuple[int, Any]]:
        """Every line that is not blank, parsed within the limits (module docstring; a line beyond them is a
        problem)."""
        with self.path.open("rb") as fh:
            lineno = 0
            while raw := fh.readline(MAX_BYTES + 1):
                lineno += 1
                if len(raw) > MAX_BYTES and not raw.endswith(b"\n"):
                    while (rest := fh.readline(1 << 20)) and not rest.endswith(b"\n"):
                        pass  # the rest of the line, unread
                    self.problem(lineno, None, f"is longer than {MAX_BYTES} bytes")
                    continue
                try:
                    text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    self.problem(
                        lineno, None, f"is not UTF-8 text (byte {raw[exc.start]:#04x} at {exc.start})"
                    )
                    continue
                if not text.strip():
                    continue
                try:
                    yield lineno, parse_json(text)
                except Refused as exc:
                    self.problem(
                        lineno, None, f"is not valid JSON within the limits ({exc.kind}: {exc.detail})"
                    )

    def read(self, lineno: int, data: Any) -> None:
        """One line: its layout (the first line's decides), then its answers."""
        self.count += 1
        if not isinstance(data, dict):
            self.problem(lineno, None, f"is not a JSON object: {type(data).__name__}")
            return
        layout = layout_of(data)
        if self.layout is None:
            if layout is None:
                self.problem(
                    lineno,
                    None,
                    "is neither the verdict layout (context_id, first, second, and one of verdict, p_first, scores) "
                    "nor JudgeBench's (pair_id with order and decision, or with judgments)",
                )
                return
            self.layout = layout
        if layout != self.layout:
            self.problem(lineno, None, f"is not in the file's layout ({self.layout}, from its first line)")
            return
        if layout == "verdicts":
            self.verdict_line(lineno, data)
        elif layout == "judgebench":
            self.judgebench_line(lineno, data)
        else:
            self.judgebench_pair(lineno, data)

    # --- the verdict layout ----------------------------------------------------------------------------------
    def verdict_line(self, lineno: int, data: dict) -> None:
        ids = [identifier(data.get(name)) for name in KEY_FIELDS]
        for name, value in zip(KEY_FIELDS, ids, strict=True):
            if value is None:
                self.problem(lineno, name, f"missing or not an id: {shown(data.get(name))}")
        scope = []
        for name in ("attribute", "template"):
            value = data.get(name)
            if value is not None and not (isinstance(value, str) and value.strip()):
                self.problem(lineno, name, f"not the name of an {name}: {shown(value)}")
                return
            scope.append(value)
        self.judge_name(lineno, data.get("judge"), "judge")
        for name in data:
            if name not in (*KEY_FIELDS, *ANSWER_FIELDS, *OPTIONAL_FIELDS):
                self.unread[name] = self.unread.get(name, 0) + 1
        given = [name for name in ANSWER_FIELDS if name in data]
        if len(given) != 1:
            self.problem(
                lineno,
                None,
                f"gives {given or 'none'} of {list(ANSWER_FIELDS)}: give exactly one (a verdict, the probability "
                "that the first wins, or a reward model's scores)",
            )
            return
        verdict = self.answer(lineno, given[0], data[given[0]])
        if verdict is not None and None not in ids:
            context, first, second = ids
            self.add(lineno, (context, first, second, *scope), verdict)  # type: ignore[arg-type]

    def answer(self, lineno: int, name: str, value: Any) -> Verdict | None:
        """The answer of field ``name`` of the verdict layout, or None (a problem noted)."""
        if name == "verdict":
            if value is not None and value not in VERDICTS:
                self.problem(
                    lineno, name, f"{shown(value)} is not a verdict: one of {list(VERDICTS)} or null (none)"
                )
                return None
            return Verdict(lineno, verdict=value)
        if name == "p_first":
            p = finite_number(value)
            if p is None or not 0 <= p <= 1:
                self.problem(lineno, name, f"{shown(value)} is not a probability (a number in [0, 1])")
                return None
            return Verdict(lineno, p_first=p)
        scores = self.scores(lineno, value)
        return Verdict(lineno, scores=scores) if scores is not None else None

    def scores(self, lineno: int, value: Any) -> tuple[float, float] | None:
        numbers = [finite_number(v) for v in value] if isinstance(value, list) else []
        if len(numbers) != 2 or None in numbers:
            self.problem(
                lineno,
                "scores",
                f"{shown(value)} is not two finite numbers (the score of the candidate shown first, then the second's)",
            )
            return None
        return numbers[0], numbers[1]  # type: ignore[return-value]

    # --- JudgeBench's layouts -------------------------------------------------------------------------------
    def judgebench_line(self, lineno: int, data: dict) -> None:
        """``{pair_id, order, decision, scores?}``: one ordering of a pair."""
        pair = identifier(data.get("pair_id"))
        order = data.get("order")
        if pair is None:
            self.problem(lineno, "pair_id", f"missing or not an id: {shown(data.get('pair_id'))}")
        if order not in ORDERS:
            self.problem(lineno, "order", f"{shown(order)} is not an order: AB or BA")
        verdict = self.decision(lineno, data, "decision", "scores")
        if pair is not None and order in ORDERS and verdict is not None:
            first, second = ORDERS[order]
            self.add(lineno, (pair, f"{pair}:{first}", f"{pair}:{second}", None, None), verdict)

    def judgebench_pair(self, lineno: int, data: dict) -> None:
        """``{pair_id, judgments: [AB, BA]}``: both orderings of a pair, as the authors' repository writes them."""
        pair = identifier(data.get("pair_id"))
        judgments = data.get("judgments")
        if pair is None:
            self.problem(lineno, "pair_id", f"missing or not an id: {shown(data.get('pair_id'))}")
        if not isinstance(judgments, list) or not 1 <= len(judgments) <= 2:
            self.problem(lineno, "judgments", "not a list of one or two judgments (the orders AB, then BA)")
            return
        for k, (judgment, order) in enumerate(zip(judgments, ORDERS, strict=False)):
            name = f"judgments[{k}]"
            if judgment is None:  # the judge's call failed: no verdict (JudgeBench counts it as none)
                verdict: Verdict | None = Verdict(lineno)
            elif not isinstance(judgment, dict):
                self.problem(lineno, name, "not a judgment object (or null)")
                continue
            else:
                inner = judgment.get("judgment")
                inner = inner if isinstance(inner, dict) else {}
                self.judge_name(lineno, inner.get("judge_model"), f"{name}.judgment.judge_model")
                merged = {
                    "decision": judgment.get("decision"),
                    **({"scores": inner["scores"]} if "scores" in inner else {}),
                }
                verdict = self.decision(lineno, merged, f"{name}.decision", f"{name}.judgment.scores")
            if pair is not None and verdict is not None:
                first, second = ORDERS[order]
                self.add(lineno, (pair, f"{pair}:{first}", f"{pair}:{second}", None, None), verdict)

    def decision(self, lineno: int, data: dict, name: str, scores_name: str) -> Verdict | None:
        """A JudgeBench decision, or the scores beside it (which decide, and must agree with it where they
        differ)."""
        decision = data.get("decision")
        if decision is not None and decision not in DECISIONS:
            self.problem(
                lineno, name, f"{shown(decision)} is not a decision: one of {list(DECISIONS)} or null (none)"
            )
            return None
        said = DECISIONS.get(decision) if decision is not None else None
        if data.get("scores") is None:
            return Verdict(lineno, verdict=said)
        scores = self.scores(lineno, data["scores"])
        if scores is None:
            return None
        better = "first" if scores[0] > scores[1] else "second" if scores[0] < scores[1] else None
        if said is not None and better is not None and said != better:
            self.problem(
                lineno,
                name,
                f"{decision!r} prefers the {said} shown, but the scores {list(scores)} prefer the {better}",
            )
            return None
        return Verdict(lineno, scores=scores)

    # --- what every layout shares -------------------------------------------------------------------------
    def judge_name(self, lineno: int, value: Any, name: str) -> None:
        """The judge a line names: the same on every line that names one."""
        if value is None:
            return
        if (
            identifier(value) is None
            or not isinstance(value, str)
            or not value.rstrip("/").rsplit("/", 1)[-1].strip()
        ):
            self.problem(lineno, name, f"not a judge's name: {shown(value)}")
        elif self.judge is None:
            self.judge, self.judge_line = value, lineno
        elif value != self.judge:
            self.problem(
                lineno,
                name,
                f"names judge {shown(value)}, but line {self.judge_line} names {shown(self.judge)}",
            )

    def add(self, lineno: int, key: Key, verdict: Verdict) -> None:
        """Keep an ordering's answer; a second one for it is a problem (a line for every attribute or template and
        one for an attribute or template answer the same prompt)."""
        context, first, second, attribute, template = key
        if first == second:
            self.problem(lineno, "second", f"is the candidate shown first too ({first!r})")
            return
        given = self.orderings.setdefault((context, first, second), {})
        clash = next(
            (v for (a, t), v in given.items() if _overlap(a, attribute) and _overlap(t, template)), None
        )
        if clash is not None:
            what = ", ".join(
                f"{name} {value!r}" if value is not None else f"every {name}"
                for name, value in (("attribute", attribute), ("template", template))
            )
            self.problem(
                lineno,
                None,
                f"a second answer for context {context!r} with {first!r} shown first and {second!r} second ({what}); "
                f"line {clash.line} answers it already",
            )
            return
        given[(attribute, template)] = verdict
        self.answers[key] = verdict

    def finish(self) -> Verdicts:
        if not self.count and not self.problems:
            self.problem(0, None, "holds no verdicts")
            self.problems[-1] = "holds no verdicts"
        if self.problems:
            raise VerdictFileError(self.path, self.problems, count=self.n_problems)
        assert self.layout is not None
        return Verdicts(
            self.path,
            self.layout,
            dict(self.answers),
            digest(self.path),
            self.judge,
            self.count,
            dict(self.unread),
        )


def layout_of(data: Mapping[str, Any]) -> str | None:
    """The layout a line is in: ``verdicts``, ``judgebench`` (one ordering a line) or ``judgebench_pairs`` (one
    pair a line); None: none of them."""
    if "context_id" in data:
        return "verdicts"
    if "pair_id" in data and "judgments" in data:
        return "judgebench_pairs"
    if "pair_id" in data:
        return "judgebench"
    return None


def _overlap(a: str | None, b: str | None) -> bool:
    """Whether two lines' scopes (an attribute or a template; None: every one) answer a prompt in common."""
    return a is None or b is None or a == b
