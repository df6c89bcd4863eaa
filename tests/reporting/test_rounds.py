"""The adaptive run's report: the ranking with per-item intervals, the criterion over rounds in the summary, and
the stage that adds both (files and plots) after the comparative report."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from pipeline.contracts.card_schema import JUDGE_CARD
from pipeline.contracts.schemas import ROUNDS, SCORES
from pipeline.reporting.rounds_report import SHOWN, ranking_table, ranking_text, rounds_text, z_of


def scores(n: int, method: str = "poe_logit", stderr: bool = True) -> pl.DataFrame:
    """One pool of ``n`` items: item k scores k / 10 (so item n-1 ranks first), standard error 0.1 + k / 100."""
    return pl.DataFrame(
        {
            "judge": ["j"] * n,
            "attribute": ["coherence"] * n,
            "template_id": ["pool"] * n,
            "method": [method] * n,
            "context_id": ["pool"] * n,
            "candidate_id": [f"doc{k}/M{k}" for k in range(n)],
            "score": [k / 10 for k in range(n)],
            "stderr": [0.1 + k / 100 if stderr else None for k in range(n)],
            "rank": [n - k for k in range(n)],
            "human_score": [float(k % 5) for k in range(n)],
        },
        schema={**pl.from_arrow(SCORES.empty_table()).schema},
    )


def rounds(contexts: list[str], n_rounds: int = 3, criterion: str | None = "expected_tau") -> pl.DataFrame:
    rows = []
    for cid in contexts:
        for r in range(n_rounds):
            rows.append(
                {
                    "round": r,
                    "context_id": cid,
                    "items": 40,
                    "pairs": 20 * r,
                    "calls": 40 * r,
                    "prompt_tokens": 1000 * r,
                    "criterion": criterion,
                    "value": None if criterion is None else 0.3 * r,
                    "expected_tau": 0.3 * r,
                    "max_stderr": 1.0 / (r + 1),
                    "downweighted": 0,
                    "beyond_cap": 0,
                    "contradicted": 0,
                    "spearman": None if r == 0 else 0.2 * r,
                    "fit_seconds": 0.01,
                    "select_seconds": 0.01,
                    "stopped": "criterion reached" if r == n_rounds - 1 else None,
                }
            )
    return pl.from_arrow(pa.Table.from_pylist(rows, schema=ROUNDS))


def test_the_ranking_has_each_item_in_rank_order_with_its_interval():
    table = ranking_table(scores(12), "poe_logit")
    assert table["rank"].to_list() == list(range(1, 13))
    assert table["candidate_id"][0] == "doc11/M11"
    z = z_of(0.95)
    assert z == pytest.approx(1.959964)
    first = table.row(0, named=True)
    assert first["lower"] == pytest.approx(1.1 - z * 0.21) and first["upper"] == pytest.approx(1.1 + z * 0.21)
    assert ranking_table(scores(12), "poe_logit", level=0.5)["upper"][0] == pytest.approx(
        1.1 + 0.6745 * 0.21, abs=1e-4
    )
    # another method is not mixed in; a method without standard errors has no intervals
    assert ranking_table(scores(12), "avg_prob").height == 0
    plain = ranking_table(scores(12, "avg_prob", stderr=False), "avg_prob")
    assert plain.height == 12 and plain["lower"].null_count() == 12
    with pytest.raises(ValueError, match="level"):
        ranking_table(scores(3), "poe_logit", level=1.0)


def test_the_ranking_text_shows_both_ends_with_intervals_and_human_scores():
    text = ranking_text(ranking_table(scores(30), "poe_logit"), "poe_logit")
    assert "ranking by poe_logit with 95% intervals (score ± 1.96 standard errors" in text
    assert "coherence (pool), pool: 30 items" in text
    lines = text.splitlines()
    shown = [line for line in lines if "doc" in line]
    assert len(shown) == 2 * SHOWN and "..." in text
    assert shown[0].split()[:2] == ["1", "doc29/M29"] and shown[-1].split()[:2] == ["30", "doc0/M0"]
    assert "2.900 [2.136, 3.664]  human 4" in shown[0]  # 2.9 ± 1.96 x 0.39
    # a short ranking is shown whole; a method without standard errors shows no brackets
    short = ranking_text(ranking_table(scores(4, "avg_prob", stderr=False), "avg_prob"), "avg_prob")
    assert len([line for line in short.splitlines() if "doc" in line]) == 4 and "[" not in short
    # a long pooled id keeps its distinguishing end
    long_id = scores(2).with_columns(candidate_id=pl.lit("x" * 60) + pl.col("candidate_id"))
    assert "…" in ranking_text(ranking_table(long_id, "poe_logit"), "poe_logit")
    assert "/M1" in ranking_text(ranking_table(long_id, "poe_logit"), "poe_logit")


def test_only_the_first_rankings_are_shown():
    many = pl.concat([scores(4).with_columns(context_id=pl.lit(f"ctx{k}")) for k in range(5)])
    text = ranking_text(ranking_table(many, "poe_logit"), "poe_logit")
    assert text.count(": 4 items") == 3 and "... and 2 more ranking(s) in ranking.csv" in text


def test_the_rounds_text_is_the_criterion_curve_round_by_round():
    text = rounds_text(rounds(["pool"]))
    lines = text.splitlines()
    assert lines[0] == "adaptive rounds, pool (40 items): stopping criterion expected_tau"
    assert len(lines) == 2 + 3
    assert lines[-1].split() == [
        "2",
        "40",
        "80",
        "2.00",
        "0.600",
        "0.600",
        "0.333",
        "0.400",
        "criterion",
        "reached",
    ]
    assert lines[2].split()[-1] == "-"  # no Spearman before anything is judged
    assert "stopping criterion none (the budget only)" in rounds_text(rounds(["pool"], criterion=None))
    assert rounds_text(rounds([])) == ""


def test_many_contexts_get_one_line_each():
    contexts = [f"ctx{k}" for k in range(5)]
    text = rounds_text(rounds(contexts))
    lines = text.splitlines()
    assert lines[0].startswith(
        "adaptive rounds: the last round of each of 5 contexts (every round: rounds.csv"
    )
    assert len(lines) == 2 + 5 and all(line.split()[1] == "2" for line in lines[2:])


def test_the_stage_adds_the_rounds_and_the_ranking_to_the_report(tmp_path: Path):
    from pipeline.stages.reporting import ReportRounds

    class Ctx:
        run_dir = tmp_path
        files: list[Path] = []
        metrics: dict[str, float] = {}

    stage = ReportRounds(True, "poe_logit")
    out = stage.run(
        Ctx(),
        rounds=rounds(["pool"]).to_arrow(),
        scores=scores(12).to_arrow(),
        summary="the comparative report",
        judge_card=JUDGE_CARD.empty_table(),
    )
    summary = out["summary"]
    assert summary.startswith("the comparative report\n\nadaptive rounds, pool (40 items)")
    assert "ranking by poe_logit with 95% intervals" in summary
    assert (tmp_path / "summary.txt").read_text() == summary + "\n"
    assert pl.read_csv(tmp_path / "ranking.csv").height == 12
    assert pl.read_csv(tmp_path / "rounds.csv").height == 3
    assert (tmp_path / "plots" / "rounds.png").stat().st_size > 0
    assert (tmp_path / "plots" / "ranking.png").stat().st_size > 0


def test_a_ranking_from_a_judge_at_chance_says_it_is_no_finding():
    from pipeline.reporting.rounds_report import ranking_table, ranking_text

    ranking = ranking_table(scores(12), "poe_logit", 0.95)
    plain = ranking_text(ranking, "poe_logit", 0.95)
    chance = ranking_text(ranking, "poe_logit", 0.95, {("j", "coherence", "pool")})
    assert "not a finding" not in plain
    assert (
        "coherence (pool), pool: 12 items: not a finding, the judge is not distinguishable from chance"
        in chance
    )


def test_the_adaptive_workflow_ends_with_the_rounds_report():
    from pipeline.workflows.catalog import adaptive
    from tests.workflows.test_workflow import ROOT, compose

    workflow = adaptive(compose(["experiment=summeval_pool"]), ROOT)
    last = workflow.stages[-1]
    assert last.name == "report_rounds" and last.method == "poe_logit"
