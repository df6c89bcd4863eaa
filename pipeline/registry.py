"""The registries' loader: entries from entry points, what every registry of the package shares.

Entry points are the Python packaging convention. The registries are the scorers'
(:mod:`pipeline.methods.scorers.registry`), the judge backends' and the stages' from outside (:mod:`pipeline.config`).
A module of its own at the bottom floor, below the maths, so that each of them can use it.

Each entry point of a registry's group names an entry (an instance of the registry's entry class, whose ``name`` is
the entry point's name) or a function returning one. The entry points are loaded once, the first time the registry
is read: the package's own first (its built-ins, registered the same way as a plugin's), then the others; by name.
One that cannot be loaded (whatever its import raises, ``sys.exit`` too), is not an entry of the registry's class,
is named otherwise or reuses a name (a built-in's, say) is left out, with a warning naming its entry point, and
asking for it by name gives that message: the rest of the registry stays usable.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

log = logging.getLogger(__name__)

# The distribution whose entry points are the built-ins (listed first).
OWN_DISTRIBUTION = "llm-comparative-assessment"


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


def load(target: str, what: str) -> Any:
    """The object ``module:attr`` names (``attr`` may be dotted); an error naming ``what`` when it is not there."""
    module, _, attr = target.partition(":")
    try:
        found: Any = importlib.import_module(module)
        for part in filter(None, attr.split(".")):
            found = getattr(found, part)
    except (
        Exception,
        SystemExit,
    ) as exc:  # whatever its import raises (a sys.exit too): named, never escaping
        raise RuntimeError(f"{what} ({target}) could not be loaded: {type(exc).__name__}: {exc}") from exc
    return found


class Registry(Generic[T]):
    """Entries of one kind by name, from the entry point ``group``; ``what`` names the kind in messages."""

    def __init__(self, group: str, kind: type[T], what: str):
        self.group, self.kind, self.what = group, kind, what
        self.entries: dict[str, T] = {}
        # plugins that could not be loaded or registered: their name -> what went wrong (naming the entry point)
        self.broken: dict[str, str] = {}
        self.loaded = False

    def all(self) -> dict[str, T]:
        """Every entry by name, the package's own first. A plugin that fails is left out of it, warned about once
        with its entry point, and named again by :meth:`get` when asked for: the rest stays usable."""
        if not self.loaded:
            self.loaded = True
            for point, entry in self._entry_points():
                if isinstance(entry, str):
                    self.broken[point.name] = entry
                    log.warning("%s", entry)
                    continue
                try:
                    self.register(entry)
                except (TypeError, ValueError) as exc:
                    self.broken[point.name] = f"{self.what} plugin {point.name} ({point.value}): {exc}"
                    log.warning("%s", self.broken[point.name])
        return self.entries

    def get(self, name: object) -> T:
        """The entry ``name``; a plugin that failed says why; an unknown name lists the valid ones."""
        entries = self.all()
        if str(name) in entries:
            return entries[str(name)]
        if str(name) in self.broken:
            raise ValueError(self.broken[str(name)])
        broken = f" (not loaded: {', '.join(sorted(self.broken))})" if self.broken else ""
        raise ValueError(f"unknown {self.what} {name!r}; valid: {', '.join(entries)}{broken}")

    def register(self, entry: T) -> T:
        """Add an entry (an entry point's, or a test's); a name already registered is refused."""
        if not isinstance(entry, self.kind):
            raise TypeError(
                f"a {self.what} is registered as a {self.kind.__name__}, not a {type(entry).__name__}"
            )
        if entry.name in self.entries:
            raise ValueError(f"{self.what} {entry.name!r} is registered twice")
        self.entries[entry.name] = entry
        return entry

    def fresh(self) -> Registry[T]:
        """A registry of the same group read afresh (tests that install a plugin)."""
        return Registry(self.group, self.kind, self.what)

    def _entry_points(self) -> Iterator[tuple[Any, T | str]]:
        """Each entry point with its entry, or with what went wrong (a message naming it)."""
        from importlib.metadata import entry_points

        def order(point: Any) -> tuple[int, str]:
            own = getattr(getattr(point, "dist", None), "name", None) == OWN_DISTRIBUTION
            return (0 if own else 1, point.name)

        for point in sorted(entry_points(group=self.group), key=order):
            where = f"{self.what} plugin {point.name} ({point.value})"
            try:
                loaded = point.load()
                made: Callable[[], Any] | None = None if isinstance(loaded, self.kind) else loaded
                entry = made() if callable(made) else loaded
            except (
                Exception,
                SystemExit,
            ) as exc:  # whatever it raises, a sys.exit too: named, never escaping
                yield point, f"{where} could not be loaded: {type(exc).__name__}: {exc}"
                continue
            if not isinstance(entry, self.kind) or entry.name != point.name:
                yield point, f"{where} must name a {self.kind.__name__} called {point.name!r}"
                continue
            yield point, entry
