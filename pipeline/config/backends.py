"""The judge backends, each registered once with what it can do: the one place a backend's name is looked at.

A :class:`BackendEntry` says where a backend's engine and its resolver are (``module:attr`` strings, imported only
where they run: the engine on its worker, the resolver on the driver; so nothing that imports this module imports an
engine's heavy dependencies), the checks of a judge config that names it, and what it supports: label-word
log-probabilities, prompts as token ids, a prefilled answer, sampled verdicts, batch jobs, generation, whether it
answers behind an endpoint (``judge.api``: address, key, prices, reply cache, batch jobs) or computes on this
machine, and where its engine runs. The rest of the package reads these instead of comparing names.

Every backend, the built-in ones included, is registered by the entry point group
``llm_comparative_assessment.backends`` (the Python packaging convention); an entry point names a
:class:`BackendEntry` or a function returning one, e.g. in a plugin's ``pyproject.toml``::

    [project.entry-points."llm_comparative_assessment.backends"]
    my_provider = "my_provider:BACKEND"

Entry points are loaded once, the first time the registry is read (:func:`backends`); the package's own first,
then the others by name. One that cannot be loaded, is not a :class:`BackendEntry` or reuses a name is an error
that names the entry point.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.config.judging import JudgeConfig

ENTRY_POINTS = "llm_comparative_assessment.backends"
# The distribution whose entry points are the built-in backends (listed first).
OWN_DISTRIBUTION = "llm-comparative-assessment"

Check = Callable[["JudgeConfig", str], list[str]]


@dataclass(frozen=True)
class BackendEntry:
    """A judge backend and what it can do.

    - ``engine``: ``module:attr`` of its engine (a class or function taking a :class:`pipeline.judge.spec.JudgeSpec`,
      giving a :class:`pipeline.contracts.engine.Engine`), imported where the engine runs;
    - ``resolve``: ``module:attr`` of ``f(judge_config, cache_dir, key) -> JudgeSpec`` (the model located, the
      settings the engine takes), run on the driver;
    - ``checks``: what is wrong with a judge config of this backend (messages naming ``key``, the config key of the
      judge: ``judge`` or ``jury.judges[k]``); run with every config check;
    - ``endpoint``: it answers behind an endpoint configured by ``judge.api`` (its replies kept in the reply cache,
      not in the judgement store; token prices; batch jobs); false: it computes on this machine;
    - ``logprobs``: it reads label-word log-probabilities from the first generated token; ``token_ids``: it takes
      prompts as token ids; ``prefill``: it can continue a prefilled answer (reasoning before the verdict);
      ``sampled``: it can sample verdicts and count their words; ``batch``: it has batch jobs at a batch price;
      ``generation``: it can generate candidates;
    - ``worker_env``: its CPU engine may run inside the judge worker's process, whose environment (threads bound,
      OpenMP preloaded) is set as the process starts (:func:`pipeline.judge.cores.worker_process_env`);
    - ``runs``: where its engine runs and what processes it has, in words (``make stages``, the docs).
    """

    name: str
    engine: str
    resolve: str
    checks: Check | None = None
    endpoint: bool = False
    logprobs: bool = True
    token_ids: bool = False
    prefill: bool = True
    sampled: bool = False
    batch: bool = False
    generation: bool = True
    worker_env: bool = False
    runs: str = ""
    summary: str = ""

    def problems(self, judge: JudgeConfig, key: str) -> list[str]:
        """What is wrong with ``judge`` (at ``key``) for this backend."""
        return list(self.checks(judge, key)) if self.checks is not None else []

    def engine_factory(self) -> Callable[..., Any]:
        """The engine's class or factory (imported now)."""
        return load(self.engine, f"backend {self.name}'s engine")

    def resolver(self) -> Callable[..., Any]:
        """The resolver (imported now)."""
        return load(self.resolve, f"backend {self.name}'s resolver")


def load(target: str, what: str) -> Any:
    """The object ``module:attr`` names; an error naming ``what`` when it is not there."""
    module, _, attr = target.partition(":")
    try:
        found: Any = importlib.import_module(module)
        for part in attr.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise RuntimeError(f"{what} ({target}) could not be loaded: {exc}") from exc
    return found


@dataclass
class _Registry:
    entries: dict[str, BackendEntry] = field(default_factory=dict)
    loaded: bool = False

    def load(self) -> dict[str, BackendEntry]:
        if not self.loaded:
            self.loaded = True
            for entry in _entry_points():
                register(entry)
            if not self.entries:
                raise RuntimeError(
                    f"no judge backend is registered (entry point group {ENTRY_POINTS}): the package is not "
                    "installed; install it (`make install`, or `pip install -e .`)"
                )
        return self.entries


_REGISTRY = _Registry()


def register(entry: BackendEntry) -> BackendEntry:
    """Add a backend (an entry point's, or a test's); a name already registered is refused."""
    if not isinstance(entry, BackendEntry):
        raise TypeError(f"a judge backend is registered as a BackendEntry, not a {type(entry).__name__}")
    if entry.name in _REGISTRY.entries:
        raise ValueError(f"judge backend {entry.name!r} is registered twice")
    _REGISTRY.entries[entry.name] = entry
    return entry


def _entry_points() -> Iterator[BackendEntry]:
    from importlib.metadata import entry_points

    def order(point: Any) -> tuple[int, str]:  # the package's own first, then the others; by name
        own = getattr(getattr(point, "dist", None), "name", None) == OWN_DISTRIBUTION
        return (0 if own else 1, point.name)

    for point in sorted(entry_points(group=ENTRY_POINTS), key=order):
        try:
            loaded = point.load()
            entry = loaded() if callable(loaded) and not isinstance(loaded, BackendEntry) else loaded
        except Exception as exc:
            raise RuntimeError(
                f"judge backend plugin {point.name} ({point.value}) could not be loaded: {exc}"
            ) from exc
        if not isinstance(entry, BackendEntry) or entry.name != point.name:
            raise RuntimeError(
                f"judge backend plugin {point.name} ({point.value}) must name a BackendEntry called {point.name!r}"
            )
        yield entry


def backends() -> dict[str, BackendEntry]:
    """Every registered backend by name, the package's own first."""
    return _REGISTRY.load()


def backend(name: object) -> BackendEntry:
    """The registered backend ``name``; an unknown name lists the valid ones."""
    try:
        return backends()[str(name)]
    except KeyError:
        raise ValueError(f"unknown judge backend {name!r}; valid: {', '.join(backends())}") from None
