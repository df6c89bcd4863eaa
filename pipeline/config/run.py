"""The whole run's config, and where it runs, is tracked and writes."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.config.adaptive_rounds import AdaptiveConfig
from pipeline.config.assessment import (
    AbsoluteConfig,
    CriterionOption,
    DatasetConfig,
    LeaderboardConfig,
    PairsConfig,
    PromptConfig,
    ReasonsConfig,
    ScoringConfig,
)
from pipeline.config.enums import Executor, LogLevel
from pipeline.config.judging import GenerateConfig, JudgeConfig, JuryConfig
from pipeline.config.trust import TrustConfig


@dataclass
class RuntimeConfig:
    # ray: stages on Ray Data (local ray.init() or an existing cluster). local: in-process, no Ray.
    executor: Executor = Executor.ray
    # Ray address: None starts a local Ray of the run's own (even where a `ray start` cluster runs on this
    # machine); "auto" joins the cluster this job runs on (or the one `ray start` made here).
    address: str | None = None
    num_cpus: int | None = None
    # Contexts per pair-generation shard is balanced by pair count; this caps the number of shards.
    max_shards: int = 64
    # Rows per pair-generation output chunk (bounds memory for one huge pool).
    pair_chunk_rows: int = 4096
    # Resume: judge only what paths.run_dir does not hold yet (refused if its judgments were made with a
    # different judging configuration). false with a run_dir that holds judgments is refused.
    resume: bool = True
    # A judge worker whose engine dies is replaced this many times per worker (its unfinished batch judged
    # again by the new one); one more death stops the run with the error.
    max_engine_restarts: int = 3
    # Seconds a step may wait with no worker running and work to do (a lost node not yet replaced, a pool
    # waiting for a GPU node) before the run stops with the numbers; it says so every 30 s meanwhile.
    placement_timeout_s: float = 900.0
    # The local Ray (address unset) starts a worker process per CPU as the driver connects, ahead of any task, as
    # Ray does by default. Off: workers start as tasks need them. The judge's workers are started for it (they
    # carry its environment), so prestarted ones only sit idle beside the engine, each waking ~100 times a
    # second (BENCHMARKS.md). A joined cluster (runtime.address) keeps the settings it was started with.
    prestart_workers: bool = False


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
    # This run's folder; None makes outputs/runs/<date>/<time>-<dataset>; "latest" continues the latest run
    # folder of the same configuration (after a killed driver: rerun the same command with it), else a new one.
    run_dir: str | None = None
    # Converted model checkpoints and the demo data.
    cache_dir: str = ".cache"


@dataclass
class RunConfig:
    workflow: str = "comparative"
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    pairs: PairsConfig = field(default_factory=PairsConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    absolute: AbsoluteConfig = field(default_factory=AbsoluteConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    # More judges of the same prompts (a jury of models; empty: the run's one judge).
    jury: JuryConfig = field(default_factory=JuryConfig)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    leaderboard: LeaderboardConfig = field(default_factory=LeaderboardConfig)
    reasons: ReasonsConfig = field(default_factory=ReasonsConfig)
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    adaptive: AdaptiveConfig = field(default_factory=AdaptiveConfig)
    # Certified verdicts and prediction-powered leaderboards from people's labels (off unless trust.enabled).
    trust: TrustConfig = field(default_factory=TrustConfig)
    # Evaluation criteria in plain words (workflow=generate): name -> what the best output does. Each criterion is
    # judged and reported like an attribute; templates use it as {criterion}.
    criteria: dict[str, str] = field(default_factory=dict)
    # EvalAssist's structured form for absolute judging (absolute.modes=[options]): criterion (or attribute) ->
    # its options, each {name, description, score}; the judge picks an option by letter.
    criteria_options: dict[str, list[CriterionOption]] = field(default_factory=dict)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    log_level: LogLevel = LogLevel.INFO
    # true: the engines' and Ray's own output on the console too (by default it goes to the run folder's logs).
    verbose: bool = False
    # Stages from outside to run, by the names their packages register (entry point group
    # llm_comparative_assessment.stages; `make stages` lists them): each joins the end of the segment its entry names.
    extra_stages: list[str] = field(default_factory=list)
