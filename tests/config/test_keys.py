"""Every value set is applied or refused (pipeline.config.keys): a misspelt key, with or without Hydra's +, names
the nearest key; a setting for a part the run does not use says what would use it; a key a group's option marks ???
is required; the defaults and every preset still compose."""

from __future__ import annotations

import pytest
from hydra.errors import ConfigCompositionException

from pipeline.config.hydra import CONF_DIR, compose
from pipeline.config.keys import PARTS, unused_settings
from pipeline.contracts.errors import ConfigError


@pytest.mark.parametrize(
    ("override", "nearest"),
    [
        ("+judge.batchsize=8", "judge.batch_size"),
        ("+dataset.max_context=3", "dataset.max_contexts"),
        ("+scoring.debiass=alpha", "scoring.debias"),
        ("+verbos=true", "verbose"),
        ("+judge.endpoint.concurency=4", "judge.endpoint.concurrency"),
        ("+trust.alpah=0.1", "trust.alpha"),
    ],
)
def test_a_misspelt_key_added_with_a_plus_is_refused_naming_the_nearest(override, nearest):
    with pytest.raises(ConfigError, match=rf"config {override[1:].split('=')[0]}: no such setting.*did you mean "
                       rf"{nearest}\?"):  # fmt: skip
        compose([override])


def test_a_misspelt_key_without_a_plus_is_refused_by_hydra_before_anything_runs():
    with pytest.raises(ConfigCompositionException, match="judge.batchsize"):
        compose(["judge.batchsize=8"])


def test_a_misspelt_key_inside_a_list_of_settings_is_refused_with_its_place():
    with pytest.raises(ConfigError, match=r"generate.models\[0\].temprature: no such setting.*generate.models\[0\]."
                       "temperature"):  # fmt: skip
        compose(["experiment=generate_demo", "+generate.models.0.temprature=0.5"])


@pytest.mark.parametrize(
    ("overrides", "old", "new"),
    [
        (["judge=api", "+judge.api.base_url=http://127.0.0.1:8000/v1"], "judge.api", "judge.endpoint"),
        (
            ["experiment=generate_demo", "+generate.models.0.api.model=smol"],
            r"generate.models\[0\].api",
            r"generate.models\[0\].endpoint",
        ),
        (
            ["+jury.judges=[{name: x, backend: api, api: {model: smol}}]"],
            r"jury.judges\[0\].api",
            r"jury.judges\[0\].endpoint",
        ),
    ],
)
def test_a_renamed_section_is_refused_naming_its_new_name(overrides, old, new):
    """``api`` (the endpoint's settings of the judge, a juror or a generator) is ``endpoint``, named apart from the
    backend ``api``: an old command is told where its setting went."""
    with pytest.raises(ConfigError, match=rf"config {old}: no such setting.*it is now {new};"):
        compose(overrides)


def test_free_mappings_stay_free():
    """judge.engine, judge.env and criteria are mappings whose keys are the backend's or the user's."""
    cfg = compose(["+judge.env.MY_FLAG=1", "+criteria.brevity=short"])
    assert cfg.judge.env["MY_FLAG"] == "1" and cfg.criteria["brevity"] == "short"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["judge.endpoint.base_url=http://127.0.0.1:8000/v1"], "judge.endpoint.base_url=http://127.0.0.1:8000/v1 is set, but "
         "this run does not use it: it is for a judge behind an endpoint; remove it, or choose one: judge=api"),
        (["judge.endpoint.batch=true"], "judge.endpoint.batch=True is set, but this run does not use it"),
        (["adaptive.strategy=locate"], "adaptive.strategy=locate is set.*adaptive rounds.*set workflow=adaptive"),
        (["absolute.temperature=0.7"], "absolute.temperature=0.7 is set.*absolute judging.*set absolute.modes="),
        (["trust.alpha=0.05"], "trust.alpha=0.05 is set.*certified verdicts.*set trust.enabled=true"),
        (["reasons.max_tokens=32"], "reasons.max_tokens=32 is set.*the judge's reasons.*set reasons.n="),
        (["judge.reasoning.max_tokens=64"], "judge.reasoning.max_tokens=64 is set.*judge.reasoning.enabled=true"),
    ],
)  # fmt: skip
def test_a_setting_for_a_part_the_run_does_not_use_is_refused_with_what_would_use_it(overrides, message):
    with pytest.raises(ConfigError, match=message):
        compose(overrides)


def test_the_same_settings_are_taken_where_their_part_runs():
    assert compose(
        ["judge=api", "judge.endpoint.base_url=http://127.0.0.1:8000/v1", "judge.endpoint.batch=true"]
    ).judge.endpoint.batch
    assert compose(["workflow=adaptive", "adaptive.strategy=locate"]).adaptive.strategy == "locate"
    assert compose(["absolute.modes=[prompt_score]", "absolute.temperature=0.7"]).absolute.temperature == 0.7
    assert compose(["reasons.n=4", "reasons.max_tokens=32"]).reasons.max_tokens == 32
    generated = compose(
        ["experiment=generate_demo", "reasons.max_tokens=32"]
    )  # its reasons are on by default
    assert generated.reasons.max_tokens == 32


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["judge=gpu"], "judge.model"),
        (["judge=recorded"], "judge.model"),
        (["judge=api"], "judge.endpoint.base_url"),
    ],
)
def test_a_key_the_chosen_option_marks_required_is_required(overrides, key):
    option = overrides[0]
    with pytest.raises(ConfigError, match=rf"config {key} is required by {option} \(its file says \?\?\?\).*add "
                       rf"{key}=<value>"):  # fmt: skip
        compose(overrides)


def test_a_required_key_set_is_taken_and_other_options_keep_the_schemas_default():
    assert compose(["judge=gpu", "judge.model=/models/judge"]).judge.model == "/models/judge"
    assert compose([]).judge.model == "smollm2-135m-instruct"  # smollm2_cpu sets its own
    assert (
        compose([]).judge.endpoint.base_url is None
    )  # judge=api's ??? does not reach a run of another judge


def test_every_preset_and_option_sets_only_what_it_uses():
    from pathlib import Path

    for path in sorted(Path(CONF_DIR).glob("experiment/*.yaml")):
        cfg = compose([f"experiment={path.stem}"])
        assert unused_settings(cfg) == [], path.stem
    assert {p.key for p in PARTS} >= {"judge.endpoint", "adaptive", "generate", "absolute", "trust"}
