"""The adaptive rounds' state on disk (pipeline.stages.rounds_files): the rounds table written and read back, a folder written
before a column existed, and a round's MLflow metrics."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.contracts.schemas import ROUNDS
from pipeline.stages.rounds_files import read_rounds, step_metrics, write_rounds


def record(
    r: int, downweighted: int | None, beyond_cap: int | None = None, contradicted: int | None = None
) -> dict:
    return {
        "round": r,
        "context_id": "pool",
        "items": 10,
        "pairs": 10 * r,
        "calls": 20 * r,
        "prompt_tokens": 100 * r,
        "criterion": "expected_tau",
        "value": 0.5,
        "expected_tau": 0.5,
        "max_stderr": 1.0,
        "downweighted": downweighted,
        "beyond_cap": beyond_cap,
        "contradicted": contradicted,
        "spearman": None,
        "fit_seconds": 0.1,
        "select_seconds": 0.1,
        "stopped": None,
    }


def test_rounds_are_written_and_read_back(tmp_path):
    write_rounds(tmp_path, [record(0, 0, 7, 0), record(1, 3, None, 2)])
    table = read_rounds(tmp_path)
    assert table.schema == ROUNDS
    assert table.column("downweighted").to_pylist() == [0, 3]
    assert table.column("beyond_cap").to_pylist() == [7, None]
    assert table.column("contradicted").to_pylist() == [0, 2]
    metrics = step_metrics(table.to_pylist()[1], 1)
    assert metrics["adaptive/contradicted"] == 2.0
    assert metrics["adaptive/downweighted"] == 3.0 and "adaptive/spearman" not in metrics
    assert "adaptive/beyond_cap" not in metrics  # a fit without censor has no count
    assert step_metrics(table.to_pylist()[0], 1)["adaptive/beyond_cap"] == 7.0


def test_a_rounds_table_from_before_the_counts_reads_with_them_unknown(tmp_path):
    added = ("downweighted", "beyond_cap", "contradicted")
    old = [{k: v for k, v in record(r, None).items() if k not in added} for r in (0, 1)]
    schema = pa.schema([f for f in ROUNDS if f.name not in added])
    pq.write_table(pa.Table.from_pylist(old, schema=schema), tmp_path / "rounds.parquet")
    table = read_rounds(tmp_path)
    assert table.schema == ROUNDS
    assert all(table.column(name).null_count == 2 for name in added)
    assert not any(f"adaptive/{name}" in step_metrics(table.to_pylist()[0], 1) for name in added)
    assert "adaptive/pool/pairs" in step_metrics(table.to_pylist()[0], 2)
