"""The compiled engine's saved model, loaded again at its next start (on the CPU).

vLLM saves the model it compiled (``VLLM_USE_AOT_COMPILE``, its default) and, at the next start with the same
settings, loads it instead of compiling it again; then it asks the loaded function to finish loading
(``finalize_loading``), a method that only vLLM's own piecewise backend's functions have. On the CPU, vLLM 0.32
compiles with Inductor's own backend (``CompilationMode.DYNAMO_TRACE_ONCE``), whose saved function torch 2.13 loads
as a wrapper of a plain function, complete as loaded and without that method: every load fails ("'function' object
has no attribute 'finalize_loading'", a warning) and the model is compiled again, 40-55 s of a 2-core machine's start.

:func:`load_saved_models` gives such a function the method, doing nothing (nothing is left to load), so vLLM's own
loader takes it. On 2 cores inside a Ray worker the compiled engine then starts in 13.8 s where it took 19.7 s with
torch.compile's cache (64 s compiling afresh), against 9.8 s eager, and judges exactly as with torch.compile's cache
(the demo's 240 judgments, every log-probability equal); BENCHMARKS.md, "The compiled engine's saved model".

It changes what a process loads, never what is saved (a file saved here loads elsewhere as it would have), and it
touches no function that has the method already, so it does nothing where vLLM or torch have fixed the mismatch.
An engine inside this process installs it itself (:class:`pipeline.judge.vllm.engine.VLLMEngine`); vLLM runs it in
each process of its own (its engine's, ``vllm serve``) as a plugin of its ``vllm.general_plugins`` group, which the
project's install registers (``pyproject.toml``): there the compiled engine started in 25.9 s on 2 cores against
46.6 s with torch.compile's cache (``make engine-modes ARGS="dataset=summeval runtime=inprocess"``). Where the
plugin does not run (not registered, as in a cluster job's runtime environment that does not install the project, or
left out by ``VLLM_PLUGINS``), vLLM's own processes keep torch.compile's cache (``VLLM_USE_AOT_COMPILE=0``,
:func:`pipeline.judge.vllm.cores.aot_compile`).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

# Our loader's attribute holding the loader it wraps (torch's own): its presence says ours is installed.
WRAPS = "_ca_wraps"


def _loaded(vllm_config: Any) -> None:
    """A function that Inductor's backend compiled is whole once loaded: nothing to finish."""


def finished(fn: Any) -> Any:
    """``fn`` as vLLM's loader takes it: with ``finalize_loading`` (a no-op) where it has none and can take one."""
    if not hasattr(fn, "finalize_loading"):
        try:
            fn.finalize_loading = _loaded
        except (AttributeError, TypeError):  # a callable without attributes of its own: vLLM compiles again
            log.debug("a compiled function of type %s cannot take finalize_loading", type(fn).__name__)
    return fn


def load_saved_models() -> bool:
    """Let vLLM load, in this process, the model it compiled and saved at an earlier start (module docstring).
    Idempotent; False where this torch has no such saved functions (nothing to do)."""
    try:
        from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable as bundled
    except ImportError:
        return False
    current = bundled.__dict__.get("deserialize_compile_artifacts")
    if not isinstance(current, classmethod):
        return False
    load = current.__func__
    if hasattr(load, WRAPS):
        return True

    def deserialize_compile_artifacts(cls: type, data: bytes) -> Any:
        return finished(load(cls, data))

    # a saved file names its loader by these (pickle), as it named torch's own
    deserialize_compile_artifacts.__qualname__ = load.__qualname__
    deserialize_compile_artifacts.__doc__ = load.__doc__
    setattr(deserialize_compile_artifacts, WRAPS, current)
    bundled.deserialize_compile_artifacts = classmethod(deserialize_compile_artifacts)
    return True
