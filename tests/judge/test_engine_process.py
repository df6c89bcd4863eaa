"""Where a vLLM engine runs (``judge.engine_process``): inside the judge worker's process on a CPU Ray actor by
default, in vLLM's own processes elsewhere; the environment each way, and the config that chooses it."""

from __future__ import annotations

import pytest

from pipeline.config.enums import MULTIPROCESSING_ENV, EngineProcess
from pipeline.config.hydra import compose as compose_config
from pipeline.config.judging import GeneratorConfig
from pipeline.contracts.errors import ConfigError
from pipeline.judge.generators import generator_judge_config
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.vllm.cores import AOT_COMPILE_ENV, PLUGIN, bound_cores, engine_inside, vllm_env
from tests.conftest import compose


def spec(process: EngineProcess = EngineProcess.auto, on_gpu: bool = False, **env: str) -> JudgeSpec:
    return JudgeSpec(
        backend="vllm",
        model="m",
        model_path="/m",
        name="m",
        max_model_len=512,
        env=env,
        engine_process=process,
        on_gpu=on_gpu,
    )


@pytest.mark.parametrize(
    "process,on_gpu,in_actor,inside",
    [
        (EngineProcess.auto, False, True, True),  # a CPU engine on a Ray actor: the actor is its process
        (EngineProcess.auto, False, False, False),  # this process may host other engines (local runs, tests)
        (EngineProcess.auto, True, True, False),  # a GPU: vLLM's engine process overlaps scheduling
        (EngineProcess.worker, True, False, True),
        (EngineProcess.own, False, True, False),
    ],
)
def test_where_the_engine_runs(process, on_gpu, in_actor, inside):
    assert engine_inside(spec(process, on_gpu), in_actor) is inside


@pytest.mark.parametrize(
    "bind,cores",
    [
        ("0,1", 2),
        ("0-3", 4),
        ("0-1,4", 3),
        ("0-3|4-7", 4),
        ("2", 1),
        ("nobind", None),
        ("", None),
        (None, None),
    ],
)
def test_the_cores_an_engine_is_bound_to(bind, cores):
    assert bound_cores(bind) == cores


def test_an_engine_inside_the_worker_computes_on_its_bound_cores():
    env = vllm_env(spec(VLLM_CPU_OMP_THREADS_BIND="0,1", VLLM_CPU_KVCACHE_SPACE="2"), inside=True)
    assert env == {
        "VLLM_CPU_OMP_THREADS_BIND": "0,1",
        "VLLM_CPU_KVCACHE_SPACE": "2",
        MULTIPROCESSING_ENV: "0",
        AOT_COMPILE_ENV: "1",  # vLLM's saved model, loaded here (pipeline.judge.vllm.compile_cache)
        "OMP_NUM_THREADS": "2",  # not the Ray actor's one thread
    }
    # a thread count the user set is kept
    assert (
        vllm_env(spec(VLLM_CPU_OMP_THREADS_BIND="0-3", OMP_NUM_THREADS="1"), inside=True)["OMP_NUM_THREADS"]
        == "1"
    )


def test_an_engine_in_its_own_processes_leaves_the_threads_to_vllm(monkeypatch):
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    env = vllm_env(spec(EngineProcess.own, VLLM_CPU_OMP_THREADS_BIND="0,1"), inside=False)
    # vLLM's saved model, which loads there by the project's plugin (pipeline.judge.vllm.compile_cache)
    assert env == {"VLLM_CPU_OMP_THREADS_BIND": "0,1", MULTIPROCESSING_ENV: "1", AOT_COMPILE_ENV: "1"}


@pytest.mark.parametrize("where", ["judge.env", "shell"])
def test_without_the_plugin_vllm_s_own_processes_keep_torch_compile_s_cache(monkeypatch, where):
    """VLLM_PLUGINS naming other plugins only (vLLM then loads only those): the saved model would not load in vLLM's
    own processes, so torch.compile's cache does; inside this process the engine installs the loader itself."""
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    given = {"VLLM_PLUGINS": "lora_filesystem_resolver"}
    if where == "shell":
        monkeypatch.setenv("VLLM_PLUGINS", given.pop("VLLM_PLUGINS"))
    assert vllm_env(spec(EngineProcess.own, **given), inside=False)[AOT_COMPILE_ENV] == "0"
    assert vllm_env(spec(**given), inside=True)[AOT_COMPILE_ENV] == "1"
    named = {"VLLM_PLUGINS": f"lora_filesystem_resolver,{PLUGIN}"}
    assert vllm_env(spec(EngineProcess.own, **named), inside=False)[AOT_COMPILE_ENV] == "1"


def test_a_user_s_aot_compile_setting_is_kept():
    env = vllm_env(spec(VLLM_CPU_OMP_THREADS_BIND="0,1", VLLM_USE_AOT_COMPILE="0"), inside=True)
    assert env[AOT_COMPILE_ENV] == "0"
    env = vllm_env(spec(EngineProcess.own, VLLM_USE_AOT_COMPILE="1"), inside=False)
    assert env[AOT_COMPILE_ENV] == "1"


def test_the_config_chooses_it_and_generators_follow_the_judge():
    cfg = compose(["judge.engine_process=own"])
    assert cfg.judge.engine_process == EngineProcess.own
    # the product's default (tests/conftest.compose runs the engine inside the test's process)
    assert compose_config([]).judge.engine_process == EngineProcess.auto
    assert generator_judge_config(GeneratorConfig(name="g"), cfg.judge).engine_process == EngineProcess.own


def test_the_switch_is_not_set_through_the_environment():
    with pytest.raises(ConfigError) as info:
        compose([f"+judge.env.{MULTIPROCESSING_ENV}='0'"])
    assert f"judge.env.{MULTIPROCESSING_ENV} is set by judge.engine_process" in str(info.value)
    with pytest.raises(Exception) as bad:
        compose(["judge.engine_process=elsewhere"])
    assert "elsewhere" in f"{bad.value} {bad.value.__cause__ or ''}"


def test_a_gpu_engine_keeps_vllm_s_own_compile_cache():
    assert AOT_COMPILE_ENV not in vllm_env(spec(on_gpu=True), inside=False)


def test_judge_engine_is_checked_against_vllms_settings_without_importing_vllm(root):
    """The driver refuses a ``judge.engine`` key that ``vllm.LLM`` would not take before any worker starts; it reads
    vLLM's settings from vLLM's source, the same list as ``vllm.EngineArgs``' fields, without importing vLLM or
    torch (seconds, on a driver that runs no engine)."""
    import subprocess
    import sys
    from dataclasses import fields

    from vllm.engine.arg_utils import EngineArgs

    from pipeline.judge.vllm.engine import check_engine_keys, engine_settings

    assert engine_settings() == {f.name for f in fields(EngineArgs)}
    code = (
        "import sys; from pipeline.judge.vllm.engine import engine_settings; "
        "print(len(engine_settings()), 'vllm' in sys.modules, 'torch' in sys.modules)"
    )
    read = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert read.stdout.split() == [str(len(fields(EngineArgs))), "False", "False"]
    check_engine_keys({"seed": 0, "enforce_eager": True, "max_num_seqs": 4})
    with pytest.raises(ConfigError, match=r"judge.engine: max_num_seq \(did you mean max_num_seqs"):
        check_engine_keys({"seed": 0, "max_num_seq": 4})
