"""make check (pipeline.run.check): a newcomer's mistakes are each refused with the key and the fix before anything
runs, printed without a traceback (exit 2), by the check and by the run alike; a good config prints its plan. The
plan against a real run of the same config is tests/run/test_absolute.py's."""

from __future__ import annotations

import pytest

from pipeline.run.check import main

MISTAKES = [
    (["+judge.batchsize=8"], "did you mean judge.batch_size?"),
    (["judge.batchsize=8"], "did you mean judge.batch_size?"),  # without +, the same answer as with it
    (["scoring.debias=foo"], "Invalid value 'foo', expected one of [average, alpha, balanced_threshold"),
    (["trust.seed=-1", "trust.enabled=true"], "config trust.seed=-1 must be a non-negative integer (a seed)"),
    (["judge.engine.seed=-3"], "config judge.engine.seed=-3 must be a non-negative integer (a seed)"),
    (["judge.endpoint.base_url=http://127.0.0.1:8000/v1"], "is for a judge behind an endpoint; remove it, or choose one"),
    (["judge=gpu"], "judge.model is required by judge=gpu"),
    (["dataset=summeval", "dataset.path=/nowhere/summeval.jsonl"], "dataset.path=/nowhere/summeval.jsonl does not exist"),
    (["judge=api", "judge.endpoint.base_url=http://127.0.0.1:9/v1", "judge.endpoint.api_key_env=CA_EMPTY_KEY"],
     "CA_EMPTY_KEY', but that environment variable"),
    (["+judge.engine.max_num_seq=4"], "did you mean max_num_seqs"),
    (["absolute.modes=[checklist]"], "absolute.modes has checklist, but no context gives a checklist"),
]  # fmt: skip


@pytest.mark.parametrize(("overrides", "message"), MISTAKES)
def test_a_newcomers_mistake_is_refused_by_the_check_with_the_key_and_no_traceback(
    overrides, message, capsys, monkeypatch, tmp_path
):
    monkeypatch.setenv("CA_EMPTY_KEY", "")
    assert main([*overrides, f"paths.output_root={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()  # nothing written


def test_the_same_mistakes_stop_the_run_before_anything_runs(tmp_path, monkeypatch):
    from pipeline.config.hydra import compose, config_error_message
    from pipeline.contracts.errors import UserError
    from pipeline.run.context import run

    monkeypatch.setenv("CA_EMPTY_KEY", "")
    for overrides, message in MISTAKES:
        with pytest.raises(Exception, match=None) as caught:
            run(compose([*overrides, f"paths.output_root={tmp_path}", "runtime=inprocess"]))
        # what `make run` prints (pipeline.cli): a UserError's message, or Hydra's as config_error_message gives it
        said = (
            str(caught.value) if isinstance(caught.value, UserError) else config_error_message(caught.value)
        )
        assert message in said, overrides
    assert not (tmp_path / "runs").exists()


def test_a_good_config_prints_its_plan(capsys, tmp_path):
    assert main(["debug=quick", f"paths.output_root={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert (
        "nothing was started, sent or spent" in out
        and "prompts to judge: " in out
        and "engine starts 1" in out
    )
    assert (
        "time (estimated, judging on this machine): about " in out
        and "3.5 prompts/s as stated for vllm" in out
    )
    assert "WARNING: this run will take more than an hour" not in out
    assert not (tmp_path / "runs").exists()


def test_the_plan_warns_of_a_run_of_hours_and_help_is_help(capsys, tmp_path):
    assert main(["dataset=summeval", "dataset.max_contexts=20", f"paths.output_root={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert (
        "prompts to judge: 19200" in out
        and "WARNING: this run will take more than an hour here (about 1.5 h)" in out
    )
    for asked in (["--help"], ["-h"]):
        assert main(asked) == 0
        assert capsys.readouterr().out.startswith('usage: make check ARGS="<the run\'s overrides>"')


def test_the_plan_says_which_engine_mode_auto_would_choose_and_why(capsys, tmp_path, monkeypatch):
    """With this machine's record of the two modes (written as `make engine-modes` writes it, for the judge the run
    resolves), the plan names the mode that finishes the run's 24 prompts first; a mode the user chose is not
    re-chosen."""
    from pipeline import PROJECT_ROOT
    from pipeline.config.hydra import compose
    from pipeline.judge.vllm.mode import Measured, ModeRecord, remember
    from pipeline.run.context import run
    from pipeline.workflows import segments

    quick = ["debug=quick", f"paths.output_root={tmp_path}"]
    cfg = compose([*quick, "runtime=inprocess"])
    values = run(cfg, PROJECT_ROOT, stop_after="shard_contexts").values
    judge = values["judge"]
    record = ModeRecord(tmp_path / "engine_modes.json")
    monkeypatch.setattr(segments, "mode_record", lambda cfg, cache: record)

    def plan_line(*overrides: str) -> str:
        assert main([*quick, *overrides]) == 0
        return next((x for x in capsys.readouterr().out.splitlines() if x.startswith("engine mode")), "")

    remember(record, judge, True, Measured(10.0, 10.0))  # eager: 10 s + 2.4 s for 24 prompts
    remember(record, judge, False, Measured(20.0, 20.0))  # compiled: 20 s + 1.2 s: pays from 201 prompts
    assert "eager: 24 prompts take about 12 s with its start against 21 s compiled" in plan_line()
    assert "it pays from 201 prompts" in plan_line()
    remember(record, judge, False, Measured(11.0, 20.0))  # compiled: 11 s + 1.2 s: pays from 21 prompts
    assert "compiled: 24 prompts take about 12 s with its start against 12 s eager" in plan_line()
    assert plan_line("judge.engine.enforce_eager=true") == ""


def test_the_adaptive_workflow_prints_its_plan_with_every_pair_as_the_bound(capsys, tmp_path):
    """It raised ImportError (an enum that does not exist) before the plan."""
    assert main(["workflow=adaptive", "debug=quick", f"paths.output_root={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert "adaptive rounds: the prompts above are every pair's, an upper bound" in out
    assert (
        "prompts to judge: 24 " in out
    )  # debug=quick: 2 contexts x 4 candidates, one attribute: 2 x 12 ordered


def test_the_plan_shows_each_templates_rendered_prompt_and_warns_of_nouns_nothing_gave(capsys, tmp_path):
    """Before anything is spent: the prompt as the judge reads it (chat template, nouns, question, answer cue), one
    per template, and a warning where the data named neither its contexts nor its candidates."""
    from tests.conftest import DATASETS

    data = ["dataset.name=mine", f"dataset.path={DATASETS / 'summeval' / 'summeval.jsonl'}", "dataset.max_contexts=1",
            "dataset.attributes=[coherence]", f"paths.output_root={tmp_path}", "experiment=jury_templates"]  # fmt: skip
    assert main([*data, "dataset.meta_path=/nowhere/meta.json"]) == 0
    out = capsys.readouterr().out
    templates = [line for line in out.splitlines() if line.startswith("prompt (compare, template ")]
    assert len(templates) == 2, out
    assert "Which summary is more coherent" in out and "<|im_start|>assistant" in out
    assert "the prompts call the contexts 'passage' and the candidates 'summary', the defaults" in out
    assert main(data) == 0  # the data's meta.json names them: no warning
    out = capsys.readouterr().out
    assert "the defaults" not in out and "Which summary is more coherent" in out


def test_the_plan_counts_one_generated_token_for_every_mode_that_reads_its_first_token():
    """Comparisons and the read modes (options, g_eval, implicit, checklist) generate one token; the generated modes
    (prompt_score, explicit) absolute.max_tokens per sample."""
    from pipeline.run.check import _generated_tokens
    from tests.conftest import compose

    cfg = compose(
        [
            "absolute.modes=[prompt_score]",
            "absolute.max_tokens=5",
            "absolute.samples=2",
            "absolute.temperature=1.0",
        ]
    )
    by_mode = {
        "compare": 10,
        "options": 4,
        "checklist": 3,
        "g_eval": 2,
        "implicit": 1,
        "prompt_score": 2,
        "explicit": 1,
    }
    assert _generated_tokens(cfg, by_mode) == 10 + 4 + 3 + 2 + 1 + (2 + 1) * 5 * 2
