"""The command line: an expected error (bad input, a config value, the judge model) prints its message and exits
with status 2, without a traceback or Hydra's hint; a bad file leaves no run folder behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def cli(tmp_path, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", f"paths.output_root={tmp_path / 'out'}", *overrides],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_expected_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, proc.stderr[-3000:]
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "HYDRA_FULL_ERROR" not in proc.stderr
    assert len(proc.stderr.splitlines()) < 15, proc.stderr


def test_bad_input_prints_the_problems_and_exits_2(tmp_path):
    path = tmp_path / "data.jsonl"
    records = [
        {
            "context_id": "c1",
            "context": "A passage.",
            "candidates": [
                {"candidate_id": "a", "text": "good", "scores": {"coherence": 4}},
                {"candidate_id": "b", "text": "", "scores": {"coherence": 2}},
                {"candidate_id": "c", "text": "fine", "scores": {"coherence": 1}},
            ],
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    proc = cli(tmp_path, "dataset.name=mine", f"dataset.path={path}", "dataset.attributes=[coherence]")
    assert_expected_error(
        proc, "error: 1 problem(s) in the input", "context 'c1', candidate 'b', field 'text'"
    )
    assert not (tmp_path / "out" / "runs").exists()


@pytest.mark.parametrize(
    "override,fragments",
    [
        (
            "scoring.debias=Alpha",
            ("scoring.debias", "expected one of [average, alpha, balanced_threshold, mean_shift, none]"),
        ),
        ("pairs.k=5", ("pairs.k=5 has no effect with pairs.strategy=all_pairs",)),
        ("dataset=summeval_typo", ("dataset", "summeval_typo")),
        ("judge.model=/no/such/model", ("judge.model=/no/such/model: no such folder",)),
    ],
)
def test_config_and_model_errors_print_their_message_and_exit_2(tmp_path, override, fragments):
    assert_expected_error(cli(tmp_path, "debug=quick", override), *fragments)
