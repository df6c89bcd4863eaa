"""The whole run as one plain function: ``run(RunConfig) -> RunResult``.

Pre-flight on the driver (input validation, model, label words, prompt lengths), then the stages: shard ->
pairs -> judge (Ray Data or in-process) -> Parquet; reduce (Polars) -> scores -> report -> MLflow.
``@hydra.main`` in :mod:`pipeline.cli` is a thin shell around this; tests and notebooks call it directly.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from pipeline import plots
from pipeline.config import RunConfig, check_choices, to_flat_dict
from pipeline.data.source import LoadedInput, load_input, resolve_path
from pipeline.judge.labels import resolve_labels
from pipeline.judge.spec import JudgeSpec
from pipeline.logs import add_file_log
from pipeline.models import resolve_model
from pipeline.pairs import PairPlan, build_shards, check_strategy, k_adjustments
from pipeline.preflight import check_prompt_lengths
from pipeline.progress import Progress, format_seconds
from pipeline.prompts import check_template, prefix_key, render_answer_prefix, uses_chat_template
from pipeline.reduce import reduce_judgments
from pipeline.report import correlation_table, mlflow_metrics, summary_text
from pipeline.runtime import judge_shards
from pipeline.score import score_comparisons
from pipeline.store import JudgmentStore
from pipeline.tracking import tracked_run

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Config sections that decide what is judged: a resumed run must match them.
IDENTITY_SECTIONS = ("dataset", "pairs", "prompt")
IDENTITY_JUDGE_FIELDS = ("backend", "model", "name", "max_model_len")


@dataclass
class RunResult:
    run_dir: Path
    tables: dict[str, Path]
    metrics: dict[str, float]
    summary: str
    mlflow_run_id: str | None
    tracking_uri: str | None
    judge_stats: dict[str, float] = field(default_factory=dict)


def make_run_dir(cfg: RunConfig, root: Path) -> Path:
    if cfg.paths.run_dir:
        return resolve_path(cfg.paths.run_dir, root)
    now = datetime.now()
    base = resolve_path(cfg.paths.output_root, root) / "runs" / now.strftime("%Y-%m-%d")
    name = f"{now.strftime('%H-%M-%S')}-{cfg.dataset.name}"
    run_dir, n = base / name, 1
    while run_dir.exists():
        n += 1
        run_dir = base / f"{name}-{n}"
    return run_dir


def judging_identity(cfg: dict) -> dict:
    identity = {k: cfg[k] for k in IDENTITY_SECTIONS}
    identity["judge"] = {k: cfg["judge"][k] for k in IDENTITY_JUDGE_FIELDS}
    return identity


def check_resumable(run_dir: Path, cfg: RunConfig) -> None:
    """A run folder holding judgments may only be resumed with the same judging configuration."""
    saved = run_dir / "config.json"
    if not saved.exists():
        return
    old = judging_identity(json.loads(saved.read_text()))
    new = judging_identity(json.loads(json.dumps(asdict(cfg))))
    flat_old = to_flat_dict_from(old)
    flat_new = to_flat_dict_from(new)
    differ = sorted(k for k in flat_old.keys() | flat_new.keys() if flat_old.get(k) != flat_new.get(k))
    if differ:
        raise ValueError(
            f"{run_dir} holds judgments of a different configuration ({', '.join(differ[:8])} differ); "
            "use a new paths.run_dir or the same settings to resume"
        )


def to_flat_dict_from(tree: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.update(to_flat_dict_from(v, key))
        else:
            out[key] = json.dumps(v, sort_keys=True)
    return out


def prepare(
    cfg: RunConfig, root: Path, cache_dir: Path
) -> tuple[LoadedInput, JudgeSpec, PairPlan, list[str]]:
    """Everything checked before judging: input, templates, pairs config, model, label words, prompt lengths."""
    for template in cfg.prompt.templates:
        check_template(template)
    check_strategy(cfg.pairs)
    loaded = load_input(cfg.dataset, cfg.scoring.correlation, root, cache_dir)
    from pipeline.methods import SCORERS

    unknown = [m for m in cfg.scoring.methods if m not in SCORERS]
    if unknown:
        raise ValueError(
            f"config scoring.methods: unknown method(s) {unknown}; choose from {sorted(SCORERS)}"
        )

    model = resolve_model(cfg.judge.model, cache_dir)
    name = cfg.judge.name or model.name
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model.path)
    labels = resolve_labels(tokenizer, cfg.prompt.label_words_a, cfg.prompt.label_words_b, name)
    chat = uses_chat_template(tokenizer, cfg.prompt.chat_template)
    attributes = loaded.data.attributes
    lengths = check_prompt_lengths(
        loaded.data.candidates, attributes, cfg.prompt, loaded.words, tokenizer, chat, cfg.judge.max_model_len
    )
    loaded.data.candidates = lengths.candidates
    loaded.data.report.truncated_contexts = lengths.truncated
    log.info(
        "judge %s (%s), labels %s, chat template %s, longest prompt %d tokens",
        name,
        model.path,
        list(labels.words),
        "on" if chat else "off",
        lengths.longest_prompt_tokens,
    )
    prefixes = {
        prefix_key(t.id, a): render_answer_prefix(t, loaded.words, a)
        for t in cfg.prompt.templates
        for a in attributes
    }
    spec = JudgeSpec(
        backend=cfg.judge.backend,
        model_path=model.path,
        name=name,
        max_model_len=cfg.judge.max_model_len,
        prompt=cfg.prompt,
        answer_prefixes=prefixes,
        engine=dict(cfg.judge.engine),
        env={str(k): str(v) for k, v in cfg.judge.env.items()},
    )
    sizes = pl.from_arrow(loaded.data.candidates.select(["context_id"]))["context_id"].value_counts()["count"]
    adjusted = k_adjustments(cfg.pairs, sizes.to_list())
    if adjusted["raised"] or adjusted["lowered"]:
        log.warning(
            "pairs: the requested k (pairs.k=%s, pairs.fraction=%s) was raised to the %s minimum in %d context(s) "
            "and lowered (to the distinct pairs there are; to an even k for symmetric) in %d",
            cfg.pairs.k,
            cfg.pairs.fraction,
            cfg.pairs.strategy,
            adjusted["raised"],
            adjusted["lowered"],
        )
    plan = PairPlan(
        pairs=cfg.pairs,
        attributes=tuple(attributes),
        templates=tuple(cfg.prompt.templates),
        words=loaded.words,
        chunk_rows=cfg.runtime.pair_chunk_rows,
    )
    return loaded, spec, plan, list(labels.words)


def write_table(df: pl.DataFrame, path: Path) -> Path:
    df.write_parquet(path)
    return path


def run(cfg: RunConfig, root: Path = PROJECT_ROOT) -> RunResult:
    """Run every stage for ``cfg``; relative paths are resolved against ``root`` (the project folder)."""
    check_choices(cfg)
    cache_dir = resolve_path(cfg.paths.cache_dir, root)
    output_root = resolve_path(cfg.paths.output_root, root)
    run_dir = make_run_dir(cfg, root)
    loaded, spec, plan, label_words = prepare(cfg, root, cache_dir)

    if cfg.runtime.resume:
        check_resumable(run_dir, cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    handler = add_file_log(run_dir / "run.log")
    try:
        return _run(cfg, run_dir, output_root, loaded, spec, plan, label_words)
    finally:
        logging.getLogger("pipeline").removeHandler(handler)
        handler.close()


def _run(
    cfg: RunConfig,
    run_dir: Path,
    output_root: Path,
    loaded: LoadedInput,
    spec: JudgeSpec,
    plan: PairPlan,
    label_words: list[str],
) -> RunResult:
    (run_dir / "config.json").write_text(json.dumps(asdict(cfg), indent=2))
    tables_dir = run_dir / "tables"
    tables_dir.mkdir(exist_ok=True)
    pq.write_table(loaded.data.candidates, tables_dir / "candidates.parquet")
    pq.write_table(loaded.data.human_scores, tables_dir / "human_scores.parquet")
    report = loaded.data.report
    (run_dir / "input_report.json").write_text(json.dumps(asdict(report), indent=2))
    log.info("run folder %s", run_dir)

    store = JudgmentStore(run_dir / "judgments", tuple(label_words))
    if cfg.runtime.resume and store.parts():
        stored = store.label_words()
        if stored is not None and stored != tuple(label_words):
            raise ValueError(f"{run_dir} holds judgments with label words {stored}, not {tuple(label_words)}")
    done = store.done_keys() if cfg.runtime.resume else {}
    already = sum(len(v) for v in done.values())
    shards, remaining = build_shards(loaded.data.candidates, plan, cfg.runtime.max_shards, done)
    log.info(
        "%d comparisons to judge in %d shard(s)%s",
        remaining,
        len(shards),
        f" ({already} already judged in {run_dir.name}, skipped)" if already else "",
    )

    with tracked_run(cfg.tracking, output_root, to_flat_dict(cfg), run_dir.name) as tracker:
        tracker.set_tags({"run_dir": str(run_dir), "dataset": cfg.dataset.name, "judge": spec.name})
        progress = Progress(remaining)
        for batch in judge_shards(shards, plan, spec, cfg.judge, cfg.runtime):
            store.add(batch)
            progress.update(
                batch.num_rows,
                int(batch.column("prompt_tokens").to_numpy().sum()),
                int(batch.column("cached_tokens").to_numpy().sum()),
            )
        store.flush()
        judge_seconds = time.monotonic() - progress.started
        if remaining:
            log.info(
                "judge stage finished: %d comparisons in %s", progress.done, format_seconds(judge_seconds)
            )
        if progress.done != remaining:
            raise RuntimeError(f"the judge stage returned {progress.done} comparisons, expected {remaining}")

        judgments = pl.from_arrow(store.read())
        reduced = reduce_judgments(judgments, cfg.scoring.debias, cfg.pairs.orderings)
        candidates = pl.from_arrow(loaded.data.candidates)
        human = pl.from_arrow(loaded.data.human_scores)
        scored = score_comparisons(
            reduced.comparisons, candidates, human, cfg.scoring.methods, cfg.scoring.debias
        )
        correlations = (
            correlation_table(scored.scores) if cfg.scoring.correlation != "off" else pl.DataFrame()
        )

        tables = {
            "judgments": write_table(reduced.judgments, tables_dir / "judgments.parquet"),
            "comparisons": write_table(reduced.comparisons, tables_dir / "comparisons.parquet"),
            "position_bias": write_table(reduced.position_bias, tables_dir / "position_bias.parquet"),
            "scores": write_table(scored.scores, tables_dir / "scores.parquet"),
        }
        scored.scores.sort(["attribute", "template_id", "method", "context_id", "rank"]).write_csv(
            run_dir / "scores.csv"
        )
        tables["scores_csv"] = run_dir / "scores.csv"
        reduced.position_bias.write_csv(run_dir / "position_bias.csv")
        if correlations.height:
            tables["correlations"] = write_table(correlations, tables_dir / "correlations.parquet")
            correlations.write_csv(run_dir / "correlations.csv")
        if scored.unscored:
            pl.DataFrame(
                scored.unscored,
                schema=["judge", "attribute", "template_id", "method", "context_id", "reason"],
                orient="row",
            ).write_csv(run_dir / "unscored.csv")

        totals = judgments.select(pl.col("prompt_tokens").sum(), pl.col("cached_tokens").sum()).row(0)
        judge_stats = {
            "comparisons": float(judgments.height),
            "judged_now": float(progress.done),
            "rate": progress.rate(),
            "rate_with_startup": progress.overall_rate(),
            "judge_seconds": judge_seconds,
            "cache_share": totals[1] / totals[0] if totals[0] else 0.0,
        }
        extra = {
            "judge/comparisons": judge_stats["comparisons"],
            "judge/judged_this_run": judge_stats["judged_now"],
            "judge/comparisons_per_s": judge_stats["rate"],
            "judge/comparisons_per_s_with_startup": judge_stats["rate_with_startup"],
            "judge/seconds": judge_seconds,
            "judge/prefix_cache_share": judge_stats["cache_share"],
            "scoring/unscored_groups": float(len(scored.unscored)),
            **{k: float(v) for k, v in report.counts().items()},
        }
        metrics = mlflow_metrics(correlations, reduced.position_bias, extra)
        summary = summary_text(correlations, reduced.position_bias, judge_stats)
        (run_dir / "summary.txt").write_text(summary + "\n")
        if cfg.tracking.plots:
            plot_dir = run_dir / "plots"
            plot_dir.mkdir(exist_ok=True)
            method = "poe_gaussian" if "poe_gaussian" in cfg.scoring.methods else cfg.scoring.methods[0]
            plots.predicted_vs_human(scored.scores, method, plot_dir / "predicted_vs_human.png")
            plots.position_bias(reduced.position_bias, plot_dir / "position_bias.png")
            if correlations.height:
                plots.correlation_by_method(correlations, "spearman", plot_dir / "spearman_by_method.png")
        tracker.log_metrics(metrics)
        tracker.log_artifacts(tables_dir, "tables")
        for name in (
            "scores.csv",
            "position_bias.csv",
            "correlations.csv",
            "unscored.csv",
            "summary.txt",
            "config.json",
            "input_report.json",
        ):
            if (run_dir / name).exists():
                tracker.log_artifact(run_dir / name)
        if cfg.tracking.plots:
            tracker.log_artifacts(run_dir / "plots", "plots")
        log.info("outputs in %s", run_dir)
        if tracker.run_id:
            log.info("MLflow run %s in %s", tracker.run_id, tracker.tracking_uri)
        return RunResult(
            run_dir=run_dir,
            tables=tables,
            metrics=metrics,
            summary=summary,
            mlflow_run_id=tracker.run_id,
            tracking_uri=tracker.tracking_uri,
            judge_stats=judge_stats,
        )
