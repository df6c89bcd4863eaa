"""The invariance battery: every table of the comparative, absolute, combined, generate (leaderboards raw and
controlled), jury and card paths, through the product's own stages from simulated judgments (:mod:`.world`), checked
against the roles declared for it (:mod:`pipeline.contracts.roles`) on worlds drawn by hypothesis:

- **names**: renaming contexts, candidates, models, judges and templates (at random, or reversing their order)
  changes no number, only the names;
- **order**: shuffling the input's records and candidates, and the judgments' and ratings' rows, changes nothing;
- **sides**: turning any comparisons round after the reduce (i and j swapped, ``p`` read as ``1 - p``) changes no
  score, rank, interval, card figure or controlled rating;
- **finite and inside**: no NaN or infinity, nulls only where "not defined", probabilities in [0, 1], estimates
  inside their intervals;
- **truth**: a judge that orders every pair right ranks every context right with every scorer; the cross-fitted
  calibration of a context does not use that context's own preferences.

A failure names the check, the table and the column; hypothesis shrinks the world to the smallest that fails.
Tolerance: 1e-9 (absolute, and relative to the value). The adaptive rounds and the review have batteries of their
own (``test_rounds_invariance.py``, ``test_review_invariance.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import string

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from pipeline.config.enums import AbsoluteMode, Debias, LeaderboardGames
from pipeline.contracts.roles import COMPLEMENT, roles_of
from pipeline.methods import scorers
from pipeline.stages import ports
from tests.conftest import ROOT, compose
from tests.invariance.compare import as_set, assert_same, assert_sound, canonical, map_names
from tests.invariance.world import ABSOLUTE_MODES, Judge, Names, Order, World, quality, run_world

METHODS = tuple(scorers())  # every registered scorer
# MLflow metrics a run measures rather than computes (time, rates): never compared.
MEASURED = ("seconds", "per_s")


@functools.cache
def base():
    """The default config, composed once (the score segment is built from it per world)."""
    return compose(["tracking.enabled=false"])


# --- strategies ------------------------------------------------------------------------------------------------


@st.composite
def judges(draw) -> Judge:
    return Judge(
        scale=draw(st.floats(0.5, 3.0)),
        bias=draw(st.floats(-1.0, 1.0)),
        length=draw(st.floats(-1.0, 2.0)),
        noise=draw(st.floats(0.0, 1.0)),
    )


@st.composite
def worlds(
    draw, kind: str | None = None, objective: bool | None = None, recorded: bool | None = None
) -> World:
    """A world of ``kind`` (drawn where None); ``objective`` and ``recorded`` force people's scores to be an
    objective label and the judges to answer from a file of verdicts (drawn for a dataset's worlds where None)."""
    kind = kind or draw(st.sampled_from(["dataset", "generate", "pool"]))
    if kind == "generate":
        models = draw(st.integers(2, 4))
        sizes = (models,) * draw(st.integers(2, 4))
    elif kind == "pool":
        models = draw(st.sampled_from([0, 2, 3]))
        sizes = (draw(st.integers(4, 8)),)
    else:
        models = draw(st.sampled_from([0, 2, 3]))
        sizes = tuple(draw(st.lists(st.integers(2, 5), min_size=2, max_size=4)))
    # a dataset's judges may answer from a file of recorded verdicts (no absolute modes then: a recorded judge rates
    # nothing on its own), and its people's scores may be an objective label (meta-evaluated)
    if recorded is None:
        recorded_kind = draw(st.sampled_from(RECORDED)) if kind == "dataset" else None
    else:
        recorded_kind = draw(st.sampled_from(RECORDED[1:])) if recorded else None
    absolute = (
        ()
        if recorded_kind
        else tuple(draw(st.lists(st.sampled_from(ABSOLUTE_MODES), unique=True, max_size=2)))
    )
    # a dataset's people may give pairwise votes instead of scores (every context a pair of two models)
    votes = kind == "dataset" and not recorded_kind and draw(st.sampled_from([False, False, True]))
    if votes:
        models, sizes = 2, (2,) * len(sizes)
    conversation = kind == "dataset" and not votes and draw(st.booleans())
    if conversation and not recorded_kind:
        absolute = (*absolute, AbsoluteMode.checklist)  # its contexts give checklists: each item asked
    return World(
        sizes=sizes,
        models=models,
        judges=tuple(draw(st.lists(judges(), min_size=1, max_size=2))),
        templates=draw(st.integers(1, 2)),
        tie=draw(st.booleans()),
        absolute=absolute,
        objective=kind != "generate"
        and not votes
        and (draw(st.booleans()) if objective is None else objective),
        votes=votes,
        recorded=recorded_kind,
        trust=draw(st.sampled_from([None, "random", "active"])) if kind != "generate" else None,
        conversation=conversation,
        generate=kind == "generate",
        human=kind != "generate",
        seed=draw(st.integers(0, 2**16)),
        verbosity=tuple(draw(st.lists(st.sampled_from([1.0, 2.0]), min_size=models, max_size=models))),
        debias=draw(st.sampled_from(list(Debias))),
        games=draw(st.sampled_from(list(LeaderboardGames))),
        rounds=10,
    )


# How a recorded judge's file gives its answers (None: the simulated engine answers).
RECORDED = (None, "p_first", "verdict", "scores")


TOKEN = st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=5)


@st.composite
def renamings(draw, world: World) -> Names:
    """New names for everything: random tokens, or the plain names in reverse order."""
    plain = Names.plain(world)
    n = len(plain.flat())
    if draw(st.booleans()):
        flat = [f"N{t}" for t in draw(st.lists(TOKEN, min_size=n, max_size=n, unique=True))]
    else:
        flat = list(reversed(sorted(plain.flat(), key=str)))
        flat = [f"N{x}" for x in flat]
    it = iter(flat)
    contexts = tuple(next(it) for _ in plain.contexts)
    candidates = tuple(tuple(next(it) for _ in cands) for cands in plain.candidates)
    return Names(
        contexts,
        candidates,
        tuple(next(it) for _ in plain.models),
        tuple(next(it) for _ in plain.judges),
        tuple(next(it) for _ in plain.templates),
    )


# --- the checks ------------------------------------------------------------------------------------------------


def roles(name: str):
    from tests.invariance.world import TABLE_PORTS

    port = next(p for p in TABLE_PORTS if p.name == name)
    declared = roles_of(port.schema)
    assert declared is not None, f"table {name}: no roles declared in pipeline.contracts.roles"
    return declared


def assert_tables_same(check: str, got, want, inverse: dict[str, str], keep_input_order: bool = True) -> None:
    assert set(got.tables) == set(want.tables), (
        f"{check}: tables {sorted(got.tables)} != {sorted(want.tables)}"
    )
    for name in sorted(want.tables):
        r = roles(name)
        a = canonical(got.tables[name], r, inverse, keep_input_order)
        b = canonical(want.tables[name], r, {}, keep_input_order)
        assert_same(f"{name} ({check})", a, b)


def input_order_columns() -> set[str]:
    """Every column a table declares as recording the input's order: a metric named after one is not compared under
    a shuffle either."""
    from tests.invariance.world import TABLE_PORTS

    declared = [roles_of(p.schema) for p in TABLE_PORTS]
    return {c for r in declared if r is not None for c in r.input_order}


def assert_metrics_same(
    check: str, got: dict, want: dict, inverse: dict[str, str], keep_input_order: bool = True
) -> None:
    ordered = set() if keep_input_order else input_order_columns()

    def kept(metrics: dict, names: dict[str, str]) -> dict[str, float]:
        # a metric's name: segments joined by "/", a jury's templates joined by ":" within one
        return {
            "/".join(as_set(map_names(part, names), (":",)) or "" for part in k.split("/")): v
            for k, v in metrics.items()
            if not any(measured in k for measured in MEASURED) and k.rsplit("/", 1)[-1] not in ordered
        }

    a, b = kept(got, inverse), kept(want, {})
    assert set(a) == set(b), f"{check}: MLflow metrics differ: {sorted(set(a) ^ set(b))[:6]}"
    for k in b:
        assert abs(a[k] - b[k]) <= 1e-9 * (1 + abs(b[k])), (
            f"{check}: MLflow metric {k}: {a[k]} against {b[k]}"
        )


@given(data=st.data())
def test_invariance_names_change_no_number(data):
    world = data.draw(worlds(), label="world")
    names = data.draw(renamings(world), label="names")
    want = run_world(world, base(), METHODS)
    got = run_world(world, base(), METHODS, names=names)
    inverse = names.inverse(Names.plain(world))
    assert_tables_same("names", got, want, inverse)
    assert_metrics_same("names", got.metrics, want.metrics, inverse)


@given(world=worlds(), records=st.integers(0, 2**16), rows=st.integers(0, 2**16))
def test_invariance_order_of_rows_changes_nothing(world, records, rows):
    want = run_world(world, base(), METHODS)
    got = run_world(world, base(), METHODS, order=Order(records=records, judgments=rows))
    assert_tables_same("order", got, want, {}, keep_input_order=False)
    assert_metrics_same("order", got.metrics, want.metrics, {}, keep_input_order=False)


def turned(seed: int):
    """Turn a seeded subset of the comparisons round: i and j swapped, p_ij and p_ji swapped, p read as 1 - p."""

    def turn(comparisons: pa.Table) -> pa.Table:
        frame = pl.from_arrow(comparisons)
        flip = pl.Series(np.random.default_rng(seed).random(frame.height) < 0.5)
        r = roles_of(ports.COMPARISONS.schema)
        assert r is not None and r.flips["p"] == COMPLEMENT
        return frame.with_columns(
            cand_i=pl.when(flip).then(pl.col("cand_j")).otherwise(pl.col("cand_i")),
            cand_j=pl.when(flip).then(pl.col("cand_i")).otherwise(pl.col("cand_j")),
            p_ij=pl.when(flip).then(pl.col("p_ji")).otherwise(pl.col("p_ij")),
            p_ji=pl.when(flip).then(pl.col("p_ij")).otherwise(pl.col("p_ji")),
            p=pl.when(flip).then(1.0 - pl.col("p")).otherwise(pl.col("p")),
        ).to_arrow()

    return turn


@given(world=worlds(), seed=st.integers(0, 2**16))
def test_invariance_sides_of_a_pair_change_no_number(world, seed):
    want = run_world(world, base(), METHODS)
    got = run_world(world, base(), METHODS, between=turned(seed))
    assert_tables_same("sides", got, want, {})
    assert_metrics_same("sides", got.metrics, want.metrics, {})


@given(world=worlds())
def test_invariance_every_table_is_finite_and_inside(world):
    out = run_world(world, base(), METHODS)
    for name, frame in out.tables.items():
        assert_sound(name, frame, roles(name))
    note(f"tables: {sorted(out.tables)}")


# --- truth -----------------------------------------------------------------------------------------------------


@given(world=worlds(kind="dataset"), bias=st.floats(-1.5, 1.5))
def test_invariance_truth_a_judge_right_on_every_pair_ranks_every_context_right(world, bias):
    """A judge whose every answer prefers the better candidate (no noise, no liking for length): every registered
    scorer and the jury rank every context in the true order, with any position bias once the orderings are debiased
    (``average``, ``alpha``, ``balanced_threshold``), and without one where each ordering is scored as judged
    (``none``, ``mean_shift``: those hand the scorers each ordering's raw answer, whose position bias only the
    PoE-Gaussian scorers' shift removes). PoE-Laplace's least absolute deviations may tie two candidates (within
    1e-9; its optimum is a face, not a point: ``pipeline.methods.scorers.poe_laplace``), never order them against the truth.
    """
    if world.debias in (Debias.none, Debias.mean_shift):
        bias = 0.0
    # a recorded verdict keeps only the side an ordering prefers: a position bias larger than a pair's difference
    # makes both orderings say "first", which no debiasing can tell from a tie; its probability keeps the rest
    recorded = "p_first" if world.recorded == "verdict" else world.recorded
    exact = dataclasses.replace(
        world,
        judges=tuple(Judge(scale=2.0, bias=bias, length=0.0, noise=0.0) for _ in world.judges),
        recorded=recorded,
    )
    out = run_world(exact, base(), METHODS)
    plain = Names.plain(exact)
    truth = {
        (plain.contexts[c], plain.candidates[c][k]): quality(exact, c, k)
        for c, n in enumerate(exact.sizes)
        for k in range(n)
    }
    scores = out.tables["scores"].filter(
        pl.col("method").is_in([*METHODS, "jury_poe", "jury_majority", "jury_mean"])
    )
    assert scores.height
    for (method, judge, template, context), group in scores.group_by(
        ["method", "judge", "template_id", "context_id"]
    ):
        q = np.array([truth[(context, c)] for c in group["candidate_id"]])
        s = group["score"].to_numpy()
        slack = 1e-9 * max(1.0, float(np.abs(s).max()))
        better = q[:, None] > q[None, :]
        wrong = better & (s[:, None] < s[None, :] - slack)
        assert not wrong.any(), (
            f"{method} ({judge}, {template}) ranks context {context} against the truth: {s} for {q}"
        )
        if method != "poe_laplace":
            tied = better & (np.abs(s[:, None] - s[None, :]) <= slack)
            assert not tied.any(), (
                f"{method} ({judge}, {template}) ties two candidates of {context}: {s} for {q}"
            )


@given(world=worlds(kind="dataset"), context=st.integers(0, 3))
def test_invariance_truth_a_cross_fitted_calibration_never_uses_its_own_context(world, context):
    """Scores on calibrated probabilities (scoring.calibrate=temperature): reversing one context's human scores
    moves no score of that context (its temperature is fitted on the other contexts only)."""
    calibrated = dataclasses.replace(world, calibrate=True, human=True)
    target = Names.plain(calibrated).contexts[context % calibrated.n_contexts]

    def reversed_scores(human: pa.Table) -> pa.Table:
        frame = pl.from_arrow(human)
        mine = pl.col("context_id") == target
        return frame.with_columns(
            human_score=pl.when(mine).then(6.0 - pl.col("human_score")).otherwise(pl.col("human_score"))
        ).to_arrow()

    want = run_world(calibrated, base(), METHODS)
    got = run_world(calibrated, base(), METHODS, human=reversed_scores)
    own = pl.col("context_id") == target
    r = roles("scores")
    assert_same(
        "scores of the context whose preferences changed",
        canonical(got.tables["scores"].filter(own).drop("human_score"), r, {}),
        canonical(want.tables["scores"].filter(own).drop("human_score"), r, {}),
    )


ROUND_ROBIN = World(
    sizes=(3,) * 120,
    models=3,
    judges=(Judge(scale=1.0, bias=0.2, length=3.0, noise=0.3),),
    generate=True,
    human=False,
    verbosity=(2.0, 1.0, 1.0),  # model 0 writes twice as long
    skill=(0.0, 0.8, 0.0),  # model 1 is better; models 0 and 2 are as good
    seed=5,
    rounds=20,
)


@given(names=st.permutations(["a-verbose", "b-good", "c-plain"]))
def test_invariance_truth_a_model_that_is_only_longer_gains_no_place_under_length_control(names):
    """The issue's round robin through the product's own path (ids ``<input>:<model>``, sides by id): whatever the
    models are called, the better model is first under length control and the verbose one no better than the plain
    one it equals; renaming any model moves no controlled rating beyond 1e-9."""
    plain = Names.plain(ROUND_ROBIN)
    named = dataclasses.replace(plain, models=tuple(f"N{n}" for n in names))
    board = run_world(ROUND_ROBIN, base(), ("win_ratio",), names=named).tables["leaderboard"]
    rating = dict(
        board.filter(pl.col("metric") == "bradley_terry:length_controlled")
        .select("model", "estimate")
        .iter_rows()
    )
    verbose, good, other = (f"N{n}" for n in names)
    assert max(rating, key=rating.get) == good, rating
    assert rating[verbose] < rating[other] + 0.3, rating
    raw = dict(board.filter(pl.col("metric") == "win_rate").select("model", "estimate").iter_rows())
    assert raw[verbose] > raw[other], raw  # the raw win rate is fooled by length
    reference = run_world(ROUND_ROBIN, base(), ("win_ratio",)).tables["leaderboard"]
    inverse = named.inverse(plain)
    assert_same(
        "leaderboard",
        canonical(board, roles("leaderboard"), inverse),
        canonical(reference, roles("leaderboard"), {}),
    )


# --- coverage --------------------------------------------------------------------------------------------------


def test_invariance_battery_covers_every_table_and_every_registered_scorer():
    """Every table port of every workflow has declared roles naming only its own columns; the battery's worlds reach
    every table of the comparative, absolute, combined, generate, jury and card paths; every registered scorer is
    scored."""
    from pipeline.config.workflows import workflows
    from pipeline.workflows.catalog import build
    from tests.invariance.world import TABLE_PORTS

    for port in TABLE_PORTS:
        if port.file is None:
            continue
        declared = roles_of(port.schema)
        assert declared is not None, f"table {port.name}: no roles declared in pipeline.contracts.roles"
        unknown = declared.columns() - set(port.schema.names)
        assert not unknown, f"table {port.name}: roles name columns it does not have: {sorted(unknown)}"
    cfg = dataclasses.replace(
        base(), absolute=dataclasses.replace(base().absolute, modes=list(ABSOLUTE_MODES))
    )
    for name in workflows():
        for stage in build(dataclasses.replace(cfg, workflow=name), ROOT).stages:
            for port in (*stage.reads, *stage.writes):
                if port.schema is not None and port.file is not None:
                    assert roles_of(port.schema) is not None, (
                        f"workflow {name}: table {port.name} has no roles"
                    )
    widest = World(
        sizes=(3, 4),
        models=2,
        judges=(Judge(), Judge(scale=1.0)),
        templates=2,
        tie=True,
        absolute=ABSOLUTE_MODES,
        seed=3,
        trust="random",
    )
    generated = dataclasses.replace(widest, sizes=(2, 2), generate=True, human=False, trust=None)
    seen = set(run_world(widest, base(), METHODS).tables) | set(run_world(generated, base(), METHODS).tables)
    checked_elsewhere = {"rounds", "round_pairs"}  # test_rounds_invariance.py
    # the judge's reasons are text an engine generates (the simulated judges generate none, so the score segment has
    # no reasons stage here): tests/run/test_api.py and test_reasoning.py read them
    checked_elsewhere.add("reasons")
    every = {p.name for p in TABLE_PORTS if p.file is not None}
    assert every - checked_elsewhere <= seen, (
        f"tables no world reaches: {sorted(every - checked_elsewhere - seen)}"
    )
    scored = set(run_world(widest, base(), METHODS).tables["scores"]["method"].unique())
    assert set(scorers()) <= scored, f"registered scorers never scored: {sorted(set(scorers()) - scored)}"


# --- recorded judges and the meta-evaluation -------------------------------------------------------------------


@given(data=st.data())
def test_invariance_recorded_judges_and_their_meta_evaluation_move_with_no_name_order_or_side(data):
    """Judges answering from a file of verdicts (the product's recorded backend: its resolver, its check against the
    run and its answers on the driver) on people's objective labels: renaming everything (in the file too),
    shuffling the input and the file's lines, and turning comparisons round move no number of any table, the
    meta-evaluation's included (its per-ordering accuracies follow the input's listing, so a shuffle may swap them)."""
    world = data.draw(worlds(kind="dataset", objective=True, recorded=True), label="world")
    names = data.draw(renamings(world), label="names")
    seeds = data.draw(st.tuples(st.integers(0, 2**16), st.integers(0, 2**16)), label="order")
    want = run_world(world, base(), METHODS)
    assert want.tables["meta_evaluation"].height, "an objective world has a meta-evaluation"
    inverse = names.inverse(Names.plain(world))
    got = run_world(world, base(), METHODS, names=names)
    assert_tables_same("names", got, want, inverse)
    assert_metrics_same("names", got.metrics, want.metrics, inverse)
    got = run_world(world, base(), METHODS, order=Order(records=seeds[0], judgments=seeds[1]))
    assert_tables_same("order", got, want, {}, keep_input_order=False)
    assert_metrics_same("order", got.metrics, want.metrics, {}, keep_input_order=False)
    got = run_world(world, base(), METHODS, between=turned(seeds[0]))
    assert_tables_same("sides", got, want, {})
    for name, frame in want.tables.items():
        assert_sound(name, frame, roles(name))


@given(world=worlds(kind="dataset", objective=True))
def test_invariance_truth_a_judge_right_on_every_pair_is_right_on_every_objective_pair(world):
    """A judge whose every answer prefers the better candidate, without position bias: every meta-evaluation row
    says 100% by every count (both orderings right, choosing alike), whoever answers (engine or file)."""
    exact = dataclasses.replace(
        world, judges=tuple(Judge(scale=2.0, bias=0.0, length=0.0, noise=0.0) for _ in world.judges)
    )
    meta = run_world(exact, base(), METHODS).tables["meta_evaluation"]
    assert meta.height
    for column in ("accuracy", "accuracy_listed_first", "accuracy_listed_second", "both_right"):
        assert (meta[column] == 1.0).all(), (column, meta)
    assert (meta["positional_agreement"] == 1.0).all() and (meta["no_preference"] == 0.0).all()


def assert_moves_with_nothing(data, world: World, want) -> None:
    """The world's run renamed (drawn), its rows shuffled (drawn) and comparisons turned round (drawn) against
    ``want``, the plain run: every table and metric the same."""
    names = data.draw(renamings(world), label="names")
    renamed = run_world(world, base(), METHODS, names=names)
    inverse = names.inverse(Names.plain(world))
    assert_tables_same("names", renamed, want, inverse)
    assert_metrics_same("names", renamed.metrics, want.metrics, inverse)
    order = Order(records=data.draw(st.integers(0, 2**16)), judgments=data.draw(st.integers(0, 2**16)))
    shuffled = run_world(world, base(), METHODS, order=order)
    assert_tables_same("order", shuffled, want, {}, keep_input_order=False)
    turned_run = run_world(world, base(), METHODS, between=turned(data.draw(st.integers(0, 2**16))))
    assert_tables_same("sides", turned_run, want, {})


# --- checklists (TICK) -----------------------------------------------------------------------------------------

# Conversations with a reference answer and a checklist of 1-3 items per context; each item asked on its own.
CHECKLIST = World(
    sizes=(3, 4, 2),
    models=2,
    absolute=(AbsoluteMode.checklist, AbsoluteMode.implicit),
    conversation=True,
    seed=5,
)


@given(data=st.data())
def test_invariance_a_checklist_is_asked_item_by_item_and_moves_with_no_name_order_or_side(data):
    """Each candidate is asked each item of its context's checklist once (its prompt ``tick#<k>``), read as a yes/no
    question; its checklist score is the mean over the items of p(yes) (the truth: the simulated judge's p(yes) of
    each item); renaming everything, shuffling the input and the rows, and turning comparisons round move none of
    it."""
    from pipeline.contracts.keys import stable_hash
    from tests.invariance.world import _noise

    world = CHECKLIST
    want = run_world(world, base(), METHODS)
    plain = Names.plain(world)
    ratings = want.tables["ratings"].filter(pl.col("mode") == "checklist")
    scores = want.tables["absolute_scores"].filter(pl.col("method") == "checklist")
    assert scores.height == sum(world.sizes)
    for c, n in enumerate(world.sizes):
        items = 1 + c % 3
        for k in range(n):
            mine = ratings.filter(
                (pl.col("context_id") == plain.contexts[c])
                & (pl.col("candidate_id") == plain.candidates[c][k])
            )
            assert sorted(mine["template_id"]) == [f"tick#{i}" for i in range(1, items + 1)]
            truth = np.mean(
                [
                    1
                    / (
                        1
                        + np.exp(
                            -(
                                quality(world, c, k)
                                + 0.3 * _noise(world, 5, stable_hash(f"tick#{i}") % 97, c, k)
                            )
                        )
                    )
                    for i in range(1, items + 1)
                ]
            )
            score = scores.filter(pl.col("candidate_id") == plain.candidates[c][k])["score"][0]
            assert score == pytest.approx(truth, abs=1e-9)
    assert_moves_with_nothing(data, world, want)


# --- people's pairwise votes ------------------------------------------------------------------------------------

VOTED = World(sizes=(2,) * 6, models=2, judges=(Judge(), Judge(scale=1.0)), absolute=(AbsoluteMode.implicit,),
              trust="random", seed=11)  # fmt: skip
VOTED = dataclasses.replace(VOTED, votes=True)


@given(data=st.data())
def test_invariance_peoples_votes_are_their_shares_and_move_with_no_name_order_or_side(data):
    """People's pairwise votes (one row per vote, each listing the two models on its own sides, as Chatbot Arena's
    export does) read by the product's flat-table reader: each candidate's human score is the share of the votes it
    won (a tie half each: the truth), under ``<context>:<model>``; every table read from them (correlations, card,
    meta-evaluation, trust) moves with no renaming, shuffling of the vote rows (and of which side each lists a model
    on) or turning of comparisons."""
    from tests.invariance.world import VOTES, vote_of

    world = VOTED
    want = run_world(world, base(), METHODS)
    plain = Names.plain(world)
    scores = run_world_inputs(world)
    for c in range(world.n_contexts):
        share = np.mean([vote_of(world, c, v) for v in range(VOTES)])
        got = dict(
            scores.filter(pl.col("context_id") == plain.contexts[c])
            .select("candidate_id", "human_score")
            .iter_rows()
        )
        assert got == pytest.approx(
            {f"{plain.contexts[c]}:model0": share, f"{plain.contexts[c]}:model1": 1 - share}
        )
    assert {"judge_card", "meta_evaluation", "correlations", "trust"} <= set(want.tables)
    assert_moves_with_nothing(data, world, want)


def run_world_inputs(world: World) -> pl.DataFrame:
    """People's scores as the product's input segment reads the world."""
    from tests.invariance.world import input_tables

    return pl.from_arrow(input_tables(world, Names.plain(world), Order())["human_scores"])
