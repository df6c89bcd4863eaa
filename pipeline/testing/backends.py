"""The judge backend checks (:mod:`pipeline.testing`): a backend's engine, made from a spec its resolver gave, asked
a few prompts alone, together and in another order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.config.backends import BackendEntry
from pipeline.contracts.engine import Request
from pipeline.contracts.frame import PromptFrame
from pipeline.testing.battery import Check, fail, run_all

PROMPTS = (
    "Which summary is more coherent? A: The cat sat. B: Sat the cat.",
    "Which answer is more helpful? A: Restart the router. B: No idea.",
    "Which text is more fluent? A: It rains today. B: Today rain it.",
    "Which reply is more polite? A: Thank you! B: Whatever.",
)


def backend_checks(
    entry: BackendEntry,
    spec: Any,
    request: Request | None = None,
    prompts: Sequence[str] = PROMPTS,
    atol: float = 1e-3,
) -> list[Check]:
    """The checks of a backend (module docstring), each ``check(entry)``: ``spec`` is the judge spec its resolver made,
    ``request`` what to read (default: the first-token log-probabilities of token ids 1 and 2), ``atol`` the noise a
    batched engine may add to a log-probability."""
    request = request or Request(token_ids=(1, 2))
    frame = PromptFrame(head="", tail="")
    answers: dict[str, Any] = {}

    def engine(e: BackendEntry) -> Any:
        if "engine" not in answers:
            if not e.engine:
                fail(
                    f"backend {e.name}", "engine", "it answers by key (recorded verdicts): no engine to check"
                )
            answers["engine"] = e.engine_factory()(spec)
        return answers["engine"]

    def together(e: BackendEntry) -> list[Any]:
        if "together" not in answers:
            answers["together"] = engine(e).answer(list(prompts), frame, request)
        return answers["together"]

    def results(e: BackendEntry) -> None:
        out = together(e)
        if len(out) != len(prompts):
            fail(f"backend {e.name}", "results", f"{len(out)} results for {len(prompts)} prompts")
        for k, result in enumerate(out):
            values = np.asarray(result.token_logprobs, dtype=np.float64)
            if result.error is not None:
                fail(f"backend {e.name}", "results", f"prompt {k}: no answer ({result.error})")
            if (
                values.shape != (len(request.token_ids),)
                or not np.all(np.isfinite(values))
                or np.any(values > 0)
            ):
                fail(
                    f"backend {e.name}",
                    "results",
                    f"prompt {k}: log-probabilities {values.tolist()} for {len(request.token_ids)} tokens asked "
                    "(finite, at most 0)",
                )

    def alone(e: BackendEntry) -> None:
        out = together(e)
        for k, prompt in enumerate(prompts):
            [single] = engine(e).answer([prompt], frame, request)
            if not np.allclose(single.token_logprobs, out[k].token_logprobs, atol=atol):
                fail(
                    f"backend {e.name}",
                    "alone (a prompt's answer whatever else the call holds)",
                    f"prompt {k}: {single.token_logprobs} alone, {out[k].token_logprobs} together",
                )

    def order(e: BackendEntry) -> None:
        out = together(e)
        backwards = engine(e).answer(list(prompts)[::-1], frame, request)[::-1]
        for k, (a, b) in enumerate(zip(out, backwards, strict=True)):
            if not np.allclose(a.token_logprobs, b.token_logprobs, atol=atol):
                fail(
                    f"backend {e.name}",
                    "order (the prompts of a call in another order)",
                    f"prompt {k}: {b.token_logprobs} against {a.token_logprobs}",
                )

    def close(e: BackendEntry) -> None:
        if "engine" in answers:
            answers.pop("engine").close()

    return [("results", results), ("alone", alone), ("order", order), ("close", close)]


def check_backend(entry: BackendEntry, spec: Any, request: Request | None = None, atol: float = 1e-3) -> None:
    """Every backend check on ``entry`` (its engine made once from ``spec``, closed at the end)."""
    run_all(f"backend {entry.name}", backend_checks(entry, spec, request, atol=atol), entry)
