"""What the judge stage did and what it cost."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JudgeStats:
    """What the judge stage did and what it cost."""

    prompts: int  # judgments in the run folder (this run and earlier ones)
    judged_now: int
    seconds: float  # the judge stage's wall time, engine start-up included
    rate: float  # prompts per second after the first batch (start-up excluded); NaN if too few batches
    rate_with_startup: float
    prompt_tokens: int
    cached_tokens: int
    # judge.backend=api: HTTP requests sent (retries included), prompts answered from the reply cache, the
    # tokens the endpoint billed (cached replies excluded) and their price (None without judge.endpoint prices)
    requests: int = 0
    cached_replies: int = 0
    billed_prompt_tokens: int = 0
    billed_completion_tokens: int = 0
    money: float | None = None
    # requested tokens read from API replies, and those not among the returned alternatives (floored)
    logprobs_read: int = 0
    missing_logprobs: int = 0
    # the paths the API requests took: token_ids (exact label log-probabilities) and/or chat (top alternatives)
    api_paths: tuple[str, ...] = ()
    # prompts of this run answered from the judgement store (the same prompt judged before: by an earlier run, or
    # for other candidates with the same texts; pipeline.storage.judgements)
    reused: int = 0
    # behind an API: failed attempts by kind (replies that were not answers, HTTP errors, timeouts, lost
    # connections; pipeline.judge.endpoint.replies.KINDS), retried or not
    failed_attempts: tuple[tuple[str, int], ...] = ()
    # behind an API: answers whose reply gave no token counts (their billed tokens are unknown)
    usage_unknown: int = 0
    # judge.endpoint.batch: the batch jobs recorded in the run folder (api_batches.jsonl) by state (completed, expired,
    # failed, cancelled once read; open: submitted, not yet read)
    batches: tuple[tuple[str, int], ...] = ()
    # prompts answered from a judge's file of verdicts (a recorded judge: no engine, nothing billed)
    recorded: int = 0
    # behind an API: the answers per judge and model their replies say served them, as (judge, model, answers);
    # more than one model for a judge is a judge that changed within the run (a provider's new snapshot behind the
    # same name: judge drift)
    served_models: tuple[tuple[str, str, int], ...] = ()
    # what the run lost and judged again, by kind (nodes, workers, engine deaths, drained workers, prompts judged
    # again; pipeline.judge.hosting.watchdog.Interruptions), those that happened
    interruptions: tuple[tuple[str, int], ...] = ()
    # judge.engine.enforce_eager=auto: the engine's mode chosen for the run, and why (pipeline.judge.vllm.mode)
    engine_mode: str = ""
    # the mode itself (eager, else compiled), for the stages that start the same engine after it; None: not chosen
    engine_eager: bool | None = None

    def models_by_judge(self) -> dict[str, tuple[tuple[str, int], ...]]:
        """Per judge, the models its replies say served them and how many answers each."""
        out: dict[str, list[tuple[str, int]]] = {}
        for judge, model, n in self.served_models:
            out.setdefault(judge, []).append((model, n))
        return {judge: tuple(models) for judge, models in out.items()}

    def changed_judges(self) -> dict[str, tuple[tuple[str, int], ...]]:
        """The judges whose replies name more than one model (judge drift within the run)."""
        return {judge: models for judge, models in self.models_by_judge().items() if len(models) > 1}

    @property
    def missing_share(self) -> float:
        return self.missing_logprobs / self.logprobs_read if self.logprobs_read else 0.0

    @property
    def cache_share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def metrics(self) -> dict[str, float]:
        return {
            "judge/comparisons": float(self.prompts),
            "judge/judged_this_run": float(self.judged_now),
            "judge/reused_judgements": float(self.reused),
            "judge/recorded_answers": float(self.recorded),
            "judge/comparisons_per_s": self.rate,
            "judge/comparisons_per_s_with_startup": self.rate_with_startup,
            "judge/seconds": self.seconds,
            "judge/prompt_tokens": float(self.prompt_tokens),
            "judge/prefix_cache_share": self.cache_share,
            "judge/api_requests": float(self.requests),
            "judge/api_cached_replies": float(self.cached_replies),
            "judge/api_billed_prompt_tokens": float(self.billed_prompt_tokens),
            "judge/api_billed_completion_tokens": float(self.billed_completion_tokens),
            "judge/api_missing_logprob_share": self.missing_share,
            "judge/api_usage_unknown": float(self.usage_unknown),
            **(
                {"judge/api_served_models": float(max(len(m) for m in self.models_by_judge().values()))}
                if self.served_models
                else {}
            ),
            **{f"judge/api_batches/{state}": float(n) for state, n in self.batches},
            "judge/api_failed_attempts": float(sum(n for _, n in self.failed_attempts)),
            **{f"judge/api_failed_attempts/{kind}": float(n) for kind, n in self.failed_attempts},
            **({"judge/api_cost": self.money} if self.money is not None else {}),
            **(
                {"judge/engine_compiled": float(not self.engine_eager)}
                if self.engine_eager is not None
                else {}
            ),
        }
