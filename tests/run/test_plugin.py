"""A package from outside, as a user's own installed package registers its parts: entry points of the groups
``llm_comparative_assessment.scorers``, ``.backends`` and ``.stages`` in a distribution on the path (a ``.dist-info``
with its ``entry_points.txt``, the layout pip installs), naming a scorer (Copeland's rule), a judge backend (a judge
that reads no model: label-word probabilities from a hash of the prompt) and a stage (the pairs each context was
judged on). With no edit to this repository, the config checks know them, ``make stages`` lists them, a run judges
with the backend, scores with the scorer and runs the stage (their tables, and MLflow), and the invariance battery
takes the scorer and the stage's table up."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import mlflow
import numpy as np
import polars as pl
import pytest

from pipeline.config import backends, stage_plugins
from pipeline.contracts.errors import ConfigError
from pipeline.methods.scorers import registry
from pipeline.run.context import run
from pipeline.workflows.describe import describe
from tests.conftest import ROOT, compose
from tests.plugins import install_plugin

pytestmark = [pytest.mark.slow]

COPELAND = '''
"""Copeland's rule: wins minus losses, each comparison decided by p."""
import numpy as np

from pipeline.methods.scorers.registry import ScorerEntry


def copeland(n, i, j, p, **_):
    i, j, p = np.asarray(i), np.asarray(j), np.asarray(p, dtype=float)
    won = np.sign(p - 0.5)
    scores = np.zeros(n)
    np.add.at(scores, i, won)
    np.add.at(scores, j, -won)
    return scores


COPELAND = ScorerEntry("copeland", copeland, leaderboard=True, summary="Copeland: wins minus losses")
'''

HASHED = '''
"""A judge that reads no model: label-word probabilities from a hash of the prompt."""
import hashlib
import math

from pipeline.config.backends import BackendEntry, Trait
from pipeline.contracts.engine import Result


def hashed_logprobs(prompt, n):
    digest = hashlib.sha256(prompt.encode()).digest()
    weights = [1 + digest[k] for k in range(n)]
    return [math.log(w / sum(weights)) for w in weights]


class HashedEngine:
    inside = True
    start_seconds = 0.0
    dtype = "none"

    def __init__(self, spec):
        self.spec = spec

    def answer(self, prompts, frame, request):
        return [
            Result(hashed_logprobs(p, len(request.token_ids)), [""], len(p), 0, 1, ["length"]) for p in prompts
        ]

    def close(self):
        pass


HASHED = BackendEntry(
    name="hashed",
    traits=Trait.LOGPROBS | Trait.ABSOLUTE,
    engine="ca_demo_hashed:HashedEngine",
    resolve="pipeline.judge.models:resolve_local",
    runs="inside the judge worker's process (no model)",
    summary="label-word probabilities from a hash of the prompt",
)
'''

PAIR_COUNTS = '''
"""How many pairs each context was judged on."""
import polars as pl
import pyarrow as pa

from pipeline.config.stage_plugins import StageEntry
from pipeline.contracts.roles import Roles, declare
from pipeline.stages import ports
from pipeline.stages.base import Port, Stage

SCHEMA = declare(
    pa.schema([("context_id", pa.string()), ("attribute", pa.string()), ("pairs", pa.int64()),
               ("decided", pa.int64())]),
    Roles(),
)
PORT = Port("pair_counts", "pairs judged per context and attribute", schema=SCHEMA, file="pair_counts")


class PairCounts(Stage):
    """How many pairs each context was judged on, and how many of them were decided (p not one half)."""

    name = "pair_counts"
    reads = (ports.COMPARISONS,)
    writes = (PORT,)

    def run(self, ctx, *, comparisons):
        out = (
            pl.from_arrow(comparisons)
            .group_by(["context_id", "attribute"])
            .agg(pl.len().cast(pl.Int64).alias("pairs"), (pl.col("p") != 0.5).sum().cast(pl.Int64).alias("decided"))
            .sort(["context_id", "attribute"])
        )
        ctx.metrics["pair_counts/pairs"] = float(out["pairs"].sum())
        return {"pair_counts": out.to_arrow()}


def pair_counts(cfg, root):
    return PairCounts()


PAIR_COUNTS = StageEntry("pair_counts", "ca_demo_pair_counts:pair_counts", "score",
                         summary="pairs judged per context and attribute")
'''

# One module per kind, and the entry points (what the package's pyproject.toml declares): group -> (name, module).
MODULES = {"ca_demo_copeland": COPELAND, "ca_demo_hashed": HASHED, "ca_demo_pair_counts": PAIR_COUNTS}
ENTRIES = {
    "llm_comparative_assessment.scorers": ("copeland", "ca_demo_copeland:COPELAND"),
    "llm_comparative_assessment.backends": ("hashed", "ca_demo_hashed:HASHED"),
    "llm_comparative_assessment.stages": ("pair_counts", "ca_demo_pair_counts:PAIR_COUNTS"),
}


@pytest.fixture
def plugin_path(tmp_path, monkeypatch):
    """The plugin installed on the path (its modules and its dist-info), the registries read afresh."""
    entries = [(group, name, target) for group, (name, target) in ENTRIES.items()]
    site = install_plugin(tmp_path, "ca-demo-plugin", MODULES, entries)
    monkeypatch.syspath_prepend(str(site))
    for module in (registry, backends, stage_plugins):
        monkeypatch.setattr(module, "REGISTRY", module.REGISTRY.fresh())
    return site


def test_the_architecture_page_counts_the_files_a_plugin_takes():
    """docs/architecture.md's table of what to add from outside: each kind the number of files this test's plugin
    needs for it (its module and the pyproject.toml that names it)."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    rows = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[3].startswith("`llm_comparative_assessment."):
            rows[cells[3].strip("`")] = int(cells[1])
    footprint = {
        group: 1 + 1 for group in ENTRIES
    }  # one module of the kind, and the package's pyproject.toml
    assert rows == footprint


def plugin_run_overrides(judge_model, tmp_path, *extra: str) -> list[str]:
    return [
        "judge.backend=hashed",
        f"judge.model={judge_model}",
        "judge.store=false",
        "runtime=inprocess",
        "dataset.demo.n_contexts=3",
        "dataset.demo.n_candidates=4",
        "judge.max_model_len=2048",
        "tracking.plots=false",
        f"paths.output_root={tmp_path}",
        *extra,
    ]


def test_a_plugin_scorer_backend_and_stage_are_registered_checked_run_and_logged(
    plugin_path, tmp_path, judge_model
):
    # registered after the package's own, with what they declare
    assert list(registry.scorers())[-1] == "copeland" and registry.scorer("copeland").leaderboard
    assert (
        list(backends.backends())[-1] == "hashed"
        and backends.Trait.ENDPOINT not in backends.backend("hashed").traits
    )
    assert list(stage_plugins.stage_plugins()) == ["pair_counts"]
    # `make stages` lists all three, and shows the stage in the workflow that takes it
    listed = describe()
    for name in ("`copeland`", "`hashed`", "`pair_counts`"):
        assert name in listed, name
    assert "| score | `pair_counts` |" in describe(["extra_stages=[pair_counts]"])
    # the config checks know them: a misspelt name is refused, listing the plugin's among the valid ones
    for override in (
        "scoring.methods=[poe_gaussian,copelandd]",
        "judge.backend=hashd",
        "extra_stages=[pair_countz]",
    ):
        with pytest.raises(ConfigError, match="copeland|hashed|pair_counts"):
            compose([override])
    # what the backend declares it cannot do is refused by the checks that read the declarations
    with pytest.raises(ConfigError, match="cannot continue a prefilled answer"):
        compose(plugin_run_overrides(judge_model, tmp_path, "judge.reasoning.enabled=true"))

    cfg = compose(
        plugin_run_overrides(
            judge_model, tmp_path, "scoring.methods=[poe_gaussian,copeland]", "extra_stages=[pair_counts]"
        )
    )
    result = run(cfg)
    tables = result.run_dir / "tables"
    # the backend judged: every prompt answered by the plugin's engine, as its hash says
    judge = json.loads((result.run_dir / "judge.json").read_text())
    assert judge["backend"] == "hashed"
    judgments = pl.read_parquet(tables / "judgments.parquet")
    # (its probabilities over the label words sum to one: the hash spreads all of it over them, a model would not)
    assert judgments.height > 0 and judgments["label_mass"].to_numpy() == pytest.approx(1.0)
    comparisons = pl.read_parquet(tables / "comparisons.parquet")
    # the scorer scored: its scores are what its function gives on the run's own comparisons
    scores = pl.read_parquet(tables / "scores.parquet")
    mine = scores.filter(pl.col("method") == "copeland")
    assert mine.height == scores.filter(pl.col("method") == "poe_gaussian").height > 0
    for (context, attribute), group in comparisons.group_by(["context_id", "attribute"]):
        cands = sorted(set(group["cand_i"]) | set(group["cand_j"]))
        won = np.sign(group["p"].to_numpy() - 0.5)
        expected = dict.fromkeys(cands, 0.0)
        for a, b, w in zip(group["cand_i"], group["cand_j"], won, strict=True):
            expected[a] += w
            expected[b] -= w
        got = mine.filter((pl.col("context_id") == context) & (pl.col("attribute") == attribute))
        assert dict(zip(got["candidate_id"], got["score"], strict=True)) == pytest.approx(expected)
    assert "copeland" in set(pl.read_parquet(tables / "correlations.parquet")["method"])
    # the stage ran at the end of the score segment: its table is the run's comparisons counted
    counts = pl.read_parquet(tables / "pair_counts.parquet")
    expected_counts = comparisons.group_by(["context_id", "attribute"]).agg(pl.len().alias("n"))
    assert sorted(zip(counts["context_id"], counts["attribute"], counts["pairs"], strict=True)) == sorted(
        zip(expected_counts["context_id"], expected_counts["attribute"], expected_counts["n"], strict=True)
    )
    # MLflow: the backend among the params, the scorer's and the stage's metrics, the stage's table as an artifact
    client = mlflow.MlflowClient(tracking_uri=result.tracking_uri)
    logged = client.get_run(result.mlflow_run_id).data
    assert logged.params["judge.backend"] == "hashed"
    assert any("copeland" in name for name in logged.metrics), sorted(logged.metrics)[:20]
    assert logged.metrics["pair_counts/pairs"] == comparisons.height
    artifacts = {a.path for a in client.list_artifacts(result.mlflow_run_id, "tables")}
    assert "tables/pair_counts.parquet" in artifacts


def test_the_invariance_battery_takes_a_plugin_scorer_and_stage_up(plugin_path):
    """The battery, run with the plugin installed: the scorer among those its worlds score, the stage's table among
    those its worlds reach (roles declared), and both through the names and sides checks."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_path), str(ROOT)])}
    check = (
        "from pipeline.methods import scorers; from tests.invariance.world import TABLE_PORTS; "
        "assert list(scorers())[-1] == 'copeland', list(scorers()); "
        "assert 'pair_counts' in [p.name for p in TABLE_PORTS]"
    )
    subprocess.run([sys.executable, "-c", check], env=env, cwd=ROOT, check=True)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/invariance/test_invariance.py",
         "-k", "covers_every or names_change or sides_of"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 passed" in done.stdout


def test_the_plugin_passes_the_public_conformance_battery(plugin_path, tmp_path, cache_dir, judge_model):
    """What a plugin's author runs (pipeline.testing) on this plugin's scorer, backend (its engine made from the
    spec its resolver gives for the real model) and stage (on the product's own comparisons)."""
    from pipeline.config.enums import Debias, Orderings
    from pipeline.config.judging import JudgeConfig
    from pipeline.judge.models import resolve_judge
    from pipeline.stages.scoring import Reduce
    from pipeline.testing import check_backend, check_scorer, check_stage
    from pipeline.testing.stages import Context
    from tests.invariance.test_invariance import base
    from tests.invariance.world import World, run_world

    check_scorer(registry.scorer("copeland"))
    spec = resolve_judge(JudgeConfig(backend="hashed", model=judge_model, store=False), cache_dir)
    check_backend(backends.backend("hashed"), spec)
    judgments = run_world(World(sizes=(3, 4), seed=3), base(), ("win_ratio",)).tables["judgments"].to_arrow()
    reduced = Reduce(Debias.average, Orderings.both).run(Context(tmp_path), judgments=judgments)
    comparisons = pl.DataFrame(reduced["comparisons"]).to_arrow()  # as the runner hands it on (Arrow)
    stage = stage_plugins.stage_plugin("pair_counts").builder()(compose([]), ROOT)
    check_stage(stage, {"comparisons": comparisons}, tmp_path)
