"""The notebook's way in (pipeline.run.assess): a DataFrame, polars or pandas, judged as `make run` judges the same
data from a file: the same tables, the run folder and MLflow run written. JudgeBench's released verdicts as the judge
(no engine: the recorded backend), its pairs as a user's frame in their upstream pairwise layout."""

from __future__ import annotations

import json

import polars as pl

from pipeline.run.assess import assess
from pipeline.run.context import run
from pipeline.run.results import RunTables
from tests.conftest import DATASETS, compose

RUN = ["experiment=judgebench_recorded", "runtime=inprocess", "jury.judges=[]", "tracking.plots=false"]


def judgebench_pairs() -> pl.DataFrame:
    rows = []
    for line in (DATASETS / "judgebench" / "judgebench-gpt.jsonl").read_text().splitlines():
        r = json.loads(line)
        a, b = r["candidates"]
        rows.append({"pair_id": r["context_id"], "question": r["context"], "response_A": a["text"],
                     "response_B": b["text"], "label": "A>B" if a["scores"]["correct"] else "B>A",
                     "category": r["category"]})  # fmt: skip
    return pl.DataFrame(rows)


def test_a_dataframe_is_judged_as_make_run_judges_the_file(tmp_path):
    frame = judgebench_pairs()
    out = [f"paths.output_root={tmp_path}"]
    mine = assess(frame.to_pandas(), [*RUN, *out])
    again = assess(frame, [*RUN, *out])  # polars: the same frame, the same input file
    reference = RunTables.open(run(compose([*RUN, *out, "dataset.splits=[gpt]"])).run_dir)
    assert (
        mine.mlflow_run_id and (mine.run_dir / "summary.txt").exists() and "meta_evaluation" in mine.names()
    )
    assert json.loads((mine.run_dir / "config.json").read_text())["dataset"]["path"] == str(
        next((tmp_path / "inputs").glob("*.parquet"))
    )
    key = ["judge", "attribute", "template_id", "category"]
    for name in ("meta_evaluation", "comparisons"):
        ours, theirs = getattr(mine, name), getattr(reference, name)
        assert ours.height and ours.columns == theirs.columns
        order = [
            c
            for c in (key if name == "meta_evaluation" else ["context_id", "cand_i", "cand_j"])
            if c in ours.columns
        ]
        assert ours.sort(order).equals(theirs.sort(order)), name
    assert again.meta_evaluation.sort(key).equals(mine.meta_evaluation.sort(key))


def test_the_notebook_judges_its_dataframe_with_the_api(tmp_path, monkeypatch):
    """notebooks/assess_dataframe.ipynb's cells, executed as Jupyter would (in order, one namespace)."""
    from tests.conftest import ROOT

    notebook = json.loads((ROOT / "notebooks" / "assess_dataframe.ipynb").read_text())
    monkeypatch.setenv("CA_DATASETS", str(DATASETS))
    monkeypatch.setenv(
        "CA_ASSESS_ARGS", f"paths.output_root={tmp_path} runtime=inprocess tracking.plots=false"
    )
    namespace: dict = {}
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), "assess_dataframe.ipynb", "exec"), namespace)
    result = namespace["result"]
    assert result.meta_evaluation.height and (result.run_dir / "summary.txt").exists()
    assert namespace["pairs"].height == 350
