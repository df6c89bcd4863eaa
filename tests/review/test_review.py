"""The review's parts without a browser: items and verdicts from comparisons, the seeded sample, the answer
log, answers mapped back to candidates and the agreement against a hand computation, and the page through
Flask's test client (escaping, only known ids, no files served)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import krippendorff
import numpy as np
import polars as pl
import pytest

from pipeline.contracts.errors import UserError
from pipeline.contracts.schemas import CANDIDATES, COMPARISONS
from pipeline.review import agreement as report
from pipeline.review import results
from pipeline.review.answers import AnswerLog, check_reviewer
from pipeline.review.sample import (
    BANDS,
    Strategy,
    draw,
    judge_verdicts,
    open_sample,
    review_items,
    reviewer_order,
    shown,
    swapped,
)

HTML = '<script>window.__pwned = 1</script><b>bold</b> & "quoted"'


def comparison(context, i, j, p, p_tie=0.0, p_ij=..., p_ji=..., attribute="coherence"):
    """A COMPARISONS row; both orderings agreeing with ``p`` unless ``p_ij``/``p_ji`` say otherwise (None: not
    judged)."""
    return {
        "judge": "j",
        "attribute": attribute,
        "template_id": "t",
        "context_id": context,
        "cand_i": i,
        "cand_j": j,
        "p_ij": p if p_ij is ... else p_ij,
        "p_ji": 1 - p if p_ji is ... else p_ji,
        "p": p,
        "p_tie": p_tie,
    }


def make_run(tmp_path: Path, rows: list[dict], texts: dict | None = None) -> Path:
    """A finished run's folder with the tables the review reads (config, candidates, comparisons)."""
    run_dir = tmp_path / "run"
    (run_dir / "tables").mkdir(parents=True)
    config = {"criteria": {}, "dataset": {"adjectives": {}}, "tracking": {"enabled": False}}
    (run_dir / "config.json").write_text(json.dumps(config))
    pl.from_dicts(rows, schema=pl.Schema(COMPARISONS)).write_parquet(
        run_dir / "tables" / "comparisons.parquet"
    )
    seen = sorted({(r["context_id"], c) for r in rows for c in (r["cand_i"], r["cand_j"])})
    texts = texts or {}
    candidates = {
        "context_id": [c for c, _ in seen],
        "context": [f"the input of {c}" for c, _ in seen],
        "candidate_id": [k for _, k in seen],
        "candidate_index": list(range(len(seen))),
        "system": ["secret-model-name"] * len(seen),
        "text": [texts.get(k, f"answer number {n}") for n, (_, k) in enumerate(seen)],
        "category": [None] * len(seen),
        "checklist": [None] * len(seen),
    }
    pl.DataFrame(candidates, schema=pl.Schema(CANDIDATES)).write_parquet(
        run_dir / "tables" / "candidates.parquet"
    )
    return run_dir


def many_pairs(n_contexts=6, seed=0):
    """Pairs of 4 candidates per context with probabilities spread over every confidence band."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(n_contexts):
        for a in range(4):
            for b in range(a + 1, 4):
                rows.append(comparison(f"c{c}", f"c{c}:{a}", f"c{c}:{b}", float(rng.uniform(0.02, 0.98))))
    return rows


# --- items and verdicts ----------------------------------------------------------------------------------------


def test_verdicts_confidence_and_ties():
    verdict, conf = judge_verdicts(np.array([0.8, 0.2, 0.5, 0.5, 0.7]), np.array([0, 0, 0, 0.6, 0.3]))
    assert verdict.tolist() == [0, 2, 1, 1, 0]  # i, j, an exact 50/50 is a tie, tie mass on top, i
    assert conf == pytest.approx([0.8, 0.8, 0.5, 0.6, 0.55])


def test_items_orient_pairs_average_orderings_and_flag_disagreements(tmp_path):
    rows = [
        comparison("c", "a", "b", 0.9, p_ij=0.95, p_ji=0.15),  # consistent: i first 0.95, j first prefers i
        comparison("c", "a", "c", 0.5, p_ij=0.8, p_ji=0.8),  # slot A both times: the orderings disagree
        comparison("c", "c", "b", 0.3, p_ij=0.3, p_ji=None),  # one ordering, stored j < i: flipped
    ]
    items = review_items(pl.from_dicts(rows, schema=pl.Schema(COMPARISONS)))
    by = {(r["cand_i"], r["cand_j"]): r for r in items.iter_rows(named=True)}
    assert set(by) == {("a", "b"), ("a", "c"), ("b", "c")}
    assert by[("b", "c")]["p"] == pytest.approx(0.7) and by[("b", "c")]["p_ji"] == pytest.approx(0.3)
    assert by[("b", "c")]["p_ij"] is None and not by[("b", "c")]["orderings_disagree"]
    assert by[("a", "c")]["orderings_disagree"] and not by[("a", "b")]["orderings_disagree"]
    assert [by[k]["judge_verdict"] for k in (("a", "b"), ("a", "c"), ("b", "c"))] == ["i", "tie", "i"]
    assert by[("a", "b")]["band"] == "0.90-1.00" and by[("b", "c")]["band"] == "0.60-0.75"
    assert items["item_id"].n_unique() == 3 and items["item_id"].str.len_chars().to_list() == [16] * 3


def test_each_ordering_as_its_own_comparison_becomes_one_item():
    rows = [
        comparison("c", "a", "b", 0.8, p_ij=0.8, p_ji=None),
        comparison("c", "b", "a", 0.4, p_ij=0.4, p_ji=None),
    ]
    items = review_items(pl.from_dicts(rows, schema=pl.Schema(COMPARISONS)))
    assert items.height == 1
    assert items["p"][0] == pytest.approx((0.8 + 0.6) / 2)
    assert (items["p_ij"][0], items["p_ji"][0]) == pytest.approx((0.8, 0.4))


# --- the sample ------------------------------------------------------------------------------------------------


def test_stratified_sample_takes_equal_shares_and_is_seeded():
    items = review_items(pl.from_dicts(many_pairs(), schema=pl.Schema(COMPARISONS)))
    available = dict(items.group_by("band").len().iter_rows())
    sample = draw(items, Strategy.STRATIFIED, 12, seed=3)
    per_band = dict(sample.group_by("stratum").len().iter_rows())
    assert sample.height == 12 and set(per_band) == set(available) == set(BANDS)
    # equal shares (3 of 12 from each of 4 bands); a band short of its share gives all it has, the rest
    # going to the others
    assert all(per_band[b] >= 3 or per_band[b] == available[b] for b in BANDS)
    smallest = min(available, key=available.get)
    assert per_band[smallest] == min(available[smallest], 3)
    assert draw(items, Strategy.STRATIFIED, 12, seed=3)["item_id"].to_list() == sample["item_id"].to_list()
    assert draw(items, Strategy.STRATIFIED, 12, seed=4)["item_id"].to_list() != sample["item_id"].to_list()
    assert draw(items, Strategy.STRATIFIED, 1000, seed=3).height == items.height


def test_disagreement_sample_holds_exactly_the_disagreeing_pairs():
    rows = many_pairs()
    for row in rows[::5]:
        row["p_ji"] = row["p_ij"]  # same slot preferred in both orderings
    items = review_items(pl.from_dicts(rows, schema=pl.Schema(COMPARISONS)))
    flagged = set(items.filter("orderings_disagree")["item_id"])
    sample = draw(items, Strategy.DISAGREEMENTS, 100, seed=0)
    assert set(sample["item_id"]) == flagged and len(flagged) == len(rows[::5])
    assert set(sample["stratum"]) == {"disagreement"}
    consistent = review_items(pl.from_dicts(many_pairs(), schema=pl.Schema(COMPARISONS)))
    with pytest.raises(UserError, match="decided differently"):
        draw(consistent, Strategy.DISAGREEMENTS, 10, seed=0)


def test_random_and_active_samples_keep_every_items_chance_and_active_asks_where_the_judge_is_unsure(
    tmp_path,
):
    """random: n of N items, each with chance n / N; active: about n items, each drawn with a known chance that is
    larger where the judge is unsure, never zero; both write every item's chance (inclusion.parquet) and carry it
    on the items drawn, from which trust weights them."""
    run_dir = make_run(tmp_path, many_pairs(n_contexts=30))
    items = review_items(pl.read_parquet(run_dir / "tables" / "comparisons.parquet"))
    uniform = open_sample(run_dir, run_dir / "random", Strategy.RANDOM, 40, 0)
    assert uniform.items.height == 40
    assert uniform.items["inclusion"].to_list() == pytest.approx([40 / items.height] * 40)
    every = pl.read_parquet(run_dir / "random" / "inclusion.parquet")
    assert every.height == items.height and every["inclusion"].sum() == pytest.approx(40)
    active = open_sample(run_dir, run_dir / "active", Strategy.ACTIVE, 40, 0)
    every = pl.read_parquet(run_dir / "active" / "inclusion.parquet").join(
        items.select("item_id", "confidence"), on="item_id"
    )
    assert every["inclusion"].sum() == pytest.approx(40) and every["inclusion"].min() > 0
    by_confidence = every.sort("confidence")["inclusion"].to_numpy()
    assert np.all(np.diff(by_confidence) <= 1e-12)  # the less sure the judge, the likelier an item is shown
    drawn = active.items.join(every.select("item_id", pl.col("inclusion").alias("known")), on="item_id")
    assert drawn["inclusion"].to_list() == pytest.approx(drawn["known"].to_list())
    # over many seeds each item is drawn as often as its chance says (Poisson sampling)
    counts = np.zeros(every.height)
    index = {item: k for k, item in enumerate(every["item_id"])}
    for seed in range(300):
        for item in draw(items, Strategy.ACTIVE, 40, seed)["item_id"]:
            counts[index[item]] += 1
    chances = every["inclusion"].to_numpy()
    assert np.abs(counts / 300 - chances).max() < 4 * np.sqrt(0.25 / 300)


def test_sample_is_saved_and_reopened_and_other_parameters_are_refused(tmp_path):
    run_dir = make_run(tmp_path, many_pairs())
    folder = run_dir / "review"
    first = open_sample(run_dir, folder, Strategy.RANDOM, 7, 11)
    assert json.loads((folder / "sample.json").read_text())["sampled"] == 7
    again = open_sample(run_dir, folder)  # no options: continue the saved one
    assert again.ids == first.ids and again.spec == first.spec
    with pytest.raises(UserError, match="strategy=random, n=7, seed=11; asked n=8"):
        open_sample(run_dir, folder, n=8)


def test_a_run_without_comparisons_is_refused_clearly(tmp_path):
    run_dir = make_run(tmp_path, many_pairs())
    pl.DataFrame(schema=pl.Schema(COMPARISONS)).write_parquet(run_dir / "tables" / "comparisons.parquet")
    with pytest.raises(UserError, match="has no comparisons to review"):
        open_sample(run_dir, run_dir / "review")


def test_slot_order_and_item_order_are_seeded_per_reviewer():
    ids = [f"{k:016x}" for k in range(200)]
    assert reviewer_order(ids, "ann", 0) == reviewer_order(ids, "ann", 0)
    assert reviewer_order(ids, "ann", 0) != reviewer_order(ids, "bob", 0)
    assert sorted(reviewer_order(ids, "ann", 0)) == ids
    flips = [swapped(i, "ann", 0) for i in ids]
    assert flips == [swapped(i, "ann", 0) for i in ids]
    assert 70 < sum(flips) < 130  # a fair coin per item
    assert flips != [swapped(i, "bob", 0) for i in ids]


# --- the answer log --------------------------------------------------------------------------------------------


def test_answers_are_written_once_and_read_back_by_another_process(tmp_path):
    path = tmp_path / "answers.jsonl"
    log, other = AnswerLog(path), AnswerLog(path)
    row, written = log.add({"reviewer": "ann", "item_id": "x", "choice": "1"})
    assert written and row["answered_at"]
    again, written = other.add({"reviewer": "ann", "item_id": "x", "choice": "2"})  # a second tab
    assert not written and again["choice"] == "1"
    assert other.add({"reviewer": "bob", "item_id": "x", "choice": "2"})[1]
    assert [(a["reviewer"], a["choice"]) for a in log.read().rows] == [("ann", "1"), ("bob", "2")]
    assert len(path.read_text().splitlines()) == 2


def test_a_torn_line_is_counted_and_the_next_answer_starts_a_line_of_its_own(tmp_path):
    path = tmp_path / "answers.jsonl"
    AnswerLog(path).add({"reviewer": "ann", "item_id": "x", "choice": "1"})
    with path.open("a") as f:
        f.write('{"reviewer": "ann", "item_id": "y", "cho')  # a crash mid-write
    log = AnswerLog(path)
    answers = log.read()
    assert [a["item_id"] for a in answers.rows] == ["x"] and answers.torn == 1
    assert log.add({"reviewer": "ann", "item_id": "y", "choice": "2"})[1]
    answers = AnswerLog(path).read()
    assert [a["item_id"] for a in answers.rows] == ["x", "y"] and answers.torn == 1


def test_reviewer_names_are_checked():
    assert check_reviewer("ann.b-1_") == "ann.b-1_"
    for bad in ("", "../x", "a b", "<x>", "x" * 41, "ann\n", "ann\r\n", "\nann"):
        with pytest.raises(UserError, match="reviewer name"):
            check_reviewer(bad)


# --- agreement -------------------------------------------------------------------------------------------------


def answer(sample, reviewer, item_id, human):
    """An answer that means ``human`` (i, j or tie) about the item, shown in the reviewer's slot order."""
    row = sample.items.filter(pl.col("item_id") == item_id).row(0, named=True)
    first, second = shown(row, reviewer, sample.spec.seed)  # as the page shows it
    choice = (
        "tie"
        if human == "tie"
        else ("1" if {"i": row["cand_i"], "j": row["cand_j"]}[human] == first else "2")
    )
    return {"reviewer": reviewer, "item_id": item_id, "slot1": first, "slot2": second, "choice": choice}


def hand_kappa(a: list[str], b: list[str]) -> float:
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
    p_e = sum((a.count(c) / len(a)) * (b.count(c) / len(b)) for c in ("i", "tie", "j"))
    return (p_o - p_e) / (1 - p_e)


def test_agreement_matches_a_hand_computation(tmp_path):
    run_dir = make_run(tmp_path, many_pairs())
    sample = open_sample(run_dir, run_dir / "review", Strategy.RANDOM, 12, 0)
    verdicts = dict(sample.items.select("item_id", "judge_verdict").iter_rows())
    rng = np.random.default_rng(0)
    log = AnswerLog(run_dir / "review" / "answers.jsonl")
    human = {}
    for reviewer in ("ann", "bob"):
        for k, item in enumerate(sample.ids):
            if reviewer == "bob" and k >= 8:
                break  # bob answers 8 of the 12
            said = verdicts[item] if rng.random() < 0.6 else str(rng.choice(["i", "j", "tie"]))
            human[reviewer, item] = said
            log.add(answer(sample, reviewer, item, said))
    result = report.agreement(sample, log.read())
    # the judge vs ann, by hand: every item read both ways round (i and j swapped), so that no statistic depends
    # on which candidate a pair calls i
    mirror = {"i": "j", "j": "i", "tie": "tie"}

    def both(labels: list[str]) -> list[str]:
        return labels + [mirror[x] for x in labels]

    ann = [human["ann", i] for i in sample.ids]
    judge = [verdicts[i] for i in sample.ids]
    assert result.value("reviewer", "ann", "raw_agreement") == pytest.approx(
        sum(x == y for x, y in zip(judge, ann, strict=True)) / 12
    )
    assert result.value("reviewer", "ann", "kappa") == pytest.approx(hand_kappa(both(judge), both(ann)))
    sided = [(x, y) for x, y in zip(judge, ann, strict=True) if "tie" not in (x, y)]
    assert result.value("reviewer", "ann", "kappa_no_ties") == pytest.approx(
        hand_kappa(both([x for x, _ in sided]), both([y for _, y in sided]))
    )
    # pooled over both reviewers' 20 answers
    pooled_j = judge + [verdicts[i] for i in sample.ids[:8]]
    pooled_h = ann + [human["bob", i] for i in sample.ids[:8]]
    assert result.value("overall", "all", "kappa") == pytest.approx(
        hand_kappa(both(pooled_j), both(pooled_h))
    )
    # between the reviewers on the 8 shared items (the krippendorff package on the items read both ways round)
    codes = {"i": 0, "tie": 1, "j": 2}
    data = np.array(
        [[codes[x] for x in both([human[r, i] for i in sample.ids[:8]])] for r in ("ann", "bob")], dtype=float
    )
    expected_alpha = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert result.value("reviewers", "2 reviewers", "alpha") == pytest.approx(expected_alpha)
    assert result.value("reviewers", "2 reviewers", "mean_pairwise_kappa") == pytest.approx(
        hand_kappa(
            both([human["ann", i] for i in sample.ids[:8]]), both([human["bob", i] for i in sample.ids[:8]])
        )
    )
    # the confusion table: the judge's verdicts in rows, ann's answers in columns
    row = result.confusion.filter((pl.col("reviewer") == "ann") & (pl.col("judge_verdict") == "i"))
    assert row["human_i"][0] == sum(1 for x, y in zip(judge, ann, strict=True) if (x, y) == ("i", "i"))
    assert (
        result.confusion.filter(pl.col("reviewer") == "all")
        .select(pl.sum_horizontal("^human_.*$"))
        .sum()
        .item()
        == 20
    )
    # intervals bracket their values; the files are written
    kappa = result.table.filter(pl.col("statistic") == "kappa")
    assert (kappa["ci_low"] <= kappa["value"]).all() and (kappa["value"] <= kappa["ci_high"]).all()
    files = results.write(result)
    assert [p.name for p in files] == ["agreement.csv", "confusion.csv", "labels.csv"]
    assert pl.read_csv(files[2]).height == 20
    assert "judge vs" in result.text() and "Krippendorff's alpha" in result.text()


def test_one_reviewer_and_one_category_are_reported_as_undefined(tmp_path):
    run_dir = make_run(tmp_path, [comparison("c", "a", "b", 0.9), comparison("c", "a", "c", 0.8)])
    sample = open_sample(run_dir, run_dir / "review", Strategy.RANDOM, 2, 0)
    log = AnswerLog(run_dir / "review" / "answers.jsonl")
    for item in sample.ids:
        log.add(answer(sample, "ann", item, "tie"))  # the judge says i throughout, ann a tie
    result = report.agreement(sample, log.read())
    assert result.value("reviewer", "ann", "raw_agreement") == 0.0
    # read both ways round, the judge's "i" throughout is i and j; ann's ties stay ties: no agreement beyond chance
    assert result.value("reviewer", "ann", "kappa") == 0.0
    # no answer chose a side: kappa without ties has no items
    assert math.isnan(result.value("reviewer", "ann", "kappa_no_ties"))
    assert math.isnan(result.value("reviewers", "needs two reviewers", "alpha"))
    assert "kappa" in result.text() and "n/a" in result.text() and "needs two reviewers" in result.text()
    assert "review.raw_agreement.reviewer.ann" in result.metrics()
    assert not any("kappa_no_ties.reviewer" in k for k in result.metrics())  # undefined values are not logged


def test_answers_that_do_not_fit_the_sample_are_named(tmp_path):
    run_dir = make_run(tmp_path, [comparison("c", "a", "b", 0.9)])
    sample = open_sample(run_dir, run_dir / "review", Strategy.RANDOM, 1, 0)
    item = sample.ids[0]
    log = AnswerLog(run_dir / "review" / "answers.jsonl")
    log.add({"reviewer": "ann", "item_id": "feedfacefeedface", "slot1": "a", "slot2": "b", "choice": "1"})
    with pytest.raises(UserError, match="reviewer 'ann', item 'feedfacefeedface': the item is not in"):
        report.agreement(sample, log.read())
    log.path.unlink()
    log = AnswerLog(log.path)
    log.add({"reviewer": "ann", "item_id": item, "slot1": "a", "slot2": "z", "choice": "1"})
    with pytest.raises(UserError, match="fields 'slot1'/'slot2'"):
        report.agreement(sample, log.read())
    log.path.unlink()
    log = AnswerLog(log.path)
    log.add({"reviewer": "ann", "item_id": item, "slot1": "a", "slot2": "b", "choice": "3"})
    with pytest.raises(UserError, match="field 'choice' is '3'"):
        report.agreement(sample, log.read())


# --- the page through Flask's test client ----------------------------------------------------------------------


@pytest.fixture
def client(tmp_path):
    from pipeline.review.app import ReviewState, create_app

    run_dir = make_run(
        tmp_path, [comparison("c", "c:a", "c:b", 0.9), comparison("c", "c:a", "c:c", 0.2)], {"c:a": HTML}
    )
    sample = open_sample(run_dir, run_dir / "review", Strategy.RANDOM, 2, 0)
    state = ReviewState.open(sample)
    return create_app(state).test_client(), state


def form_of(page: str) -> dict:
    return {name: value for name, value in re.findall(r'name="(item_id|token|key)" value="([^"]*)"', page)}


def link(state, reviewer: str) -> str:
    """A reviewer's personal link (what ``python -m pipeline.review invite`` prints), as a path."""
    return f"/r/{reviewer}?key={state.reviewer_key(reviewer)}"


def test_the_page_is_blind_and_escapes_the_texts(client):
    client, state = client
    page = client.get(link(state, "ann"))
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert "script-src 'nonce-" in page.headers["Content-Security-Policy"]
    assert "<script>window.__pwned" not in html and "&lt;script&gt;window.__pwned" in html
    assert "<b>bold</b>" not in html and "&amp;" in html
    # the form's hidden values are opaque (random tokens; the time the item was shown is kept on the server): read
    # apart, so that a token's digits are not taken for the judge's probability 0.2
    form = form_of(html)
    assert set(form) == {"item_id", "token", "key"} and 'name="shown"' not in html
    assert not any(":" in value for value in form.values())
    rest = re.sub(r'(name="(?:item_id|token|key)" value=")[^"]*"', r'\1"', html)
    for secret in ("secret-model-name", "c:a", "c:b", "c:c", "0.9", "0.2"):
        assert secret not in rest  # no model name, candidate id or judge probability
    assert "Which one is more coherent?" in html


def test_only_known_items_with_their_token_are_accepted_and_written_once(client):
    client, state = client
    form = form_of(client.get(link(state, "ann")).get_data(as_text=True))
    assert client.post("/r/ann", data={**form, "item_id": "0" * 16, "choice": "1"}).status_code == 404
    assert client.post("/r/ann", data={**form, "token": "x", "choice": "1"}).status_code == 403
    assert client.post("/r/ann", data={**form, "choice": "left"}).status_code == 400
    assert client.post("/r/bob", data={**form, "choice": "1"}).status_code == 403  # ann's form, bob's name
    assert client.post("/r/ann", data={**form, "choice": "tie", "note": "close"}).status_code == 303
    assert client.post("/r/ann", data={**form, "choice": "2"}).status_code == 303  # resubmitted: not written
    rows = state.answers.read().rows
    assert [(a["item_id"], a["choice"], a["note"]) for a in rows] == [(form["item_id"], "tie", "close")]
    assert "Comparison 2 of 2" in client.get(link(state, "ann")).get_data(as_text=True)


def test_nothing_outside_the_pages_is_served(client):
    client, _ = client
    for path in (
        "/static/x",
        "/config.json",
        "/../config.json",
        "/r/..%2Fconfig.json",
        "/r/a%20b",
        "/tables/candidates.parquet",
    ):
        assert client.get(path).status_code == 404, path


def test_the_last_answer_writes_the_agreement_tables(client):
    client, state = client
    for _ in range(3):
        page = client.get(link(state, "ann"))
        assert page.status_code == 200
        if "Review done" in page.get_data(as_text=True):
            break
        assert (
            client.post("/r/ann", data={**form_of(page.get_data(as_text=True)), "choice": "1"}).status_code
            == 303
        )
    page = page.get_data(as_text=True)
    assert "How often you and the judge agree" in page and "kappa" in page
    assert (state.sample.folder / "agreement.csv").exists()
    assert len(state.answers.read().rows) == 2


def test_a_finished_reviewer_sees_their_own_agreement_only_and_the_owner_sees_every_reviewer(client):
    """bob answers first, then ann (at random, as anyone invited could): ann's last page shows her agreement with the
    judge, from her answers alone; not bob's name, the confusion table, agreement between reviewers or a server path.
    The owner's report has them all."""
    client, state = client
    for reviewer in ("bob", "ann"):
        for _ in range(3):
            page = client.get(link(state, reviewer)).get_data(as_text=True)
            if "Review done" in page:
                break
            client.post(f"/r/{reviewer}", data={**form_of(page), "choice": "2" if reviewer == "bob" else "1"})
    assert "Review done" in page
    own = state.own_agreement("ann")
    assert own.reviewers == ["ann"]
    assert own.cell("overall", "all", "raw_agreement") in page
    for secret in ("bob", "confusion", "between reviewers", "judge's verdict (rows)", str(state.sample.folder),
                   str(state.answers.path), "answer i", "Krippendorff"):  # fmt: skip
        assert secret not in page, secret
    owner = client.get(f"/agreement?key={state.owner_key()}").get_data(as_text=True)
    assert (
        "bob" in owner
        and "ann" in owner
        and "between reviewers" in owner
        and str(state.sample.folder) in owner
    )


def test_the_time_an_item_was_shown_is_kept_on_the_server_not_taken_from_the_form(client):
    client, state = client
    form = form_of(client.get(link(state, "ann")).get_data(as_text=True))
    # an old form's "shown" field, or one made up, changes nothing: the time is measured from the server's showing
    assert client.post("/r/ann", data={**form, "choice": "1", "shown": "0"}).status_code == 303
    [row] = state.answers.read().rows
    assert 0 <= row["seconds"] < 600
    # an item this server never showed (a form from an earlier server): no time rather than a wrong one
    state._shown.clear()
    page = client.get(link(state, "ann")).get_data(as_text=True)
    state._shown.clear()
    assert client.post("/r/ann", data={**form_of(page), "choice": "2"}).status_code == 303
    assert state.answers.read().rows[1]["seconds"] is None


def test_a_form_token_is_never_a_key_for_a_made_up_reviewer(client):
    """Tokens and keys are HMACs in domains of their own: the token a reviewer named "reviewer" gets for an item is
    not the key of a reviewer named after the item (who would then add answers to the pooled agreement)."""
    client, state = client
    form = form_of(client.get(link(state, "reviewer")).get_data(as_text=True))
    made_up = form["item_id"]
    assert check_reviewer(made_up) == made_up  # a name the page would take
    for key in (form["token"], form["token"][:32]):
        assert client.get(f"/r/{made_up}?key={key}").status_code == 403
    assert state.answers.read().rows == []


def test_notes_that_look_like_formulas_are_neutralised_in_labels_csv(tmp_path):
    run_dir = make_run(tmp_path, many_pairs())
    sample = open_sample(run_dir, run_dir / "review", Strategy.RANDOM, 4, 0)
    log = AnswerLog(run_dir / "review" / "answers.jsonl")
    notes = ['=HYPERLINK("http://x")', "+1", "-2+3", "@SUM(A1)", "plain, with a comma"]
    for item, note in zip(sample.ids, notes, strict=False):
        log.add({**answer(sample, "ann", item, "i"), "note": note})
    results.write(report.agreement(sample, log.read()))
    written = pl.read_csv(run_dir / "review" / "labels.csv")["note"].to_list()
    assert sorted(written) == sorted(['\'=HYPERLINK("http://x")', "'+1", "'-2+3", "'@SUM(A1)"])


@pytest.mark.parametrize("bad", ["é", "ключ", "%FF%FE", "💥" * 40, "a" * 5000, "%00"])
def test_a_key_or_token_that_was_not_issued_is_a_403_whatever_its_characters(client, bad):
    from urllib.parse import quote

    client, state = client
    form = form_of(client.get(link(state, "ann")).get_data(as_text=True))
    query = bad if bad.startswith("%") else quote(bad)  # "%FF%FE": bytes that are not UTF-8
    assert client.get(f"/r/ann?key={query}").status_code == 403
    assert client.get(f"/agreement?key={query}").status_code == 403
    assert client.get(f"/?key={query}").status_code == 200  # the start page, as for anyone
    assert client.post("/r/ann", data={**form, "key": bad, "choice": "1"}).status_code == 403
    assert client.post("/r/ann", data={**form, "token": bad, "choice": "1"}).status_code == 403
    assert state.answers.read().rows == []


def test_the_secret_is_made_whole_and_private_and_a_bad_one_is_refused_with_what_to_do(tmp_path):
    import os
    import stat

    from pipeline.contracts.errors import UserError
    from pipeline.review.keys import review_secret

    folder = tmp_path / "review"
    old = os.umask(0)  # the most permissive umask: the secret is still private
    try:
        secret = review_secret(folder)
    finally:
        os.umask(old)
    path = folder / ".secret"
    assert len(secret) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert review_secret(folder) == secret and [p.name for p in folder.iterdir()] == [".secret"]
    path.chmod(0o644)
    with pytest.raises(UserError, match=r"readable by others \(mode 644\).*chmod 600"):
        review_secret(folder)
    path.chmod(0o600)
    for content in (b"", b"short"):  # a write cut short by a crash
        path.write_bytes(content)
        with pytest.raises(UserError, match=f"is {len(content)} byte\\(s\\), not 32.*delete it"):
            review_secret(folder)
    path.unlink()
    assert len(review_secret(folder)) == 32  # a new one, once the bad one is deleted


def test_a_reviewers_page_and_answers_need_their_own_key_and_the_agreement_the_owners(client):
    from pipeline.review.keys import personal_links

    client, state = client
    assert client.get("/r/ann").status_code == 403  # no key
    assert client.get(f"/r/ann?key={state.reviewer_key('bob')}").status_code == 403  # bob's key
    form = form_of(client.get(link(state, "ann")).get_data(as_text=True))
    assert form["key"] == state.reviewer_key("ann")
    stolen = {**form, "key": state.reviewer_key("bob"), "choice": "1"}
    assert client.post("/r/ann", data=stolen).status_code == 403  # bob answering as ann
    assert client.post("/r/ann", data={**form, "key": "", "choice": "1"}).status_code == 403
    assert state.answers.read().rows == []  # nothing written
    start = client.get("/").get_data(as_text=True)
    assert "by invitation" in start and 'name="reviewer"' not in start and "/agreement" not in start
    assert client.get("/?reviewer=mallory").status_code == 200  # no name picking: the same note
    assert client.get("/agreement").status_code == 403
    assert client.get(f"/agreement?key={state.reviewer_key('ann')}").status_code == 403
    assert client.get(f"/agreement?key={state.owner_key()}").status_code == 200
    # the answer goes in with ann's key, and the page after it keeps her key
    answered = client.post("/r/ann", data={**form, "choice": "1"})
    assert answered.status_code == 303 and f"key={state.reviewer_key('ann')}" in answered.headers["Location"]
    assert len(state.answers.read().rows) == 1
    # the links invite prints, and the owner's page listing the reviewers with theirs
    links = personal_links(state.secret, "http://review.example:8765/", ["ann", "bob"])
    assert links["ann"] == f"http://review.example:8765/r/ann?key={state.reviewer_key('ann')}"
    assert links["(owner)"].endswith(f"/agreement?key={state.owner_key()}")
    owner = client.get(f"/?key={state.owner_key()}").get_data(as_text=True)
    assert "ann" in owner and state.reviewer_key("ann") in owner


def test_an_open_review_lets_a_name_be_picked(tmp_path):
    from pipeline.review.app import ReviewState, create_app

    run_dir = make_run(tmp_path, [comparison("c", "c:a", "c:b", 0.9)], {})
    sample = open_sample(run_dir, run_dir / "review", Strategy.RANDOM, 1, 0)
    state = ReviewState.open(sample, open_review=True)
    client = create_app(state).test_client()
    assert 'name="reviewer"' in client.get("/").get_data(as_text=True)
    assert client.get("/?reviewer=ann").status_code == 303
    form = form_of(client.get("/r/ann").get_data(as_text=True))
    assert client.post("/r/ann", data={**form, "choice": "1"}).status_code == 303
    assert client.get("/agreement").status_code == 200


def test_invite_prints_each_reviewers_link_and_the_owners(tmp_path, capsys):
    from pipeline.review.__main__ import main
    from pipeline.review.keys import owner_key, review_secret, reviewer_key

    run_dir = make_run(tmp_path, [comparison("c", "c:a", "c:b", 0.9)], {})
    assert (
        main(["invite", str(run_dir), "--reviewer", "ann", "--reviewer", "bob", "--url", "http://h:1/"]) == 0
    )
    out = capsys.readouterr().out.splitlines()
    secret = review_secret(run_dir / "review")
    assert out == [
        f"ann: http://h:1/r/ann?key={reviewer_key(secret, 'ann')}",
        f"bob: http://h:1/r/bob?key={reviewer_key(secret, 'bob')}",
        f"(owner): http://h:1/agreement?key={owner_key(secret)}",
    ]
    assert main(["invite", str(run_dir), "--reviewer", "../x"]) == 2  # a name that is not a name


@pytest.mark.parametrize("argument", [["--seed", "-1"], ["--n", "0"], ["--seed", "x"]])
def test_a_seed_or_size_that_cannot_be_used_is_refused_before_anything_is_read(argument, tmp_path, capsys):
    """The review's command line refuses a negative seed, an empty sample or a word as argparse does: exit 2, the
    usage and the argument, no traceback (a negative seed passed argparse and failed in numpy's generator)."""
    from pipeline.review.__main__ import main

    with pytest.raises(SystemExit) as stopped:
        main(["serve", str(tmp_path), *argument])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and f"argument {argument[0]}: {argument[1]!r} is not an integer" in err
    assert "Traceback" not in err


def test_the_report_goes_to_the_projects_own_store_never_the_one_a_run_folder_names(tmp_path):
    """A run folder received from someone else names their tracking server in tracking.json: the report logs to the
    store the user gives (or the project's own), found there by the run folder's tag, whatever quotes its path holds;
    their store is never written."""
    import mlflow

    root = tmp_path / 'it\'s "mine"'
    run_dir = make_run(root, many_pairs())
    theirs = tmp_path / "theirs.db"
    (run_dir / "tracking.json").write_text(
        json.dumps({"run_id": "0" * 32, "tracking_uri": f"sqlite:///{theirs}"})
    )
    own = f"sqlite:///{tmp_path / 'own.db'}"
    client = mlflow.tracking.MlflowClient(own)
    experiment = client.create_experiment("runs", artifact_location=(tmp_path / "artifacts").as_uri())
    parent = client.create_run(experiment, tags={"run_dir": str(run_dir)}).info.run_id
    sample = open_sample(run_dir, run_dir / "review", Strategy.RANDOM, 4, 0)
    log = AnswerLog(run_dir / "review" / "answers.jsonl")
    for item in sample.ids:
        log.add({**answer(sample, "ann", item, "i"), "note": "=cmd|' /C calc'!A0"})
    result = report.agreement(sample, log.read())
    child = results.log_to_mlflow(result, results.write(result), own)
    assert client.get_run(child).data.tags["mlflow.parentRunId"] == parent
    assert not theirs.exists()
    assert results.own_tracking_uri(run_dir, None) != f"sqlite:///{theirs}"
