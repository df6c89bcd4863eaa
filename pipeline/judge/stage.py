"""The judge stage: PAIRS rows in, JUDGMENTS rows out. One engine per instance (per Ray actor), created once."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.judge.engines import make_engine
from pipeline.judge.labels import side_logprobs
from pipeline.judge.spec import JudgeSpec
from pipeline.prompts import encode_prompt, full_prompt, prefix_key, uses_chat_template
from pipeline.schemas import JUDGMENTS, PAIRS, check_schema

log = logging.getLogger(__name__)


def prompt_ids(tokenizer: Any, spec: JudgeSpec, chat: bool, batch: pa.Table) -> list[list[int]]:
    """Token ids of every PAIRS row: the message, chat-wrapped when ``chat``, plus the answer prefix."""
    out = []
    for message, template_id, attribute in zip(
        batch.column("message").to_pylist(),
        batch.column("template_id").to_pylist(),
        batch.column("attribute").to_pylist(),
        strict=True,
    ):
        prefix = spec.answer_prefixes[prefix_key(template_id, attribute)]
        out.append(encode_prompt(tokenizer, full_prompt(tokenizer, spec.prompt, message, prefix, chat), chat))
    return out


class JudgeStage:
    """Callable class for ``Dataset.map_batches`` (one instance per actor) and for in-process runs."""

    def __init__(self, spec: JudgeSpec):
        self.spec = spec
        self.engine = make_engine(spec)
        self.chat = uses_chat_template(self.engine.tokenizer, spec.prompt.chat_template)
        self.labels = self.engine.labels
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
        return prompt_ids(self.engine.tokenizer, self.spec, self.chat, batch)

    def __call__(self, batch: pa.Table) -> pa.Table:
        batch = check_schema(batch, PAIRS, "judge stage input")
        results = self.engine.run(self.prompt_ids(batch)) if batch.num_rows else []
        label_lp = np.array([r.label_logprobs for r in results], dtype=np.float64).reshape(len(results), -1)
        if len(results):
            lp_a, lp_b = side_logprobs(label_lp, self.labels.n_a)
        else:
            lp_a = lp_b = np.zeros(0)
        out = pa.table(
            {
                "context_id": batch.column("context_id"),
                "attribute": batch.column("attribute"),
                "template_id": batch.column("template_id"),
                "cand_a": batch.column("cand_a"),
                "cand_b": batch.column("cand_b"),
                "judge": pa.array([self.spec.name] * batch.num_rows, pa.string()),
                "label_logprobs": pa.array([r.label_logprobs for r in results], pa.list_(pa.float64())),
                "logprob_a": pa.array(lp_a, pa.float64()),
                "logprob_b": pa.array(lp_b, pa.float64()),
                "top_token": pa.array([r.top_token for r in results], pa.string()),
                "prompt_tokens": pa.array([r.prompt_tokens for r in results], pa.int32()),
                "cached_tokens": pa.array([r.cached_tokens for r in results], pa.int32()),
                "worker": pa.array([self.worker] * batch.num_rows, pa.string()),
            }
        )
        return check_schema(out, JUDGMENTS, "judge stage output")
