"""Trust with a guarantee through the product, on real judges' released verdicts (JudgeBench, GPT-4o's 350 pairs,
where the objective label plays people): ``experiment=judgebench_trust`` certifies a cascade of a reward model and
o1-mini, keeps verdicts with the guarantee and escalates the rest; the review's random sample, answered, calibrates the
same cascade (``trust.labels=review``) and its escalated pairs become the review's queue; bad input is refused before
anything is judged.

Held out: the guarantee on the released verdicts themselves. The run's own comparisons (sides, ids and confidences as
the product's stages made them) are split 200 times into 200 calibration pairs and the rest; the disagreement with
the right answer over all 350 pairs above the threshold certified on the calibration pairs is at most alpha in at
least 1 - delta of the splits (a calibration sample drawn without replacement: the binomial bound is conservative).
"""

from __future__ import annotations

import json
import math

import mlflow
import numpy as np
import polars as pl
import pytest

from pipeline.contracts.errors import ConfigError, UserError
from pipeline.methods.agreement.selective import cascade, fixed_sequence_threshold
from pipeline.methods.verdicts.outcomes import WIN_I, WIN_J, judge_verdicts
from pipeline.review.agreement import agreement
from pipeline.review.answers import AnswerLog
from pipeline.review.results import write
from pipeline.review.sample import Strategy, open_sample, shown
from pipeline.run.context import run
from pipeline.storage.csv import write_csv
from tests.conftest import DATASETS, compose

SKYWORK, O1 = "Skywork-Reward-Gemma-2-27B", "o1-mini-2024-09-12"
PAIR = ["attribute", "context_id", "cand_i", "cand_j"]


def right_answers() -> dict[str, str]:
    """Each JudgeBench GPT-4o pair's right response, read from the data file itself (not from the run)."""
    out = {}
    for line in (DATASETS / "judgebench" / "judgebench-gpt.jsonl").open():
        record = json.loads(line)
        out[record["context_id"]] = next(
            c["candidate_id"] for c in record["candidates"] if c["scores"]["correct"] == 1
        )
    return out


def table(result, name: str) -> pl.DataFrame:
    return pl.read_parquet(result.run_dir / "tables" / f"{name}.parquet")


@pytest.fixture(scope="module")
def trust_run(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("trust")
    cfg = compose(
        [
            "experiment=judgebench_trust",
            "runtime=inprocess",
            f"paths.output_root={outputs}",
            f"paths.run_dir={outputs / 'run'}",
            "tracking.plots=true",
        ]
    )
    return run(cfg)


def verdicts_of(comparisons: pl.DataFrame, judge: str, right: dict[str, str]) -> pl.DataFrame:
    """A judge's verdict on each pair (from the run's debiased comparisons), its confidence, and whether it is the
    right answer."""
    mine = comparisons.filter(pl.col("judge") == judge).sort("context_id")
    code, confidence = judge_verdicts(mine["p"].to_numpy(), mine["p_tie"].fill_null(0.0).to_numpy())
    chosen = np.where(code == WIN_I, mine["cand_i"].to_numpy(), np.where(code == WIN_J, mine["cand_j"], None))
    truth = np.array([right[c] for c in mine["context_id"]])
    return mine.select(PAIR).with_columns(
        confidence=pl.Series(confidence), agree=pl.Series(chosen == truth, dtype=pl.Boolean)
    )


def test_the_cascade_keeps_what_it_certifies_and_the_kept_verdicts_agree_as_guaranteed(trust_run):
    trust, accepted, labels = (table(trust_run, n) for n in ("trust", "accepted", "labels"))
    right = right_answers()
    # 200 pairs labelled from the data, drawn uniformly from the 350 people scored (the population), each label the
    # right answer
    assert labels.height == 350 and labels["inclusion"].n_unique() == 1
    assert labels["inclusion"][0] == pytest.approx(200 / 350)
    labels = labels.drop_nulls("preference")
    assert labels.height == 200 and (table(trust_run, "trust")["population"] == 350).all()
    for row in labels.iter_rows(named=True):
        assert row["preference"] == (1.0 if right[row["context_id"]] == row["cand_i"] else 0.0)
    # the cascade in the order given, each at its share of delta
    assert trust.sort("step")["judge"].to_list() == [SKYWORK, O1]
    assert trust["delta"].to_list() == pytest.approx([0.05, 0.05])
    # every pair once: kept by the first judge whose certified threshold its confidence reaches, else escalated
    assert accepted.height == 350 and accepted.select(PAIR).n_unique() == 350
    comparisons = table(trust_run, "comparisons")
    by_judge = {j: verdicts_of(comparisons, j, right) for j in (SKYWORK, O1)}
    open_ = pl.Series([True] * 350)
    want = pl.Series(["escalated"] * 350)
    pairs = by_judge[SKYWORK].select(PAIR)
    for row in trust.sort("step").iter_rows(named=True):
        mine = pairs.join(by_judge[row["judge"]], on=PAIR, how="left")
        keeps = open_ & (mine["confidence"] >= row["threshold"]) if row["certified"] else open_ & False
        want = pl.select(pl.when(keeps).then(pl.lit(row["judge"])).otherwise(want)).to_series()
        open_ = open_ & ~keeps
        # what the table says it kept and its agreement on the labelled ones kept, counted again here
        labelled = mine.join(labels.select(PAIR), on=PAIR, how="semi")
        kept = labelled.filter(pl.col("confidence") >= (row["threshold"] if row["certified"] else 2.0)).join(
            pairs.filter(~(open_ | keeps)).select(PAIR), on=PAIR, how="anti"
        )
        if row["certified"]:
            assert row["labels_kept"] == kept.height and row["disagreements"] == (~kept["agree"]).sum()
            assert row["bound"] <= row["alpha"]
            assert row["coverage"] == pytest.approx(keeps.sum() / 350)
        else:
            assert row["threshold"] is None and row["bound"] == 1.0
    got = pairs.join(accepted, on=PAIR, how="left")["accepted_by"]
    assert got.to_list() == want.to_list()
    # the guarantee, against the truth of all 350 pairs: the verdicts kept agree with the right answer >= 1 - alpha
    kept = accepted.filter(pl.col("accepted_by") != "escalated")
    assert kept.height > 0, "the cascade keeps something at alpha 0.2 on the released verdicts"
    chosen = np.where(kept["p"].to_numpy() > 0.5, kept["cand_i"].to_numpy(), kept["cand_j"].to_numpy())
    assert np.mean(chosen == np.array([right[c] for c in kept["context_id"]])) >= 0.8
    # the summary says it in words, and MLflow has it
    summary = trust_run.summary
    assert f"trust correct ({O1}, step 2 of the cascade): accepts" in summary
    assert f"{kept.height} of 350 comparisons kept with the guarantee" in summary
    assert "no prediction-powered leaderboard" in summary
    assert (trust_run.run_dir / "plots" / "risk_coverage.png").stat().st_size > 0
    assert "could not be drawn" not in trust_run.summary
    tracking = json.loads((trust_run.run_dir / "tracking.json").read_text())
    metrics = mlflow.MlflowClient(tracking["tracking_uri"]).get_run(tracking["run_id"]).data.metrics
    assert metrics["trust/kept"] == kept.height and metrics["trust/escalated"] == 350 - kept.height
    assert metrics["trust/labels"] == 200
    assert metrics[f"trust/correct/{O1}/c1/certified"] == 1.0


@pytest.mark.parametrize("alpha", [0.2, 0.3])
def test_the_guarantee_holds_on_the_released_verdicts_over_random_splits(trust_run, alpha):
    """Held out: each judge alone and the cascade, 200 random splits of the run's own comparisons."""
    right = right_answers()
    comparisons = table(trust_run, "comparisons")
    judges = [verdicts_of(comparisons, j, right) for j in (SKYWORK, O1)]
    assert all(j.select(PAIR).equals(judges[0].select(PAIR)) for j in judges)
    confidences = [j["confidence"].to_numpy() for j in judges]
    agrees = [j["agree"].to_numpy() for j in judges]
    delta, splits, n = 0.1, 200, len(agrees[0])
    failures = {"skywork": 0, "o1": 0, "cascade": 0}
    certified = dict.fromkeys(failures, 0)
    for seed in range(splits):
        calibration = np.zeros(n, dtype=bool)
        calibration[np.random.default_rng([seed, int(alpha * 100)]).permutation(n)[:200]] = True
        for name, c, ok in (("skywork", confidences[0], agrees[0]), ("o1", confidences[1], agrees[1])):
            found = fixed_sequence_threshold(c[calibration], ok[calibration], alpha, delta)
            if found.certified:
                certified[name] += 1
                failures[name] += (1 - ok[c >= found.threshold].mean()) > alpha
        steps = cascade(confidences, agrees, calibration, alpha, delta)
        kept = np.zeros(n, dtype=bool)
        right_kept = np.zeros(n, dtype=bool)
        for step, ok in zip(steps, agrees, strict=True):
            kept |= step.accepts
            right_kept |= step.accepts & ok
        if kept.any():
            certified["cascade"] += 1
            failures["cascade"] += 1 - right_kept.sum() / kept.sum() > alpha
    allowed = splits * delta + 3 * math.sqrt(splits * delta * (1 - delta))
    print(
        f"alpha {alpha}: failures {failures}, certified {certified} of {splits} splits (allowed {allowed:.1f})"
    )
    assert all(f <= allowed for f in failures.values()), (failures, certified)
    assert certified["o1"] > splits / 2 and certified["cascade"] > splits / 2, certified


def test_a_random_review_calibrates_the_cascade_and_its_escalated_pairs_are_the_queue(trust_run, tmp_path):
    """The review's own path: a uniform sample of the run's items, answered (with the right answer), written by
    the review's report with each label's chance; the same run folder rerun with trust.labels=review certifies on
    those labels (no pair judged again), and --strategy escalated queues exactly the pairs no judge kept."""
    right = right_answers()
    run_dir = trust_run.run_dir
    folder = run_dir / "review"
    sample = open_sample(run_dir, folder, Strategy.RANDOM, 120, 0)
    assert (folder / "inclusion.parquet").exists() and sample.items["inclusion"].n_unique() == 1
    log = AnswerLog(folder / "answers.jsonl")
    for item in sample.items.iter_rows(named=True):
        first, second = shown(item, "ann", sample.spec.seed)
        choice = "1" if right[item["context_id"]] == first else "2"
        log.add(
            {"reviewer": "ann", "item_id": item["item_id"], "slot1": first, "slot2": second, "choice": choice}
        )
    write(agreement(sample, log.read()))
    answers = pl.read_csv(folder / "labels.csv", schema_overrides={"context_id": pl.String})
    assert answers["inclusion"].null_count() == 0
    cfg = compose(
        [
            "experiment=judgebench_trust",
            "runtime=inprocess",
            "trust.labels=review",
            f"paths.output_root={run_dir.parent}",
            f"paths.run_dir={run_dir}",
        ]
    )
    again = run(cfg)
    population = table(again, "labels")
    assert set(population["source"]) == {"review"}
    assert population.height == 350  # the review drew from every pair of the run
    labels = population.drop_nulls("preference")
    assert labels.select(PAIR).n_unique() == labels.height == answers.select(PAIR).n_unique()
    for row in labels.iter_rows(named=True):
        assert row["preference"] == (1.0 if right[row["context_id"]] == row["cand_i"] else 0.0)
    trust = table(again, "trust")
    assert trust["n_labels"].max() <= labels.height and trust.height == 2
    assert again.judge_stats.judged_now == 0  # the run folder's verdicts, calibrated anew
    escalated = table(again, "accepted").filter(pl.col("accepted_by") == "escalated").select(PAIR)
    queue = open_sample(run_dir, tmp_path / "queue", Strategy.ESCALATED, 10**6, 0)
    assert queue.items.select(PAIR).sort(PAIR).equals(escalated.sort(PAIR))


def reviewed(folder, tmp_path):
    """The trust preset calibrated on the review answers in ``folder``, its outputs under ``tmp_path``."""
    overrides = ["experiment=judgebench_trust", "runtime=inprocess", "trust.labels=review"]
    return compose([*overrides, f"trust.review_folder={folder}", f"paths.output_root={tmp_path / 'out'}"])


def test_labels_from_another_run_are_refused_naming_the_pair(trust_run, tmp_path):
    folder = tmp_path / "review"
    folder.mkdir()
    pl.DataFrame(
        {
            "attribute": ["correct"],
            "context_id": ["not-a-context"],
            "cand_i": ["x"],
            "cand_j": ["y"],
            "human": ["i"],
            "inclusion": [0.5],
        }
    ).write_csv(folder / "labels.csv")
    cfg = reviewed(folder, tmp_path)
    with pytest.raises(UserError, match="not among the run's comparisons.*not-a-context.*another run"):
        run(cfg)


def test_review_labels_without_their_inclusion_file_are_refused_saying_what_to_do(trust_run, tmp_path):
    """labels.csv beside no inclusion.parquet (copied alone): refused naming the missing file, never a column error;
    its ids are read as the text the run wrote, whatever they look like."""
    attribute, context, a, b = table(trust_run, "comparisons").select(PAIR).row(0)
    pair = (attribute, context, min(a, b), max(a, b))
    folder = tmp_path / "review"
    folder.mkdir()
    frame = pl.DataFrame([(*pair, "i", 0.5)], schema=[*PAIR, "human", "inclusion"], orient="row")
    write_csv(frame, folder / "labels.csv")
    with pytest.raises(UserError, match="labels.csv has no inclusion.parquet beside it"):
        run(reviewed(folder, tmp_path))


@pytest.mark.parametrize(
    "override,message",
    [
        ("trust.alpha=0", r"trust.alpha=0.0 must be strictly between 0 and 1"),
        ("trust.delta=1.5", r"trust.delta=1.5 must be strictly between 0 and 1"),
        ("trust.n=0", r"trust.n=0 must be a positive number"),
        ("trust.cascade=[]", r"trust.cascade is empty"),
    ],
)
def test_a_guarantee_that_means_nothing_is_refused_at_start(tmp_path, override, message):
    with pytest.raises(ConfigError, match=message):
        compose(
            ["experiment=judgebench_trust", "runtime=inprocess", override, f"paths.output_root={tmp_path}"]
        )
    assert not list(tmp_path.rglob("*.parquet"))


def test_a_cascade_naming_no_judge_of_the_run_is_refused_before_anything_is_judged(tmp_path):
    cfg = compose(
        [
            "experiment=judgebench_trust",
            "runtime=inprocess",
            "trust.cascade=[o1-mini]",
            f"paths.output_root={tmp_path}",
        ]
    )
    with pytest.raises(UserError, match=r"trust.cascade names 'o1-mini', which is none of the run's judges"):
        run(cfg)
    assert not list(tmp_path.rglob("judgments/*.parquet"))


def partial_world(folder) -> tuple[str, str]:
    """Four contexts of four candidates; people scored the first two contexts only; a recorded judge sure and right
    on those and sure and wrong on the others (the issue's case). The data file and the verdict file."""
    records, verdicts = [], []
    for c in range(4):
        quality = [3, 1, 4, 2]
        cands = [
            {"candidate_id": f"c{c}:{k}", "text": f"answer {k} to question {c}"}
            | ({"scores": {"quality": quality[k]}} if c < 2 else {})
            for k in range(4)
        ]
        records.append({"context_id": f"c{c}", "context": f"question {c}", "candidates": cands})
        for a in range(4):
            for b in range(4):
                if a != b:
                    right = quality[a] > quality[b]
                    first_wins = right if c < 2 else not right
                    verdicts.append(
                        {"context_id": f"c{c}", "first": f"c{c}:{a}", "second": f"c{c}:{b}",
                         "p_first": 0.99 if first_wins else 0.01}
                    )  # fmt: skip
    data, file = folder / "partial.jsonl", folder / "verdicts.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    file.write_text("".join(json.dumps(v) + "\n" for v in verdicts))
    return str(data), str(file)


def test_labels_from_part_of_the_run_certify_that_part_only(tmp_path):
    """Held out: people scored two of four contexts; the judge is right there and wrong elsewhere. The labels' population
    is the pairs people scored; the certificate keeps verdicts there only, every other pair is escalated, and the
    summary says so: the kept verdicts agree with the truth as guaranteed."""
    data, file = partial_world(tmp_path)
    cfg = compose(
        [
            "dataset.name=partial",
            f"dataset.path={data}",
            "dataset.attributes=[quality]",
            "judge=recorded",
            f"judge.model={file}",
            "runtime=inprocess",
            "trust.enabled=true",
            "trust.n=40",
            "trust.alpha=0.2",
            f"paths.output_root={tmp_path / 'out'}",
        ]
    )
    result = run(cfg)
    labels, trust, accepted = (table(result, n) for n in ("labels", "trust", "accepted"))
    assert labels.height == 12 and set(labels["context_id"]) == {"c0", "c1"}  # 6 pairs in each scored context
    row = trust.row(0, named=True)
    assert (row["population"], row["comparisons"]) == (12, 24) and row["certified"]
    outside = accepted.filter(pl.col("context_id").is_in(["c2", "c3"]))
    assert (
        outside.height == 12
        and (outside["accepted_by"] == "escalated").all()
        and not outside["population"].any()
    )
    kept = accepted.filter(pl.col("accepted_by") != "escalated")
    assert kept.height == 12 and set(kept["context_id"]) == {"c0", "c1"}
    assert "the labels were drawn from 12 of the 24 comparisons only" in result.summary
    assert "the other 12 are escalated, since the labels say nothing of them" in result.summary


def test_a_review_without_its_sample_frame_is_refused_by_name(trust_run, tmp_path):
    folder = tmp_path / "review"
    folder.mkdir()
    attribute, context, a, b = table(trust_run, "comparisons").select(PAIR).row(0)
    pair = (attribute, context, min(a, b), max(a, b))
    pl.DataFrame(
        {**{k: [v] for k, v in zip(PAIR, pair, strict=True)}, "human": ["i"], "inclusion": [0.5]}
    ).write_csv(folder / "labels.csv")
    cfg = reviewed(folder, tmp_path)
    with pytest.raises(UserError, match="no inclusion.parquet beside it"):
        run(cfg)


def test_a_review_of_part_of_the_run_certifies_that_part_only(trust_run, tmp_path):
    """A review drawn from half of the run's pairs (a smaller run's, or one category's: its inclusion.parquet names
    them): its answers certify the verdicts of that half, every other pair is escalated, and PPI reads that half."""
    right = right_answers()
    pairs = table(trust_run, "comparisons").select(PAIR).unique().sort(PAIR)
    frame = pairs.head(175).with_columns(
        item_id=pl.Series([f"i{k}" for k in range(175)]), inclusion=pl.lit(120 / 175)
    )
    folder = tmp_path / "review"
    folder.mkdir()
    frame.write_parquet(folder / "inclusion.parquet")
    answered = frame.head(120).with_columns(
        human=pl.Series(
            [
                "i" if right[c] == i else "j"
                for c, i in zip(frame.head(120)["context_id"], frame.head(120)["cand_i"], strict=True)
            ]
        )
    )
    answered.select(*PAIR, "human", "inclusion").write_csv(folder / "labels.csv")
    cfg = reviewed(folder, tmp_path)
    result = run(cfg)
    labels, trust, accepted = (table(result, n) for n in ("labels", "trust", "accepted"))
    assert labels.height == 175 and labels["preference"].is_not_null().sum() == 120
    assert (trust["population"] == 175).all() and (trust["comparisons"] == 350).all()
    outside = accepted.join(frame.select(PAIR), on=PAIR, how="anti")
    assert (
        outside.height == 175
        and (outside["accepted_by"] == "escalated").all()
        and not outside["population"].any()
    )
    assert "the labels were drawn from 175 of the 350 comparisons only" in result.summary
