"""Real judges' verdicts through the product's own stages: the judge benchmarks of ../shared/datasets as presets, the
recorded backend answering from files of verdicts, and the meta-evaluation computed the benchmarks' way.

- ``experiment=judgebench_recorded`` on a real local Ray: the seven judges whose verdicts JudgeBench released, as one
  jury, print the published accuracies, overall and by category (against JudgeBench's own counting, restated in
  tests/methods/test_benchmark.py, on the released files), into the summary, the tables, the judge card and MLflow;
- LLMBar evaluators' verdicts written in the documented layout (drawn at random here, with unparsed verdicts; the
  released ones are held out) give LLMBar's own statistics per subset, in-process;
- a file that does not answer the run is refused before anything runs: nothing is stored, no MLflow run.

(The live judge on JudgeBench beside a recorded juror, with the real engine: test_judge_benchmarks_engine.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.contracts.errors import UserError
from pipeline.run.context import run
from tests.conftest import DATASETS, compose, run_fresh, run_table
from tests.methods.test_benchmark import judgebench_accuracy, llmbar_statistics

RECORDED = DATASETS / "judgebench" / "recorded"
# The accuracies JudgeBench's metric gives on the released verdicts (the issue's, and the authors' leaderboard's).
PUBLISHED = {
    "o1-mini-2024-09-12": 65.71,
    "Skywork-Reward-Gemma-2-27B": 64.29,
    "internlm2-20b-reward": 63.43,
    "Skywork-Reward-Llama-3.1-8B": 62.29,
    "GRM-Gemma-2B-rewardmodel-ft": 59.43,
    "internlm2-7b-reward": 59.43,
    "claude-3-haiku-20240307": 32.22,
}
FILES = {
    "o1-mini-2024-09-12": ("gpt", "arena_hard:o1-mini-2024-09-12.jsonl"),
    "Skywork-Reward-Gemma-2-27B": ("gpt", "reward_model:Skywork_Skywork-Reward-Gemma-2-27B.jsonl"),
    "internlm2-20b-reward": ("gpt", "reward_model:internlm_internlm2-20b-reward.jsonl"),
    "Skywork-Reward-Llama-3.1-8B": ("gpt", "reward_model:Skywork_Skywork-Reward-Llama-3.1-8B.jsonl"),
    "GRM-Gemma-2B-rewardmodel-ft": ("gpt", "reward_model:Ray2333_GRM-Gemma-2B-rewardmodel-ft.jsonl"),
    "internlm2-7b-reward": ("gpt", "reward_model:internlm_internlm2-7b-reward.jsonl"),
    "claude-3-haiku-20240307": ("claude", "arena_hard:claude-3-haiku-20240307.jsonl"),
}
# JudgeBench's run_judge.py reports its sources by these prefixes (and "" for overall)
SOURCES = ("mmlu-pro", "livebench-reasoning", "livebench-math", "livecodebench")


def released_pairs(judge: str) -> list[dict]:
    """The judge's released verdicts as JudgeBench's compute_final_metrics takes them: one pair each, its label
    (the right response, from the data) and its source, its two judgments (orders AB, BA)."""
    split, file = FILES[judge]
    data = {}
    for line in (DATASETS / "judgebench" / f"judgebench-{split}.jsonl").open():
        record = json.loads(line)
        right = next(c for c in record["candidates"] if c["scores"]["correct"] == 1)["candidate_id"]
        data[record["context_id"]] = {
            "label": "A>B" if right.endswith(":A") else "B>A",
            "source": record["category"],
            "judgments": [None, None],
        }
    for line in (RECORDED / split / file).open():
        verdict = json.loads(line)
        pair = data[verdict["pair_id"]]
        pair["judgments"][0 if verdict["order"] == "AB" else 1] = {"decision": verdict["decision"]}
    return list(data.values())


# --- the released judges through the product, on Ray ------------------------------------------------------------


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory, ray_cluster):
    return run_fresh(tmp_path_factory, ["experiment=judgebench_recorded"])[1]


def meta_of(result) -> pl.DataFrame:
    return run_table(result, "meta_evaluation")


@pytest.mark.ray
def test_the_released_judges_print_the_published_accuracies(recorded_run):
    overall = meta_of(recorded_run).filter(pl.col("category").is_null())
    got = {r["judge"]: round(100 * r["accuracy"], 2) for r in overall.iter_rows(named=True)}
    assert got == PUBLISHED
    summary = recorded_run.summary
    for judge, accuracy in PUBLISHED.items():
        line = next(ln for ln in summary.splitlines() if f" {judge} " in ln and "[" in ln)
        assert f" {accuracy:.2f} " in line, line
    # each judge answered from its file alone, its split's pairs; the other split's pairs left out and counted
    assert dict(overall.select("judge", "n_pairs").iter_rows()) == {
        j: 270 if j.startswith("claude") else 350 for j in PUBLISHED
    }
    assert "every answer read from the judge's file of verdicts (no engine)" in summary


@pytest.mark.ray
def test_every_released_judge_is_informative_and_the_summary_says_so_first(recorded_run):
    import mlflow

    card = run_table(recorded_run, "judge_card")
    assert set(card["judge"]) == set(PUBLISHED) and card["informative"].all(), card.select(
        "judge", "signal", "signal_p_value", "signal_units"
    )
    assert (card["signal_units"] == card["n_pairs"]).all()  # contexts of two: a unit per pair
    head = recorded_run.summary.splitlines()[: len(PUBLISHED)]
    assert all(line.startswith("informative: judge ") for line in head), head
    assert "NOT INFORMATIVE" not in recorded_run.summary
    metrics = (
        mlflow.MlflowClient(tracking_uri=recorded_run.tracking_uri)
        .get_run(recorded_run.mlflow_run_id)
        .data.metrics
    )
    assert metrics["quality/correct/o1-mini-2024-09-12/c1/informative"] == 1.0


@pytest.mark.ray
def test_by_category_the_numbers_are_judgebenchs_own_count(recorded_run):
    meta = meta_of(recorded_run)
    for judge in PUBLISHED:
        pairs = released_pairs(judge)
        want = {
            source: judgebench_accuracy([p for p in pairs if p["source"].startswith(source)])
            for source in SOURCES
        }
        want["all"] = judgebench_accuracy(pairs)
        rows = meta.filter(pl.col("judge") == judge)
        got = {(r["category"] or "all"): 100 * r["accuracy"] for r in rows.iter_rows(named=True)}
        assert set(got) == set(want) and all(abs(got[k] - want[k]) < 1e-9 for k in want), (judge, got, want)
    # and the summary shows them side by side
    assert "by category (accuracy, pairs)" in recorded_run.summary
    assert "82.14 (56)" in recorded_run.summary  # o1-mini on livebench-math


@pytest.mark.ray
def test_the_meta_evaluation_reaches_the_card_mlflow_and_the_leaderboard_of_judges(recorded_run):
    import mlflow

    meta = meta_of(recorded_run).filter(pl.col("category").is_null())
    o1 = meta.filter(pl.col("judge") == "o1-mini-2024-09-12").row(0, named=True)
    assert o1["lower"] <= o1["accuracy"] <= o1["upper"] and o1["rank"] == 1
    haiku = meta.filter(pl.col("judge") == "claude-3-haiku-20240307").row(0, named=True)
    assert haiku["rank"] > 1 and haiku["upper"] < o1["lower"]  # statistically below the others
    assert "o1-mini-2024-09-12" in haiku["tied_with"] or haiku["tied_with"] == ""
    card = run_table(recorded_run, "judge_card")
    row = card.filter(pl.col("judge") == "o1-mini-2024-09-12").row(0, named=True)
    assert row["n_objective_pairs"] == 350 and abs(row["benchmark_accuracy"] - 0.657142857142857) < 1e-12
    client = mlflow.MlflowClient(tracking_uri=recorded_run.tracking_uri)
    metrics = client.get_run(recorded_run.mlflow_run_id).data.metrics
    assert abs(metrics["meta/correct/o1-mini-2024-09-12/c1/all/accuracy"] - 0.657142857142857) < 1e-12
    assert abs(metrics["meta/correct/claude-3-haiku-20240307/c1/livecodebench/accuracy"] - 3 / 31) < 1e-12
    assert metrics["judge/left_out_prompts"] == 540.0
    assert metrics["juror/arena_hard:claude-3-haiku-20240307.jsonl/judge/left_out_prompts"] == 700.0
    left = run_table(recorded_run, "left_out")
    assert dict(left.group_by("judge").len().iter_rows()) == {
        j: 700 if j.startswith("claude") else 540 for j in PUBLISHED
    }


# --- LLMBar evaluators' verdicts in the documented layout, in-process --------------------------------------------

LLMBAR_SPLITS = ("natural", "adversarial-gptout")


def llmbar_evaluator(seed: int) -> tuple[list[dict], dict[str, list[dict]]]:
    """An evaluator's verdicts as LLMBar's result.json holds them (per subset, each item's winners in the outputs'
    own labels, "1", "2" or None: unparsed), drawn at random, and the same in the documented verdict layout."""
    rng = np.random.default_rng(seed)
    lines, results = [], {}
    for split in LLMBAR_SPLITS:
        items = [json.loads(line) for line in (DATASETS / "llmbar" / f"llmbar-{split}.jsonl").open()]
        results[split] = []
        for item in items:
            label = 1 if item["candidates"][0]["scores"]["correct"] == 1 else 2
            w_false, w_true = (rng.choice(["1", "2", "1", "2", None]) for _ in range(2))
            results[split].append(
                {
                    "label": label,
                    "results": [{"swap = False": {"winner": w_false}, "swap = True": {"winner": w_true}}],
                }
            )
            one, two = (c["candidate_id"] for c in item["candidates"])
            verdict = {"1": "first", "2": "second", None: None}
            lines.append(
                {"context_id": item["context_id"], "first": one, "second": two, "verdict": verdict[w_false]}
            )
            lines.append(
                {
                    "context_id": item["context_id"],
                    "first": two,
                    "second": one,
                    "verdict": verdict[{"1": "2", "2": "1"}.get(w_true)],
                }
            )
    return lines, results


def write_lines(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_llmbar_evaluators_get_llmbars_own_statistics_per_subset(tmp_path):
    first, second = llmbar_evaluator(1), llmbar_evaluator(2)
    one = write_lines(tmp_path / "evaluator-one.jsonl", first[0])
    two = write_lines(tmp_path / "evaluator-two.jsonl", second[0])
    cfg = compose(
        [
            "dataset=llmbar",
            f"dataset.splits=[{','.join(LLMBAR_SPLITS)}]",
            "judge=recorded",
            f"judge.model={one}",
            f"jury.judges=[{{model: {two}}}]",
            "runtime=inprocess",
            "tracking.plots=false",
            f"paths.output_root={tmp_path / 'out'}",
        ]
    )
    result = run(cfg)
    meta = run_table(result, "meta_evaluation")
    for judge, (_, results) in (("evaluator-one", first), ("evaluator-two", second)):
        for split in LLMBAR_SPLITS:
            want = llmbar_statistics(results[split])
            row = meta.filter((pl.col("judge") == judge) & (pl.col("category") == split)).row(0, named=True)
            assert abs(100 * row["accuracy_listed_first"] - want["correct_False"]) < 1e-9
            assert abs(100 * row["accuracy_listed_second"] - want["correct_True"]) < 1e-9
            assert abs(100 * row["accuracy_orderings"] - want["correct_average"]) < 1e-9
            assert abs(100 * row["both_right"] - want["correct_both"]) < 1e-9
            assert abs(100 * row["positional_agreement"] - want["equal"]) < 1e-9


# --- a file that does not answer the run: refused before anything runs --------------------------------------------


def o1_lines() -> list[dict]:
    """o1-mini's released verdicts on the first three GPT-4o pairs, in the documented verdict layout."""
    records = [json.loads(line) for line in (DATASETS / "judgebench" / "judgebench-gpt.jsonl").open()][:3]
    lines = []
    for record in records:
        a, b = (c["candidate_id"] for c in record["candidates"])
        lines.append({"context_id": record["context_id"], "first": a, "second": b, "verdict": "first"})
        lines.append({"context_id": record["context_id"], "first": b, "second": a, "p_first": 0.4})
    return lines


def broken(lines: list[dict], case: str) -> list:
    if case == "lacking":
        return lines[:-1]
    if case == "stranger":
        return [
            *lines,
            {
                "context_id": lines[0]["context_id"],
                "first": lines[0]["first"],
                "second": "nobody",
                "verdict": "first",
            },
        ]
    if case == "verdict":
        return [{**lines[0], "verdict": "better"}, *lines[1:]]
    if case == "score":
        return [
            *lines[:1],
            {k: v for k, v in lines[1].items() if k != "p_first"} | {"scores": [1.0, "inf"]},
            *lines[2:],
        ]
    assert case == "twice"
    return [*lines, {**lines[2], "verdict": "second"}]


def recorded_file(path, out, *extra: str):
    """Three JudgeBench contexts judged by the verdicts in the file at ``path``, in process, outputs in ``out``."""
    judge = ["judge=recorded", f"judge.model={path}", "runtime=inprocess", f"paths.output_root={out}"]
    return compose(["dataset=judgebench", "dataset.splits=[gpt]", "dataset.max_contexts=3", *judge, *extra])


@pytest.mark.parametrize(
    "case,fragments",
    [
        (
            "lacking",
            ["has no answer for 1 of the run's 6 prompt(s)", "shown first", "judge.engine.match=partial"],
        ),
        ("stranger", ["line 7: 'nobody' is not a candidate of context"]),
        ("verdict", ["line 1, field 'verdict': 'better' is not a verdict"]),
        ("score", ["line 2, field 'scores': [1.0, 'inf'] is not two finite numbers"]),
        ("twice", ["line 7: a second answer for context", "line 3 answers it already"]),
    ],
)
def test_a_file_that_does_not_answer_the_run_is_refused_and_nothing_is_stored(tmp_path, case, fragments):
    path = write_lines(tmp_path / "judge.jsonl", broken(o1_lines(), case))
    out = tmp_path / "out"
    with pytest.raises(UserError) as info:
        run(recorded_file(path, out))
    message = str(info.value)
    assert str(path) in message or "judge.jsonl" in message
    for fragment in fragments:
        assert fragment in message, message
    assert not (out / "runs").exists() and not (out / "mlflow").exists()  # no run folder, no MLflow run


def test_the_same_lacking_file_with_match_partial_leaves_the_pair_out_counted(tmp_path):
    path = write_lines(tmp_path / "judge.jsonl", broken(o1_lines(), "lacking"))
    result = run(recorded_file(path, tmp_path / "out", "judge.engine.match=partial", "tracking.plots=false"))
    left = run_table(result, "left_out")
    assert (
        left.height == 2 and left["context_id"].n_unique() == 1
    )  # the lacking ordering and its pair's other
    assert result.metrics["judge/left_out_prompts"] == 2.0
    assert "left out, their pairs lacking from the judge's file of verdicts" in result.summary
    judgments = run_table(result, "judgments")
    assert judgments.height == 4


@pytest.mark.ray
def test_each_accuracys_interval_is_clopper_pearsons_and_never_of_no_width(recorded_run):
    """The exact binomial interval at leaderboard.level (0.90) of JudgeBench's accuracy, overall and per category: a
    category of a few pairs all right or all wrong still has an interval (a bootstrap over pairs gave it none)."""
    from scipy.stats import beta

    meta = meta_of(recorded_run)
    for row in meta.iter_rows(named=True):
        right, n = round(row["accuracy"] * row["n_pairs"]), row["n_pairs"]
        lower = 0.0 if right == 0 else beta.ppf(0.05, right, n - right + 1)
        upper = 1.0 if right == n else beta.ppf(0.95, right + 1, n - right)
        assert row["lower"] == pytest.approx(lower, abs=1e-12) and row["upper"] == pytest.approx(
            upper, abs=1e-12
        )
        assert row["upper"] - row["lower"] > 0.01, row
