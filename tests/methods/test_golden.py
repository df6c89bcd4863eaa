"""Golden cases: small inputs with expected outputs derived by hand (see tests/methods/golden/*.json)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.methods import scorer, scorers

from .conftest import GOLDEN_DIR, load_golden

NAMES = sorted(p.stem for p in GOLDEN_DIR.glob("*.json"))
CASES = [(name, c) for name in NAMES for c in load_golden(name)]


def test_every_registered_scorer_has_golden_cases():
    assert set(NAMES) == set(scorers())


@pytest.mark.parametrize(("name", "case"), CASES, ids=[f"{n}:{c['desc'][:40]}" for n, c in CASES])
def test_golden(name, case):
    got = scorer(name).score(
        case["n_items"],
        np.array(case["i"], dtype=np.int64),
        np.array(case["j"], dtype=np.int64),
        np.array(case["p"], dtype=np.float64),
        **case["kwargs"],
    )
    np.testing.assert_allclose(got, case["expected"], rtol=0, atol=case["atol"], err_msg=case["desc"])
