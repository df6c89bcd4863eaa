"""Anthropic's Messages API as a judge backend (``judge.backend=anthropic``; ``judge=anthropic``), built as a plugin
is: this package, its entry point (``pyproject.toml``) and its page (``docs/anthropic.md``).

The Messages API returns no log-probabilities, so a verdict is **sampled** (``judge.endpoint.path=sampled``): each prompt
is asked ``judge.endpoint.samples`` times, the answer prefix sent as the assistant's turn for the model to continue, and
the first word of each sample counted (:mod:`pipeline.judge.endpoint.sampled`, the rule the OpenAI-compatible backend's
sampled path uses). Reasoning before the verdict goes by chat: the reasoning is generated, then sent back inside the
assistant's turn that the verdict continues. With ``judge.endpoint.batch`` the requests go as **Message Batches** at the
batch price (:mod:`.batches`). The endpoint's other settings are ``judge.endpoint``'s: address, key (sent as ``x-api-key``),
concurrency, retries, reply cache, prices.
"""

from __future__ import annotations

from pipeline.config.backends import BackendEntry, Trait
from pipeline.config.judging import JudgeConfig
from pipeline.judge.builtin_backends import endpoint_judge_problems


def anthropic_problems(judge: JudgeConfig, key: str) -> list[str]:
    """An endpoint's checks, and the Messages API's own range of temperatures."""
    problems = endpoint_judge_problems(judge, key)
    if not 0 <= judge.endpoint.sample_temperature <= 1:
        problems.append(
            f"config {key}.endpoint.sample_temperature={judge.endpoint.sample_temperature} must be in [0, 1] for Anthropic's "
            "Messages API"
        )
    return problems


ANTHROPIC = BackendEntry(
    name="anthropic",
    traits=Trait.ENDPOINT | Trait.PREFILL | Trait.SAMPLED | Trait.BATCH | Trait.GENERATION | Trait.ABSOLUTE,
    engine="pipeline.judge.anthropic.engine:AnthropicEngine",
    resolve="pipeline.judge.models:resolve_endpoint",
    checks=anthropic_problems,
    runs="behind Anthropic's Messages API (or a server of it); the driver holds the client (no worker starts)",
    summary="Anthropic's Messages API: sampled verdicts, reasoning by chat, Message Batches",
)
