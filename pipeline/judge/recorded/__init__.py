"""Verdicts a judge gave elsewhere as a judge backend (``judge.backend=recorded``; ``judge=recorded``): a judge
benchmark's released verdicts, a reward model's scores, AlpacaEval's annotations, a provider's batch output, another
team's run. Built as a plugin is: this package, its entry point (``pyproject.toml``) and its page
(``docs/judge_benchmarks.md``).

``judge.model`` is the file (:mod:`.layout`: this project's verdict layout, one line per ordering, or JudgeBench's
released layouts as they are); the judge's name is ``judge.name``, else the one the file gives, else its file name.
Each prompt (a context, the candidate shown first, the one shown second) is answered from the file by its key, on the
driver (:mod:`.answers`): no engine starts and nothing else is asked; the file is checked against the run before
anything runs (``judge.engine.match``: ``exact`` refuses a file that lacks a prompt of the run or names ids its data
does not hold; ``partial`` leaves the pairs it lacks out, counted and reported). From there a recorded judge is a
judge like any other: its judgments, comparisons, scores, card, leaderboards and meta-evaluation, alone or in a jury
beside other recorded or live judges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path

from pipeline.config.backends import BackendEntry, Trait
from pipeline.config.judging import JudgeConfig
from pipeline.contracts.errors import ModelError
from pipeline.judge.spec import JudgeSpec

MATCHES = ("exact", "partial")


@dataclass(frozen=True)
class RecordedSettings:
    """The recorded backend's settings (``judge.engine``): ``match`` says how the file must answer the run: ``exact``
    (every prompt answered, every id in the data) or ``partial`` (the pairs it lacks left out, its answers for other
    contexts not read; both counted and reported)."""

    match: str = "exact"


def recorded_problems(judge: JudgeConfig, key: str) -> list[str]:
    """A recorded judge's config: its file, its ``match``, and no engine placement it would ignore."""
    problems = []
    settings = {f.name: judge.engine.get(f.name, f.default) for f in fields(RecordedSettings)}
    if settings["match"] not in MATCHES:
        problems.append(
            f"config {key}.engine.match={settings['match']!r} must be one of {', '.join(MATCHES)}"
        )
    path = Path(str(judge.model)).expanduser()
    if not path.is_file():
        problems.append(
            f"config {key}.model={judge.model}: a recorded judge's model is its file of verdicts (a .jsonl file, "
            "docs/judge_benchmarks.md), and there is no such file"
        )
    return problems


def judge_name(path: Path, given: str | None) -> str:
    """The judge's name from its file: the name the file gives (a model id's last part; a name that has none, such as
    ``/``, is not one), else the file's name, where
    JudgeBench's (``<judge>:<org>_<model>.jsonl``, ``...,judge_model=<org>_<model>.jsonl``) gives the model's."""
    last = given.rstrip("/").rsplit("/", 1)[-1] if given else ""
    if last.strip():
        return last
    stem = path.stem
    model = re.split(r"judge_model=|:", stem)[-1] if re.search(r"judge_model=|:", stem) else None
    if model is None:
        return stem
    return model.split("_", 1)[1] if "_" in model else model  # a hub id's "/" is written "_" there


def resolve(cfg: JudgeConfig, cache_dir: Path, key: str = "judge.model") -> JudgeSpec:
    """The recorded judge: its file read and checked whole (a file that cannot be read as written is refused here,
    before anything runs), its name, its settings and the file's digest (a changed file is another judge)."""
    from pipeline.judge.recorded.answers import describe
    from pipeline.judge.recorded.layout import read_verdicts

    path = Path(str(cfg.model)).expanduser()
    if not path.is_file():
        raise ModelError(f"config {key}={cfg.model}: no such file of verdicts")
    path = path.resolve()
    verdicts = read_verdicts(path)
    settings = RecordedSettings(**cfg.engine)
    name = cfg.name or judge_name(path, verdicts.judge)
    return JudgeSpec(
        backend=cfg.backend,
        model=cfg.model,
        model_path=str(path),
        name=name,
        max_model_len=cfg.max_model_len,
        engine={"match": settings.match, "layout": verdicts.layout, "sha256": verdicts.sha256},
        dtype_reason=f"verdicts recorded in {path.name}: {describe(verdicts)}",
    )


RECORDED = BackendEntry(
    name="recorded",
    traits=Trait(0),
    engine="",
    resolve="pipeline.judge.recorded:resolve",
    answers="pipeline.judge.recorded.answers:RecordedAnswers",
    settings=RecordedSettings,
    checks=recorded_problems,
    runs="nowhere: the driver answers each prompt by its key from the file of verdicts (judge.model)",
    summary="verdicts a judge gave elsewhere, from a file (judge benchmarks' released verdicts, reward models' "
    "scores, annotations)",
)
