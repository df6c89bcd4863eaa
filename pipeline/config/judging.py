"""Who judges and generates: the judge (in-process or behind an API) and the generator models."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.config.enums import ApiPath, EngineProcess, OutputHandling


@dataclass
class EndpointConfig:
    """The judge behind an OpenAI-compatible API (``judge.backend=api``; :mod:`pipeline.judge.openai` on :mod:`pipeline.judge.endpoint`)."""

    # The endpoint, e.g. http://127.0.0.1:8000/v1 (a `vllm serve`).
    base_url: str | None = None
    # The model name the server serves; default: the judge's name.
    model: str | None = None
    # The NAME of the environment variable that holds the key (never the key itself); None: no key.
    api_key_env: str | None = None
    # token_ids | chat | auto (see ApiPath); chat reads the label words among the first token's top_logprobs
    # alternatives (20 is most hosted models' limit): a label word not among them gets the smallest returned
    # log-probability (a floor), counted and reported. prefill: the answer prefix ("Summary") goes as a final
    # assistant message continued by the model (vLLM: continue_final_message); false drops it.
    path: ApiPath = ApiPath.auto
    top_logprobs: int = 20
    prefill: bool = True
    # path=sampled (a model that returns no logprobs): each verdict sampled this many times at this temperature, up
    # to sample_tokens tokens each; its words' probabilities are the samples' counts (half a count added to each).
    samples: int = 20
    sample_temperature: float = 1.0
    sample_tokens: int = 8
    # Requests in flight at once.
    concurrency: int = 8
    # Seconds per request; retries on 429, 5xx, timeouts and lost connections, with exponential backoff and
    # jitter (honouring Retry-After), at most max_retries times and retry_for seconds per request.
    timeout: float = 60.0
    max_retries: int = 8
    retry_for: float = 300.0
    backoff: float = 0.5
    backoff_max: float = 30.0
    # Keep every reply in a SQLite file, keyed by endpoint, model, prompt and sampling: cache_path, default
    # paths.cache_dir/api/replies.sqlite (shared by every run of the project).
    cache: bool = True
    cache_path: str | None = None
    # Price per million prompt (input) and completion (output) tokens, for the cost in the summary and MLflow.
    price_input: float | None = None
    price_output: float | None = None
    # Batch judging (OpenAI's Batch API: /files, /batches; pipeline.judge.endpoint.batch): each engine call's requests go
    # as one batch input file, polled (from batch_poll seconds, doubling to batch_poll_max) until done, at most
    # batch_wait seconds (then the run stops; the same command picks the recorded batch up). The lines a batch did
    # not answer (missing, failed, or its batch expired, failed or was cancelled) go into a new batch, at most
    # batch_rounds batches in all (the rounds stop early when two in a row answer nothing); what is left is
    # reported and asked again by a rerun. Its tokens are priced at batch_discount times the prices above (half on
    # OpenAI's and Anthropic's batch APIs).
    batch: bool = False
    batch_rounds: int = 20
    batch_discount: float = 0.5
    batch_wait: float = 86_400.0
    batch_poll: float = 10.0
    batch_poll_max: float = 300.0


@dataclass
class ReasoningConfig:
    """Reasoning, then the verdict (off by default; pipeline.judge.reasoning). The judge first generates up to
    ``max_tokens`` tokens of reasoning in its chat template after ``open``, ending at a ``stop`` string or the budget;
    then ``close`` and the template's answer prefix are appended and the verdict is read as without reasoning.
    Instruct models: ``instruction`` (appended to every prompt's message) asks them to think step by step. Thinking
    models: ``open: "<think>\\n"``, ``close: "\\n</think>\\n\\n"``, ``stop: ["</think>"]`` and no instruction."""

    enabled: bool = False
    max_tokens: int = 256
    instruction: str = (
        "Before you answer, think it through step by step in a few sentences; then give your answer."
    )
    open: str = ""
    close: str = "\n\nAnswer: "
    stop: list[str] = field(default_factory=list)


# Marks a field that says where and how a judge runs, not what it judges: a run may continue another
# (``paths.run_dir=latest``) whose values differ there (pipeline.run.folder).
PLACEMENT = {"placement": True}


@dataclass
class JudgeConfig:
    """The LLM judge and how its engines are placed."""

    # backend: a registered judge backend (pipeline.config.backends; `make stages` lists them): vllm (the product) |
    # hf (Hugging Face transformers, one prompt at a time: the papers' way) | api (an OpenAI-compatible endpoint,
    # judge.endpoint) | a plugin's.
    backend: str = "vllm"
    # A model alias known to pipeline.judge.models (e.g. smollm2-135m-instruct), a local folder, or a hub id.
    model: str = "smollm2-135m-instruct"
    # Name recorded in the tables; defaults to the model alias / folder name.
    name: str | None = None
    max_model_len: int = 4096
    # vllm: passed through to vllm.LLM as one mapping (enforce_eager, dtype, enable_prefix_caching, ...; every
    # key is checked against vLLM's EngineArgs). hf: dtype, threads, seed. Without a dtype, a CPU judge runs
    # in bfloat16 where the CPU has native bfloat16 and in float32 elsewhere (pipeline.judge.hardware).
    engine: dict[str, Any] = field(default_factory=dict)
    # Environment of the engine's process, set before the engine is imported (CPU KV cache size, threads).
    env: dict[str, str] = field(default_factory=dict, metadata=PLACEMENT)
    # vllm: where the engine runs: auto | worker (inside the judge worker's process) | own (processes of its own,
    # watched by the worker): see EngineProcess. auto is worker for a CPU engine on a Ray actor, else own.
    engine_process: EngineProcess = field(default=EngineProcess.auto, metadata=PLACEMENT)
    # Prompts per engine call; larger batches let vLLM schedule more prompts that share a prefix.
    batch_size: int = field(default=256, metadata=PLACEMENT)
    # Judge workers (Ray actors, an engine each): a number, or a range [least, most]: the pool starts with what the
    # cluster has room for in between and grows onto nodes that join (pipeline.runtime.pool).
    num_actors: Any = field(default=1, metadata=PLACEMENT)
    num_cpus_per_actor: float = field(default=1.0, metadata=PLACEMENT)
    num_gpus_per_actor: float = field(default=0.0, metadata=PLACEMENT)
    # backend=api: the endpoint, its model name, the key's environment variable, concurrency, retries, cache.
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    # Keep every answer of an in-process judge by content (judge identity, read, exact prompt) in one SQLite
    # file that every run consults before judging (pipeline.storage.judgements): store_path, default
    # paths.cache_dir/judgements.sqlite. (A judge behind an API has its reply cache instead.)
    store: bool = True
    store_path: str | None = None
    # Reason before the verdict (ReasoningConfig); off by default.
    reasoning: ReasoningConfig = field(default_factory=ReasoningConfig)
    # The comparative templates (ids of prompt.templates) this judge answers; None: every one. In a jury of
    # judges (jury.judges) each judge answers its own, e.g. one template per model.
    templates: list[str] | None = None

    @property
    def actors(self) -> tuple[int, int]:
        """``num_actors`` as (least, most) workers (checked by the config's validation)."""
        if isinstance(self.num_actors, int):
            return self.num_actors, self.num_actors
        least, most = self.num_actors
        return int(least), int(most)


@dataclass
class JuryConfig:
    """More judges that judge the same prompts as ``judge`` (in-process and API judges mixed), each stored under
    its own identity in the run folder's ``jurors/<name>/`` and resumed on its own; with ``scoring.jury`` every
    (judge, template) is a juror of one jury. Each entry is a judge config over ``judge``'s settings: a juror
    takes what it does not set from ``judge`` (``engine`` only when it has ``judge``'s backend); its ``name``
    must differ from every other judge's."""

    # As written, partial judge configs; typed once, at conversion, into a JudgeConfig each merged over ``judge``
    # (pipeline.config.derived.typed_jurors): past conversion every entry is a JudgeConfig.
    judges: list[Any] = field(default_factory=list)


@dataclass
class GeneratorConfig:
    """One generator "model": a model and how it is sampled. Generators that share a model and engine settings
    share one engine (they differ only in sampling or system prompt)."""

    # The model's name on the leaderboard (the candidates' ``system``).
    name: str = ""
    # A model alias (smollm2-135m-instruct), a local folder or a hub id.
    model: str = "smollm2-135m-instruct"
    system_prompt: str | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 96
    seed: int = 0
    stop: list[str] = field(default_factory=list)
    # vllm.LLM settings and the engine's environment, over the judge's (judge.engine, judge.env).
    engine: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    # The backend it generates on (a registered one that can generate: `make stages` lists them); None: the judge's
    # in-process backend, or `api` (OpenAI's wire format) when ``api`` is set (pipeline.config.backends).
    backend: str | None = None
    # Its endpoint, for a backend behind one (base_url, model, api_key_env, concurrency, cache, prices: as judge.endpoint).
    endpoint: EndpointConfig | None = None


@dataclass
class GenerateConfig:
    """Generate-then-evaluate (``workflow=generate``): task inputs, a task prompt, the generator models."""

    # A .jsonl/.parquet file (or folder) of task records with named fields; None: the demo tasks the project
    # writes (support tickets to summarise).
    inputs: str | None = None
    # The field naming each record (unique); the records' order otherwise.
    id_field: str = "id"
    # The task prompt, with {field} placeholders filled from each record.
    task: str = ""
    max_inputs: int | None = None
    models: list[GeneratorConfig] = field(default_factory=list)
    # Empty outputs and outputs cut off at max_tokens: keep | placeholder | drop (counted and reported).
    empty_output: OutputHandling = OutputHandling.placeholder
    cut_off_output: OutputHandling = OutputHandling.keep
    placeholder: str = "(no output)"
    # Prompts per engine call.
    batch_size: int = 64
