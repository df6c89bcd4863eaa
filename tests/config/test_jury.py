"""A jury of judges in the config: each juror merged over the run's judge, its templates and name its own, and
every setting that could not be applied as written refused by its key."""

from __future__ import annotations

import pytest

from pipeline.config.derived import typed_jurors
from pipeline.config.judging import JudgeConfig
from pipeline.contracts.errors import ConfigError
from pipeline.workflows.segments import judge_templates, judging_identity
from tests.conftest import compose

API_JUROR = (
    "+jury.judges=[{name: smol-api, backend: api, templates: [c2], "
    "endpoint: {base_url: 'http://127.0.0.1:8000/v1', model: smol}}]"
)


def test_a_juror_takes_what_it_does_not_set_from_the_judge():
    cfg = compose(["experiment=jury_templates", "judge.templates=[c1]", API_JUROR])
    [juror] = cfg.jury.judges
    # typed once, at conversion; typing again changes nothing
    assert isinstance(juror, JudgeConfig) and typed_jurors(cfg) == cfg.jury.judges
    assert juror.backend == "api" and juror.name == "smol-api" and juror.templates == ["c2"]
    assert juror.endpoint.base_url == "http://127.0.0.1:8000/v1" and juror.endpoint.model == "smol"
    # the judge's sizes, but not its vLLM engine settings (another backend)
    assert juror.max_model_len == cfg.judge.max_model_len and juror.batch_size == cfg.judge.batch_size
    assert juror.engine == {} and cfg.judge.engine
    same = compose(["experiment=jury_templates", "+jury.judges=[{name: smol-2, templates: [c2]}]"])
    [twin] = same.jury.judges
    assert twin.backend == "vllm" and twin.engine == same.judge.engine and twin.env == same.judge.env


def test_each_judge_is_resumed_on_its_own_templates_and_the_default_identity_is_unchanged():
    cfg = compose(["experiment=jury_templates", "judge.templates=[c1]", API_JUROR])
    [juror] = cfg.jury.judges
    assert [t.id for t in judge_templates(cfg.prompt, cfg.judge).templates] == ["c1"]
    assert [t["id"] for t in judging_identity(cfg)["prompt"]["templates"]] == ["c1"]
    assert [t["id"] for t in judging_identity(cfg, juror)["prompt"]["templates"]] == ["c2"]
    plain = compose(["experiment=jury_templates"])
    assert [t["id"] for t in judging_identity(plain)["prompt"]["templates"]] == ["c1", "c2"]


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["+jury.judges=[{templates: [c1]}]"], "judge name(s) ['smollm2-135m-instruct'] repeat"),
        (["+jury.judges=[{name: b, templates: [c9]}]"], "jury.judges[0].templates=['c9'] must name"),
        (["judge.templates=[]"], "judge.templates=[] must name one or more"),
        (
            ["+jury.judges=[{name: b, backend: api}]"],
            "jury.judges[0].endpoint.base_url must be the endpoint's URL",
        ),
        (
            ["+jury.judges=[{name: b, batch_size: 0}]"],
            "jury.judges[0].batch_size=0 must be a positive integer",
        ),
        (["+jury.judges=[{name: b, colour: red}]"], "config jury.judges[0].colour: no such setting"),
        (
            ["+jury.judges=[{name: b}]", "workflow=absolute", "absolute.modes=[g_eval]"],
            "not workflow=absolute",
        ),
        (["scoring.jury=true", "judge.templates=[c1]"], "scoring.jury=true needs at least two jurors"),
    ],
)
def test_a_jury_that_could_not_be_run_as_written_is_refused_by_its_key(overrides, message):
    with pytest.raises(ConfigError) as info:
        compose(["experiment=jury_templates", "scoring.jury=false", *overrides])
    assert message in str(info.value)


def test_two_judges_with_a_template_each_make_a_jury():
    cfg = compose(["experiment=jury_templates", "judge.templates=[c1]", API_JUROR])
    assert cfg.scoring.jury and len(cfg.jury.judges) == 1
