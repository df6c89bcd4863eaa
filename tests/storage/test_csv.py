"""Every CSV the project writes (pipeline.storage.csv): no text cell a spreadsheet would run as a formula, ids and
names included, and every value read back as it was (ids stay text: "007" is not 7)."""

from __future__ import annotations

import csv

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.storage.csv import FORMULA_START, read_csv, write_csv

texts = st.one_of(
    st.sampled_from(
        ["=1+1", '=HYPERLINK("http://x")', "+1", "-2", "@SUM(A1)", "'=x", "''", "007", "1e3", ""]
    ),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(texts, texts), min_size=1, max_size=8))
def test_no_cell_starts_a_formula_and_every_value_reads_back_as_it_was(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("csv") / "labels.csv"
    frame = pl.DataFrame(rows, schema={"candidate_id": pl.String, "note": pl.String}, orient="row")
    write_csv(frame.with_columns(inclusion=pl.lit(0.25)), path)
    with path.open(newline="") as fh:
        cells = [cell for row in list(csv.reader(fh))[1:] for cell in row]
    assert not any(cell.startswith(FORMULA_START[:-1]) for cell in cells)
    back = read_csv(path, {"inclusion": pl.Float64})
    assert back.select("candidate_id", "note").equals(frame)
    assert back["inclusion"].to_list() == [0.25] * len(rows)
