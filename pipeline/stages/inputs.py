"""The stages that prepare a run: read the input, resolve the judge, settle the prompts, open the run folder's stores."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline.config.assessment import AbsoluteConfig, DatasetConfig, PromptConfig
from pipeline.config.backends import Trait, backend
from pipeline.config.enums import AbsoluteMode, ApiPath, Correlation
from pipeline.config.judging import JudgeConfig, ReasoningConfig
from pipeline.contracts.errors import ConfigError
from pipeline.contracts.schemas import JUDGED_KEYS
from pipeline.data.records import InputReport
from pipeline.data.source import DatasetInfo, load_input
from pipeline.judge.endpoint.batch import RECORD_FILE
from pipeline.judge.models import resolve_judge
from pipeline.judge.spec import JudgeSpec
from pipeline.prompts.labels import resolve_labels
from pipeline.prompts.plan import PromptPlan, plan_prompts
from pipeline.prompts.preflight import check_prompt_lengths
from pipeline.runtime.logs import FILE_ONLY
from pipeline.stages import ports
from pipeline.stages.base import Stage, StageContext
from pipeline.storage.parts import JudgmentParts, RatingParts

log = logging.getLogger("pipeline")


@dataclass(frozen=True)
class LoadInput(Stage):
    """Read the contexts and candidates (JSONL, Parquet or the demo set) and check every record."""

    dataset: DatasetConfig
    correlation: Correlation
    root: Path
    cache_dir: Path

    name = "load_input"
    writes = (ports.CANDIDATES, ports.HUMAN_SCORES, ports.INPUT_REPORT, ports.DATASET)

    def run(self, ctx: StageContext) -> dict[str, Any]:
        loaded = load_input(self.dataset, self.correlation, self.root, self.cache_dir)
        return {
            "candidates": loaded.candidates,
            "human_scores": loaded.human_scores,
            "input_report": loaded.report,
            "dataset": loaded.info,
        }


@dataclass(frozen=True)
class ResolveJudge(Stage):
    """Find the judge model (converting the default one once) and settle its engine settings and dtype."""

    judge: JudgeConfig
    cache_dir: Path

    name = "resolve_judge"
    writes = (ports.JUDGE, ports.JUDGES)

    def run(self, ctx: StageContext) -> dict[str, Any]:
        spec = resolve_judge(self.judge, self.cache_dir)
        if (
            Trait.ENDPOINT in backend(spec.backend).traits
            and spec.endpoint is not None
            and spec.endpoint.settings.batch
        ):
            # batch judging records its jobs in the run folder
            record = str(ctx.planned_run_dir / RECORD_FILE)
            spec = dataclasses.replace(spec, endpoint=dataclasses.replace(spec.endpoint, record_path=record))
        log.info("judge %s on %s, %s: %s", spec.name, spec.backend, spec.dtype, spec.dtype_reason)
        log.info(
            "judge model %s, engine %s",
            spec.model_path or "(no checkpoint here)",
            dict(spec.engine),
            extra=FILE_ONLY,
        )
        return {"judge": spec, "judges": (spec.name,)}


def check_checklists(plan: PromptPlan, candidates: pa.Table) -> None:
    """Mode checklist asks the items of each context's checklist: refused where no context gives one, the contexts
    without one counted (they have no checklist score)."""
    if not any(t.mode == AbsoluteMode.checklist for t in plan.absolute):
        return
    contexts = pl.from_arrow(candidates.select(["context_id", "checklist"])).unique("context_id")
    without = contexts.filter(pl.col("checklist").list.len().fill_null(0) == 0)
    if without.height == contexts.height:
        raise ConfigError(
            "config absolute.modes has checklist, but no context gives a checklist: give each context its items "
            '("checklist": ["Is it under 100 words?", ...], or a column dataset.columns.checklist)'
        )
    if without.height:
        log.warning(
            "%d of %d contexts give no checklist and have no checklist score, e.g. %s",
            without.height, contexts.height, without["context_id"][0],
        )  # fmt: skip


def check_words_by_request(judge: JudgeSpec, plan: PromptPlan, candidates: pa.Table) -> None:
    """Without the judge's tokenizer, check the words answers are read from by test requests: the first
    comparison in both orderings (and the first prompt of each absolute template that reads words), sent to
    the endpoint's chat path; a word among the first token's alternatives is a single token the judge uses.
    Words not seen are warned about (they will be floored and counted); a side with none seen is refused."""
    from pipeline.judge.openai.words import check_words
    from pipeline.prompts.labels import LabelError

    frame = pl.from_arrow(candidates.select(["context_id", "context", "text"]))
    first = frame.filter(pl.col("context_id") == frame["context_id"][0]).head(2)
    context, texts = first["context"][0], first["text"].to_list()
    attribute = plan.attributes[0]
    checks = []
    comparative = None
    if plan.templates and len(texts) == 2:
        template = plan.templates[0]
        prompts = [plan.prompt(template, attribute, context, a, b) for a, b in (texts, texts[::-1])]
        request = plan.requests()[template.id]
        comparative = check_words(
            judge, plan.frame, prompts, plan.labels.words, request, "comparative label words"
        )
        checks.append(comparative)
    for t in plan.absolute:
        if t.request.token_ids:
            asked = next(a for a in plan.attributes if t.asks(a))
            prompt = plan.rate_prompt(t, asked, context, texts[0], "Is the answer correct?")
            checks.append(
                check_words(
                    judge, plan.frame, [prompt], t.words, t.request, f"absolute template {t.id!r} words"
                )
            )
    for check in checks:
        seen = ", ".join(
            f"{w!r} " + (f"{lp:.2f}" if lp is not None else "absent")
            for w, lp in zip(check.words, check.seen, strict=True)
        )
        log.info("test request, %s among the first token's alternatives: %s", check.what, seen)
        if check.missing:
            log.warning(
                "%s %s: not among the judge's first-token alternatives in the test request (alternatives: %s); "
                "where they stay absent they get a floor, counted in the summary",
                check.what,
                check.missing,
                list(check.alternatives),
            )
    if comparative is not None:
        labels, seen = plan.labels, comparative.seen
        sides = {"A": seen[: labels.n_a], "B": seen[labels.n_a : len(seen) - labels.n_tie]}
        blind = [side for side, values in sides.items() if all(v is None for v in values)]
        if blind:
            raise LabelError(
                f"judge {judge.name}: no {' or '.join(blind)} label word ({list(labels.words)}) is among the first "
                f"token's alternatives of a test comparison (they were {list(comparative.alternatives)}): the judge "
                "does not answer with them; change prompt.label_words_a / label_words_b"
            )


@dataclass(frozen=True)
class PreparePrompts(Stage):
    """Settle the prompt once with the judge's tokenizer (chat template, label tokens, answer prefixes) and
    make every prompt fit the judge's context (truncate the context text, counted, or refuse)."""

    prompt: PromptConfig
    absolute: AbsoluteConfig
    # False: absolute prompts only (workflow=absolute).
    comparative: bool = True
    # The options of each criterion (absolute mode options).
    criteria_options: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    # judge.reasoning: reason before every verdict (None or not enabled: off).
    reasoning: ReasoningConfig | None = None

    name = "prepare_prompts"
    reads = (ports.CANDIDATES, ports.INPUT_REPORT, ports.DATASET, ports.JUDGE)
    writes = (ports.CANDIDATES, ports.INPUT_REPORT, ports.PROMPT_PLAN)

    def run(
        self,
        ctx: StageContext,
        *,
        candidates: pa.Table,
        input_report: InputReport,
        dataset: DatasetInfo,
        judge: JudgeSpec,
    ) -> dict[str, Any]:
        from pipeline.judge.tokenizers import is_exact, load_tokenizer
        from pipeline.prompts.absolute import resolve_absolute

        tokenizer = load_tokenizer(judge, ask_server=ctx.sends)
        endpoint = judge.endpoint if Trait.ENDPOINT in backend(judge.backend).traits else None
        if (
            not is_exact(tokenizer)
            and endpoint is not None
            and endpoint.path == ApiPath.token_ids
            and ctx.sends
        ):
            raise ConfigError(
                f"config judge.endpoint.path=token_ids needs the tokenizer of {judge.model}, and there is none here "
                "(no local checkpoint, no /tokenize on the server): use judge.endpoint.path=chat or auto"
            )
        labels = resolve_labels(
            tokenizer,
            self.prompt.label_words_a,
            self.prompt.label_words_b,
            judge.name,
            self.prompt.label_words_tie,
        )
        absolute = resolve_absolute(self.absolute, tokenizer, judge.name, self.criteria_options)
        unknown = sorted({t.attribute for t in absolute if t.attribute} - set(dataset.attributes))
        if unknown:
            raise ConfigError(
                f"config criteria_options names {unknown}, which are not judged here (attributes: "
                f"{', '.join(dataset.attributes)})"
            )
        plan = plan_prompts(
            self.prompt,
            dataset.attributes,
            dataset.words,
            tokenizer,
            labels,
            judge.name,
            absolute,
            self.comparative,
            self.reasoning,
        )
        check_checklists(plan, candidates)
        read = ", ".join(
            ([f"comparative label words {list(labels.words)}"] if plan.templates else [])
            + [f"absolute {t.mode} ({t.id})" for t in absolute]
        )
        if backend(judge.backend).answers:  # it answers by key and reads no text: nothing to fit or test
            log.info("prompts: %s, answered by key (judge %s reads no prompt text)", read, judge.name)
            return {"candidates": candidates, "input_report": input_report, "prompt_plan": plan}
        lengths = check_prompt_lengths(candidates, plan, tokenizer, judge.max_model_len, self.prompt.too_long)
        log.info(
            "prompts: chat template %s, %s, longest prompt %d tokens with its answer",
            "on" if plan.chat else "off",
            read,
            lengths.longest_prompt_tokens,
        )
        if not is_exact(tokenizer):
            log.info("prompt lengths are estimated (%s)", tokenizer.source)
        sampled = endpoint is not None and endpoint.path == ApiPath.sampled
        if not is_exact(tokenizer) and not sampled and ctx.sends:  # a sampled verdict reads no alternatives
            check_words_by_request(judge, plan, lengths.candidates)
        elif not is_exact(tokenizer) and not sampled:
            log.warning(
                "judge %s has no tokenizer here: its label words are checked by two test chat requests when the run "
                "starts (make check sends nothing)",
                judge.name,
            )
        report = dataclasses.replace(input_report, truncated_contexts=list(lengths.truncated))
        return {"candidates": lengths.candidates, "input_report": report, "prompt_plan": plan}


@dataclass(frozen=True)
class OpenStore(Stage):
    """Open the run folder's judgments and ratings: refuse those made with another judging identity, list what
    is judged.

    (A folder holding judgments with ``runtime.resume=false`` is refused when the run starts, before any stage.)
    """

    # The dataset, pairs and prompt settings that decide what is compared (the judge's part comes from ``judge``).
    identity: dict[str, Any]
    # The dataset and absolute settings that decide what is rated: a run folder's comparisons are kept when only
    # its absolute settings change, and the other way round.
    rating_identity: dict[str, Any]

    name = "open_store"
    reads = (ports.JUDGE, ports.PROMPT_PLAN)
    writes = (ports.PARTS, ports.RATING_PARTS, ports.JUDGED)

    def run(self, ctx: StageContext, *, judge: JudgeSpec, prompt_plan: PromptPlan) -> dict[str, Any]:
        identity = {**self.identity, "judge": judge.identity()}
        rating_identity = {**self.rating_identity, "judge": judge.identity()}
        words = prompt_plan.labels.words
        # refused before the run folder is opened, so its config.json and MLflow history stay those of its judgments
        JudgmentParts(ctx.planned_run_dir / "judgments", identity, words).check_identity()
        RatingParts(ctx.planned_run_dir / "ratings", rating_identity).check_identity()
        parts = JudgmentParts(ctx.run_dir / "judgments", identity, words)
        rating_parts = RatingParts(ctx.run_dir / "ratings", rating_identity)
        judged = pa.concat_tables([parts.judged(), rating_parts.judged()]).select(JUDGED_KEYS.names)
        if judged.num_rows:
            log.info("%d prompts already judged in %s: skipped", judged.num_rows, ctx.run_dir)
        return {"parts": parts, "rating_parts": rating_parts, "judged": judged}
