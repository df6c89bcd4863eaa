"""The compiled engine's saved model loads again (pipeline.judge.vllm.compile_cache): vLLM's own loader, on what Inductor's
backend saved (as vLLM compiles on the CPU), refuses it as vLLM 0.32 does without our loader and takes it with it,
computing what the model computes. A small module compiled in a few seconds stands in for the judge's model, whose
compile takes 40-55 s on 2 cores (the engine's starts with it are in BENCHMARKS.md)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

from pipeline.judge.vllm.compile_cache import WRAPS, finished, load_saved_models
from pipeline.judge.vllm.cores import in_vllm_processes


@pytest.mark.engine
def test_vllm_s_loader_takes_the_model_it_saved_on_the_cpu(tmp_path, monkeypatch):
    import torch
    from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable as bundled
    from vllm.compilation.decorators import _try_load_aot_compiled_fn
    from vllm.config import VllmConfig

    from tests.judge.tiny_model import Tiny

    model, x = Tiny(), torch.arange(32, dtype=torch.float32).reshape(4, 8) / 10
    saved = tmp_path / "model"
    compiled = torch.compile(model.forward, fullgraph=True, backend="inductor").aot_compile(((x,), {}))
    compiled.save_compiled_function(str(saved))
    # what vLLM's loader reads of the model it compiled
    config = VllmConfig()
    model.vllm_config, model.compilation_config, model._is_encoder = config, config.compilation_config, False

    # vLLM 0.32 with torch 2.13 as released (torch's own loader, even where an engine of this process installed
    # ours): the load fails and vLLM compiles again
    installed = bundled.__dict__["deserialize_compile_artifacts"]
    monkeypatch.setattr(
        bundled, "deserialize_compile_artifacts", getattr(installed.__func__, WRAPS, installed)
    )
    assert _try_load_aot_compiled_fn(model, str(saved)) is None

    assert load_saved_models() and load_saved_models()  # idempotent
    loaded = _try_load_aot_compiled_fn(model, str(saved))
    assert loaded is not None
    torch.testing.assert_close(loaded(model, x), model(x), rtol=0, atol=0)
    torch.testing.assert_close(loaded(model, -x), model(-x), rtol=0, atol=0)


def test_a_function_without_the_method_gets_one_that_does_nothing():
    def fn():
        return 1

    assert finished(fn) is fn and fn.finalize_loading(None) is None

    class Whole:
        calls = 0

        def finalize_loading(self, config):
            Whole.calls += 1

    whole = Whole()
    finished(whole).finalize_loading(None)
    assert Whole.calls == 1  # its own method kept
    assert finished(len) is len and not hasattr(len, "finalize_loading")  # no attributes: left as it is


def test_a_saved_file_names_the_loader_as_torch_s_own():
    from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable as bundled

    load_saved_models()
    loader = pickle.loads(pickle.dumps(bundled.deserialize_compile_artifacts))
    assert loader.__qualname__ == "BundledAOTAutogradSerializableCallable.deserialize_compile_artifacts"
    assert loader == bundled.deserialize_compile_artifacts


@pytest.mark.engine
def test_vllm_runs_the_loader_in_each_process_of_its_own():
    """vLLM's own plugin loading (``load_general_plugins``, run in its engine's processes and by ``vllm serve``), in a
    fresh interpreter of this environment: the loader is installed there, not only where our engine installs it;
    left out by VLLM_PLUGINS, it is not, as :func:`pipeline.judge.vllm.cores.in_vllm_processes` says."""
    probe = (
        "from vllm.plugins import load_general_plugins\n"
        "from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable as bundled\n"
        "from pipeline.judge.vllm.compile_cache import WRAPS\n"
        "load_general_plugins()\n"
        "print(hasattr(bundled.deserialize_compile_artifacts.__func__, WRAPS))\n"
    )

    def installed(**env: str) -> bool:
        base = {k: v for k, v in os.environ.items() if k != "VLLM_PLUGINS"}
        out = subprocess.run(
            [sys.executable, "-c", probe], env={**base, **env}, capture_output=True, text=True, check=True
        )
        return out.stdout.strip().splitlines()[-1] == "True"

    assert installed() and in_vllm_processes({})
    others = {"VLLM_PLUGINS": "lora_filesystem_resolver"}
    assert not installed(**others) and not in_vllm_processes(others)
