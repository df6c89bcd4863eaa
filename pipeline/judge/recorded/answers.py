"""A recorded judge's answers, given on the driver by each prompt's key (:class:`RecordedAnswers`).

Before anything is judged, :meth:`RecordedAnswers.check` checks the file against the run: the ids it names that
the data does not hold, and the prompts of the run it has no answer for. With ``judge.engine.match=exact`` (the
default) either is refused, naming the file, the line or the prompts (how many, the first few by context and
candidate); with ``match=partial`` the prompts it lacks are left out (returned: the run counts and reports them) and
its lines for contexts the data does not hold are not read (counted). A candidate it names in a context the data holds
but which is not one of that context's candidates is refused either way: the file is not of this data.

Then the judge stage's front (:class:`pipeline.runtime.Front`) answers every prompt from the file: a verdict as one
sampled verdict (:mod:`pipeline.methods.verdicts.sampled`: ``first`` says the A label, ``second`` the B label,
``tie`` the tie label, or no label where the template has none, ``null`` no label), a probability or a reward
model's scores as the label words' log-probabilities (:mod:`pipeline.methods.verdicts.given`). Nothing is asked of an
engine; nothing is stored beside the run folder's judgments (the file is the store).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import pyarrow as pa

from pipeline.contracts.engine import Coverage, Result
from pipeline.contracts.errors import UserError
from pipeline.contracts.keys import COMPARE, PROMPT_KEY
from pipeline.judge.hosting.worker import responses
from pipeline.judge.recorded.layout import Verdict, VerdictFileError, Verdicts, digest, read_verdicts
from pipeline.judge.spec import JudgeSpec
from pipeline.methods.verdicts.given import probability_logprobs, score_logprobs
from pipeline.methods.verdicts.sampled import sampled_logprobs
from pipeline.prompts.labels import Labels

# Where the answers came from (RESPONSES.source): the file of verdicts.
SOURCE = "recorded"
# The prompts named in a refusal.
SHOWN = 5


class RecordedError(UserError, ValueError):
    """A file of verdicts that does not answer the run as ``judge.engine.match`` requires."""


@lru_cache(maxsize=16)
def _read(path: str, sha256: str) -> Verdicts:
    return read_verdicts(Path(path))


def verdicts_of(spec: JudgeSpec) -> Verdicts:
    """The file's verdicts (read once per process and digest), refused if the file changed since it was resolved."""
    path = Path(spec.model_path)
    if not path.is_file():
        raise RecordedError(f"judge {spec.name}: the verdict file {path} is gone")
    now = digest(path)
    if now != spec.engine.get("sha256"):
        raise RecordedError(
            f"judge {spec.name}: the verdict file {path} changed since the run started (sha256 {now[:12]}, was "
            f"{str(spec.engine.get('sha256'))[:12]}); run again"
        )
    return _read(str(path), now)


class RecordedAnswers:
    """The recorded judge ``spec``'s answers to the run's prompts, with the plan's label words ``labels``."""

    def __init__(self, spec: JudgeSpec, labels: Labels):
        self.spec = spec
        self.labels = labels
        self.verdicts = verdicts_of(spec)
        self.match = str(spec.engine.get("match", "exact"))
        self.worker = f"{SOURCE}:{Path(spec.model_path).name}"

    # --- the check before anything runs ---------------------------------------------------------------------
    def check(self, prompts: pa.Table, candidates: pa.Table) -> Coverage:
        """The run's prompts (PROMPT_KEY rows of ``prompts``) this judge leaves out, and what of the file the run does
        not use; refuses what it cannot answer as ``match`` requires (module docstring)."""
        held = _candidates_by_context(candidates)
        attributes = set(prompts.column("attribute").to_pylist())
        problems, other_contexts, other_attributes = [], 0, 0
        templates = set(prompts.column("template_id").to_pylist())
        for (context, first, second, attribute, template), verdict in self.verdicts.answers.items():
            if context not in held:
                other_contexts += 1
                if self.match == "exact":
                    problems.append(f"line {verdict.line}: context {context!r} is not in the run's data")
                continue
            wrong = [c for c in (first, second) if c not in held[context]]
            if wrong:
                problems.append(
                    f"line {verdict.line}: {', '.join(map(repr, wrong))} is not a candidate of context {context!r} "
                    f"(its candidates: {sorted(held[context])[:6]})"
                )
            elif (attribute is not None and attribute not in attributes) or (
                template is not None and template not in templates
            ):
                other_attributes += 1
        if problems:
            if other_contexts and self.match == "exact":
                problems.append(
                    "if the file covers more than this run (other contexts of the data set), set "
                    "judge.engine.match=partial (for a juror: jury.judges[k].engine.match)"
                )
            raise VerdictFileError(self.verdicts.path, problems, "id(s) the run's data does not hold in")
        lacking = self.lacking(prompts)
        if lacking.num_rows and self.match == "exact":
            raise RecordedError(self._lacking_message(lacking, prompts.num_rows))
        notes = []
        if other_contexts:
            notes.append(f"{other_contexts} answer(s) for contexts the run's data does not hold, not read")
        if other_attributes:
            notes.append(
                f"{other_attributes} answer(s) for attributes or templates the run does not judge with, not read"
            )
        if self.verdicts.unread:
            notes.append(f"fields not read: {unread_text(dict(self.verdicts.unread))}")
        counts = {
            "answers_for_other_contexts": other_contexts,
            "answers_for_other_attributes_or_templates": other_attributes,
        }
        return Coverage(lacking, tuple(notes), counts)

    def lacking(self, prompts: pa.Table) -> pa.Table:
        """The PROMPT_KEY rows of ``prompts`` the file has no answer for (an absolute prompt never has one)."""
        keep = [self.find(row) is None for row in _key_rows(prompts)]
        return prompts.select(list(PROMPT_KEY)).filter(pa.array(keep, pa.bool_()))

    def find(self, row: dict) -> Verdict | None:
        """The answer to a prompt (a PROMPT_KEY row): the line for its attribute and template, where a line without
        one answers every one (the file has at most one line that answers a prompt)."""
        if row["mode"] != COMPARE:
            return None
        answers = self.verdicts.answers
        key = (row["context_id"], row["cand_a"], row["cand_b"])
        for attribute in (row["attribute"], None):
            for template in (row["template_id"], None):
                found = answers.get((*key, attribute, template))
                if found is not None:
                    return found
        return None

    def _lacking_message(self, lacking: pa.Table, total: int) -> str:
        rows = _key_rows(lacking)
        shown = "; ".join(
            f"context {r['context_id']!r}: {r['cand_a']!r} shown first, {r['cand_b']!r} second"
            + (f" ({r['attribute']})" if r["mode"] == COMPARE else f" ({r['mode']}, an absolute prompt)")
            for r in rows[:SHOWN]
        )
        return (
            f"judge {self.spec.name}: the verdict file {self.verdicts.path} has no answer for {lacking.num_rows} of "
            f"the run's {total} prompt(s), e.g. {shown}"
            + (" ..." if len(rows) > SHOWN else "")
            + ". Give it a line for each (one per ordering of every pair), or set judge.engine.match=partial (for a "
            "juror: jury.judges[k].engine.match) to leave those pairs out, counted and reported"
        )

    # --- the front of the judge stage ------------------------------------------------------------------------
    def answer(self, batch: pa.Table) -> tuple[pa.Table | None, pa.Table]:
        """Every row of ``batch`` (PROMPTS) answered from the file (RESPONSES); nothing left for a worker."""
        results = []
        for row in _key_rows(batch):
            verdict = self.find(row)
            if verdict is None:  # the check before the run found none lacking: the run is not the one checked
                raise RecordedError(
                    f"judge {self.spec.name}: the verdict file {self.verdicts.path} has no answer for context "
                    f"{row['context_id']!r} with {row['cand_a']!r} shown first and {row['cand_b']!r} second "
                    f"({row['attribute']}, {row['template_id']})"
                )
            results.append(self.result(verdict))
        done = responses(batch, self.spec.name, results, [0.0] * batch.num_rows, self.worker)
        return done, batch.slice(0, 0)

    def result(self, verdict: Verdict) -> Result:
        """A verdict as the engine's answer: the label words' log-probabilities, and the label it says."""
        logprobs, said = answer_logprobs(verdict, self.labels)
        return Result(
            token_logprobs=logprobs,
            texts=[said],
            prompt_tokens=0,
            cached_tokens=0,
            generated_tokens=0,
            finish_reasons=["stop"],
            source=SOURCE,
        )

    def keep(self, sent: pa.Table, out: pa.Table) -> None:
        """Nothing to keep: the file is the store (and no row reaches a worker)."""

    def close(self) -> None:
        """Nothing to release."""


def answer_logprobs(verdict: Verdict, labels: Labels) -> tuple[list[float], str]:
    """The label words' log-probabilities of an answer, and the label it says (the side it favours; empty for
    none)."""
    words = [w.strip() for w in labels.words]
    n_b = len(words) - labels.n_a - labels.n_tie
    a_word, b_word = words[0], words[labels.n_a]
    if verdict.kind == "verdict":
        said = {
            "first": a_word,
            "second": b_word,
            "tie": words[-1] if labels.n_tie else "tie",
            None: "",
        }[verdict.verdict]
        return sampled_logprobs([said], labels.words, "")[0], said
    if verdict.scores is not None:
        s1, s2 = verdict.scores
        said = a_word if s1 > s2 else b_word if s1 < s2 else ""
        return score_logprobs(s1, s2, labels.n_a, n_b, labels.n_tie), said
    p = float(verdict.p_first)  # type: ignore[arg-type]
    said = a_word if p > 0.5 else b_word if p < 0.5 else ""
    return probability_logprobs(p, labels.n_a, n_b, labels.n_tie), said


def _key_rows(table: pa.Table) -> list[dict]:
    return table.select(list(PROMPT_KEY)).to_pylist()


def _candidates_by_context(candidates: pa.Table) -> dict[str, set[str]]:
    held: dict[str, set[str]] = {}
    for context, candidate in zip(
        candidates.column("context_id").to_pylist(),
        candidates.column("candidate_id").to_pylist(),
        strict=True,
    ):
        held.setdefault(context, set()).add(candidate)
    return held


def describe(verdicts: Verdicts) -> str:
    """The file in a few words (the log, judge.json)."""
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(verdicts.kinds().items()))
    return f"{len(verdicts.answers)} answers ({kinds}) in {verdicts.layout} layout"


def unread_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{name!r} on {n} line(s)" for name, n in sorted(counts.items()))


__all__: Sequence[str] = ("RecordedAnswers", "RecordedError", "answer_logprobs", "describe", "verdicts_of")
