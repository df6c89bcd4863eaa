"""The judge worker: PROMPTS rows in, RESPONSES rows out. One engine per instance (one per Ray actor), made once.

What it reads is settled on the driver: the whole prompt text (``PROMPTS.prompt``) and, per stream, a :class:`Task`:
who answers (the judge, or a generator on the same engine), the frame around every prompt and, for every template,
what the engine reads and generates (a :class:`pipeline.contracts.engine.Request`, from
:meth:`pipeline.prompts.plan.PromptPlan.requests`). The engine settings are the worker's (:class:`JudgeSpec`); a
kept-alive worker serves every stage of its model (generate, judge, give reasons), each with its task. One engine
answers the comparative and the absolute prompts of a run; the judgement store is the driver's
(:class:`pipeline.judge.stored.StoreFront`): no worker opens it. A batch is answered in one engine call per
template (its rows in stream order), so each call holds prompts of one mode and its measured seconds are that
mode's cost.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import pyarrow as pa

from pipeline.contracts.engine import Engine, Request, Result
from pipeline.contracts.frame import PromptFrame
from pipeline.contracts.keys import PROMPT_KEY, base_template
from pipeline.contracts.schemas import PROMPTS, RESPONSES, check_schema
from pipeline.judge.hosting.engines import open_engine
from pipeline.judge.hosting.watchdog import EngineWatch, Reaper, engine_processes, record_event
from pipeline.judge.reasoning import ReasoningEngine
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.vllm.mode import KEY, settled


def batch_key(batch: pa.Table) -> str:
    """A batch's identity: a digest of its prompts' keys (the same rows give the same key on any worker)."""
    digest = hashlib.blake2b(digest_size=12)
    for column in PROMPT_KEY:
        for value in batch.column(column).to_pylist():
            digest.update(str(value).encode())
            digest.update(b"\x1f")
    return digest.hexdigest()


@dataclass(frozen=True)
class Task:
    """What a stream asks of a judge worker: who answers (the judge or generator: its name in the tables, its
    identity in the judgement store; its engine must be the worker's), what each template reads or generates, and
    the frame around every prompt (``frames``: a template's own where it differs, e.g. each generator's system
    prompt). The worker's engine outlives a task: the stages of one model (generate, judge, give reasons) each send
    their own."""

    judge: JudgeSpec
    requests: Mapping[str, Request]
    frame: PromptFrame
    frames: Mapping[str, PromptFrame] = field(default_factory=dict)

    def request(self, template_id: str) -> Request:
        """What the engine reads for a prompt of ``template_id`` (a checklist item's: its template's)."""
        return self.requests[base_template(template_id)]


def engine_spec(spec: JudgeSpec) -> JudgeSpec:
    """What decides a worker's engine: the spec without the name it answers under (a generator and the judge on
    one model and engine settings share the engine), named by its model."""
    return replace(spec, name=spec.model, dtype_reason="")


class JudgeWorker:
    """Callable class for ``Dataset.map_batches`` (one instance per actor) and for in-process runs: an engine made
    once (``spec``'s, named or not), each batch answered as its :class:`Task` says."""

    def __init__(self, spec: JudgeSpec, events: str | None = None):
        self.spec = engine_spec(spec)
        self.in_flight = 0
        self.events = events
        self.base: Engine = self.open(spec)
        # pyarrow imports pandas on its first conversion (0.3 s here): at the worker's start, not in its first batch
        pa.array([0.0])
        self.engines: dict[tuple[str, bool], Engine] = {}
        self.start_seconds = self.base.start_seconds
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        # the engine's own processes watched (an engine in processes of its own: ``inside`` is False): a dead engine
        # ends this worker instead of hanging it
        # (pipeline.judge.hosting.watchdog); ``events``: the run's file of such deaths
        self.watch = (
            EngineWatch(
                engine_processes(known=getattr(self.base, "processes", list)()),
                lambda: self.in_flight,
                events,
            )
            if self.base.inside is False
            else None
        )
        self.reaper = Reaper(self.watch.pids) if self.watch is not None else None
        # where the engine runs and how long it took to start: inside this process (no engine processes to
        # watch) or in processes of its own (judge.engine_process)
        record_event(
            events,
            {
                "event": "engine_started",
                "worker": self.worker,
                "backend": str(spec.backend),
                "inside": self.base.inside,
                "pids": self.watch.pids if self.watch is not None else [],
                "seconds": round(float(self.start_seconds or 0.0), 3),
            },
            sync=False,
        )

    @staticmethod
    def open(spec: JudgeSpec) -> Engine:
        """The worker's engine: its backend's (a benchmark's worker may give another, :mod:`benchmarks`)."""
        return open_engine(spec)

    def engine(self, task: Task) -> Engine:
        """The engine that answers ``task``: the worker's, with the reasoning in front when a request asks for it
        (judge.reasoning). The judgement store is the driver's (:class:`pipeline.judge.stored.StoreFront`): no
        worker opens it."""
        eager = self.spec.engine.get(
            KEY
        )  # the mode this worker's engine started in (a task's may be ``auto``)
        if engine_spec(settled(task.judge, eager if isinstance(eager, bool) else None)) != self.spec:
            raise ValueError(
                f"judge worker: {task.judge.name} runs on another engine than this worker's ({self.spec.model})"
            )
        reasoning = any(r.reasoning is not None for r in task.requests.values())
        identity = json.dumps(task.judge.identity(), sort_keys=True, default=str)
        key = (identity, reasoning)
        if key not in self.engines:
            self.engines[key] = ReasoningEngine(self.base) if reasoning else self.base
        return self.engines[key]

    def close(self) -> None:
        """Shut the engine down (Ray Data calls ``__del__`` when it releases the actor)."""
        watch = self.__dict__.pop("watch", None)
        if watch is not None:
            watch.stop()
        reaper = self.__dict__.pop("reaper", None)
        if reaper is not None:
            reaper.stop()
        self.__dict__.pop("engines", None)  # the base's wrappers: the base is closed once below
        engine = self.__dict__.pop("base", None)
        if engine is not None:
            engine.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to release cleanly
            pass

    def answer(
        self, engine: Engine, prompts: Sequence[str], request: Request, frame: PromptFrame
    ) -> tuple[list[Result], float]:
        """The answers to prompts of one template, and the seconds the engine took."""
        started = time.perf_counter()
        self.in_flight = len(prompts)
        try:
            results = engine.answer(prompts, frame, request)
        except Exception:
            if self.watch is not None:
                self.watch.check()  # a dead engine's error ends this worker (a new one takes the batch)
            raise
        finally:
            self.in_flight = 0
        return results, time.perf_counter() - started

    def __call__(self, batch: pa.Table, task: Task) -> pa.Table:
        batch = check_schema(batch, PROMPTS, "judge stage input")
        # the batch's start and end in the run's events: a batch started and never finished by this worker was
        # lost with it (its engine or its whole process) and judged again elsewhere (watchdog.interruptions)
        key = batch_key(batch)
        mark = {"worker": self.worker, "batch": key, "rows": batch.num_rows}
        record_event(self.events, {"event": "batch_started", **mark}, sync=False)
        out = self.respond(batch, task)
        record_event(self.events, {"event": "batch_done", **mark}, sync=False)
        return out

    def respond(self, batch: pa.Table, task: Task) -> pa.Table:
        """RESPONSES rows for a batch of PROMPTS rows."""
        template_ids = batch.column("template_id").to_pylist()
        prompts = batch.column("prompt").to_pylist()
        unknown = sorted(t for t in set(template_ids) if base_template(t) not in task.requests)
        if unknown:
            raise ValueError(f"judge stage input: template(s) {unknown} are not in the prompt plan")
        engine = self.engine(task)
        results: list[Result | None] = [None] * batch.num_rows
        seconds = [0.0] * batch.num_rows
        for template_id in dict.fromkeys(template_ids):
            rows = [k for k, t in enumerate(template_ids) if t == template_id]
            answered, took = self.answer(
                engine,
                [prompts[k] for k in rows],
                task.request(template_id),
                task.frames.get(template_id, task.frame),
            )
            for k, result in zip(rows, answered, strict=True):
                results[k] = result
                seconds[k] = took / len(rows)
        done = [r for r in results if r is not None]
        return responses(batch, task.judge.name, done, seconds, self.worker)


def responses(
    batch: pa.Table, judge: str, results: Sequence[Result], seconds: Sequence[float], worker: str
) -> pa.Table:
    """RESPONSES rows: each PROMPTS row of ``batch`` with its result, the engine's seconds and who answered."""
    done, n = results, batch.num_rows
    out = pa.table(
        {
            **{k: batch.column(k) for k in PROMPT_KEY},
            "judge": pa.array([judge] * n, pa.string()),
            "token_logprobs": pa.array([r.token_logprobs for r in done], pa.list_(pa.float64())),
            "texts": pa.array([r.texts for r in done], pa.list_(pa.string())),
            "prompt_tokens": pa.array([r.prompt_tokens for r in done], pa.int32()),
            "cached_tokens": pa.array([r.cached_tokens for r in done], pa.int32()),
            "generated_tokens": pa.array([r.generated_tokens for r in done], pa.int32()),
            "finish_reasons": pa.array([r.finish_reasons for r in done], pa.list_(pa.string())),
            "seconds": pa.array(seconds, pa.float64()),
            "worker": pa.array([worker] * n, pa.string()),
            "error": pa.array([r.error for r in done], pa.string()),
            "source": pa.array([r.source for r in done], pa.string()),
            "requests": pa.array([r.requests for r in done], pa.int32()),
            "missing_logprobs": pa.array([r.missing for r in done], pa.int32()),
            "failed_attempts": pa.array([list(r.failures) for r in done], pa.list_(pa.string())),
            "usage_unknown": pa.array([r.usage_unknown for r in done], pa.bool_()),
            "served_model": pa.array([r.served_model for r in done], pa.string()),
            "reasoning": pa.array([r.reasoning for r in done], pa.string()),
            "reasoning_tokens": pa.array(
                [r.reasoning_tokens if r.reasoning is not None else None for r in done], pa.int32()
            ),
            "reasoning_cut": pa.array([r.reasoning_cut for r in done], pa.bool_()),
        }
    )
    return check_schema(out, RESPONSES, "judge stage output")
