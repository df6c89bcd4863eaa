"""Plugins that fail, as a user's broken package would (entry points on the path, the layout pip installs): one that
shadows a built-in's name, one whose import calls ``sys.exit``, one whose import raises, one that names another
class; each is left out with a warning naming its entry point, asking for it by name says why, and the built-ins
and the good plugin stay usable. A scorer whose output cannot be the context's scores is refused naming the scorer
and the context; scores that are not finite leave the context out of that method, counted, naming the candidates."""

from __future__ import annotations

import logging

import numpy as np
import polars as pl
import pytest

from pipeline.config.enums import Debias
from pipeline.contracts.errors import UserError
from pipeline.contracts.schemas import HUMAN_SCORES
from pipeline.methods.scorers import registry
from pipeline.scoring.comparative import score_comparisons
from tests.conftest import candidates_table
from tests.plugins import install_plugin

GROUP = "llm_comparative_assessment.scorers"
MODULES = {
    "ca_broken_shadow": """
        from pipeline.methods.scorers.registry import ScorerEntry
        SHADOW = ScorerEntry("bradley_terry", lambda n, i, j, p, **_: [0.0] * n)
    """,
    "ca_broken_exit": """
        import sys
        sys.exit("this plugin exits at import")
    """,
    "ca_broken_raise": """
        raise RuntimeError("a bug at import")
    """,
    "ca_broken_kind": """
        NOT_A_SCORER = object()
    """,
    "ca_scorers_odd": """
        import numpy as np
        from pipeline.methods.scorers.registry import ScorerEntry
        SHORT = ScorerEntry("too_few", lambda n, i, j, p, **_: np.zeros(n - 1))
        NAN = ScorerEntry("all_nan", lambda n, i, j, p, **_: np.full(n, np.nan))
        GOOD = ScorerEntry("wins", lambda n, i, j, p, **_: np.bincount(i, weights=p, minlength=n)
                           + np.bincount(j, weights=1 - np.asarray(p), minlength=n))
    """,
}
ENTRIES = {
    "bradley_terry": "ca_broken_shadow:SHADOW",
    "exits": "ca_broken_exit:ANYTHING",
    "raises": "ca_broken_raise:ANYTHING",
    "wrong_kind": "ca_broken_kind:NOT_A_SCORER",
    "too_few": "ca_scorers_odd:SHORT",
    "all_nan": "ca_scorers_odd:NAN",
    "wins": "ca_scorers_odd:GOOD",
}


@pytest.fixture
def broken(tmp_path, monkeypatch):
    entries = [(GROUP, name, target) for name, target in ENTRIES.items()]
    site = install_plugin(tmp_path, "ca-broken-plugin", MODULES, entries)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(registry, "REGISTRY", registry.REGISTRY.fresh())
    return registry.REGISTRY


def test_broken_plugins_are_named_with_their_entry_points_and_the_rest_stays_usable(broken, caplog):
    with caplog.at_level(logging.WARNING):
        names = set(broken.all())
    assert {"win_ratio", "bradley_terry", "poe_gaussian", "wins", "too_few", "all_nan"} <= names
    assert not names & {"exits", "raises", "wrong_kind"}
    # the built-in keeps its name; the shadow is named with its entry point
    assert broken.get("bradley_terry").score.__module__ == "pipeline.methods.scorers.bradley_terry"
    warned = caplog.text
    for name, target in ENTRIES.items():
        if name in ("exits", "raises", "wrong_kind"):
            assert f"plugin {name} ({target})" in warned
    assert "plugin bradley_terry (ca_broken_shadow:SHADOW)" in warned and "registered twice" in warned
    with pytest.raises(ValueError, match=r"plugin exits \(ca_broken_exit:ANYTHING\).*SystemExit"):
        broken.get("exits")
    with pytest.raises(ValueError, match=r"plugin raises \(ca_broken_raise:ANYTHING\).*RuntimeError: a bug"):
        broken.get("raises")
    with pytest.raises(ValueError, match=r"unknown scoring method 'nothing'.*not loaded: .*exits"):
        broken.get("nothing")
    # read again: the same, nothing loaded twice or lost
    assert set(broken.all()) == names


def comparisons(n: int) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    rows = [
        {"judge": "j", "attribute": "a", "template_id": "t", "context_id": "c", "cand_i": f"k{a}",
         "cand_j": f"k{b}", "p_ij": float(x), "p_ji": float(1 - x), "p": float(x), "p_tie": 0.0}
        for a in range(n) for b in range(a + 1, n) for x in [rng.uniform(0.1, 0.9)]
    ]  # fmt: skip
    return pl.DataFrame(rows)


def test_a_scorer_whose_output_is_not_one_score_per_candidate_is_refused_naming_it_and_the_context(broken):
    empty = pl.from_arrow(HUMAN_SCORES.empty_table())
    with pytest.raises(
        UserError, match=r"context 'c' \(judge j, attribute a, template t\): scorer 'too_few'.*4"
    ):
        score_comparisons(
            comparisons(4), candidates_table({"c": 4}, "k{k}"), empty, ["wins", "too_few"], Debias.average
        )
    scored = score_comparisons(
        comparisons(4), candidates_table({"c": 4}, "k{k}"), empty, ["wins", "all_nan"], Debias.average
    )
    assert set(scored.scores["method"]) == {"wins"} and scored.scores.height == 4
    [(judge, attribute, template, method, context, reason)] = scored.unscored
    assert (judge, attribute, template, method, context) == ("j", "a", "t", "all_nan", "c")
    assert "not finite" in reason and "k0" in reason
