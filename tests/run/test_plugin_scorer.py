"""A scorer from outside, as a user's own installed package registers it: an entry point of the group
``llm_comparative_assessment.scorers`` in a distribution on the path (a ``.dist-info`` with its ``entry_points.txt``,
the layout pip installs), naming a ScorerEntry. With no edit to this repository, the config checks accept its name,
a run scores it (the scores and correlations tables, and MLflow) and the invariance battery takes it up (every
registered scorer scored in its worlds)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import mlflow
import numpy as np
import polars as pl
import pytest

from pipeline.methods import registry
from pipeline.run.context import run
from tests.conftest import ROOT, compose
from tests.judge.faulty import FaultyServer
from tests.run.test_api_faults import standin_overrides

pytestmark = [pytest.mark.slow]

PLUGIN = '''
"""Copeland's rule: wins minus losses, each comparison decided by p."""
import numpy as np

from pipeline.methods.registry import ScorerEntry


def copeland(n, i, j, p, **_):
    i, j, p = np.asarray(i), np.asarray(j), np.asarray(p, dtype=float)
    won = np.sign(p - 0.5)
    scores = np.zeros(n)
    np.add.at(scores, i, won)
    np.add.at(scores, j, -won)
    return scores


COPELAND = ScorerEntry("copeland", copeland, leaderboard=True, summary="Copeland: wins minus losses")
'''


@pytest.fixture
def plugin_path(tmp_path, monkeypatch):
    """The plugin installed on the path (its package and its dist-info), the registry read afresh."""
    site = tmp_path / "site"
    (site / "copeland_plugin").mkdir(parents=True)
    (site / "copeland_plugin" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "copeland_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: copeland-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[llm_comparative_assessment.scorers]\ncopeland = copeland_plugin:COPELAND\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(registry, "_REGISTRY", registry._Registry())
    return site


def test_a_plugin_scorer_is_registered_checked_scored_and_logged(plugin_path, tmp_path, judge_model):
    assert list(registry.scorers())[-1] == "copeland" and registry.scorer("copeland").leaderboard
    # the config checks know it: accepted by name, and listed among the valid ones
    from pipeline.contracts.errors import ConfigError

    with pytest.raises(ConfigError, match="copeland"):
        compose(["scoring.methods=[poe_gaussian,copelandd]"])
    with FaultyServer(share=0.0, seed=2) as server:
        overrides = standin_overrides(
            server.url, judge_model, tmp_path, "scoring.methods=[poe_gaussian,copeland]"
        )
        result = run(compose(overrides))
    scores = pl.read_parquet(result.run_dir / "tables" / "scores.parquet")
    mine = scores.filter(pl.col("method") == "copeland")
    assert mine.height == scores.filter(pl.col("method") == "poe_gaussian").height > 0
    # its scores are what the plugin's function gives on the run's own comparisons
    comparisons = pl.read_parquet(result.run_dir / "tables" / "comparisons.parquet")
    for (context, attribute), group in comparisons.group_by(["context_id", "attribute"]):
        cands = sorted(set(group["cand_i"]) | set(group["cand_j"]))
        index = {c: k for k, c in enumerate(cands)}
        won = np.sign(group["p"].to_numpy() - 0.5)
        expected = dict.fromkeys(cands, 0.0)
        for a, b, w in zip(group["cand_i"], group["cand_j"], won, strict=True):
            expected[a] += w
            expected[b] -= w
        got = mine.filter((pl.col("context_id") == context) & (pl.col("attribute") == attribute))
        assert dict(zip(got["candidate_id"], got["score"], strict=True)) == pytest.approx(expected), index
    correlations = pl.read_parquet(result.run_dir / "tables" / "correlations.parquet")
    assert "copeland" in set(correlations["method"])
    logged = mlflow.MlflowClient(tracking_uri=result.tracking_uri).get_run(result.mlflow_run_id).data.metrics
    assert any("copeland" in name for name in logged), sorted(logged)[:20]


def test_the_invariance_battery_takes_a_plugin_scorer_up(plugin_path):
    """The battery's coverage test, run with the plugin installed: it is among the scorers the battery's worlds score
    (its names, order and sides tests run every registered scorer the same way: METHODS is the registry)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_path), str(ROOT)])}
    check = "from pipeline.methods import SCORERS; assert list(SCORERS)[-1] == 'copeland', list(SCORERS)"
    subprocess.run([sys.executable, "-c", check], env=env, cwd=ROOT, check=True)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/invariance/test_invariance.py",
         "-k", "covers_every"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
