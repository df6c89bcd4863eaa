"""The public conformance battery (pipeline.testing) on the product's own parts, and on parts built to break each of
its promises: every registered scorer passes; a scorer with a wrong shape, a favourite index, a blind side, the wrong
direction or noise fails the check it breaks and only by name; a backend whose answers move with the other prompts
fails; a stage that keeps its first rows fails. Scorer settings (scoring.options) reach the scorer."""

from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pytest

from pipeline.config.backends import BackendEntry
from pipeline.contracts.engine import Result
from pipeline.methods.scorers.registry import ScorerEntry, scorers
from pipeline.testing import (
    ConformanceError,
    check_backend,
    check_scorer,
    check_stage,
    parametrize_with_checks,
    scorer_checks,
)


@parametrize_with_checks(list(scorers().values()))
def test_every_registered_scorer_passes_the_battery(entry, check):
    check(entry)


def wins(n, i, j, p, **_):
    scores = np.zeros(n)
    np.add.at(scores, np.asarray(i), np.asarray(p) - 0.5)
    np.add.at(scores, np.asarray(j), 0.5 - np.asarray(p))
    return scores


BROKEN = {
    "shapes": lambda n, i, j, p, **_: wins(n, i, j, p)[:-1],
    "names": lambda n, i, j, p, **_: wins(n, i, j, p) + 0.3 * np.arange(n),
    "sides": lambda n, i, j, p, **_: np.bincount(np.asarray(i), weights=np.asarray(p), minlength=n),
    "direction": lambda n, i, j, p, **_: -wins(n, i, j, p),
    "deterministic": lambda n, i, j, p, **_: wins(n, i, j, p) + np.random.default_rng().normal(0, 1e-3, n),
}


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_a_scorer_that_breaks_a_promise_fails_that_check_by_name(broken):
    entry = ScorerEntry(f"broken_{broken}", BROKEN[broken])
    with pytest.raises(ConformanceError, match=rf"scorer broken_{broken} fails {broken}"):
        check_scorer(entry)
    passed = []
    for name, check in scorer_checks(entry):
        try:
            check(entry)
            passed.append(name)
        except Exception:
            pass
    assert broken not in passed and "shapes" in passed or broken == "shapes"


@dataclasses.dataclass(frozen=True)
class MarginSettings:
    margin: float = 0.0


def margin_wins(n, i, j, p, *, margin=0.0, **_):
    decided = np.where(np.abs(np.asarray(p) - 0.5) > margin, np.sign(np.asarray(p) - 0.5), 0.0)
    scores = np.zeros(n)
    np.add.at(scores, np.asarray(i), decided)
    np.add.at(scores, np.asarray(j), -decided)
    return scores


def test_a_scorer_takes_its_settings_as_it_declares_them_and_refuses_others():
    entry = ScorerEntry("margin", margin_wins, settings=MarginSettings)
    check_scorer(entry, {"margin": 0.1})
    assert entry.options({}) == {"margin": 0.0} and entry.options({"margin": 0.2}) == {"margin": 0.2}
    with pytest.raises(ValueError, match="scoring method margin takes margin, not \\['width'\\]"):
        entry.options({"width": 1})
    with pytest.raises(ValueError, match="takes no settings"):
        scorers()["win_ratio"].options({"margin": 1})


def test_scoring_options_reach_the_scorer_on_the_products_path(monkeypatch):
    """score_comparisons with scoring.options: a setting that changes the scores changes them (a margin above every
    comparison's distance from one half leaves every score 0)."""
    import polars as pl

    from pipeline.config.enums import Debias
    from pipeline.methods.scorers import registry
    from pipeline.scoring.comparative import score_comparisons

    monkeypatch.setattr(registry, "REGISTRY", registry.REGISTRY.fresh())
    registry.REGISTRY.register(ScorerEntry("margin", margin_wins, settings=MarginSettings))
    cands = pa.table({"context_id": ["c"] * 3, "context": ["x"] * 3, "candidate_id": ["a", "b", "k"],
                      "candidate_index": [0, 1, 2], "system": [None] * 3, "text": ["1", "22", "333"]})  # fmt: skip
    comps = pl.DataFrame({"judge": ["jd"] * 3, "attribute": ["q"] * 3, "template_id": ["t"] * 3,
                          "context_id": ["c"] * 3, "cand_i": ["a", "a", "b"], "cand_j": ["b", "k", "k"],
                          "p_ij": [0.8, 0.7, 0.6], "p_ji": [0.2, 0.3, 0.4], "p": [0.8, 0.7, 0.6],
                          "p_tie": [0.0] * 3})  # fmt: skip
    human = pl.DataFrame(schema={"context_id": pl.String, "candidate_id": pl.String, "attribute": pl.String,
                                 "human_score": pl.Float64})  # fmt: skip
    plain = score_comparisons(comps, cands, human, ["margin"], Debias.average).scores
    wide = score_comparisons(
        comps, cands, human, ["margin"], Debias.average, options={"margin": {"margin": 0.4}}
    ).scores
    # every p is within 0.4 of one half: with the wider margin no comparison counts, without it each does
    assert plain["score"].to_list() != [0.0] * 3
    assert wide["score"].to_list() == [0.0] * 3


# --- backends ------------------------------------------------------------------------------------------------


class HashEngine:
    """A judge that reads no model: each prompt's log-probabilities from a hash of the prompt alone."""

    inside, start_seconds, dtype = True, 0.0, "none"

    def __init__(self, spec):
        self.spec = spec

    def answer(self, prompts, frame, request):
        out = []
        for prompt in prompts:
            digest = hashlib.sha256(prompt.encode()).digest()
            weights = [1 + digest[k] for k in range(len(request.token_ids))]
            out.append(
                Result([math.log(w / sum(weights)) for w in weights], [""], len(prompt), 0, 1, ["length"])
            )
        return out

    def close(self):
        pass


class CrowdEngine(HashEngine):
    """Answers that move with the other prompts of the call (a batch's first prompt is favoured)."""

    def answer(self, prompts, frame, request):
        out = super().answer(prompts, frame, request)
        first = dataclasses.replace(out[0], token_logprobs=[v - 0.5 for v in out[0].token_logprobs])
        return [first, *out[1:]]


def test_a_backend_is_checked_alone_together_and_in_another_order():
    good = BackendEntry("hash", f"{__name__}:HashEngine", "pipeline.judge.models:resolve_local")
    check_backend(good, spec=None)
    crowd = BackendEntry("crowd", f"{__name__}:CrowdEngine", "pipeline.judge.models:resolve_local")
    with pytest.raises(ConformanceError, match="backend crowd fails alone") as caught:
        check_backend(crowd, spec=None)
    assert "backend crowd fails order" in str(caught.value) and "fails results" not in str(caught.value)


# --- stages ----------------------------------------------------------------------------------------------------


def test_a_products_stage_passes_and_a_stage_that_keeps_its_first_rows_fails(tmp_path):
    from pipeline.config.enums import Debias, Orderings
    from pipeline.stages.scoring import Reduce
    from tests.invariance.test_invariance import base
    from tests.invariance.world import World, run_world

    world = World(sizes=(3, 4), seed=3)
    tables = run_world(world, base(), ("win_ratio",)).tables
    judgments = tables["judgments"].to_arrow()
    check_stage(Reduce(Debias.average, Orderings.both), {"judgments": judgments}, tmp_path)

    class FirstRows(Reduce):
        """Only the context its first row belongs to (which the rows' order decides)."""

        def run(self, ctx, *, judgments):
            first = judgments.column("context_id")[0]
            return super().run(
                ctx, judgments=judgments.filter(pa.compute.equal(judgments.column("context_id"), first))
            )

    with pytest.raises(ConformanceError, match="stage reduce fails row order") as caught:
        check_stage(FirstRows(Debias.average, Orderings.both), {"judgments": judgments}, tmp_path)
    assert "fails declared" not in str(caught.value)
