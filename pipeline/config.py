"""Typed run configuration.

Hydra composes YAML from ``conf/`` over these dataclasses (registered as the ``base_config`` schema), and
the entry point converts the result once with :func:`to_run_config`; library code receives these objects,
never a ``DictConfig``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class DemoConfig:
    """The demo set the project writes itself: a good text per context and progressively damaged copies."""

    n_contexts: int = 4
    n_candidates: int = 6
    seed: int = 0


@dataclass
class DatasetConfig:
    """Where the contexts and candidates come from (the JSONL layout of ``../shared/datasets``, or Parquet)."""

    name: str = "demo"
    # A .jsonl file, a .parquet file or a folder of .parquet files; unused for the demo set.
    path: str | None = None
    # meta.json beside the data (attributes, nouns); defaults to ``<dir of path>/meta.json`` when present.
    meta_path: str | None = None
    # Attributes to judge; None means every attribute in meta.json (or the data).
    attributes: list[str] | None = None
    # Keep only the first N contexts (in file order).
    max_contexts: int | None = None
    # Keep only the first N candidates of each context (in file order).
    max_candidates: int | None = None
    # What the prompt calls a context and a candidate; None takes meta.json's, else "passage" / "summary".
    context_noun: str | None = None
    candidate_noun: str | None = None
    # attribute -> adjective used in the question ("Which summary is more <adjective>?").
    adjectives: dict[str, str] = field(default_factory=dict)
    # Candidates whose text is empty (or equal to one of empty_markers): error | placeholder | drop.
    # placeholder and drop are counted and reported; error names every offending candidate.
    empty_text: str = "error"
    empty_markers: list[str] = field(default_factory=list)
    placeholder: str = "(no text)"
    # An empty context is an error unless allowed (a single pool of items may have no shared context).
    allow_empty_context: bool = False
    demo: DemoConfig = field(default_factory=DemoConfig)


@dataclass
class PairsConfig:
    """How comparison pairs are chosen per context (and attribute)."""

    # all_pairs (every unordered pair, so N(N-1) ordered prompts) | balanced_random | greedy_optimal | random
    # | no_repeat | symmetric | all_ordered. Ordered selections are folded into unordered pairs.
    strategy: str = "all_pairs"
    # Unordered pairs per context for the sampling strategies, or `fraction` of all N(N-1)/2 pairs; when
    # both are set, k wins (so `pairs=balanced pairs.k=500` overrides the preset's fraction).
    k: int | None = None
    fraction: float | None = None
    # both: every pair is judged in both orderings (the product's rule). one: only the selected ordering.
    orderings: str = "both"
    # The same pair set for every attribute of a context (more prefix-cache hits) or a new draw per attribute.
    same_pairs_for_all_attributes: bool = True
    seed: int = 0


@dataclass
class TemplateConfig:
    """One prompt template. Fields: {context}, {a}, {b}, {adjective}, {noun}, {Noun}, {context_noun},
    {Context_noun}. The question goes last so that prompts sharing a context and slot A share a prefix."""

    id: str = "c1"
    text: str = (
        "{Context_noun}: {context}\n\n{Noun} A: {a}\n\n{Noun} B: {b}\n\n"
        "Which {noun} is more {adjective}, {Noun} A or {Noun} B?"
    )
    # Text the answer starts with, so that the next token is the label word ("Summary" -> " A").
    answer_prefix: str = "{Noun}"


@dataclass
class PromptConfig:
    templates: list[TemplateConfig] = field(default_factory=lambda: [TemplateConfig()])
    # auto: use the model's chat template when it has one; true: require it; false: plain text.
    chat_template: str = "auto"
    system_prompt: str | None = None
    # Label words whose first-token log-probabilities are read; each must be a single token.
    label_words_a: list[str] = field(default_factory=lambda: [" A", "A"])
    label_words_b: list[str] = field(default_factory=lambda: [" B", "B"])
    # A prompt longer than the model's context: truncate (the context text, counted and warned) | refuse.
    too_long: str = "truncate"


@dataclass
class JudgeConfig:
    """The LLM judge and how its engines are placed."""

    # backend: vllm (the product) | hf (Hugging Face transformers, one prompt at a time: the papers' way).
    backend: str = "vllm"
    # A model alias known to pipeline.models (e.g. smollm2-135m-instruct), a local folder, or a hub id.
    model: str = "smollm2-135m-instruct"
    # Name recorded in the tables; defaults to the model alias / folder name.
    name: str | None = None
    max_model_len: int = 4096
    # Passed through to vllm.LLM as one mapping (enforce_eager, dtype, enable_prefix_caching, ...).
    engine: dict[str, Any] = field(
        default_factory=lambda: {"enforce_eager": True, "enable_prefix_caching": True, "seed": 0}
    )
    # Environment for the engine's process, set before vLLM is imported (CPU KV cache size, thread binding).
    env: dict[str, str] = field(default_factory=dict)
    # Prompts per actor call; larger batches let vLLM schedule more prompts that share a prefix.
    batch_size: int = 256
    num_actors: int = 1
    num_cpus_per_actor: float = 1.0
    num_gpus_per_actor: float = 0.0


@dataclass
class ScoringConfig:
    # Methods from pipeline.methods.SCORERS.
    methods: list[str] = field(
        default_factory=lambda: ["win_ratio", "avg_prob", "bradley_terry", "poe_gaussian"]
    )
    # Position-bias removal: average (both orderings, PoE 4.2) | alpha (reweight so P(A) = 0.5, EACL eq. 9)
    # | mean_shift (one ordering: PoE-Gaussian expert mean shifted by the observed P(A), PoE A.6; the other
    # methods get the raw probabilities) | none (each ordering is its own comparison).
    debias: str = "average"
    # Correlation with human scores: auto (where the data has them) | required (error if missing) | off.
    correlation: str = "auto"


@dataclass
class RuntimeConfig:
    # ray: stages on Ray Data (local ray.init() or an existing cluster). local: in-process, no Ray.
    executor: str = "ray"
    # Ray address: None starts a local Ray; "auto" joins the cluster this job runs on.
    address: str | None = None
    num_cpus: int | None = None
    # Contexts per pair-generation shard is balanced by pair count; this caps the number of shards.
    max_shards: int = 64
    # Rows per pair-generation output chunk (bounds memory for one huge pool).
    pair_chunk_rows: int = 4096
    # Resume: skip comparisons already written in the output folder's judgments.
    resume: bool = True


@dataclass
class TrackingConfig:
    enabled: bool = True
    # None: a local SQLite store under paths.output_root/mlflow. Or any MLflow tracking URI.
    tracking_uri: str | None = None
    experiment: str = "comparative-assessment"
    run_name: str | None = None
    # Plot files (PNG) are logged with the tables.
    plots: bool = True


@dataclass
class PathsConfig:
    # Root of everything a run writes; relative paths are resolved against the project root.
    output_root: str = "outputs"
    # This run's folder; None makes outputs/runs/<date>/<time>-<dataset>.
    run_dir: str | None = None
    # Converted model checkpoints and the demo data.
    cache_dir: str = ".cache"


@dataclass
class RunConfig:
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    pairs: PairsConfig = field(default_factory=PairsConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    log_level: str = "INFO"


CHOICES = {
    "dataset.empty_text": ("error", "placeholder", "drop"),
    "pairs.orderings": ("both", "one"),
    "prompt.chat_template": ("auto", "true", "false"),
    "prompt.too_long": ("truncate", "refuse"),
    "judge.backend": ("vllm", "hf"),
    "scoring.debias": ("average", "alpha", "mean_shift", "none"),
    "scoring.correlation": ("auto", "required", "off"),
    "runtime.executor": ("ray", "local"),
}


def check_choices(cfg: RunConfig) -> None:
    """Raise ValueError naming the field when a string option is not one of its documented values."""
    for dotted, allowed in CHOICES.items():
        section, name = dotted.split(".")
        value = getattr(getattr(cfg, section), name)
        if str(value).lower() not in allowed:
            raise ValueError(f"config {dotted}={value!r} is not one of {', '.join(allowed)}")
    if cfg.pairs.fraction is not None and not 0 < cfg.pairs.fraction <= 1:
        raise ValueError(f"config pairs.fraction={cfg.pairs.fraction} must be in (0, 1]")
    if cfg.pairs.orderings == "one" and cfg.scoring.debias == "average":
        raise ValueError(
            "config pairs.orderings=one judges a single ordering, so scoring.debias=average has nothing to "
            "average; use scoring.debias=alpha or none"
        )
    if cfg.scoring.debias == "mean_shift" and cfg.pairs.orderings != "one":
        raise ValueError(
            "config scoring.debias=mean_shift is the one-ordering correction (PoE appendix A.6); with both "
            "orderings use scoring.debias=average"
        )
    ids = [t.id for t in cfg.prompt.templates]
    if len(set(ids)) != len(ids):
        raise ValueError(f"config prompt.templates has duplicate ids: {ids}")
    if not cfg.prompt.label_words_a or not cfg.prompt.label_words_b:
        raise ValueError(
            "config prompt.label_words_a and prompt.label_words_b must each name at least one word"
        )


def register_configs() -> None:
    """Register the schema with Hydra's ConfigStore (conf/config.yaml lists ``base_config`` first)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="base_config", node=RunConfig)


def to_run_config(cfg: Any) -> RunConfig:
    """Convert a composed DictConfig into a validated :class:`RunConfig` (once, at the entry point)."""
    from omegaconf import OmegaConf

    merged = OmegaConf.merge(OmegaConf.structured(RunConfig), cfg)
    run_cfg = OmegaConf.to_object(merged)
    assert isinstance(run_cfg, RunConfig)
    check_choices(run_cfg)
    return run_cfg


def to_flat_dict(cfg: RunConfig) -> dict[str, Any]:
    """The resolved config as dotted keys (for MLflow params)."""
    from dataclasses import asdict

    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            if not value:
                out[prefix] = "{}"
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for n, v in enumerate(value):
                walk(f"{prefix}.{n}", v)
        else:
            out[prefix] = value

    walk("", asdict(cfg))
    return out
