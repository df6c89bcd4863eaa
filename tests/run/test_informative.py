"""Is the judge informative here? Held-out judges through the product's own path (a data set with models, with and
without people's scores; a recorded judge answering every prompt from a file, in-process): judges without signal
(always "first", a coin with a position bias, one half everywhere) are flagged "not informative" in the summary's
first lines, the leaderboard's headline, the card, `make runs` and MLflow; a judge that sees the quality is flagged
informative, with one line saying why. The released JudgeBench judges: tests/run/test_judge_benchmarks.py; the test's
rates on simulated judges: tests/methods/test_signal.py."""

from __future__ import annotations

import json

import mlflow
import numpy as np
import polars as pl
import pytest

from pipeline.run.context import run
from pipeline.run.runs import runs, table
from tests.conftest import compose, run_table

MODELS = ("alpha", "bravo", "charlie", "delta", "echo")
QUALITY = {m: k for k, m in enumerate(MODELS)}  # echo best


def world(folder, judge: str, scored: bool) -> tuple[str, str]:
    """Twelve questions answered by five models (people's scores follow the models' quality where ``scored``) and a
    file of verdicts for every ordering of every pair from ``judge``."""
    rng = np.random.default_rng(5)
    records, verdicts = [], []
    for c in range(12):
        cands = []
        for m in MODELS:
            cand = {
                "candidate_id": f"q{c}:{m}",
                "system": m,
                "text": f"{m} answers question {c} " + "x" * (c + 3),
            }
            if scored:
                cand["scores"] = {"quality": QUALITY[m] + float(rng.normal(0, 0.3))}
            cands.append(cand)
        records.append({"context_id": f"q{c}", "context": f"question {c}", "candidates": cands})
        for a in MODELS:
            for b in MODELS:
                if a == b:
                    continue
                line = {"context_id": f"q{c}", "first": f"q{c}:{a}", "second": f"q{c}:{b}"}
                if judge == "always first":
                    line["verdict"] = "first"
                elif judge == "one half":
                    line["p_first"] = 0.5
                elif judge == "biased coin":
                    line["p_first"] = float(np.clip(rng.normal(0.8, 0.15), 0, 1))
                else:  # sees the quality
                    line["p_first"] = float(1 / (1 + np.exp(-(QUALITY[a] - QUALITY[b]) - rng.normal(0, 1))))
                verdicts.append(line)
    data, file = folder / "data.jsonl", folder / "verdicts.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    file.write_text("".join(json.dumps(v) + "\n" for v in verdicts))
    return str(data), str(file)


def judged(tmp_path, judge: str, scored: bool):
    data, file = world(tmp_path, judge, scored)
    overrides = [
        "dataset.name=models",
        f"dataset.path={data}",
        "dataset.attributes=[quality]",
        "judge=recorded",
        f"judge.model={file}",
        "judge.name=held-out",
        "runtime=inprocess",
        f"paths.output_root={tmp_path / 'out'}",
    ]
    return run(compose(overrides))


@pytest.mark.parametrize("scored", [True, False], ids=["with people's scores", "without"])
@pytest.mark.parametrize("judge", ["always first", "biased coin", "one half"])
def test_a_judge_without_signal_is_said_to_be_so_before_any_conclusion(tmp_path, judge, scored):
    result = judged(tmp_path, judge, scored)
    card = run_table(result, "judge_card").row(0, named=True)
    assert card["informative"] is False and card["signal_p_value"] > 0.05
    first = result.summary.splitlines()[0]
    assert first.startswith(
        "NOT INFORMATIVE: judge held-out, quality (c1) is not distinguishable from chance here"
    )
    assert "leaderboard quality (c1): no model can be told apart" in result.summary
    assert "first by win rate" not in result.summary
    assert "judge card quality (c1, judge held-out): not informative here" in result.summary
    if scored:  # people's own board beside it, and no calibration claimed
        assert "no calibration (a temperature fitted to noise is not a calibration)" in result.summary
        assert (
            card["accuracy_lower"] is None or card["accuracy_upper"] > card["accuracy_lower"]
        )  # never no width
        assert "people's first by their mean score echo" in result.summary
    metrics = mlflow.MlflowClient(result.tracking_uri).get_run(result.mlflow_run_id).data.metrics
    assert metrics["quality/quality/held-out/c1/informative"] == 0.0
    listed = table(runs(tmp_path / "out"))
    assert "informative" in listed.splitlines()[0] and " 0 of 1 " in listed.splitlines()[1]
    assert not scored or "(judge not informative)" in listed.splitlines()[1]


def test_a_judge_that_sees_the_quality_is_informative_and_people_sit_beside_it(tmp_path):
    result = judged(tmp_path, "sees the quality", True)
    card = run_table(result, "judge_card").row(0, named=True)
    assert card["informative"] is True and card["signal_p_value"] < 0.01 and card["signal"] > 0.5
    assert result.summary.splitlines()[0].startswith(
        "informative: judge held-out, quality (c1): its verdicts prefer"
    )
    assert "NOT INFORMATIVE" not in result.summary and "first by win rate echo" in result.summary
    # its agreement with people, with an interval over the twelve contexts (pairs of a context share candidates)
    assert (
        card["accuracy_lower"] > 0.5 and card["accuracy_lower"] <= card["accuracy"] <= card["accuracy_upper"]
    )
    assert (
        f"agrees with people on {100 * card['accuracy']:.0f}% [" in result.summary
        and "above chance" in result.summary
    )
    # people's own per-model mean and rank beside the judge's, and how far the two boards agree across the 5 models
    board = run_table(result, "leaderboard")
    people = board.filter(pl.col("metric") == "people").sort("estimate", descending=True)
    assert people["model"].to_list()[0] == "echo" and people["rank"].min() == 1
    low = card["models_spearman_lower"]  # none where every bootstrap round agrees (an interval of no width)
    assert card["n_models"] == 5 and (low is None or low < card["models_spearman"] <= 1.0)
    assert card["models_spearman"] > 0.8 and card["models_kendall"] > 0.6
    assert "the judge's board and people's across 5 models: Spearman" in result.summary
    metrics = mlflow.MlflowClient(result.tracking_uri).get_run(result.mlflow_run_id).data.metrics
    assert metrics["quality/quality/held-out/c1/informative"] == 1.0
    assert metrics["card/quality/held-out/c1/models_spearman"] == pytest.approx(card["models_spearman"])
