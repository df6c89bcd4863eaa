"""The judge behind a real OpenAI-compatible server: vLLM's own API server (the CPU build) on the SmolLM2
checkpoint the project converts, on 127.0.0.1, asking for a key. The demo runs through it end to end on a local
Ray; its label log-probabilities match the in-process engine's on the same prompts; a second run is answered
from the reply cache with no request; the key appears in no file the runs wrote; and a server stopped mid-run
and started again costs retries, not prompts."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.methods.scorers.poe_gaussian import poe_gaussian
from pipeline.run.context import run
from pipeline.stages.accounting import ENGINE_EVENTS
from pipeline.storage.events import read_events
from pipeline.testing.serve import LocalVLLMServer
from tests.conftest import compose, run_table

pytestmark = [pytest.mark.api, pytest.mark.ray, pytest.mark.engine, pytest.mark.slow]

KEY = "ca-test-key-7d1f0c2b9e4a-not-for-logs"
KEY_ENV = "CA_TEST_API_KEY"
SERVED = "smollm2"
N_CONTEXTS, N_CANDIDATES = 2, 4
N_PROMPTS = N_CONTEXTS * N_CANDIDATES * (N_CANDIDATES - 1) * 2  # both orderings, two attributes
COMMON = [
    f"dataset.demo.n_contexts={N_CONTEXTS}",
    f"dataset.demo.n_candidates={N_CANDIDATES}",
    "judge.max_model_len=2048",
    "judge.batch_size=16",
]


@pytest.fixture(scope="module")
def server(judge_model, tmp_path_factory):
    s = LocalVLLMServer(judge_model, tmp_path_factory.mktemp("server") / "vllm.log", SERVED, api_key=KEY)
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return tmp_path_factory.mktemp("outputs")


def api_overrides(server: LocalVLLMServer, cache: Path, *extra: str) -> list[str]:
    return [
        *COMMON,
        "judge=api",
        f"judge.endpoint.base_url={server.url}",
        f"judge.endpoint.model={SERVED}",
        f"judge.endpoint.api_key_env={KEY_ENV}",
        f"judge.endpoint.cache_path={cache}",
        # a CPU server on its test worker's core answers a prompt in one to two seconds (SummEval's 0.6/s; 0.2/s
        # when it bound both cores against the other worker's engine): a request queued behind the client's others
        # may wait past the 60 s default and be asked again, which the request counts here would read as a changed
        # prompt
        "judge.endpoint.timeout=600",
        *extra,
    ]


def judgments(result) -> pl.DataFrame:
    return run_table(result, "judgments")


KEYS = ["context_id", "attribute", "cand_a", "cand_b"]


@pytest.fixture(scope="module")
def in_process(outputs, ray_cluster) -> pl.DataFrame:
    """The same demo judged by the in-process engine, in the server's dtype (float32; on a CPU with native bfloat16
    the in-process default would be bfloat16)."""
    overrides = [*COMMON, "+judge.engine.dtype=float32", f"paths.output_root={outputs / 'local'}"]
    return judgments(run(compose(overrides)))


def test_the_demo_through_the_server_matches_the_in_process_engine_and_reruns_from_the_cache(
    server, outputs, ray_cluster, monkeypatch, in_process
):
    monkeypatch.setenv(KEY_ENV, KEY)
    cache = outputs / "replies.sqlite"
    first = run(compose([*api_overrides(server, cache), f"paths.output_root={outputs / 'api'}"]))
    table = judgments(first)
    keys = ["context_id", "attribute", "cand_a", "cand_b"]
    assert table.height == N_PROMPTS and table.select(keys).n_unique() == N_PROMPTS  # once per ordering
    pairs = table.select(
        "context_id",
        "attribute",
        pl.min_horizontal("cand_a", "cand_b").alias("lo"),
        pl.max_horizontal("cand_a", "cand_b").alias("hi"),
    )
    assert pairs.n_unique() == N_PROMPTS // 2
    # the endpoint's client ran in the driver (this process): no judge worker, and its reply cache opened by the
    # driver alone (no worker on another node needs the file)
    assert set(table["worker"].to_list()) == {f"{socket.gethostname()}:{os.getpid()}"}
    events = read_events(first.run_dir / "logs" / ENGINE_EVENTS)
    assert not [e for e in events if e.get("event") == "worker_started"]
    stats = first.judge_stats
    assert stats.cached_replies == 0 and stats.requests == N_PROMPTS
    assert stats.billed_prompt_tokens == table["prompt_tokens"].sum() > 0
    assert f"{N_PROMPTS} request(s) sent" in first.summary

    assert "API (token_ids path)" in first.summary  # the server took token ids: auto chose them
    # the same prompts in-process: the same label log-probabilities, within float32 batching noise
    joined = table.join(in_process, on=KEYS, suffix="_local")
    assert joined.height == N_PROMPTS
    served = np.array(joined["label_logprobs"].to_list())
    in_process = np.array(joined["label_logprobs_local"].to_list())
    assert np.abs(served - in_process).max() < 0.02
    assert np.abs(joined["p_a"].to_numpy() - joined["p_a_local"].to_numpy()).max() < 0.01

    # a second run on the same prompts: every reply from the cache, no request
    again = run(compose([*api_overrides(server, cache), f"paths.output_root={outputs / 'again'}"]))
    assert again.judge_stats.requests == 0 and again.judge_stats.cached_replies == N_PROMPTS
    assert (
        judgments(again).sort(keys)["label_logprobs"].to_list()
        == table.sort(keys)["label_logprobs"].to_list()
    )
    assert (
        f"0 request(s) sent (retries included), {N_PROMPTS} prompt(s) answered from the reply cache"
        in again.summary
    )

    # the key: sent (the server refuses requests without it) but written nowhere
    for folder in (outputs / "api", outputs / "again"):  # run folders, MLflow stores, logs
        for path in folder.rglob("*"):
            if path.is_file():
                assert KEY.encode() not in path.read_bytes(), path
    assert KEY.encode() not in cache.read_bytes()


def test_a_server_stopped_mid_run_costs_retries_not_prompts(server, outputs, ray_cluster, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    overrides = api_overrides(
        server,
        outputs / "fault-replies.sqlite",  # a fresh cache: every prompt is a request
        "dataset.demo.n_contexts=3",
        "dataset.demo.n_candidates=4",
        "judge.batch_size=8",
        "judge.endpoint.concurrency=2",
        "judge.endpoint.backoff_max=4",
        "judge.endpoint.retry_for=600",
        "judge.endpoint.max_retries=100",
        f"paths.output_root={outputs / 'fault'}",
    )
    n_prompts = 3 * 4 * 3 * 2  # contexts, ordered pairs, attributes

    def answered() -> int:
        return server.log.read_text(errors="replace").count('POST /v1/completions HTTP/1.1" 200')

    before = answered()
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(value=run(compose(overrides))))
    worker.start()
    deadline = time.monotonic() + 300
    while answered() < before + 16:  # two batches answered: the run is under way
        assert time.monotonic() < deadline and worker.is_alive(), "the run sent no requests"
        time.sleep(0.2)
    server.stop()
    time.sleep(3)
    server.start()
    worker.join(timeout=900)
    assert not worker.is_alive()
    done = result["value"]
    table = judgments(done)
    assert table.height == n_prompts
    assert table.select("context_id", "attribute", "cand_a", "cand_b").n_unique() == n_prompts
    stats = done.judge_stats
    assert stats.requests > n_prompts  # the outage cost retries
    assert answered() - before < n_prompts + 16  # and few prompts twice (those cut off with the server)


def test_the_chat_path_reads_the_label_words_among_the_top_alternatives(
    server, outputs, ray_cluster, monkeypatch, in_process
):
    monkeypatch.setenv(KEY_ENV, KEY)
    n_prompts = N_PROMPTS // N_CONTEXTS
    for top in (20, 2):
        overrides = api_overrides(
            server,
            outputs / f"chat-{top}.sqlite",
            "judge.endpoint.path=chat",
            f"judge.endpoint.top_logprobs={top}",
            "dataset.demo.n_contexts=1",  # one context's prompts, twice: the chat path answers one at a time
        )
        result = run(compose([*overrides, f"paths.output_root={outputs / f'chat-{top}'}"]))
        assert "API (chat path)" in result.summary
        table = judgments(result)
        assert table.height == n_prompts and table.select(KEYS).n_unique() == n_prompts
        joined = table.join(in_process, on=KEYS, suffix="_local")
        served = np.array(joined["label_logprobs"].to_list())
        local = np.array(joined["label_logprobs_local"].to_list())
        stats = result.judge_stats
        assert stats.logprobs_read == served.size
        assert (
            f"{stats.missing_logprobs} of {served.size} requested token log-probabilities" in result.summary
        )
        # the answer prefix is continued on the server, so the prompt is the same text: a word among the
        # alternatives has the in-process log-probability; one that is not gets a floor above its truth
        found = np.abs(served - local) < 0.02
        if top == 20:
            assert stats.missing_logprobs == 0 and found.all()  # all four label words among the top 20
        else:
            assert stats.missing_logprobs == (~found).sum() > 0
            assert (served[~found] > local[~found]).all()
            assert found[:, [0, 2]].mean() > 0.9  # " A" and " B" are the likely first tokens


def test_a_served_model_without_a_local_checkpoint_uses_the_servers_tokenizer(
    server, outputs, ray_cluster, monkeypatch, in_process, caplog
):
    """``judge.model`` names only the served model (no checkpoint of that name here): the label words and prompt
    lengths come from the server's /tokenize, and the chat path reads the same log-probabilities."""
    monkeypatch.setenv(KEY_ENV, KEY)
    overrides = api_overrides(server, outputs / "served.sqlite", f"judge.model={SERVED}")
    with caplog.at_level("INFO"):
        result = run(compose([*overrides, f"paths.output_root={outputs / 'served'}"]))
    assert "tokens from the server's /tokenize" in caplog.text
    assert "API (chat path)" in result.summary and result.judge_stats.missing_logprobs == 0
    table = judgments(result)
    assert table.height == N_PROMPTS
    joined = table.join(in_process, on=KEYS, suffix="_local")
    served = np.array(joined["label_logprobs"].to_list())
    local = np.array(joined["label_logprobs_local"].to_list())
    assert joined.height == N_PROMPTS and np.abs(served - local).max() < 0.02


def test_generators_behind_the_server_then_the_judge(server, outputs, ray_cluster, monkeypatch, caplog):
    """Generate, then evaluate with both generators and the judge behind the server: one generator by token
    ids (its checkpoint is here), one by the chat path with its own system prompt (only the served name); the
    outputs are judged, rated and explained, all through the API."""
    monkeypatch.setenv(KEY_ENV, KEY)
    api = (
        f"{{base_url: '{server.url}', model: {SERVED}, api_key_env: {KEY_ENV}, "
        f"cache_path: '{outputs / 'gen.sqlite'}', timeout: 600}}"
    )
    models = (
        f"[{{name: greedy, model: smollm2-135m-instruct, max_tokens: 48, endpoint: {api}}},"
        f"{{name: terse, model: {SERVED}, system_prompt: 'You answer in at most twelve words.', "
        f"max_tokens: 48, endpoint: {api}}}]"
    )
    overrides = api_overrides(
        server,
        outputs / "gen-judge.sqlite",
        "experiment=generate_demo",
        f"generate.models={models}",
        "generate.max_inputs=3",
        "reasons.n=2",
        f"paths.output_root={outputs / 'generate'}",
    )
    with caplog.at_level("INFO"):
        result = run(compose(overrides))
    outputs_table = pl.read_parquet(result.run_dir / "generations")
    assert outputs_table.height == 6 and set(outputs_table["model"]) == {"greedy", "terse"}
    assert (outputs_table["output_tokens"] > 0).all() and (outputs_table["output"].str.len_chars() > 0).all()
    assert "tokens from the server's /tokenize" in caplog.text  # the terse generator's
    log_text = server.log.read_text(errors="replace")
    assert (
        'POST /v1/chat/completions HTTP/1.1" 200' in log_text
        and 'POST /v1/completions HTTP/1.1" 200' in log_text
    )
    judged = judgments(result)
    assert judged.height == 3 * 2  # one pair per input, both orderings, one criterion
    reasons = run_table(result, "reasons")
    assert reasons.height > 0 and (reasons["reason"].str.len_chars() > 0).all()
    board = run_table(result, "leaderboard")
    assert set(board["model"]) == {"greedy", "terse"}
    for path in (outputs / "generate").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_a_judge_behind_the_server_reasons_then_gives_its_verdict(server, outputs, ray_cluster, monkeypatch):
    """judge.reasoning through the server, by the token-id path and by the chat path (the reasoning asked as a
    chat, the verdict as a second request that continues the reasoning and the answer prefix as the assistant's
    message): every prompt has its reasoning and its verdict, two requests each, and the two paths agree."""
    monkeypatch.setenv(KEY_ENV, KEY)
    tables = {}
    n_prompts = N_PROMPTS // N_CONTEXTS
    for path in ("token_ids", "chat"):
        overrides = api_overrides(
            server,
            outputs / f"reasoning-{path}.sqlite",
            f"judge.endpoint.path={path}",
            "judge.reasoning.enabled=true",
            "judge.reasoning.max_tokens=16",
            "dataset.demo.n_contexts=1",  # a generation of 16 tokens per prompt, twice: one context's prompts
            f"paths.output_root={outputs / f'reasoning-{path}'}",
        )
        result = run(compose(overrides))
        table = judgments(result)
        assert table.height == n_prompts and table["reasoning"].null_count() == 0
        assert table["reasoning_tokens"].is_between(1, 16).all() and table["p_a"].is_finite().all()
        assert result.judge_stats.requests == 2 * n_prompts
        tables[path] = table
    joined = tables["token_ids"].join(tables["chat"], on=KEYS, suffix="_chat")
    assert joined.height == n_prompts
    same = (joined["reasoning"] == joined["reasoning_chat"]).mean()
    assert same > 0.9  # the server renders the same chat text the token-id path sends
    agree = joined.filter(pl.col("reasoning") == pl.col("reasoning_chat"))
    np.testing.assert_allclose(agree["p_a"], agree["p_a_chat"], atol=0.02)


def test_a_jury_of_an_in_process_judge_and_the_same_model_behind_the_server(
    server, outputs, ray_cluster, monkeypatch, datasets
):
    """Two judges of one run (jury.judges): SmolLM2 in-process answering template c1 and the same model behind the
    server answering c2, each stored under its own identity (the juror in jurors/<name>/) and resumed on its own; the
    per-judge tables, the jury's scores (jury_mean checked against PoE-Gaussian on the pooled answers) and its jurors'
    lines in the run folder and in MLflow."""
    import mlflow

    monkeypatch.setenv(KEY_ENV, KEY)
    folder = outputs / "jury-run"
    overrides = [
        "experiment=jury_templates",
        f"dataset.path={datasets / 'summeval' / 'summeval.jsonl'}",
        "dataset.max_contexts=1",
        "dataset.max_candidates=4",
        "judge.max_model_len=2048",
        "judge.templates=[c1]",
        "+judge.engine.dtype=float32",
        (
            "+jury.judges=[{name: smol-api, backend: api, templates: [c2], endpoint: {base_url: '"
            f"{server.url}', model: {SERVED}, api_key_env: {KEY_ENV}, cache_path: '{outputs / 'jury.sqlite'}',"
            " timeout: 600}}]"  # as api_overrides says: no request asked twice on a loaded machine
        ),
        f"paths.output_root={outputs / 'jury'}",
        f"paths.run_dir={folder}",
        "tracking.plots=false",
    ]
    first = run(compose(overrides))
    table = judgments(first)
    prompts = 4 * 3  # one article, 4 summaries, both orderings
    by_judge = dict(table.group_by("judge").agg(pl.col("template_id").unique().sort()).iter_rows())
    assert by_judge == {"smollm2-135m-instruct": ["c1"], "smol-api": ["c2"]}
    assert table.height == 2 * prompts and table.select(["judge", *KEYS]).n_unique() == 2 * prompts
    # the juror's own folder: its judge, prompt plan and judgments, and its stats under juror/<name>/
    juror = folder / "jurors" / "smol-api"
    assert (juror / "judge.json").exists() and (juror / "prompt_plan.json").exists()
    assert pl.read_parquet(juror / "tables" / "judgments.parquet").height == prompts
    assert first.metrics["juror/smol-api/judge/api_requests"] == prompts
    assert first.metrics["judge/comparisons"] == prompts  # the run's own judge: its prompts alone

    tables = folder / "tables"
    bias = pl.read_parquet(tables / "position_bias.parquet")
    assert sorted(bias["judge"].unique()) == ["smol-api", "smollm2-135m-instruct"]
    correlations = pl.read_parquet(tables / "correlations.parquet")
    assert {"smol-api", "smollm2-135m-instruct", "jury"} <= set(correlations["judge"])
    jurors = pl.read_parquet(tables / "jurors.parquet")
    assert sorted(zip(jurors["judge"], jurors["template_id"], strict=True)) == [
        ("smol-api", "c2"),
        ("smollm2-135m-instruct", "c1"),
    ]
    assert jurors["share"].sum() == pytest.approx(1.0) and (jurors["answers"] == prompts).all()
    agreement = pl.read_parquet(tables / "juror_agreement.parquet")
    assert agreement.height == 1 and agreement["pairs"][0] == prompts // 2
    scores = pl.read_parquet(tables / "scores.parquet")
    assert set(scores.filter(pl.col("judge") == "jury")["method"]) == {
        "jury_poe",
        "jury_majority",
        "jury_mean",
    }
    # jury_mean: PoE-Gaussian on every juror's answers pooled, each of equal weight (the two judges' rows together)
    jury = scores.filter(pl.col("judge") == "jury")
    assert jury.height == 3 * 4 and jury["template_id"].unique().to_list() == ["c1:c2"]
    assert jury["human_score"].null_count() == 0 and jury["rank"].min() == 1
    cands = sorted(set(table["cand_a"]))
    index = {c: k for k, c in enumerate(cands)}
    want = poe_gaussian(
        len(cands),
        np.array([index[c] for c in table["cand_a"]]),
        np.array([index[c] for c in table["cand_b"]]),
        table["p_a"].to_numpy(),
    )
    got = dict(jury.filter(pl.col("method") == "jury_mean").select("candidate_id", "score").iter_rows())
    np.testing.assert_allclose([got[c] for c in cands], want, atol=1e-9)
    # the same model answers both templates: in float32 the two judges' verdicts on a template would be equal, and
    # here the templates differ, so the jury compares two jurors of one model

    client = mlflow.tracking.MlflowClient(first.tracking_uri)
    logged = client.get_run(first.mlflow_run_id).data.metrics
    assert "jury/coherence/smol-api/c2/share" in logged
    assert "jury/coherence/smollm2-135m-instruct/c1/share" in logged
    assert logged["juror/smol-api/judge/api_requests"] == prompts
    artifacts = {a.path for a in client.list_artifacts(first.mlflow_run_id, "tables")}
    assert {
        "tables/jurors.parquet",
        "tables/juror_agreement.parquet",
        "tables/judgments.parquet",
    } <= artifacts

    # resumed per judge: the juror's judgments lost, the rerun asks only the juror again (from the reply cache)
    import shutil

    shutil.rmtree(juror / "judgments")
    again = run(compose(overrides))
    assert again.metrics["judge/judged_this_run"] == 0  # the run's judge: everything in its folder
    assert again.metrics["juror/smol-api/judge/judged_this_run"] == prompts
    assert again.metrics["juror/smol-api/judge/api_requests"] == 0
    assert again.metrics["juror/smol-api/judge/api_cached_replies"] == prompts
    same = ["judge", *KEYS, "template_id", "label_logprobs", "p_a"]
    assert judgments(again).select(same).sort(same[:5]).equals(table.select(same).sort(same[:5]))


def test_a_model_that_returns_no_logprobs_gets_a_sampled_verdict_marked_in_every_table(
    server, outputs, ray_cluster, monkeypatch
):
    """judge.endpoint.path=sampled: each verdict asked ``samples`` times without logprobs, its words counted; the judge's
    name says ``:sampled`` in every table; a rerun is answered by the reply cache."""
    monkeypatch.setenv(KEY_ENV, KEY)
    samples = 5
    overrides = api_overrides(
        server,
        outputs / "sampled.sqlite",
        "judge.endpoint.path=sampled",
        f"judge.endpoint.samples={samples}",
        "judge.endpoint.sample_tokens=3",
        "dataset.attributes=[coherence]",
        "tracking.plots=false",
    )
    result = run(compose([*overrides, f"paths.output_root={outputs / 'sampled'}"]))
    table = judgments(result)
    name = "smollm2-135m-instruct:sampled"
    prompts = N_PROMPTS // 2  # one attribute
    assert table.height == prompts and set(table["judge"]) == {name}
    # every probability is a count of the samples with half a count added to A and to B
    mass = table["label_mass"].to_numpy() * (samples + 1)
    said = mass - 1  # samples that gave a label word
    assert np.allclose(said, np.round(said)) and (said >= 0).all() and (said <= samples).all()
    a_count = table["p_a"].to_numpy() * mass - 0.5
    assert np.allclose(a_count, np.round(a_count)) and (a_count >= 0).all()
    assert result.judge_stats.requests == prompts  # one request of n samples per prompt
    assert result.judge_stats.billed_completion_tokens >= prompts * samples  # at least a token per sample
    tables = result.run_dir / "tables"
    for file in ("comparisons", "position_bias", "scores", "correlations", "cost"):
        assert set(pl.read_parquet(tables / f"{file}.parquet")["judge"]) == {name}, file
    assert "API (sampled path)" in result.summary

    again = run(compose([*overrides, f"paths.output_root={outputs / 'sampled-again'}"]))
    assert again.judge_stats.requests == 0 and again.judge_stats.cached_replies == prompts
    assert judgments(again).sort(KEYS)["p_a"].to_list() == table.sort(KEYS)["p_a"].to_list()
