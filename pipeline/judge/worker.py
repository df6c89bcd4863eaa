"""The judge worker: PAIRS rows in, JUDGMENTS rows out. One engine per instance (one per Ray actor), made once.

What it reads is settled on the driver: the whole prompt text (``PAIRS.prompt``), how to tokenize it and which
label tokens to read (:class:`pipeline.prompts.PromptPlan`), and the engine settings (:class:`JudgeSpec`).
"""

from __future__ import annotations

import os
import socket

import numpy as np
import pyarrow as pa

from pipeline.judge.engines import make_engine
from pipeline.judge.labels import Labels, label_mass, p_a_wins, side_logprobs
from pipeline.judge.spec import JudgeSpec
from pipeline.prompts import PromptFrame, encode_prompts
from pipeline.schemas import JUDGMENTS, PAIRS, check_schema


class JudgeWorker:
    """Callable class for ``Dataset.map_batches`` (one instance per actor) and for in-process runs."""

    def __init__(self, spec: JudgeSpec, labels: Labels, frame: PromptFrame):
        self.spec = spec
        self.labels = labels
        self.frame = frame
        self.engine = make_engine(spec, labels.token_ids)
        self.start_seconds = self.engine.start_seconds
        self.worker = f"{socket.gethostname()}:{os.getpid()}"

    def close(self) -> None:
        """Shut the engine down (Ray Data calls ``__del__`` when it releases the actor)."""
        engine = self.__dict__.pop("engine", None)
        if engine is not None:
            engine.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to release cleanly
            pass

    def prompt_ids(self, batch: pa.Table) -> list[list[int]]:
        return encode_prompts(self.engine.tokenizer, batch.column("prompt").to_pylist(), self.frame)

    def __call__(self, batch: pa.Table) -> pa.Table:
        batch = check_schema(batch, PAIRS, "judge stage input")
        results = self.engine.run(self.prompt_ids(batch)) if batch.num_rows else []
        label_lp = [r.label_logprobs for r in results]
        lp_a, lp_b = side_logprobs(np.array(label_lp, dtype=np.float64), self.labels.n_a)
        n = batch.num_rows
        out = pa.table(
            {
                "context_id": batch.column("context_id"),
                "attribute": batch.column("attribute"),
                "template_id": batch.column("template_id"),
                "cand_a": batch.column("cand_a"),
                "cand_b": batch.column("cand_b"),
                "judge": pa.array([self.spec.name] * n, pa.string()),
                "label_logprobs": pa.array(label_lp, pa.list_(pa.float64())),
                "logprob_a": pa.array(lp_a, pa.float64()),
                "logprob_b": pa.array(lp_b, pa.float64()),
                "p_a": pa.array(p_a_wins(lp_a, lp_b), pa.float64()),
                "label_mass": pa.array(label_mass(lp_a, lp_b), pa.float64()),
                "top_token": pa.array([r.top_token for r in results], pa.string()),
                "prompt_tokens": pa.array([r.prompt_tokens for r in results], pa.int32()),
                "cached_tokens": pa.array([r.cached_tokens for r in results], pa.int32()),
                "worker": pa.array([self.worker] * n, pa.string()),
            }
        )
        return check_schema(out, JUDGMENTS, "judge stage output")
