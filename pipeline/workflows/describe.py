"""``python -m pipeline.describe [overrides]``: a workflow's stages and the values they pass, as declared.

Prints two Markdown tables built from the stage declarations themselves (the README holds the same tables, and
a test keeps them in sync): each stage with what it does, what it reads and what it writes; and each port with
what it holds, its schema (columns) or type, and its file in the run folder.
"""

from __future__ import annotations

import sys

from pipeline import PROJECT_ROOT
from pipeline.config.hydra import compose
from pipeline.workflows.catalog import WORKFLOWS


def describe(overrides: list[str] | None = None) -> str:
    cfg = compose(overrides)
    workflow = WORKFLOWS[cfg.workflow](cfg, PROJECT_ROOT)
    return workflow.describe() + "\n\n" + workflow.describe_ports()


if __name__ == "__main__":
    print(describe(sys.argv[1:]))
