"""Blind review in a real headless Chromium (Debian's package, driven by Playwright) against the real `review`
command on a real finished run (local Ray, CPU vLLM, the local MLflow store).

A reviewer answers by keyboard and by click, the server is killed (SIGKILL) and started again, the review goes
on where it stopped; every answer is on disk exactly once, a candidate holding HTML shows as text, and the
agreement report (the command, its CSV and MLflow) matches a hand computation from the run's comparisons.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from pipeline.run.context import run
from tests.conftest import ROOT, compose

pytestmark = [pytest.mark.browser, pytest.mark.ray, pytest.mark.engine, pytest.mark.slow]

CHROMIUM = Path(os.environ.get("CA_CHROMIUM", "/usr/bin/chromium"))
HTML = "<script>window.__pwned = 1</script><b>bold claim</b> & more"
N_ITEMS = 6  # 2 contexts x 3 pairs: the whole run is the sample


def records():
    texts = {
        "r1": ["A storm closed the port on Monday.", HTML, "Ports close sometimes."],
        "r2": ["The council approved the budget.", "Budget news.", "Nothing happened at the council."],
    }
    return [
        {
            "context_id": cid,
            "context": f"Article {cid}: a short news story about {cid}.",
            "candidates": [
                {"candidate_id": f"{cid}-{k}", "text": text, "scores": {"coherence": float(k + 1)}}
                for k, text in enumerate(items)
            ],
        }
        for cid, items in texts.items()
    ]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, ray_cluster):
    if not CHROMIUM.exists():
        pytest.fail(
            f"no Chromium at {CHROMIUM}: `make test` installs it (apt-get install chromium chromium-driver)"
        )
    root = tmp_path_factory.mktemp("review")
    data = root / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records()))
    cfg = compose(
        [
            "dataset.name=custom",
            f"dataset.path={data}",
            "dataset.attributes=[coherence]",
            "judge.env.VLLM_CPU_KVCACHE_SPACE=2",
            f"paths.output_root={root / 'outputs'}",
            "tracking.experiment=review-test",
        ]
    )
    return run(cfg)


class Server:
    """``python -m pipeline.review serve`` in its own process, on a free port."""

    def __init__(self, run_dir: Path, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.review", "serve", str(run_dir), "--port", "0", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        if not line.startswith("review: "):
            self.proc.kill()
            raise AssertionError(f"the server did not start: {line}{self.proc.stderr.read()}")
        self.url = line.split(" ", 1)[1].strip()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield chromium
        chromium.close()


def test_blind_review_survives_a_killed_server_and_agrees_with_a_hand_count(finished_run, browser):
    import mlflow

    run_dir = finished_run.run_dir
    candidates = pl.read_parquet(run_dir / "tables" / "candidates.parquet")
    id_of = dict(zip(candidates["text"], candidates["candidate_id"], strict=True))
    comparisons = pl.read_parquet(run_dir / "tables" / "comparisons.parquet")
    assert comparisons.height == N_ITEMS
    # the judge's verdict by hand: no tie words in this run, so the debiased p decides
    judge = {
        (r["cand_i"], r["cand_j"]): ("i" if r["p"] > 0.5 else "j") for r in comparisons.iter_rows(named=True)
    }

    answered: dict[tuple[str, str], str] = {}  # pair -> what the reviewer meant (i, j or tie)
    saw_html = False
    forms: list[dict] = []

    def answer(page, how: str, choice: str, note: str = "") -> None:
        nonlocal saw_html
        title = page.title()
        slot1, slot2 = page.inner_text("#slot1"), page.inner_text("#slot2")
        for slot in ("#slot1", "#slot2"):
            if "<script>" in page.inner_text(slot):
                saw_html = True
                assert page.inner_text(slot) == HTML  # shown as text, character for character
                assert page.locator(f"{slot} b, {slot} script").count() == 0
        assert page.evaluate("typeof window.__pwned") == "undefined"
        for hidden in ("r1-0", "r1-1", "r1-2", "r2-0", "r2-1", "r2-2"):  # no candidate id
            assert hidden not in page.content().replace(HTML.replace("<", "&lt;"), "")
        first, second = id_of[slot1], id_of[slot2]
        pair = tuple(sorted((first, second)))
        meant = "tie" if choice == "tie" else (first if choice == "1" else second)
        answered[pair] = "tie" if meant == "tie" else ("i" if meant == pair[0] else "j")
        forms.append({n: page.input_value(f"input[name={n}]") for n in ("item_id", "token")})
        if note:
            page.fill("#note", note)
        page.click("h3")  # out of the note field: keys there are typing, not answers
        with page.expect_navigation():  # the post, then the redirect to the next comparison
            if how == "key":
                page.keyboard.press({"1": "1", "2": "2", "tie": "t"}[choice])
            else:
                page.click(f"#choose-{choice}")
        assert page.title() != title

    server = Server(run_dir, "--reviewer", "ann", "--strategy", "random", "--n", str(N_ITEMS), "--seed", "7")
    page = browser.new_page()
    try:
        # ann's page is her personal link: without its key, or with another reviewer's, the page is refused
        assert "?key=" in server.url
        assert page.goto(server.url.split("?", 1)[0]).status == 403
        assert page.goto(server.url.replace("/r/ann?", "/r/bob?")).status == 403
        page.goto(server.url)
        assert page.title() == f"Comparison 1 of {N_ITEMS}"
        assert "Which one is more coherent?" in page.inner_text(".criterion")
        answer(page, "key", "1")
        answer(page, "click", "tie")
        page.locator("#note").press_sequentially("1 2 t")  # typed into the note, not answers
        assert page.title() == f"Comparison 3 of {N_ITEMS}"
        answer(page, "key", "2")
        answers_file = run_dir / "review" / "answers.jsonl"
        assert len(answers_file.read_text().splitlines()) == 3
    finally:
        server.kill()  # SIGKILL: no chance to flush anything

    server = Server(run_dir, "--reviewer", "ann")  # no sample options: continue the saved sample
    try:
        page.goto(server.url)
        assert page.title() == f"Comparison 4 of {N_ITEMS}"  # where the reviewer stopped
        answer(page, "click", "2", note="second is <i>better</i>")
        answer(page, "key", "1")
        # the first form again (a resubmission from another tab): accepted as a no-op, not written twice
        response = page.request.post(server.url, form={**forms[0], "choice": "2"})
        assert response.ok
        answer(page, "click", "1")
        assert page.title() == "Review done"
        done = page.inner_text("body")
        assert "How often you and the judge agree" in done
        # her own agreement only: no confusion table, no agreement between reviewers, no path on the server
        assert "judge's verdict (rows)" not in done and "between reviewers" not in done
        assert str(run_dir) not in page.content()
        # the agreement page: the owner's link only; a key that was not issued is refused, whatever its characters
        from pipeline.review.keys import owner_key, review_secret

        base = server.url.split("/r/", 1)[0]
        assert page.goto(f"{base}/agreement").status == 403
        assert page.goto(f"{base}/agreement?key=ключ").status == 403
        assert page.goto(f"{base}/r/ann?key=%C3%A9%FF").status == 403
        owner = owner_key(review_secret(run_dir / "review"))
        assert page.goto(f"{base}/agreement?key={owner}").status == 200 and page.title() == "Agreement"
    finally:
        server.kill()
        page.close()
    assert saw_html
    # the time each item was shown was kept by the server that showed it (the form carries none)
    seconds = [
        json.loads(x)["seconds"] for x in (run_dir / "review" / "answers.jsonl").read_text().splitlines()
    ]
    assert len(seconds) == N_ITEMS and all(0 <= s < 3600 for s in seconds)

    # every answer on disk exactly once, with what was shown in which slot
    rows = [json.loads(line) for line in answers_file.read_text().splitlines()]
    assert len(rows) == N_ITEMS and len({r["item_id"] for r in rows}) == N_ITEMS
    assert {tuple(sorted((r["slot1"], r["slot2"]))) for r in rows} == set(answered)
    assert [r["note"] for r in rows if r["note"]] == ["1 2 t", "second is <i>better</i>"]

    # the agreement, by hand: kappa reads every pair both ways round (i and j swapped), so that chance agreement
    # does not depend on which candidate the run calls i
    pairs = sorted(answered)
    j, h = [judge[p] for p in pairs], [answered[p] for p in pairs]
    p_o = sum(a == b for a, b in zip(j, h, strict=True)) / N_ITEMS
    mirror = {"i": "j", "j": "i", "tie": "tie"}
    j2, h2 = j + [mirror[x] for x in j], h + [mirror[x] for x in h]
    p_e = sum(j2.count(c) / len(j2) * h2.count(c) / len(h2) for c in ("i", "tie", "j"))
    kappa = (p_o - p_e) / (1 - p_e)

    out = subprocess.run(
        [sys.executable, "-m", "pipeline.review", "report", str(run_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"{N_ITEMS} answer(s) from 1 reviewer(s)" in out and "needs two reviewers" in out
    table = pl.read_csv(run_dir / "review" / "agreement.csv")

    def value(scope, group, statistic):
        return table.filter(
            (pl.col("scope") == scope) & (pl.col("group") == group) & (pl.col("statistic") == statistic)
        )["value"][0]

    assert value("reviewer", "ann", "raw_agreement") == pytest.approx(p_o)
    assert value("reviewer", "ann", "kappa") == pytest.approx(kappa)
    labels = pl.read_csv(run_dir / "review" / "labels.csv")
    assert (
        dict(zip(zip(labels["cand_i"], labels["cand_j"], strict=True), labels["human"], strict=True))
        == answered
    )

    # in MLflow: a child run of the run's own, with the metric and the tables
    tracking = json.loads((run_dir / "tracking.json").read_text())
    child = json.loads((run_dir / "review" / "mlflow.json").read_text())
    client = mlflow.tracking.MlflowClient(tracking["tracking_uri"])
    review_run = client.get_run(child["run_id"])
    assert review_run.data.tags["mlflow.parentRunId"] == tracking["run_id"] == finished_run.mlflow_run_id
    assert review_run.data.metrics["review.raw_agreement.reviewer.ann"] == pytest.approx(p_o)
    assert review_run.data.metrics["review.answers"] == N_ITEMS
    artifacts = {a.path for a in client.list_artifacts(child["run_id"], "review")}
    assert {"review/agreement.csv", "review/confusion.csv", "review/labels.csv"} <= artifacts
