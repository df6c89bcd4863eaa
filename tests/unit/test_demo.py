"""The demo set: deterministic, in the shared layout, with the quality order known by construction."""

from __future__ import annotations

from pipeline.config import DemoConfig
from pipeline.data.demo import demo_records, write_demo
from pipeline.data.load import read_meta, read_records
from pipeline.data.validate import ValidationRules, validate_records


def test_demo_is_seeded_and_valid(tmp_path):
    cfg = DemoConfig(n_contexts=3, n_candidates=5, seed=1)
    assert demo_records(cfg) == demo_records(cfg)
    assert demo_records(cfg) != demo_records(DemoConfig(n_contexts=3, n_candidates=5, seed=2))
    path = write_demo(cfg, tmp_path)
    meta = read_meta(tmp_path / "meta.json")
    out = validate_records(
        read_records(path), ValidationRules(attributes=meta.attributes, correlation="required")
    )
    assert out.report.n_contexts == 3 and out.report.n_candidates == 15


def test_damage_is_progressive():
    records = demo_records(DemoConfig(n_contexts=2, n_candidates=6, seed=0))
    for record in records:
        by_level = {int(c["system"].split("-")[1]): c for c in record["candidates"]}
        assert sorted(by_level) == list(range(6))
        scores = [by_level[d]["scores"]["coherence"] for d in range(6)]
        assert scores == sorted(scores, reverse=True) and scores[0] == 5.0 and scores[-1] == 1.0
        texts = [by_level[d]["text"] for d in range(6)]
        assert len(set(texts)) == 6  # every level differs from the others
