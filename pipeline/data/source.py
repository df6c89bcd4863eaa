"""From the dataset config to validated tables and the words the prompts use."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from pipeline.config.assessment import DatasetConfig
from pipeline.config.derived import resolve_path
from pipeline.config.enums import Correlation
from pipeline.contracts.errors import ConfigError
from pipeline.data.demo import write_demo
from pipeline.data.load import KINDS, DatasetMeta, default_meta_path, existing, read_meta
from pipeline.data.records import InputReport, ValidationRules, validate_records
from pipeline.data.tables import read_records
from pipeline.data.words import PromptWords, resolve_adjectives

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DatasetInfo:
    """What was read and how its prompts talk about it."""

    name: str
    path: str
    attributes: tuple[str, ...]
    words: PromptWords


@dataclass
class LoadedInput:
    candidates: pa.Table  # CANDIDATES
    human_scores: pa.Table  # HUMAN_SCORES
    report: InputReport
    info: DatasetInfo


def dataset_path(cfg: DatasetConfig, root: Path, cache_dir: Path) -> Path:
    if cfg.name == "demo" and cfg.path is None:
        return write_demo(cfg.demo, cache_dir / "demo")
    if cfg.path is None:
        raise ConfigError(f"config dataset.path is not set for dataset {cfg.name!r} ({KINDS})")
    # checked before its meta.json is looked for beside it: a missing file is the mistake to name
    return existing(resolve_path(cfg.path, root))


def choose_attributes(cfg: DatasetConfig, meta: DatasetMeta, path: Path) -> list[str]:
    if cfg.attributes:
        return list(cfg.attributes)
    if meta.attributes:
        return list(meta.attributes)
    raise ConfigError(
        f"config dataset.attributes is not set and {path} has no meta.json listing them: set dataset.attributes=[...]"
    )


def load_input(cfg: DatasetConfig, correlation: Correlation, root: Path, cache_dir: Path) -> LoadedInput:
    path = dataset_path(cfg, root, cache_dir)
    meta_path = resolve_path(cfg.meta_path, root) if cfg.meta_path else default_meta_path(path)
    meta = read_meta(meta_path)
    attributes = choose_attributes(cfg, meta, path)
    if len(set(attributes)) != len(attributes):
        raise ConfigError(f"config dataset.attributes lists an attribute twice: {attributes}")
    unknown = [a for a in attributes if meta.attributes and a not in meta.attributes]
    if unknown:
        log.warning("attribute(s) %s are not listed in %s (%s)", unknown, meta_path, list(meta.attributes))
    given = {
        "context_noun": cfg.context_noun or meta.context_noun,
        "candidate_noun": cfg.candidate_noun or meta.candidate_noun,
    }
    words = PromptWords(
        context_noun=given["context_noun"] or "passage",
        candidate_noun=given["candidate_noun"] or "summary",
        adjectives=resolve_adjectives(attributes, cfg.adjectives),
        defaulted=() if cfg.name == "demo" else tuple(k for k, v in given.items() if not v),
    )
    if words.warning():
        log.warning(words.warning())
    rules = ValidationRules(
        attributes=tuple(attributes),
        empty_text=cfg.empty_text,
        empty_markers=tuple(cfg.empty_markers),
        placeholder=cfg.placeholder,
        allow_empty_context=cfg.allow_empty_context,
        correlation=correlation,
        max_candidates=cfg.max_candidates,
        system_field=cfg.system_field,
        category_field=cfg.category_field,
        category_groups=tuple(cfg.category_groups),
    )
    records = read_records(path, cfg.max_contexts, cfg.splits, cfg.columns, attributes)
    data = validate_records(records, rules)
    report = data.report
    log.info(
        "input %s: %d contexts, %d candidates, attributes %s",
        path,
        report.n_contexts,
        report.n_candidates,
        ", ".join(attributes),
    )
    if report.empty_text_replaced:
        log.warning(
            "%d candidate(s) with empty text replaced by %r (dataset.empty_text=placeholder), e.g. %s",
            len(report.empty_text_replaced),
            cfg.placeholder,
            report.empty_text_replaced[:3],
        )
    if report.empty_text_dropped:
        log.warning(
            "%d candidate(s) with empty text dropped (dataset.empty_text=drop), e.g. %s",
            len(report.empty_text_dropped),
            report.empty_text_dropped[:3],
        )
    if report.attributes_without_scores:
        log.warning(
            "attribute(s) %s have no human scores: scores are reported without correlation",
            report.attributes_without_scores,
        )
    if report.missing_scores:
        log.warning("candidates without a human score (left out of correlations): %s", report.missing_scores)
    info = DatasetInfo(name=cfg.name, path=str(path), attributes=tuple(attributes), words=words)
    candidates, human_scores = data.candidates, data.human_scores
    if cfg.pool:
        candidates, human_scores = as_pool(candidates, human_scores)
        log.info("dataset.pool=true: the %d candidates are one pool", candidates.num_rows)
    return LoadedInput(candidates, human_scores, report, info)


POOL = "pool"


def as_pool(candidates: pa.Table, human_scores: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Every candidate in one context ``pool`` with no shared text, its id ``<context>/<candidate>`` (unique across
    contexts); the human scores follow."""
    import pyarrow.compute as pc

    def pooled_ids(table: pa.Table) -> pa.Array:
        return pc.binary_join_element_wise(table.column("context_id"), table.column("candidate_id"), "/")

    n = candidates.num_rows
    pooled = candidates.set_column(
        candidates.schema.get_field_index("candidate_id"), "candidate_id", pooled_ids(candidates)
    )
    pooled = pooled.set_column(
        pooled.schema.get_field_index("context_id"), "context_id", pa.array([POOL] * n)
    )
    pooled = pooled.set_column(pooled.schema.get_field_index("context"), "context", pa.array([""] * n))
    pooled = pooled.set_column(
        pooled.schema.get_field_index("candidate_index"), "candidate_index", pa.array(range(n), pa.int32())
    )
    # the pool is one context: its members' checklists were their own contexts'
    pooled = pooled.set_column(
        pooled.schema.get_field_index("checklist"), "checklist", pa.nulls(n, pa.list_(pa.string()))
    )
    scores = human_scores.set_column(
        human_scores.schema.get_field_index("candidate_id"), "candidate_id", pooled_ids(human_scores)
    )
    scores = scores.set_column(
        scores.schema.get_field_index("context_id"), "context_id", pa.array([POOL] * scores.num_rows)
    )
    return pooled.cast(candidates.schema), scores.cast(human_scores.schema)
