"""Config composition: every option of every group composes into a valid typed RunConfig."""

from __future__ import annotations

import pytest

from pipeline.config import RunConfig, check_choices, to_flat_dict
from pipeline.pairs import resolve_k
from tests.conftest import ROOT, compose

GROUPS = {
    group: sorted(p.stem for p in (ROOT / "conf" / group).glob("*.yaml"))
    for group in ("dataset", "judge", "pairs", "runtime", "experiment", "debug")
}


@pytest.mark.parametrize("group,option", [(g, o) for g, options in GROUPS.items() for o in options])
def test_every_option_composes(group, option):
    overrides = [f"{group}={option}"]
    if group == "judge" and option == "gpu":
        overrides.append("judge.model=/models/any")  # the GPU config asks for a model (???)
    cfg = compose(overrides)
    assert isinstance(cfg, RunConfig)


def test_default_is_the_embedded_demo():
    cfg = compose()
    assert cfg.dataset.name == "demo" and cfg.judge.model == "smollm2-135m-instruct"
    assert cfg.runtime.executor == "ray" and cfg.runtime.address is None
    assert cfg.tracking.tracking_uri is None and cfg.pairs.strategy == "all_pairs"
    assert cfg.judge.env["VLLM_CPU_KVCACHE_SPACE"] == "4"


def test_experiment_and_overrides():
    cfg = compose(["experiment=summeval_3ctx", "dataset.max_contexts=5", "pairs=balanced", "pairs.k=10"])
    assert cfg.dataset.name == "summeval" and cfg.dataset.attributes == ["coherence"]
    assert cfg.dataset.max_contexts == 5 and cfg.pairs.strategy == "balanced_random"
    # k overrides the preset's fraction
    assert cfg.pairs.k == 10 and resolve_k(cfg.pairs, 16) == 10
    check_choices(cfg)


def test_hf_judge_inherits_the_cpu_judge():
    cfg = compose(["judge=hf"])
    assert cfg.judge.backend == "hf" and cfg.judge.model == "smollm2-135m-instruct"


@pytest.mark.parametrize(
    "override,message",
    [
        ("scoring.debias=median", "scoring.debias"),
        ("prompt.too_long=ignore", "prompt.too_long"),
        ("dataset.empty_text=skip", "dataset.empty_text"),
        ("pairs.orderings=three", "pairs.orderings"),
        ("runtime.executor=spark", "runtime.executor"),
    ],
)
def test_bad_choices_name_the_field(override, message):
    with pytest.raises(ValueError, match=message):
        compose([override])


def test_type_errors_name_the_field():
    with pytest.raises(Exception, match="max_contexts"):
        compose(["dataset.max_contexts=three"])


def test_mean_shift_needs_one_ordering():
    with pytest.raises(ValueError, match="mean_shift"):
        compose(["scoring.debias=mean_shift"])
    cfg = compose(["scoring.debias=mean_shift", "pairs.orderings=one"])
    assert cfg.scoring.debias == "mean_shift"


def test_flat_params_for_mlflow():
    flat = to_flat_dict(compose())
    assert flat["pairs.strategy"] == "all_pairs"
    assert flat["prompt.templates.0.id"] == "c1"
    assert flat["judge.engine.enable_prefix_caching"] is True
