"""``python -m pipeline.workflows.describe [overrides]`` (``make stages``): every workflow's segments and stages,
and the values they pass, as declared; ``--packages``: the map of the package's layers.

By default a short view that fits a terminal: each workflow's stages by segment, one line each, with the ports it
writes (:func:`brief`). ``--markdown`` prints Markdown built from the stage declarations themselves (``docs/workflows.md`` holds the same text, and a
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

# One composition per distinct workflow (workflow=absolute runs the comparative workflow's stages), the first with
# trust on, the jury's with scoring.jury (the optional parts, pipeline.config.keys.PARTS).
EXAMPLES: dict[str, list[str]] = {
    "comparative": ["trust.enabled=true"],
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
            "rating stages pass through. The optional parts are in a workflow only where the run uses them: "
            "`reasons` where it asks for reasons (`reasons.n`, or the workflow's default: `generate`'s), `jury` with "
            "`scoring.jury` (the jury's workflow below), `check_trust`, `draw_labels`, `certify` and `ppi_leaderboard` with `trust.enabled` "
            "(shown here; the last with `trust.ppi`); without them the stages after read their tables as empty (the run "
            "folder holds them empty; `jurors` and `juror_agreement`, which nothing after reads, are not written)."
        )
    table = describe_ports(list(ports.values()))
    return "\n\n".join([*parts, table, *([] if overrides else [registered()])])


def registered() -> str:
    """What is registered (built-in and plugins alike, :mod:`pipeline.registry`): the workflows, the judge
    backends with what each supports, the scoring methods with what each gives, and the stages from outside."""
    from pipeline.config.backends import BackendEntry, Trait, backends
    from pipeline.config.stage_plugins import stage_plugins
    from pipeline.config.workflows import workflows
    from pipeline.methods.scorers.registry import scorers

    def marks(entry: object, names: tuple[str, ...]) -> str:
        return ", ".join(n for n in names if getattr(entry, n)) or "-"

    def supports(entry: BackendEntry) -> str:
        return ", ".join((["answers"] if entry.answers else []) + Trait.names(entry.traits)) or "-"

    def table(title: str, head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
        rows = rows or [("-", "none installed", *("-",) * (len(head) - 2))]
        return [
            title,
            "",
            f"| {' | '.join(head)} |",
            "|" + "---|" * len(head),
            *(f"| {' | '.join(r)} |" for r in rows),
        ]

    flags: tuple[str, ...] = ("stderr", "ties", "contradictions", "batched", "leaderboard")
    shape = ("pairs", "generated", "rounds", "jury")
    lines = [
        *table("Workflows (`workflow=`):", ("workflow", "what it does", "derives"),
               [(f"`{w}`", e.summary, marks(e, shape)) for w, e in workflows().items()]),
        "",
        *table("Judge backends (`judge.backend=`):", ("backend", "what it is", "supports", "where it runs"),
               [(f"`{n}`", e.summary, supports(e), e.runs) for n, e in backends().items()]),
        "",
        *table("Scoring methods (`scoring.methods=`):", ("method", "what it is", "gives"),
               [(f"`{n}`", e.summary, marks(e, flags)) for n, e in scorers().items()]),
        "",
        *table("Stages from outside (`extra_stages=`):", ("stage", "what it does", "joins segment"),
               [(f"`{n}`", e.summary, e.segment) for n, e in stage_plugins().items()]),
    ]  # fmt: skip
    return "\n".join(lines)


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


def brief(overrides: list[str] | None = None) -> str:
    """Each workflow (or the one ``overrides`` compose) as its stages by segment, one line each with what it writes,
    cut to fit a terminal of 100 columns."""
    flows = [workflow(overrides)] if overrides else [workflow(example) for example in EXAMPLES.values()]
    lines = []
    for flow in flows:
        lines.append(f"workflow {flow.name}: " + " -> ".join(s.name for s in flow.segments))
        for segment in flow.segments:
            for stage in segment.stages:
                line = f"  {segment.name:<8} {stage.name:<16} -> {', '.join(p.name for p in stage.writes)}"
                lines.append(line if len(line) <= 100 else line[:97] + "...")
        lines.append("")
    lines.append(
        "`make stages ARGS=--markdown` prints every stage's description, the ports and what is registered"
    )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from pipeline.contracts.errors import UserError

    markdown = "--markdown" in argv
    args = [a for a in argv if a != "--markdown"]
    try:
        if args == ["--packages"]:
            print(package_map())
        else:
            print(describe(args) if markdown else brief(args))
    except (UserError, HydraException, OmegaConfBaseException) as exc:
        print(f"make stages: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
