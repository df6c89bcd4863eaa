"""The runs under an output root: each with its status and key numbers (``make runs``), one found by its folder, its
folder's name or its MLflow run id (the review's ``RUN=``), and the MLflow store they were logged to (``make mlflow``).

A run's status is read from its folder: ``running`` while a process holds its lock (:mod:`pipeline.run.lock`),
``finished`` once its summary is written, ``failed`` when its log says so, else ``stopped`` (killed, or ended before
its summary); ``unreadable`` when its config.json is empty or torn (listed and named, never chosen as ``latest``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.contracts.errors import UserError
from pipeline.run.folder import json_object
from pipeline.run.lock import holder


@dataclass(frozen=True)
class RunInfo:
    folder: Path
    status: str
    workflow: str
    dataset: str
    judge: str
    judgments: int
    # the best Spearman with people of one judge, attribute, template and method (per context, averaged), and whose
    spearman: float | None
    method: str | None
    mlflow_run_id: str | None
    # the judge card's groups (judge, attribute, template) that are informative here, of how many (None: no card)
    informative: tuple[int, int] | None = None


def _status(folder: Path) -> str:
    if holder(folder) is not None:
        return "running"
    if (folder / "summary.txt").exists():
        return "finished"
    log = folder / "run.log"
    if log.exists() and "run failed" in log.read_text(errors="replace")[-20000:]:
        return "failed"
    return "stopped"


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows if path.exists() else 0


def _best(folder: Path, card: Any) -> tuple[float | None, str | None]:
    """The highest Spearman with people of one row of the correlations (a judge, attribute, template and method), named
    ``judge/attribute/template/method`` (ties broken by those names), marked where the judge ``card`` says its judge
    is not informative."""
    import polars as pl

    path = folder / "tables" / "correlations.parquet"
    if not path.exists():
        return None, None
    table = pl.read_parquet(path).drop_nulls("spearman")
    if not table.height:
        return None, None
    names = ["judge", "attribute", "template_id", "method"]
    best = table.sort(["spearman", *names], descending=[True, False, False, False, False]).row(0, named=True)
    mine = tuple(best[n] for n in names[:3])
    noise = card is not None and mine in card.filter(~pl.col("informative")).select(names[:3]).rows()
    name = "/".join(str(best[n]) for n in names) + (" (judge not informative)" if noise else "")
    return float(best["spearman"]), name


def _card(folder: Path) -> Any:
    """The run's judge card's groups and their informative flag (None: no card)."""
    import polars as pl

    path = folder / "tables" / "judge_card.parquet"
    columns = ["judge", "attribute", "template_id", "informative"]
    return pl.read_parquet(path, columns=columns) if path.exists() else None


def info(folder: Path) -> RunInfo:
    """A run folder's status and key numbers; a folder whose config.json cannot be read (empty, torn: a run killed
    while writing it, or not a run's) has the status ``unreadable`` and nothing else."""
    config = json_object(folder / "config.json")
    if config is None:
        return RunInfo(folder, "unreadable", "", "", "", 0, None, None, None)
    run_id = (json_object(folder / "tracking.json") or {}).get("run_id")
    judge = config.get("judge") if isinstance(config.get("judge"), dict) else {}
    dataset = config.get("dataset") if isinstance(config.get("dataset"), dict) else {}
    try:
        card = _card(folder)
        spearman, method = _best(folder, card)
        judgments = _rows(folder / "tables" / "judgments.parquet")
    except Exception:  # a torn table: the run's status is still worth listing
        card, spearman, method, judgments = None, None, "(a table is unreadable)", 0
    return RunInfo(
        folder=folder,
        status=_status(folder),
        workflow=str(config.get("workflow", "")),
        dataset=str(dataset.get("name", "")),
        judge=str(judge.get("name") or judge.get("model", "")),
        judgments=judgments,
        spearman=spearman,
        method=method,
        mlflow_run_id=run_id if isinstance(run_id, str) else None,
        informative=None if card is None else (int(card["informative"].sum()), card.height),
    )


def runs(output_root: Path) -> list[RunInfo]:
    """Every run folder under ``output_root/runs`` (those holding a config.json), oldest first."""
    folders = sorted(
        (p.parent for p in (output_root / "runs").glob("*/*/config.json")), key=lambda p: p.stat().st_mtime
    )
    return [info(folder) for folder in folders]


def find_run(ref: str | None, output_root: Path) -> Path:
    """The run folder ``ref`` names: a path, a folder's name under ``output_root/runs``, an MLflow run id, or None /
    ``latest`` for the latest finished run. :class:`UserError` naming what was looked at when none matches."""
    if ref and Path(ref).is_dir():
        folder = Path(ref).resolve()
        if json_object(folder / "config.json") is None:
            raise UserError(f"{folder} is not a run folder (no readable config.json)")
        return folder
    known = runs(output_root)
    if not ref or ref == "latest":
        finished = [r for r in known if r.status == "finished"]
        if not finished:
            raise UserError(f"no finished run under {output_root / 'runs'}; run `make run` first")
        return finished[-1].folder
    matches = [
        r.folder for r in known if ref in (r.folder.name, r.mlflow_run_id) and r.status != "unreadable"
    ]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UserError(
            f"{ref} names {len(matches)} runs under {output_root}: give the folder ({matches[0]}, ...)"
        )
    raise UserError(
        f"no run folder, folder name or MLflow run id {ref!r} under {output_root / 'runs'} ({len(known)} runs "
        "there; `make runs` lists them, `paths.output_root=<dir>` or --root looks elsewhere)"
    )


def table(found: list[RunInfo]) -> str:
    """The runs as a table that fits a terminal."""
    if not found:
        return "no runs yet"
    head = (
        "folder",
        "status",
        "workflow",
        "dataset",
        "judge",
        "judged",
        "informative",
        "best Spearman",
        "MLflow run",
    )
    rows = [head]
    for r in found:
        best = f"{r.spearman:.3f} {r.method}" if r.spearman is not None else "-"
        flag = "-" if not r.informative else f"{r.informative[0]} of {r.informative[1]}"
        rows.append(
            (
                f"{r.folder.parent.name}/{r.folder.name}",
                r.status,
                r.workflow,
                r.dataset,
                r.judge[:24],
                str(r.judgments),
                flag,
                best,
                (r.mlflow_run_id or "-")[:12],
            )
        )
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def configured_root() -> Path:
    """``paths.output_root`` as the config composes it (conf/ and CA_* environment), resolved."""
    from pipeline import PROJECT_ROOT
    from pipeline.config.derived import resolve_path
    from pipeline.config.hydra import compose

    return resolve_path(compose([]).paths.output_root, PROJECT_ROOT)


def main(argv: list[str] | None = None) -> int:
    """``python -m pipeline.run.runs [list|mlflow] [--root DIR]``."""
    import argparse
    import os
    import sys

    top = argparse.ArgumentParser(prog="python -m pipeline.run.runs", description=__doc__.split("\n\n")[0])
    top.add_argument("command", nargs="?", default="list", choices=["list", "mlflow"])
    top.add_argument("--root", help="the output root (default: paths.output_root as configured)")
    top.add_argument("--port", type=int, default=5000, help="mlflow: the UI's port on 127.0.0.1")
    args = top.parse_args(sys.argv[1:] if argv is None else argv)
    root = Path(args.root).resolve() if args.root else configured_root()
    if args.command == "list":
        print(table(runs(root)))
        return 0
    from pipeline.run.tracking import local_store

    if not (root / "mlflow" / "mlflow.db").exists():
        print(f"no MLflow store under {root / 'mlflow'} yet; run `make run` first", file=sys.stderr)
        return 2
    uri, artifacts = local_store(root)
    command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--default-artifact-root", artifacts,
               "--host", "127.0.0.1", "--port", str(args.port)]  # fmt: skip
    print(f"MLflow UI on http://127.0.0.1:{args.port} for {uri}", flush=True)
    os.execvp(command[0], command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
