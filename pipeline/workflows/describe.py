"""``python -m pipeline.workflows.describe [overrides]`` (``make stages``): every workflow's segments and stages,
and the values they pass, as declared; ``--packages``: the map of the package's layers.

Prints Markdown built from the stage declarations themselves (``docs/workflows.md`` holds the same text, and a
test keeps it in sync): for each workflow, its stages by segment with what each does, reads and writes; then every
port with what it holds, its schema (columns) or type, and its file in the run folder. With overrides, the one
workflow those overrides compose.
"""

from __future__ import annotations

import sys

from pipeline import PROJECT_ROOT
from pipeline.config.hydra import compose
from pipeline.stages.base import Port
from pipeline.workflows.catalog import build
from pipeline.workflows.core import Workflow, describe_ports

# One composition per distinct workflow (workflow=absolute runs the comparative workflow's stages).
EXAMPLES: dict[str, list[str]] = {
    "comparative": [],
    "jury": ["experiment=jury_judges"],
    "generate": ["experiment=generate_demo"],
    "adaptive": ["experiment=summeval_pool"],
}


def workflow(overrides: list[str]) -> Workflow:
    cfg = compose(overrides)
    return build(cfg, PROJECT_ROOT)


def describe(overrides: list[str] | None = None) -> str:
    """Every workflow (or the one ``overrides`` compose) and the ports they pass."""
    if overrides:
        flows = [workflow(overrides)]
    else:
        flows = [workflow(example) for example in EXAMPLES.values()]
    ports: dict[str, Port] = {}
    for flow in flows:
        for port in flow.ports():
            ports.setdefault(port.name, port)
    parts = [flow.describe() for flow in flows]
    if not overrides:
        parts[0] += (
            "\n\n`workflow=absolute` runs the same stages with absolute prompts only; with no `absolute.modes` the "
            "rating stages pass through."
        )
    table = describe_ports(list(ports.values()))
    return "\n\n".join([*parts, table])


def package_map() -> str:
    """The packages of ``pipeline/`` as a Markdown table, top layer first (the layers of pyproject.toml's import
    contract), each with the first line of its docstring (README.md holds the same table; a test keeps it in sync)."""
    import importlib
    import tomllib

    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    lines = ["| layer | package | what it holds |", "|---|---|---|"]
    for n, layer in enumerate(layers, start=1):
        for name in (part.strip() for part in layer.split("|")):
            module = importlib.import_module(name)
            summary = (module.__doc__ or "").strip().splitlines()[0]
            path = name.replace(".", "/") + ("/" if hasattr(module, "__path__") else ".py")
            lines.append(f"| {n} | `{path}` | {summary} |")
    return "\n".join(lines)


if __name__ == "__main__":
    args = sys.argv[1:]
    print(package_map() if args == ["--packages"] else describe(args))
