"""Registries filled by entry points (the Python packaging convention): what every registry of the package shares
(the scorers here, in :mod:`pipeline.methods.scorers.registry`; the judge backends and the plugin stages in
:mod:`pipeline.config`). It lives in the bottom layer so that each of them can use it.

Each entry point of a registry's group names an entry (an instance of the registry's entry class, whose ``name`` is
the entry point's name) or a function returning one. The entry points are loaded once, the first time the registry
is read: the package's own first (its built-ins, registered the same way as a plugin's), then the others; by name.
One that cannot be loaded, is not an entry of the registry's class, is named otherwise or reuses a name is an error
that names the entry point.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

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
    except (ImportError, AttributeError, ValueError) as exc:
        raise RuntimeError(f"{what} ({target}) could not be loaded: {exc}") from exc
    return found


class Registry(Generic[T]):
    """Entries of one kind by name, from the entry point ``group``; ``what`` names the kind in messages."""

    def __init__(self, group: str, kind: type[T], what: str):
        self.group, self.kind, self.what = group, kind, what
        self.entries: dict[str, T] = {}
        self.loaded = False

    def all(self) -> dict[str, T]:
        """Every entry by name, the package's own first."""
        if not self.loaded:
            self.loaded = True
            for entry in self._entry_points():
                self.register(entry)
        return self.entries

    def get(self, name: object) -> T:
        """The entry ``name``; an unknown name lists the valid ones."""
        try:
            return self.all()[str(name)]
        except KeyError:
            raise ValueError(f"unknown {self.what} {name!r}; valid: {', '.join(self.all())}") from None

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

    def _entry_points(self) -> Iterator[T]:
        from importlib.metadata import entry_points

        def order(point: Any) -> tuple[int, str]:
            own = getattr(getattr(point, "dist", None), "name", None) == OWN_DISTRIBUTION
            return (0 if own else 1, point.name)

        for point in sorted(entry_points(group=self.group), key=order):
            try:
                loaded = point.load()
                made: Callable[[], Any] | None = None if isinstance(loaded, self.kind) else loaded
                entry = made() if callable(made) else loaded
            except Exception as exc:
                raise RuntimeError(
                    f"{self.what} plugin {point.name} ({point.value}) could not be loaded: {exc}"
                ) from exc
            if not isinstance(entry, self.kind) or entry.name != point.name:
                raise RuntimeError(
                    f"{self.what} plugin {point.name} ({point.value}) must name a {self.kind.__name__} called "
                    f"{point.name!r}"
                )
            yield entry
