"""The real CPU vLLM engine on SmolLM2-135M-Instruct: exact label log-probabilities, prefix cache, worker schema,
absolute reads (score tokens, yes/no words, greedy and sampled generation), and the hf backend applying its
settings."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from pipeline.config.assessment import AbsoluteConfig, PromptConfig
from pipeline.config.enums import AbsoluteMode
from pipeline.contracts.engine import Request
from pipeline.contracts.schemas import JUDGMENTS, PROMPTS, RESPONSES
from pipeline.data.words import PromptWords
from pipeline.judge.hf_engine import HFEngine
from pipeline.judge.hosting.worker import JudgeWorker, Task
from pipeline.judge.spec import JudgeSpec
from pipeline.methods.verdicts.win_probability import p_a_wins, side_logprobs
from pipeline.prompts.absolute import resolve_absolute
from pipeline.prompts.labels import resolve_labels
from pipeline.prompts.plan import plan_prompts
from pipeline.scoring.responses import judgments_from_responses

pytestmark = pytest.mark.engine

PASSAGE = (
    "The council closed the old pool after engineers found cracks in its basin. A new leisure centre with two "
    "pools will open in three years, and a free bus will take swimmers to the next village until then."
)
GOOD = "The cracked pool closed; a new centre opens in three years and a free bus runs meanwhile."
BAD = "pool the banana cracked opens bus years three the the free meanwhile centre."
WORDS = PromptWords("passage", "summary", {"coherence": "coherent"})


def spec(model_path: str, backend: str = "vllm", **engine) -> JudgeSpec:
    return JudgeSpec(
        backend=backend,
        model="smollm2",
        model_path=model_path,
        name="smollm2",
        max_model_len=1024,
        engine=engine
        or (
            {"enforce_eager": True, "enable_prefix_caching": True, "seed": 0, "dtype": "float32"}
            if backend == "vllm"
            else {"dtype": "float32"}
        ),
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "all"},
    )


ABSOLUTE = AbsoluteConfig(modes=list(AbsoluteMode))


@pytest.fixture(scope="module")
def plan(tokenizer):
    labels = resolve_labels(tokenizer, [" A", "A"], [" B", "B"], "smollm2")
    absolute = resolve_absolute(ABSOLUTE, tokenizer, "smollm2")
    return plan_prompts(PromptConfig(), ["coherence"], WORDS, tokenizer, labels, "smollm2", absolute)


def pairs(plan, rows: list[tuple[str, str, str, str]]) -> pa.Table:
    template = plan.templates[0]
    return pa.table(
        {
            "context_id": ["c"] * len(rows),
            "mode": ["compare"] * len(rows),
            "attribute": ["coherence"] * len(rows),
            "template_id": ["c1"] * len(rows),
            "cand_a": [r[0] for r in rows],
            "cand_b": [r[1] for r in rows],
            "prompt": [plan.prompt(template, "coherence", PASSAGE, a, b) for _, _, a, b in rows],
        },
        schema=PROMPTS,
    )


def rate(plan, template_ids: list[str], text: str = GOOD) -> pa.Table:
    templates = {t.id: t for t in plan.absolute}
    return pa.table(
        {
            "context_id": ["c"] * len(template_ids),
            "mode": [str(templates[t].mode) for t in template_ids],
            "attribute": ["coherence"] * len(template_ids),
            "template_id": template_ids,
            "cand_a": ["g"] * len(template_ids),
            "cand_b": [""] * len(template_ids),
            "prompt": [plan.rate_prompt(templates[t], "coherence", PASSAGE, text) for t in template_ids],
        },
        schema=PROMPTS,
    )


@pytest.fixture(scope="module")
def task(judge_model, plan):
    return Task(spec(judge_model), plan.requests(), plan.frame)


@pytest.fixture(scope="module")
def worker(judge_model, plan):
    w = JudgeWorker(spec(judge_model))
    yield w
    w.close()


def test_worker_writes_the_judgment_schema(worker, plan, task):
    responses = worker(pairs(plan, [("g", "b", GOOD, BAD), ("b", "g", BAD, GOOD)]), task)
    assert responses.schema.equals(RESPONSES)
    out = judgments_from_responses(responses, plan.labels)
    assert out.schema.equals(JUDGMENTS)
    assert out.num_rows == 2
    lp = np.array(out.column("label_logprobs").to_pylist())
    assert lp.shape == (2, 4)
    # " A" and " B" are the judge's likely first tokens after "Summary"
    assert set(out.column("top_token").to_pylist()) <= {" A", " B"}
    # p(A wins) is the renormalised label probability of the label log-probs the engine returned
    np.testing.assert_allclose(out.column("p_a").to_numpy(), p_a_wins(*side_logprobs(lp, 2)), rtol=1e-12)
    mass = np.exp(lp).sum(axis=1)
    np.testing.assert_allclose(out.column("label_mass").to_numpy(), mass, rtol=1e-9)
    assert worker.base.dtype == "float32"


def test_label_logprobs_match_transformers(worker, plan, judge_model):
    """vLLM's first-token log-probabilities of the label words equal a full forward pass in transformers."""

    batch = pairs(plan, [("g", "b", GOOD, BAD), ("b", "g", BAD, GOOD)])
    ids = plan.frame.encode(worker.base.tokenizer, batch.column("prompt").to_pylist())
    read = plan.requests()["c1"]
    ours = np.array([r.token_logprobs for r in worker.base.run(ids, read)])
    hf = HFEngine(spec(judge_model, backend="hf"))
    theirs = np.array([r.token_logprobs for r in hf.run(ids, read)])
    np.testing.assert_allclose(ours, theirs, atol=0.02)
    # greedy generation of a few tokens (prompt scoring) is the same text in both engines
    generate = Request(max_tokens=4)
    assert [r.texts for r in worker.base.run(ids, generate)] == [r.texts for r in hf.run(ids, generate)]


def test_the_worker_answers_every_absolute_mode(worker, plan, task):
    """One engine answers absolute prompts of every mode: the score tokens and yes/no words read exactly (one
    log-probability per word), the generated modes' texts; each engine call holds one template."""
    ids = [t.id for t in plan.absolute]
    out = worker(rate(plan, ids), task)
    assert out.schema.equals(RESPONSES)
    by_id = {t.id: t for t in plan.absolute}
    for row in out.to_pylist():
        template = by_id[row["template_id"]]
        assert len(row["token_logprobs"]) == len(template.words)
        assert all(lp <= 0 for lp in row["token_logprobs"])
        assert len(row["texts"]) == template.request.n
        assert row["generated_tokens"] >= 1 and row["seconds"] > 0
    geval = next(r for r in out.to_pylist() if r["mode"] == "g_eval")
    # the five score tokens "1".."5" carry most of the probability after "Coherence score: "
    assert np.exp(geval["token_logprobs"]).sum() > 0.3


def test_sampled_generation_is_seeded(worker, plan):
    """absolute.samples > 1 draws that many samples at the temperature with a seed: the same every time."""
    sampled = Request(max_tokens=4, n=5, temperature=1.0, seed=7)
    template = plan.absolute[0]
    prompt = plan.rate_prompt(template, "coherence", PASSAGE, GOOD)

    ids = plan.frame.encode(worker.base.tokenizer, [prompt])
    first = worker.base.run(ids, sampled)[0].texts
    assert len(first) == 5 and len(set(first)) > 1
    assert worker.base.run(ids, sampled)[0].texts == first


def test_the_hf_backend_applies_its_env_and_settings(judge_model, plan):
    import torch

    threads = torch.get_num_threads()
    settings = replace(
        spec(judge_model, "hf"),
        engine={"dtype": "bfloat16", "threads": 1, "seed": 3},
        env={"CA_TEST_HF_ENV": "applied"},
    )
    try:
        hf = HFEngine(settings)
        assert os.environ["CA_TEST_HF_ENV"] == "applied"
        assert torch.get_num_threads() == 1 and hf.dtype == "bfloat16"
    finally:
        torch.set_num_threads(threads)
        os.environ.pop("CA_TEST_HF_ENV", None)


def test_prefix_cache_serves_shared_prefixes(worker, plan, task):
    long_good = " ".join([GOOD] * 12)  # the shared prefix (passage + slot A) spans several 128-token blocks
    worker(pairs(plan, [("g", "b", long_good, BAD)]), task)  # warm the cache
    out = worker(pairs(plan, [("g", "d", long_good, BAD + " once more")]), task)
    cached, total = out.column("cached_tokens")[0].as_py(), out.column("prompt_tokens")[0].as_py()
    assert total > 256
    # only whole KV blocks of the shared prefix are served from the cache
    assert 128 <= cached < total


def test_prompts_are_the_chat_templates_own_rendering(tokenizer, plan):
    message = plan.templates[0].text.format(
        context=PASSAGE,
        a=GOOD,
        b=BAD,
        adjective="coherent",
        noun="summary",
        Noun="Summary",
        context_noun="passage",
        Context_noun="Passage",
    )
    expected = tokenizer.apply_chat_template(
        [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
    )
    assert plan.prompt(plan.templates[0], "coherence", PASSAGE, GOOD, BAD) == expected + "Summary"
    plain = plan_prompts(
        PromptConfig(chat_template="false"), ["coherence"], WORDS, tokenizer, plan.labels, "smollm2"
    )
    assert (
        plain.prompt(plain.templates[0], "coherence", PASSAGE, GOOD, BAD) == f"{message}\n\nAnswer: Summary"
    )
