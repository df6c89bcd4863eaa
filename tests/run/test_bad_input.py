"""Bad input stops the run before any judging starts, with the context, candidate and field named."""

from __future__ import annotations

import json

import pytest

from pipeline.contracts.errors import ConfigError, InputError
from pipeline.run.context import run
from tests.conftest import compose


def write(tmp_path, records):
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def records():
    return [
        {
            "context_id": "c1",
            "context": "A passage about a pool.",
            "candidates": [
                {"candidate_id": "a", "text": "good", "scores": {"coherence": 4}},
                {"candidate_id": "b", "text": "", "scores": {"coherence": 2}},
                {"candidate_id": "c", "text": "fine", "scores": {"coherence": "n/a"}},
            ],
        },
        {"context_id": "c2", "context": "Another.", "candidates": [{"candidate_id": "z", "text": "alone"}]},
    ]


def test_bad_records_fail_before_judging(tmp_path):
    path = write(tmp_path, records())
    cfg = compose(
        [
            "dataset.name=custom",
            f"dataset.path={path}",
            "dataset.attributes=[coherence]",
            f"paths.output_root={tmp_path / 'out'}",
        ]
    )
    with pytest.raises(InputError) as info:
        run(cfg)
    message = str(info.value)
    assert "context 'c1', candidate 'b', field 'text'" in message
    assert "context 'c1', candidate 'c', field 'scores.coherence'" in message
    assert "context 'c2', field 'candidates'" in message
    assert not (tmp_path / "out" / "runs").exists()  # nothing was started


def test_unknown_method_and_bad_choices(tmp_path):
    with pytest.raises(Exception, match="scoring.debias=mean"):
        compose(["scoring.debias=mean", f"paths.output_root={tmp_path}"])
    with pytest.raises(ConfigError, match="unknown method"):
        compose(["scoring.methods=[elo]", f"paths.output_root={tmp_path}"])


@pytest.mark.engine
def test_prompt_too_long_is_refused_before_judging(tmp_path):
    cfg = compose(["judge.max_model_len=96", "prompt.too_long=refuse", f"paths.output_root={tmp_path}"])
    with pytest.raises(InputError, match="field 'context': the longest prompt needs"):
        run(cfg)
