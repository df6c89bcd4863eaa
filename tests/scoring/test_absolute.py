"""Absolute assessment maths and checks: the parser, G-Eval's expected score, the implicit score, start-up refusals,
ratings (failures kept, never 0), the tie option in the labels, the reduce and the scorers, and config checks."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from pipeline.config.assessment import AbsoluteConfig, AbsoluteTemplateConfig
from pipeline.config.enums import AbsoluteMode, Debias, Orderings
from pipeline.contracts.errors import ConfigError
from pipeline.contracts.schemas import RESPONSES
from pipeline.methods.verdicts.absolute_scores import (
    expected_score,
    implicit_max,
    parse_score,
    yes_probability,
)
from pipeline.methods.verdicts.win_probability import p_a_wins, p_tie, side_logprobs, tie_logprob
from pipeline.prompts.absolute import AbsoluteLabelError, resolve_absolute
from pipeline.prompts.labels import resolve_labels
from pipeline.scoring.comparative import method_scores
from pipeline.scoring.ratings import rating_failures, rating_scores
from pipeline.scoring.reduce import reduce_judgments
from pipeline.scoring.responses import ratings_from_responses
from tests.conftest import compose, judgment_rows


@pytest.mark.parametrize(
    ("text", "low", "high", "value", "failure"),
    [
        (" 7", 1, 10, 7.0, None),
        ("Score: 8/10", 1, 10, 8.0, None),
        ("I would give it a 6 because", 1, 10, 6.0, None),
        (" 7.5\n", 1, 10, 7.5, None),
        ("85", 0, 100, 85.0, None),
        ("0", 0, 100, 0.0, None),
        ("10", 1, 10, 10.0, None),
        (" 11", 1, 10, None, "out of range 1-10"),
        ("0", 1, 10, None, "out of range 1-10"),
        ("-3", 1, 10, None, "out of range 1-10"),
        ("150 points", 0, 100, None, "out of range 0-100"),
        ("ten", 1, 10, None, "no number"),
        (" The summary is good", 1, 10, None, "no number"),
        ("", 1, 10, None, "empty"),
        ("   \n", 1, 10, None, "empty"),
    ],
)
def test_the_parser_takes_the_first_number_in_range(text, low, high, value, failure):
    parsed = parse_score(text, low, high)
    assert parsed.value == value
    assert parsed.failure == failure


def test_expected_score_by_hand():
    # p(1..5) = 0.1, 0.2, 0.3, 0.2, 0.1 (mass 0.9): (0.1 + 0.4 + 0.9 + 0.8 + 0.5) / 0.9 = 3
    p = np.array([[0.1, 0.2, 0.3, 0.2, 0.1]])
    score, mass = expected_score(np.log(p), [1, 2, 3, 4, 5])
    assert score[0] == pytest.approx(3.0)
    assert mass[0] == pytest.approx(0.9)
    # all the mass on "4": the score is 4; two words per score add up
    p2 = np.array([[1e-9, 1e-9, 1e-9, 0.5, 1e-9, 1e-9, 1e-9, 0.3]])
    score, mass = expected_score(np.log(p2), [1, 1, 2, 2, 3, 3, 4, 4])
    # "2" holds 0.5 and "4" holds 0.3 (the other six words 1e-9 each): (0.5 * 2 + 0.3 * 4) / 0.8
    assert score[0] == pytest.approx(2.75, rel=1e-6)
    assert mass[0] == pytest.approx(0.8, abs=1e-8)


def test_implicit_scores_by_hand():
    # yes words 0.3 + 0.1, no words 0.2 + 0.2: p(yes) / (p(yes) + p(no)) = 0.4 / 0.8
    lp = np.log(np.array([[0.3, 0.1, 0.2, 0.2]]))
    assert yes_probability(lp, 2)[0] == pytest.approx(0.5)
    # Chen's max(p(yes), 1 - p(no)) = max(0.4, 0.6)
    assert implicit_max(lp, 2)[0] == pytest.approx(0.6)
    lp = np.log(np.array([[0.7, 0.05, 0.05]]))
    assert yes_probability(lp, 1)[0] == pytest.approx(0.7 / 0.8)
    assert implicit_max(lp, 1)[0] == pytest.approx(0.9)


def test_a_multi_token_score_label_is_refused_at_start_up(tokenizer):
    cfg = AbsoluteConfig(modes=[AbsoluteMode.g_eval])
    cfg.library["geval"].high = 10  # "10" is two tokens for SmolLM2
    with pytest.raises(AbsoluteLabelError) as err:
        resolve_absolute(cfg, tokenizer, "smollm2")
    message = str(err.value)
    assert "'10' is 2 tokens" in message and "geval" in message
    assert "1-9 does" in message and "absolute.library.geval.high=9" in message
    # a leading-space digit is two tokens too: refused, naming the word
    with pytest.raises(AbsoluteLabelError, match="' 1' is 2 tokens"):
        resolve_absolute(
            AbsoluteConfig(modes=[AbsoluteMode.g_eval], score_words=["{v}", " {v}"]), tokenizer, "m"
        )
    with pytest.raises(AbsoluteLabelError, match="yes/no word"):
        resolve_absolute(
            AbsoluteConfig(modes=[AbsoluteMode.implicit], yes_words=["Yes please"]), tokenizer, "m"
        )


def test_the_default_templates_resolve_for_the_default_judge(tokenizer):
    templates = resolve_absolute(AbsoluteConfig(modes=list(AbsoluteMode)), tokenizer, "smollm2")
    by_mode = {t.mode: t for t in templates}
    assert by_mode[AbsoluteMode.g_eval].words == ("1", "2", "3", "4", "5")
    assert len(by_mode[AbsoluteMode.g_eval].request.token_ids) == 5
    assert by_mode[AbsoluteMode.implicit].n_yes == 4
    assert (
        by_mode[AbsoluteMode.prompt_score].request.token_ids == ()
        and by_mode[AbsoluteMode.prompt_score].request.n == 1
    )
    sampled = resolve_absolute(
        AbsoluteConfig(modes=[AbsoluteMode.explicit], samples=20, temperature=1.0), tokenizer, "m"
    )[0]
    assert sampled.request.n == 20 and sampled.request.temperature == 1.0 and sampled.request.seed == 0
    with pytest.raises(ConfigError, match="needs absolute.temperature > 0"):
        compose(["absolute.modes=[explicit]", "absolute.samples=20"])


def responses(rows: list[dict]) -> pa.Table:
    base = {
        "context_id": "c",
        "attribute": "coherence",
        "cand_b": "",
        "judge": "j",
        "token_logprobs": [],
        "prompt_tokens": 10,
        "cached_tokens": 0,
        "generated_tokens": 1,
        "finish_reasons": ["stop"],
        "seconds": 0.1,
        "worker": "w",
        "error": None,
        "source": "engine",
        "requests": 0,
        "missing_logprobs": 0,
        "failed_attempts": [],
        "usage_unknown": False,
        "served_model": None,
    }
    return pa.Table.from_pylist([{**base, **r} for r in rows], schema=RESPONSES)


def test_ratings_keep_failures_and_never_score_them_zero(tokenizer):
    cfg = AbsoluteConfig(modes=[AbsoluteMode.prompt_score, AbsoluteMode.g_eval, AbsoluteMode.implicit])
    templates = resolve_absolute(cfg, tokenizer, "m")
    lp_geval = np.log([0.1, 0.2, 0.3, 0.2, 0.1]).tolist()
    lp_yes = np.log([0.3, 0.1, 0.0001, 0.0001, 0.2, 0.2, 0.0001, 0.0001]).tolist()
    table = responses(
        [
            {"mode": "prompt_score", "template_id": "s1", "cand_a": "x", "texts": [" 7"]},
            {"mode": "prompt_score", "template_id": "s1", "cand_a": "y", "texts": [" ten"]},
            {"mode": "prompt_score", "template_id": "s1", "cand_a": "z", "texts": [" 12"]},
            {
                "mode": "g_eval",
                "template_id": "geval",
                "cand_a": "x",
                "texts": ["3"],
                "token_logprobs": lp_geval,
            },
            {
                "mode": "implicit",
                "template_id": "chen_implicit",
                "cand_a": "x",
                "texts": [" Yes"],
                "token_logprobs": lp_yes,
            },
        ]
    )
    ratings = pl.from_arrow(ratings_from_responses(table, templates))
    scores = dict(zip(ratings["candidate_id"] + "/" + ratings["mode"], ratings["score"], strict=True))
    assert scores["x/prompt_score"] == 7.0
    assert scores["y/prompt_score"] is None and scores["z/prompt_score"] is None
    assert scores["x/g_eval"] == pytest.approx(3.0)
    assert scores["x/implicit"] == pytest.approx(0.4002 / 0.8004)
    failures = rating_failures(ratings)
    assert failures.height == 2
    assert set(failures["failure"]) == {"no number", "out of range 1-10"}
    assert not failures["scored"].any()
    by_method = rating_scores(ratings, templates)
    # the failed ratings are not scores (they are in the failures), and implicit_max is computed beside implicit
    assert sorted(by_method["method"]) == ["g_eval", "implicit", "implicit_max", "prompt_score"]
    assert 0.0 not in by_method.filter(pl.col("method") == "prompt_score")["score"].to_list()


def test_averaged_samples_count_each_failure():
    from pipeline.methods.verdicts.absolute_scores import sample_scores

    score, values, failures = sample_scores([" 4", "8", "no idea", " 6 out of 10"], 1, 10)
    assert score == pytest.approx(6.0) and values == [4.0, 8.0, None, 6.0] and failures == ["no number"]


# --- the tie option -------------------------------------------------------------------------------------------


def test_tie_probability_is_split_evenly_by_hand(tokenizer):
    labels = resolve_labels(tokenizer, [" A"], [" B"], "m", [" C"])
    assert labels.n_tie == 1 and labels.words == (" A", " B", " C")
    # p(A) = 0.3, p(B) = 0.1, p(C) = 0.4, mass 0.8: p(A wins) = (0.3 + 0.2) / 0.8, p(tie) = 0.5
    lp = np.log(np.array([[0.3, 0.1, 0.4]]))
    lp_a, lp_b = side_logprobs(lp, 1, 1)
    lp_t = tie_logprob(lp, 1)
    assert p_a_wins(lp_a, lp_b, lp_t)[0] == pytest.approx(0.625)
    assert p_tie(lp_a, lp_b, lp_t)[0] == pytest.approx(0.5)
    # without tie words the definition is the two-way one
    assert p_a_wins(lp_a, lp_b)[0] == pytest.approx(0.75)


def test_the_reduce_reports_how_often_the_tie_is_picked():
    rows, _ = judgment_rows(n=3, seed=0)
    ties = [0.6, 0.1, 0.1, 0.1, 0.1, 0.1]
    for row, t in zip(rows, ties, strict=True):
        row["p_tie"] = t
        row["p_a"] = 0.2 + t / 2  # p(A) = 0.2, p(B) = 0.8 - t
    reduced = reduce_judgments(pl.DataFrame(rows), Debias.average, Orderings.both)
    bias = reduced.position_bias.row(0, named=True)
    assert bias["p_tie"] == pytest.approx(np.mean(ties))
    # the tie is the top label in one prompt of six (0.6 > 0.2 and > 0.2)
    assert bias["tie_hard"] == pytest.approx(1 / 6)
    assert reduced.comparisons["p_tie"].max() == pytest.approx((0.6 + 0.1) / 2)


def test_the_tie_model_reads_the_tie_probability_and_the_others_the_split():
    i, j = np.array([0, 1, 0]), np.array([1, 2, 2])
    p, tie = np.array([0.65, 0.6, 0.7]), np.array([0.3, 0.5, 0.2])
    davidson, _ = method_scores("davidson", 3, i, j, p, Debias.average, tie)
    without, _ = method_scores("davidson", 3, i, j, p, Debias.average, np.zeros(3))
    assert not np.allclose(davidson, without)
    assert np.argsort(-davidson).tolist() == [0, 1, 2]
    avg, _ = method_scores("avg_prob", 3, i, j, p, Debias.average, tie)
    assert avg.tolist() == pytest.approx([(0.65 + 0.7) / 2, (0.35 + 0.6) / 2, (0.4 + 0.3) / 2])


# --- configuration --------------------------------------------------------------------------------------------


def test_absolute_config_problems_are_listed_together():
    with pytest.raises(ConfigError) as err:
        compose(
            [
                "absolute.modes=[g_eval,prompt_score]",
                "absolute.templates.g_eval=[s1]",
                "absolute.templates.prompt_score=[nope]",
                "absolute.samples=0",
                "absolute.score_words=[x]",
                "absolute.library.s2.text=no candidate here",
                "absolute.library.s2.low=5",
                "absolute.library.s2.high=5",
                "absolute.templates.explicit=[s2]",
            ]
        )
    message = str(err.value)
    assert "absolute.templates.g_eval: template 's1' is a prompt_score template" in message
    assert "no template 'nope'" in message
    assert "absolute.samples=0" in message
    assert "score_words" in message
    # templates of modes that do not run are not checked; s2 is named for explicit, which does not run either
    assert "absolute.library.s2" not in message
    with pytest.raises(ConfigError) as err:
        compose(
            [
                "absolute.modes=[prompt_score]",
                "absolute.templates.prompt_score=[s2]",
                "absolute.library.s2.text=no candidate here",
                "absolute.library.s2.low=5",
                "absolute.library.s2.high=5",
            ]
        )
    assert "absolute.library.s2.text must contain {candidate}" in str(err.value)
    assert "absolute.library.s2: low=5 must be below high=5" in str(err.value)


def test_workflow_absolute_needs_modes_and_davidson_needs_a_tie():
    with pytest.raises(ConfigError, match="workflow=absolute needs absolute.modes"):
        compose(["workflow=absolute"])
    with pytest.raises(ConfigError, match="davidson .* prompt.label_words_tie is empty"):
        compose(["scoring.methods=[davidson]"])
    cfg = compose(["workflow=absolute", "absolute.modes=[g_eval]"])
    assert cfg.absolute.modes == [AbsoluteMode.g_eval]
    tie = compose(["+prompt=chen_tie", "scoring.methods=[poe_gaussian,davidson]"])
    assert tie.prompt.label_words_tie == [" C"]


def test_a_user_template_joins_the_library():
    """A template added in a YAML file (as conf/absolute/*.yaml or an experiment preset does) joins the shipped ones."""
    from omegaconf import OmegaConf

    from pipeline.config.hydra import to_run_config

    mine = {"mode": "prompt_score", "text": "{candidate} Rate it {low}-{high}.", "high": 5}
    cfg = to_run_config(
        OmegaConf.create(
            {
                "absolute": {
                    "modes": ["prompt_score"],
                    "library": {"mine": mine},
                    "templates": {"prompt_score": ["s1", "mine"]},
                }
            }
        )
    )
    assert cfg.absolute.library["mine"] == AbsoluteTemplateConfig(
        mode=AbsoluteMode.prompt_score, text="{candidate} Rate it {low}-{high}.", low=1, high=5
    )
    assert set(cfg.absolute.library) >= {"s1", "s2", "geval", "chen_implicit", "chen_explicit", "mine"}


# --- EvalAssist's structured criteria: options with descriptions and scores -------------------------------------


def test_criterion_options_are_read_by_letter_and_scored(tokenizer):
    from pipeline.config.assessment import CriterionOption

    options = {
        "useful": [
            CriterionOption("Actionable", "states the problem", 2),
            CriterionOption("Partial", "", 1),
            CriterionOption("Not useful", "misses it", 0),
        ]
    }
    cfg = AbsoluteConfig(modes=[AbsoluteMode.options])
    (template,) = resolve_absolute(cfg, tokenizer, "smollm2", options)
    assert template.id == "criterion_options:useful" and template.attribute == "useful"
    assert template.words == ("A", "B", "C") and template.values == (2.0, 1.0, 0.0)
    assert template.options == "(A) Actionable: states the problem\n(B) Partial\n(C) Not useful: misses it"
    assert template.asks("useful") and not template.asks("honest")
    # p(A, B, C) = 0.5, 0.3, 0.1 (mass 0.9): (2 * 0.5 + 1 * 0.3) / 0.9
    score, mass = expected_score(np.log([[0.5, 0.3, 0.1]]), template.values)
    assert score[0] == pytest.approx(1.3 / 0.9) and mass[0] == pytest.approx(0.9)


def test_criterion_options_config_is_checked():
    cfg = compose(["experiment=generate_demo"])
    assert [o.name for o in cfg.criteria_options["useful"]] == ["Actionable", "Partial", "Not useful"]
    assert cfg.criteria_options["useful"][0].score == 2.0
    with pytest.raises(ConfigError, match="criteria_options is set but absolute.modes has no options"):
        compose(["experiment=generate_demo", "absolute.modes=[g_eval]"])
    with pytest.raises(ConfigError, match="absolute.modes has options but criteria_options is empty"):
        compose(["absolute.modes=[options]"])
