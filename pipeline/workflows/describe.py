"""``python -m pipeline.workflows.describe [overrides]`` (``make stages``): every workflow's segments and stages,
and the values they pass, as declared.

Prints Markdown built from the stage declarations themselves (``docs/workflows.md`` holds the same text, and a
test keeps it in sync): for each workflow, its stages by segment with what each does, reads and writes; then every
port with what it holds, its schema (columns) or type, and its file in the run folder. With overrides, the one
workflow those overrides compose.
"""

from __future__ import annotations

import sys

from pipeline import PROJECT_ROOT
from pipeline.config.hydra import compose
from pipeline.workflows.catalog import WORKFLOWS
from pipeline.workflows.core import Workflow, describe_ports

# One composition per distinct workflow (workflow=absolute runs the comparative workflow's stages).
EXAMPLES: dict[str, list[str]] = {
    "comparative": [],
    "generate": ["experiment=generate_demo"],
    "adaptive": ["experiment=summeval_pool"],
}


def workflow(overrides: list[str]) -> Workflow:
    cfg = compose(overrides)
    return WORKFLOWS[cfg.workflow](cfg, PROJECT_ROOT)


def describe(overrides: list[str] | None = None) -> str:
    """Every workflow (or the one ``overrides`` compose) and the ports they pass."""
    if overrides:
        flows = [workflow(overrides)]
    else:
        flows = [workflow(example) for example in EXAMPLES.values()]
    ports = {}
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


if __name__ == "__main__":
    print(describe(sys.argv[1:]))
