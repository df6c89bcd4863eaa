"""The real CPU vLLM engine on SmolLM2-135M-Instruct: exact label log-probabilities, prefix cache, stage schema."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pipeline.config import PromptConfig
from pipeline.judge.engines import HFEngine
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.stage import JudgeStage
from pipeline.prompts import prefix_key
from pipeline.schemas import JUDGMENTS, PAIRS

pytestmark = pytest.mark.engine

PASSAGE = (
    "The council closed the old pool after engineers found cracks in its basin. A new leisure centre with two "
    "pools will open in three years, and a free bus will take swimmers to the next village until then."
)
GOOD = "The cracked pool closed; a new centre opens in three years and a free bus runs meanwhile."
BAD = "pool the banana cracked opens bus years three the the free meanwhile centre."


def spec(model_path: str, backend: str = "vllm") -> JudgeSpec:
    return JudgeSpec(
        backend=backend,
        model_path=model_path,
        name="smollm2",
        max_model_len=1024,
        prompt=PromptConfig(),
        answer_prefixes={prefix_key("c1", "coherence"): "Summary"},
        engine={"enforce_eager": True, "enable_prefix_caching": True, "seed": 0, "dtype": "float32"}
        if backend == "vllm"
        else {"dtype": "float32"},
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "all"},
    )


def pairs(rows: list[tuple[str, str, str, str]]) -> pa.Table:
    return pa.table(
        {
            "context_id": ["c"] * len(rows),
            "attribute": ["coherence"] * len(rows),
            "template_id": ["c1"] * len(rows),
            "cand_a": [r[0] for r in rows],
            "cand_b": [r[1] for r in rows],
            "message": [
                f"Passage: {PASSAGE}\n\nSummary A: {a}\n\nSummary B: {b}\n\nWhich summary is more coherent, "
                "Summary A or Summary B?"
                for _, _, a, b in rows
            ],
        },
        schema=PAIRS,
    )


@pytest.fixture(scope="module")
def stage(judge_model):
    s = JudgeStage(spec(judge_model))
    yield s
    s.close()


def test_stage_writes_the_judgment_schema(stage):
    out = stage(pairs([("g", "b", GOOD, BAD), ("b", "g", BAD, GOOD)]))
    assert out.schema.equals(JUDGMENTS)
    assert out.num_rows == 2
    lp = np.array(out.column("label_logprobs").to_pylist())
    assert lp.shape == (2, 4) and (lp < 0).all()
    # " A" and " B" are the judge's likely first tokens after "Summary"
    assert set(out.column("top_token").to_pylist()) <= {" A", " B"}
    p_a = 1 / (1 + np.exp(np.array(out.column("logprob_b")) - np.array(out.column("logprob_a"))))
    assert ((p_a > 0) & (p_a < 1)).all()


def test_label_logprobs_match_transformers(stage, judge_model):
    """vLLM's first-token log-probabilities of the label words equal a full forward pass in transformers."""
    batch = pairs([("g", "b", GOOD, BAD), ("b", "g", BAD, GOOD)])
    ids = stage.prompt_ids(batch)
    ours = np.array([r.label_logprobs for r in stage.engine.run(ids)])
    hf = HFEngine(spec(judge_model, backend="hf"))
    theirs = np.array([r.label_logprobs for r in hf.run(ids)])
    np.testing.assert_allclose(ours, theirs, atol=0.02)


def test_prefix_cache_serves_shared_prefixes(stage):
    long_good = " ".join([GOOD] * 12)  # the shared prefix (passage + slot A) spans several 128-token blocks
    stage(pairs([("g", "b", long_good, BAD)]))  # warm the cache
    out = stage(pairs([("g", "d", long_good, BAD + " once more")]))
    cached, total = out.column("cached_tokens")[0].as_py(), out.column("prompt_tokens")[0].as_py()
    assert total > 256
    # only whole KV blocks of the shared prefix are served from the cache
    assert 128 <= cached < total
