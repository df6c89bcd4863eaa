"""The judge backends, each registered once with what it can do: the one place a backend's name is looked at.

A :class:`BackendEntry` says where a backend's engine and its resolver are (``module:attr`` strings, imported only
where they run: the engine on its worker, the resolver on the driver; so nothing that imports this module imports an
engine's heavy dependencies), the checks of a judge config that names it, and what it supports: label-word
log-probabilities, prompts as token ids, a prefilled answer, sampled verdicts, batch jobs, generation, whether it
answers behind an endpoint (``judge.endpoint``: address, key, prices, reply cache, batch jobs) or computes on this
machine, and where its engine runs. The rest of the package reads these instead of comparing names.

Every backend, the built-in ones included, is registered by the entry point group
``llm_comparative_assessment.backends`` (the Python packaging convention); an entry point names a
:class:`BackendEntry` or a function returning one, e.g. in a plugin's ``pyproject.toml``::

    [project.entry-points."llm_comparative_assessment.backends"]
    my_provider = "my_provider:BACKEND"

Entry points are loaded once, the first time the registry is read (:func:`backends`), as every registry's are
(:mod:`pipeline.registry`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import Flag, auto
from typing import TYPE_CHECKING, Any

from pipeline.registry import Registry, load

if TYPE_CHECKING:
    from pipeline.config.judging import GeneratorConfig, JudgeConfig

ENTRY_POINTS = "llm_comparative_assessment.backends"

Check = Callable[["JudgeConfig", str], list[str]]


class Trait(Flag):
    """What a judge backend can do, and where it answers: declared once, in its :class:`BackendEntry`."""

    # it answers behind an endpoint configured by ``judge.endpoint`` (its replies kept in the reply cache, not in the
    # judgement store; token prices; batch jobs); without it, it computes on this machine
    ENDPOINT = auto()
    # it reads label-word log-probabilities from the first generated token
    LOGPROBS = auto()
    # it takes prompts as token ids
    TOKEN_IDS = auto()
    # it can continue a prefilled answer (reasoning before the verdict)
    PREFILL = auto()
    # it can sample verdicts and count their words
    SAMPLED = auto()
    # it has batch jobs at a batch price
    BATCH = auto()
    # it can generate candidates (and give its reasons)
    GENERATION = auto()
    # it can rate a candidate on its own (``absolute.modes``)
    ABSOLUTE = auto()
    # its CPU engine may run inside the judge worker's process, whose environment (threads bound, OpenMP
    # preloaded) is set as the process starts (:func:`pipeline.judge.vllm.cores.worker_process_env`)
    WORKER_ENV = auto()
    # a model on this machine that reads log-probabilities of text prompts, prefills, generates and rates (the
    # default of an entry that declares none)
    LOCAL = LOGPROBS | PREFILL | GENERATION | ABSOLUTE

    @classmethod
    def names(cls, traits: Trait) -> list[str]:
        """The single traits in ``traits``, lower-case, in declaration order (``make stages``, messages)."""
        return [str(t.name).lower() for t in cls if t in traits]


@dataclass(frozen=True)
class BackendEntry:
    """A judge backend and what it can do.

    - ``engine``: ``module:attr`` of its engine (a class or function taking a :class:`pipeline.judge.spec.JudgeSpec`,
      giving a :class:`pipeline.contracts.engine.Engine`), imported where the engine runs; empty for a backend that
      ``answers`` by key;
    - ``answers``: ``module:attr`` of a class taking ``(spec, labels)`` whose instance answers every prompt by its key
      on the driver (:class:`pipeline.contracts.engine.KeyedAnswers`: recorded verdicts), checked against the run
      before anything runs; no engine starts, and a prompt's text is never read (its prompts are settled without a
      tokenizer and their lengths are not checked); empty: an engine answers;
    - ``resolve``: ``module:attr`` of ``f(judge_config, cache_dir, key) -> JudgeSpec`` (the model located, the
      settings the engine takes), run on the driver;
    - ``settings``: the dataclass its ``judge.engine`` mapping is read into (a key that is not one of its fields is
      refused, naming them); None: a mapping the backend checks itself (vLLM's, against ``vllm.EngineArgs``);
    - ``checks``: what is wrong with a judge config of this backend (messages naming ``key``, the config key of the
      judge: ``judge`` or ``jury.judges[k]``); run with every config check;
    - ``traits``: what it can do and where it answers (:class:`Trait`, e.g.
      ``Trait.LOGPROBS | Trait.TOKEN_IDS | Trait.ABSOLUTE``), read as ``Trait.X in entry.traits``;
    - ``runs``: where its engine runs and what processes it has, in words (``make stages``, the docs);
    - ``rate``: ``(start seconds, prompts a second)`` of its engine where this machine has not measured it, with the
      words saying where the numbers come from: ``make check``'s estimate of a run's time (None: not estimated).
    """

    name: str
    engine: str
    resolve: str
    answers: str = ""
    settings: type | None = None
    checks: Check | None = None
    traits: Trait = Trait.LOCAL
    runs: str = ""
    summary: str = ""
    rate: tuple[float, float, str] | None = None

    def problems(self, judge: JudgeConfig, key: str) -> list[str]:
        """What is wrong with ``judge`` (at ``key``) for this backend: settings it does not take, then its checks."""
        problems = []
        if self.settings is not None:
            known = [f.name for f in fields(self.settings)]
            extra = sorted(set(judge.engine) - set(known))
            if extra:
                problems.append(
                    f"config {key}.engine has {extra}, which the {self.name} backend does not take (it takes "
                    f"{', '.join(known) or 'none'})"
                )
        return problems + (list(self.checks(judge, key)) if self.checks is not None else [])

    def engine_factory(self) -> Callable[..., Any]:
        """The engine's class or factory (imported now)."""
        if not self.engine:
            raise RuntimeError(
                f"backend {self.name} has no engine: it answers every prompt by its key on the driver ({self.answers})"
            )
        return load(self.engine, f"backend {self.name}'s engine")

    def answerer(self) -> Callable[..., Any]:
        """The class whose instance answers by key (imported now): ``answerer()(spec, labels)``."""
        if not self.answers:
            raise RuntimeError(f"backend {self.name} answers with an engine, not by key")
        return load(self.answers, f"backend {self.name}'s answers")

    def resolver(self) -> Callable[..., Any]:
        """The resolver (imported now)."""
        return load(self.resolve, f"backend {self.name}'s resolver")


REGISTRY: Registry[BackendEntry] = Registry(ENTRY_POINTS, BackendEntry, "judge backend")


def register(entry: BackendEntry) -> BackendEntry:
    """Add a backend (a test's; a package registers its own by the entry point)."""
    return REGISTRY.register(entry)


def backends() -> dict[str, BackendEntry]:
    """Every registered backend by name, the package's own first."""
    found = REGISTRY.all()
    if not found:
        raise RuntimeError(
            f"no judge backend is registered (entry point group {ENTRY_POINTS}): the package is not installed; "
            "install it (`make install`, or `pip install -e .`)"
        )
    return found


def backend(name: object) -> BackendEntry:
    """The registered backend ``name``; an unknown name lists the valid ones."""
    backends()
    return REGISTRY.get(name)


# A generator with an endpoint of its own (``generate.models[k].endpoint``) and no backend named is asked through this one
# (OpenAI's wire format, the one most servers speak).
DEFAULT_ENDPOINT = "api"


def generator_backend(generator: GeneratorConfig, judge: JudgeConfig) -> BackendEntry:
    """The backend a generator runs on: the one it names (``generate.models[k].backend``); else, with an endpoint of
    its own (``api``), :data:`DEFAULT_ENDPOINT`; else in-process on the judge's backend, or on the default backend
    when the judge's cannot generate on this machine (an endpoint serves the judge's model, not the generator's)."""
    from pipeline.config.judging import JudgeConfig

    if generator.backend is not None:
        return backend(generator.backend)
    if generator.endpoint is not None:
        return backend(DEFAULT_ENDPOINT)
    entry = backend(judge.backend)
    if Trait.ENDPOINT in entry.traits or Trait.GENERATION not in entry.traits or not entry.engine:
        return backend(JudgeConfig().backend)
    return entry
