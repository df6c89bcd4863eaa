"""The demo set: deterministic, in the shared layout, with the quality order known by construction."""

from __future__ import annotations

from pipeline.config.assessment import DemoConfig
from pipeline.data.demo import demo_records, write_demo
from pipeline.data.load import read_meta
from pipeline.data.records import ValidationRules, validate_records
from pipeline.data.tables import read_records


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


def test_contexts_pooled_into_one_keep_every_candidate_and_its_human_scores():
    import pyarrow as pa

    from pipeline.contracts.schemas import CANDIDATES, HUMAN_SCORES
    from pipeline.data.source import POOL, as_pool

    candidates = pa.Table.from_pylist(
        [
            {
                "context_id": c,
                "context": f"text {c}",
                "candidate_id": k,
                "candidate_index": i,
                "system": None,
                "text": f"{c}{k}",
            }
            for c in ("x", "y")
            for i, k in enumerate(("1", "2"))
        ],
        schema=CANDIDATES,
    )
    human = pa.Table.from_pylist(
        [{"context_id": "y", "candidate_id": "2", "attribute": "coherence", "human_score": 3.0}],
        schema=HUMAN_SCORES,
    )
    pooled, scores = as_pool(candidates, human)
    assert pooled.schema == CANDIDATES and scores.schema == HUMAN_SCORES
    assert set(pooled.column("context_id").to_pylist()) == {POOL}
    assert pooled.column("candidate_id").to_pylist() == ["x/1", "x/2", "y/1", "y/2"]
    assert pooled.column("candidate_index").to_pylist() == [0, 1, 2, 3]
    assert pooled.column("text").to_pylist() == ["x1", "x2", "y1", "y2"] and set(
        pooled.column("context").to_pylist()
    ) == {""}
    assert scores.to_pylist() == [
        {"context_id": POOL, "candidate_id": "y/2", "attribute": "coherence", "human_score": 3.0}
    ]
