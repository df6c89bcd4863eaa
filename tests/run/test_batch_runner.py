"""The batch input file that judge.endpoint.batch uploads is a real OpenAI batch file: vLLM's own batch runner (``python -m
vllm.entrypoints.openai.run_batch``, the CPU engine on SmolLM2) accepts it and answers every line, and its output is
read with the same checks as a hosted batch's (the upload, poll and download cycle is tested against a stand-in of
the Batch API's endpoints: tests/judge/test_batch.py). vLLM's runner takes chat requests only, so the chat path."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from pipeline.contracts.engine import Request
from pipeline.judge.endpoint.batch import Line, Tally, input_file, read_output
from pipeline.judge.endpoint.replies import chat_reader, check_of
from pipeline.judge.openai.bodies import chat_body

pytestmark = [pytest.mark.engine, pytest.mark.slow]

WORDS = [" A", "A", " B", "B"]


def test_vllms_batch_runner_answers_the_batch_input_file_and_its_output_is_read(tmp_path, judge_model):
    request = Request(token_ids=(1, 2, 3, 4), max_tokens=1, seed=0)
    summaries = ["The cat sat on the mat.", "A cat was sitting on a mat in the sun.", "Dogs bark."]
    lines = []
    for k, (a, b) in enumerate([(x, y) for x in summaries for y in summaries if x != y]):
        message = f"Passage: a cat on a mat.\n\nSummary A: {a}\n\nSummary B: {b}\n\nWhich summary is better?"
        body = chat_body("smol", message, "Summary", request, None, 20, True)
        lines.append(Line(f"req-{k}", body, check_of(chat_reader(1, WORDS))))
    (tmp_path / "in.jsonl").write_text(input_file("/chat/completions", lines))
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING"}
    done = subprocess.run(
        [sys.executable, "-m", "vllm.entrypoints.openai.run_batch", "-i", str(tmp_path / "in.jsonl"),
         "-o", str(tmp_path / "out.jsonl"), "--model", judge_model, "--served-model-name", "smol",
         "--dtype", "float32", "--max-model-len", "1024", "--enforce-eager"],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    tally = Tally()
    answers = read_output([(tmp_path / "out.jsonl").read_text()], lines, tally)
    assert not tally.failures and set(answers) == {ln.custom_id for ln in lines}, tally.errors
    for body in answers.values():
        answer = chat_reader(1, WORDS)(body)
        assert (
            np.isfinite(answer.logprobs).all() and answer.missing < len(WORDS) and answer.texts[0] is not None
        )
