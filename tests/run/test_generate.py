"""Generate, then evaluate, through a real local Ray and the real CPU vLLM engine: the demo preset on four tickets
(three SmolLM2 "models" sharing one engine), every pair of outputs judged once per ordering, the leaderboard with
intervals in the run folder and MLflow, the judge's reasons, the criterion's options judged absolutely; a rerun in the same folder generates and judges
nothing again, and after losing one model's outputs generates exactly those."""

from __future__ import annotations

import shutil

import polars as pl
import pytest

from pipeline.run.context import run
from tests.conftest import run_fresh

pytestmark = [pytest.mark.ray, pytest.mark.engine, pytest.mark.slow]

N_INPUTS, MODELS = 4, ("smollm2-greedy", "smollm2-sampled", "smollm2-terse")
OVERRIDES = [
    "experiment=generate_demo",
    f"generate.max_inputs={N_INPUTS}",
    *(f"generate.models.{k}.max_tokens=32" for k in range(len(MODELS))),
    "reasons.n=3",
    "judge.env.VLLM_CPU_KVCACHE_SPACE=2",
    "tracking.plots=true",
]


@pytest.fixture(scope="module")
def generate_run(tmp_path_factory, ray_cluster):
    return run_fresh(tmp_path_factory, [*OVERRIDES, "tracking.experiment=generate-test"])


def test_every_model_answers_every_input_and_every_pair_is_judged_once_per_ordering(generate_run):
    _, result = generate_run
    generations = pl.from_arrow(result.values["generations"])
    assert generations.height == N_INPUTS * len(MODELS)
    assert generations.group_by("input_id", "model").len()["len"].to_list() == [1] * (N_INPUTS * len(MODELS))
    assert set(generations["finish_reason"]) <= {"stop", "length"}
    assert (generations["output_tokens"] > 0).all()
    candidates = pl.from_arrow(result.values["candidates"])
    assert sorted(candidates["system"].unique()) == sorted(MODELS)
    judgments = pl.from_arrow(result.values["judgments"])
    assert judgments.height == N_INPUTS * 3 * 2  # 3 pairs of outputs per input, both orderings
    assert judgments.group_by("context_id", "cand_a", "cand_b").len()["len"].max() == 1
    assert set(judgments["attribute"]) == {"useful"}
    # EvalAssist's structured criterion beside the comparisons: every output rated once by option letter
    ratings = pl.from_arrow(result.values["ratings"])
    assert ratings.height == N_INPUTS * len(MODELS)
    assert set(ratings["template_id"]) == {"criterion_options:useful"}
    assert ratings["score"].is_between(0, 2).all() and (ratings["label_mass"] > 0).all()


def test_the_leaderboard_has_intervals_and_is_printed_and_logged(generate_run):
    import mlflow

    _, result = generate_run
    board = pl.from_arrow(result.values["leaderboard"])
    assert set(board["model"]) == set(MODELS)
    assert set(board["metric"]) == {
        "win_rate",
        "bradley_terry",
        "poe_gaussian",
        "options",
        "win_rate:length_controlled",  # beside the raw ones: the outputs' length regressed out
        "bradley_terry:length_controlled",
        "win_rate:alpaca_eval_lc",  # AlpacaEval 2's, against leaderboard.baseline (the first generator)
    }
    assert (board["lower"] <= board["estimate"]).all() and (board["estimate"] <= board["upper"]).all()
    lc = board.filter(pl.col("metric") == "win_rate:alpaca_eval_lc")
    assert lc.height == len(MODELS) and lc.filter(pl.col("model") == MODELS[0])["estimate"][0] == 0.5
    assert (board.filter(pl.col("metric") == "win_rate")["n_games"] == N_INPUTS * 2).all()
    assert "leaderboard useful (evalullm" in result.summary
    assert (result.run_dir / "leaderboard.csv").exists() and (
        result.run_dir / "plots" / "leaderboard.png"
    ).exists()
    assert "could not be drawn" not in result.summary
    client = mlflow.MlflowClient(tracking_uri=result.tracking_uri)
    artifacts = {a.path for a in client.list_artifacts(result.mlflow_run_id)}
    assert {"leaderboard.csv", "reasons.csv", "generators.json"} <= artifacts
    assert any(k.startswith("leaderboard/useful/") for k in client.get_run(result.mlflow_run_id).data.metrics)


def test_reasons_are_stored_beside_the_comparisons(generate_run):
    _, result = generate_run
    reasons = pl.from_arrow(result.values["reasons"])
    assert reasons.height == 3
    assert set(reasons["why"]) <= {"disagree", "close", "random"}
    assert (reasons["reason"].str.len_chars() > 0).all()
    comparisons = pl.from_arrow(result.values["comparisons"])
    joined = reasons.join(comparisons, on=["context_id", "cand_i", "cand_j"], suffix="_c")
    # the score is the comparison's: a reason never changes it
    assert joined.height == 3 and (joined["p"] == joined["p_c"]).all()


def test_the_model_that_generates_judges_and_gives_its_reasons_starts_one_engine(generate_run):
    """The generators run on the judge's model (SmolLM2 under three sampling settings): one engine, started once,
    generates every output, judges every comparison and rating, and gives the reasons."""
    from pipeline.storage.events import read_events

    _, result = generate_run
    events = read_events(result.run_dir / "logs" / "engine_events.jsonl")
    started = [e for e in events if e["event"] == "engine_started"]
    assert len(started) == 1, started
    batches = [e for e in events if e["event"] == "batch_done"]
    # its batches: the generations, then the comparisons and ratings, then the reasons, all by that one worker
    assert {e["worker"] for e in batches} == {started[0]["worker"]}
    assert (
        sum(e["rows"] for e in batches)
        == N_INPUTS * len(MODELS) + N_INPUTS * 3 * 2 + N_INPUTS * len(MODELS) + 3
    )


def test_a_rerun_generates_and_judges_nothing_twice(generate_run):
    cfg, result = generate_run
    cfg.paths.run_dir = str(result.run_dir)
    cfg.tracking.enabled = False
    cfg.reasons.n = 0
    # one generator's outputs lost: only they are generated again (the other models' are not), nothing is judged
    shutil.rmtree(result.run_dir / "generations" / "smollm2-terse")
    again = run(cfg)
    assert again.metrics["generate/generated_now"] == N_INPUTS
    before = pl.from_arrow(result.values["generations"]).sort("input_id", "model")
    after = pl.from_arrow(again.values["generations"]).sort("input_id", "model")
    # greedy generation again: the same outputs, so the comparisons on disk still hold
    assert before["output"].to_list() == after["output"].to_list()
    assert again.judge_stats.judged_now == 0
