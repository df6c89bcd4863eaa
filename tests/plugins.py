"""A plugin installed on the path as pip would leave it: its modules and a dist-info naming its entry points."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path


def install_plugin(
    root: Path, name: str, modules: Mapping[str, str], entries: Iterable[tuple[str, str, str]]
) -> Path:
    """Write ``modules`` (module name: source) and the dist-info of distribution ``name`` with ``entries`` (group,
    entry name, target) under ``root/site``; returns the folder to put on the path."""
    site = root / "site"
    site.mkdir()
    for module, source in modules.items():
        (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "".join(f"[{group}]\n{entry} = {target}\n\n" for group, entry, target in entries)
    )
    return site
