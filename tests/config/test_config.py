"""Config: every option composes into a typed RunConfig, and every value is applied or refused by name."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.config.backends import backends
from pipeline.config.checks import within
from pipeline.config.derived import to_flat_dict
from pipeline.config.enums import ChatTemplate, Debias, EmptyText, Executor, Orderings, Strategy, TooLong
from pipeline.config.run import RunConfig
from pipeline.contracts.errors import ConfigError
from pipeline.prompts.pairs import resolve_k
from tests.conftest import DATASETS, ROOT, compose

GROUPS = {
    group: sorted(p.stem for p in (ROOT / "conf" / group).glob("*.yaml"))
    for group in ("dataset", "judge", "pairs", "runtime", "experiment", "debug")
}


def refused(overrides: list[str]) -> str:
    """The message (with its cause) of a config that is refused while composing or validating."""
    with pytest.raises(Exception) as info:
        compose(overrides)
    exc = info.value
    return f"{exc} {exc.__cause__ or ''}"


@pytest.mark.parametrize("group,option", [(g, o) for g, options in GROUPS.items() for o in options])
def test_every_option_composes(group, option):
    overrides = [f"{group}={option}"]
    if group == "judge" and option == "gpu":
        overrides.append("judge.model=/models/any")  # the GPU config asks for a model (???)
    if group == "judge" and option == "api":
        overrides.append(
            "judge.endpoint.base_url=http://127.0.0.1:8000/v1"
        )  # and the API config for its endpoint
    if group == "judge" and option == "recorded":  # and the recorded judge for its file of verdicts
        overrides.append(
            f"judge.model={DATASETS}/judgebench/recorded/gpt/arena_hard:o1-mini-2024-09-12.jsonl"
        )
    cfg = compose(overrides)
    assert isinstance(cfg, RunConfig)


def test_default_is_the_embedded_demo():
    cfg = compose()
    assert cfg.dataset.name == "demo" and cfg.judge.model == "smollm2-135m-instruct"
    assert cfg.runtime.executor == Executor.ray and cfg.runtime.address is None
    assert cfg.tracking.tracking_uri is None and cfg.pairs.strategy == Strategy.all_pairs
    assert cfg.judge.env["VLLM_CPU_KVCACHE_SPACE"] == "4"
    # no dtype in the default engine: it is chosen for the CPU at run time
    assert "dtype" not in cfg.judge.engine and not cfg.verbose


def test_choices_are_typed_once():
    cfg = compose(["scoring.debias=alpha", "runtime.executor=local", "prompt.chat_template=false"])
    assert cfg.scoring.debias is Debias.alpha and cfg.runtime.executor is Executor.local
    assert cfg.prompt.chat_template is ChatTemplate.false
    assert compose(["prompt.chat_template=true"]).prompt.chat_template is ChatTemplate.true


def test_experiment_and_overrides():
    cfg = compose(["experiment=summeval_3ctx", "dataset.max_contexts=5", "pairs=balanced", "pairs.k=10"])
    assert cfg.dataset.name == "summeval" and cfg.dataset.attributes == ["coherence"]
    assert cfg.dataset.max_contexts == 5 and cfg.pairs.strategy == Strategy.balanced_random
    # k overrides the preset's fraction
    assert cfg.pairs.k == 10 and resolve_k(cfg.pairs, 16) == 10


def test_hf_judge_has_its_own_engine_settings():
    cfg = compose(["judge=hf"])
    assert cfg.judge.backend == "hf" and cfg.judge.model == "smollm2-135m-instruct"
    assert cfg.judge.engine == {"seed": 0}
    cfg = compose(["judge=hf", "+judge.engine.threads=1", "+judge.env.OMP_NUM_THREADS=1"])
    assert cfg.judge.engine["threads"] == 1 and cfg.judge.env == {"OMP_NUM_THREADS": "1"}


@pytest.mark.parametrize(
    "override,choices",
    [
        ("scoring.debias=median", Debias),
        ("scoring.debias=Alpha", Debias),
        ("runtime.executor=Local", Executor),
        ("runtime.executor=spark", Executor),
        ("prompt.too_long=ignore", TooLong),
        ("dataset.empty_text=skip", EmptyText),
        ("pairs.orderings=three", Orderings),
        ("pairs.strategy=best", Strategy),
        ("judge.backend=tgi", sorted(backends())),
        ("prompt.chat_template=Auto", ChatTemplate),
    ],
)
def test_a_value_outside_its_choices_is_refused_with_the_key_and_the_valid_values(override, choices):
    """The message names the key and every valid value (the enum's members, the registered backends)."""
    message = refused([override])
    assert override.split("=")[0] in message and ", ".join(choices) in message


def test_type_errors_name_the_field():
    assert "dataset.max_contexts" in refused(["dataset.max_contexts=three"])


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["pairs.k=10"], "pairs.k=10 has no effect with pairs.strategy=all_pairs"),
        (["pairs.strategy=all_ordered", "pairs.fraction=0.5"], "pairs.fraction=0.5 has no effect"),
        (["pairs=balanced", "pairs.strategy=all_pairs"], "pairs.fraction=0.2 has no effect"),
        (["pairs=balanced", "pairs.fraction=1.5"], "pairs.fraction=1.5 must be in (0, 1]"),
        (["pairs=balanced", "pairs.k=0"], "pairs.k=0 must be a positive number"),
        (["pairs.strategy=random", "pairs.k=3"], "selects ordered comparisons"),
        (["scoring.debias=mean_shift"], "mean_shift is the one-ordering correction"),
        (["pairs.orderings=one"], "scoring.debias=average has nothing to average"),
        (["scoring.methods=[elo]"], "unknown method(s) ['elo']"),
        (["scoring.methods=[]"], "scoring.methods is empty"),
        (["prompt.label_words_a=[X]", "prompt.label_words_b=[X]"], "both list ['X']"),
        (["judge.batch_size=0"], "judge.batch_size=0 must be a positive integer"),
        (["+judge.engine.max_model_len=99"], "judge.engine.max_model_len is set by judge.max_model_len"),
        (["judge=hf", "+judge.engine.enforce_eager=true"], "the hf backend does not take"),
        (["dataset.max_candidates=1"], "dataset.max_candidates must be at least 2"),
        (
            ["judge.reasoning.enabled=true", "judge.reasoning.max_tokens=0"],
            "judge.reasoning.max_tokens=0 must be a positive integer",
        ),
        (
            [
                "judge=api",
                "judge.endpoint.base_url=http://127.0.0.1:8000/v1",
                "judge.endpoint.prefill=false",
                "judge.reasoning.enabled=true",
            ],
            "judge.reasoning needs judge.endpoint.prefill=true",
        ),
        (["scoring.jury=true"], "scoring.jury=true needs at least two jurors"),
        (
            ["experiment=generate_demo", "scoring.calibrate=temperature"],
            "this run has no human scores to fit it to",
        ),
        (
            ["workflow=adaptive", "adaptive.budget.calls_per_item=null", "adaptive.stop.criterion=null"],
            "has no budget (adaptive.budget) and no stopping rule",
        ),
        (
            ["workflow=adaptive", "adaptive.warm_start=prompt_score"],
            "adaptive.warm_start=prompt_score is not among",
        ),
        (["runtime.pair_chunk_rows=0"], "runtime.pair_chunk_rows=0 must be a positive integer"),
        (["leaderboard.level=1"], "leaderboard.level=1.0 must be in (0, 1) (0.90: a 5-95% interval)"),
        (
            ["absolute.modes=[prompt_score]", "absolute.temperature=-1"],
            "absolute.temperature=-1.0 must be in [0, inf)",
        ),
        (
            [
                "judge=api",
                "judge.endpoint.base_url=http://127.0.0.1:8000/v1",
                "judge.endpoint.max_retries=-1",
            ],
            "judge.endpoint.max_retries=-1 must be in [0, inf)",
        ),
        (
            ["judge=api", "judge.endpoint.base_url=http://127.0.0.1:8000/v1", "judge.endpoint.concurrency=0"],
            "judge.endpoint.concurrency=0 must be a positive integer",
        ),
        (["workflow=adaptive", "adaptive.window=0"], "adaptive.window=0 must be a positive integer"),
        (["workflow=adaptive", "adaptive.later_round=0"], "adaptive.later_round=0.0 must be in (0, 64]"),
        (["workflow=adaptive", "adaptive.robust=0"], "adaptive.robust=0.0 must be a positive number"),
        (["workflow=adaptive", "adaptive.stop.threshold=1.5"], "must be in (-1, 1) for expected_tau"),
        (
            ["workflow=adaptive", "adaptive.budget.money=5"],
            "adaptive.budget.money needs a judge behind an API",
        ),
        (
            ["workflow=adaptive", "pairs.orderings=one", "scoring.debias=alpha"],
            "judges every pair in both orderings",
        ),
    ],
)
def test_values_that_would_be_ignored_or_misapplied_are_refused(overrides, message):
    with pytest.raises(ConfigError) as info:
        compose(overrides)
    assert message in str(info.value)


@given(
    value=st.floats(-10, 10) | st.integers(-10, 10),
    low=st.integers(-5, 5),
    width=st.integers(0, 5),
    left=st.sampled_from("[("),
    right=st.sampled_from("])"),
)
def test_a_value_is_refused_exactly_outside_the_interval_its_message_shows(value, low, width, left, right):
    interval = f"{left}{low}, {low + width}{right}"
    inside = (low <= value if left == "[" else low < value) and (
        value <= low + width if right == "]" else value < low + width
    )
    problems: list[str] = []
    within(problems, "some.key", value, interval)
    assert problems == ([] if inside else [f"config some.key={value!r} must be in {interval}"])


def test_an_interval_closed_at_infinity_takes_infinity_and_nothing_takes_nan():
    problems: list[str] = []
    within(problems, "retry_for", math.inf, "[0, inf]")
    assert problems == []
    within(problems, "max_retries", math.inf, "[0, inf)")
    within(problems, "level", math.nan, "(0, 1)")
    within(problems, "growth", "3", "[0, 10]")
    assert problems == [
        "config max_retries=inf must be in [0, inf)",
        "config level=nan must be in (0, 1)",
        "config growth='3' must be in [0, 10]",
    ]


def test_every_problem_is_listed_at_once():
    with pytest.raises(ConfigError) as info:
        compose(["pairs.k=3", "scoring.methods=[elo]"])
    assert "pairs.k=3" in str(info.value) and "elo" in str(info.value)


def test_mean_shift_with_one_ordering_is_accepted():
    cfg = compose(["scoring.debias=mean_shift", "pairs.orderings=one"])
    assert cfg.scoring.debias == Debias.mean_shift


def test_flat_params_for_mlflow():
    flat = to_flat_dict(compose())
    assert flat["pairs.strategy"] == "all_pairs" and type(flat["pairs.strategy"]) is str
    assert flat["prompt.templates.0.id"] == "c1"
    assert flat["judge.engine.enable_prefix_caching"] is True
    assert flat["workflow"] == "comparative"


def test_the_api_judge_needs_an_endpoint_and_the_name_of_its_key_variable():
    cfg = compose(
        ["judge=api", "judge.endpoint.base_url=http://127.0.0.1:8000/v1", "judge.endpoint.api_key_env=MY_KEY"]
    )
    assert cfg.judge.backend == "api" and cfg.judge.endpoint.concurrency == 8 and cfg.judge.endpoint.cache
    assert "base_url" in refused(["judge=api"])
    message = refused(
        ["judge=api", "judge.endpoint.base_url=http://x/v1", "judge.endpoint.api_key_env=sk-abc-123"]
    )
    assert "the NAME of an environment variable" in message and "sk-abc-123" not in message
    assert "judge.endpoint.base_url must be the endpoint's URL" in refused(
        ["judge=api", "judge.endpoint.base_url=localhost:8000"]
    )


@pytest.mark.parametrize(
    "pasted", ["hf_AbCdEfGhIjKlMnOpQrStUv12", "gsk_abc123DEF456ghi789JKL", "sk_live_abc123"]
)
def test_a_key_pasted_where_its_variables_name_belongs_is_refused_without_echoing_it(pasted):
    message = refused(
        ["judge=api", "judge.endpoint.base_url=http://x/v1", f"judge.endpoint.api_key_env={pasted}"]
    )
    assert "the NAME of an environment variable" in message and pasted not in message


def test_credentials_in_an_endpoints_url_are_refused_without_echoing_them():
    message = refused(["judge=api", "judge.endpoint.base_url=https://me:s3cr3t-key@api.example.com/v1"])
    assert "holds credentials" in message and "api.example.com" in message
    assert "s3cr3t-key" not in message and "me:" not in message


def test_an_engines_environment_is_recorded_by_name_its_secrets_redacted(tmp_path):
    """+judge.env.HF_TOKEN=... never reaches config.json or MLflow's params; vLLM's own settings stay readable."""
    from pipeline.config.derived import REDACTED, recorded

    cfg = compose(
        [
            "+judge.env.HF_TOKEN=hf_secret_value",
            "+judge.env.MY_VAR=anything",
            "judge.env.VLLM_CPU_KVCACHE_SPACE=2",
        ]
    )
    assert cfg.judge.env["HF_TOKEN"] == "hf_secret_value"  # the engine still gets it
    for record in (
        recorded(cfg)["judge"]["env"],
        {k.split(".")[-1]: v for k, v in to_flat_dict(cfg).items() if ".env." in k},
    ):
        assert (
            record["HF_TOKEN"] == record["MY_VAR"] == REDACTED
            and str(record["VLLM_CPU_KVCACHE_SPACE"]) == "2"
        )
    assert "hf_secret_value" not in str(recorded(cfg)) + str(to_flat_dict(cfg))
    from pipeline.judge.spec import JudgeSpec

    described = JudgeSpec("vllm", "m", "m", "m", 512, env=dict(cfg.judge.env)).describe()  # judge.json
    assert described["env"]["HF_TOKEN"] == REDACTED and "hf_secret_value" not in str(described)


def test_the_pool_preset_composes_an_adaptive_run():
    cfg = compose(["experiment=summeval_pool"])
    assert cfg.workflow == "adaptive" and cfg.dataset.pool and cfg.dataset.attributes == ["coherence"]
    assert cfg.adaptive.strategy == "reorder" and cfg.adaptive.budget.calls_per_item == 8
    assert [t.id for t in cfg.prompt.templates] == ["pool"]


def test_the_round_sizes_come_from_one_schedule():
    """The pipeline's rounds and bench-adaptive both size rounds with AdaptiveConfig.round_settings().schedule."""
    from pipeline.config.adaptive_rounds import AdaptiveConfig

    def sizes(cfg: AdaptiveConfig, n: int, checkpoints: tuple[int, ...] = ()):
        return cfg.round_settings().schedule.sizes(n, checkpoints)

    size = sizes(AdaptiveConfig(first_round=0.5, later_round=0.125, growth=0.25), 100)
    assert size(0) == 50  # a matching first
    assert size(50) == 12  # then max(later_round x items, growth x judged): round(12.5) and 12
    assert size(400) == 100  # growth x judged once it is the larger
    assert sizes(AdaptiveConfig(first_round=1.0), 100, (130,))(100) == 25  # cut to end at a checkpoint
    assert sizes(AdaptiveConfig(first_round=1.0), 100, (110,))(100) == 10
    assert sizes(AdaptiveConfig(first_round=0.001), 3)(0) == 1  # never an empty round


@pytest.mark.parametrize(
    "override,message",
    [
        ("dataset.name=../../../../x", r"dataset.name='../../../../x' is not a plain name"),
        ("dataset.name=a/b", r"dataset.name='a/b' is not a plain name"),
        ("dataset.name=..", r"dataset.name='..' is not a plain name"),
        ("judge.name='a\x1fb'", r"judge.name='a\\x1fb' is not a name without control characters"),
        ("judge.name=' '", r"judge.name=' ' is not a name"),
    ],
)
def test_a_name_that_would_leave_its_folder_or_break_a_line_is_refused_at_conversion(override, message):
    with pytest.raises(ConfigError, match=message):
        compose([override])
    compose(["dataset.name=my set-2.0", "judge.name='gpt-4o (2024)'"])  # odd but plain: taken
