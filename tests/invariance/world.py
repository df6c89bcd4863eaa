"""Simulated worlds with a known truth, run through the product's own stages without an engine.

A :class:`World` is drawn in index space (contexts, candidates, models, judges, templates, each a number) with a
latent quality per candidate, texts whose lengths the world sets, people's scores, and simulated judges (scale,
position bias, a liking for length, noise). Names are a separate mapping, so that the same world can be run under
any names and any order of its rows.

:func:`run_world` runs it as the product does: the input (a data set's records through the product's validation,
or a generate run's tasks and outputs through the product's ``candidates_from_generations``), the prompts (the
product's ``ShardContexts`` stage and prompt generation, with a plan settled by ``plan_prompts`` and
``resolve_absolute``), a simulated engine where the engine would be (the only stand-in: it answers each prompt's
label words, score words or generated score from the world's truth, keyed by content, so a renamed world is answered
the same), the product's conversion of the answers into judgments and ratings, and then the product's score
segment (``pipeline.workflows.segments.scoring``: reduce, reasons, score, rate, combine, jury, leaderboard,
correlate, card, cost). Every table with a file comes back, with the run's metrics.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.config.assessment import AbsoluteConfig, PairsConfig, PromptConfig, TemplateConfig
from pipeline.config.derived import derive
from pipeline.config.enums import AbsoluteMode, Calibrate, Debias, LabelSample, LeaderboardGames
from pipeline.config.judging import GenerateConfig, GeneratorConfig
from pipeline.config.run import RunConfig
from pipeline.contracts.engine import Result
from pipeline.contracts.keys import COMPARE, base_template, stable_hash
from pipeline.contracts.schemas import GENERATIONS, JUDGED_KEYS, LEFT_OUT, TASKS
from pipeline.contracts.stats import JudgeStats
from pipeline.data.load import Record
from pipeline.data.records import ValidationRules, validate_records
from pipeline.data.words import PromptWords
from pipeline.judge.hosting.worker import responses
from pipeline.judge.spec import JudgeSpec, Placement
from pipeline.prompts.absolute import resolve_absolute
from pipeline.prompts.labels import Labels
from pipeline.prompts.pairs import generate_prompts, split_shards
from pipeline.prompts.plan import PromptPlan, plan_prompts
from pipeline.scoring.responses import split_responses
from pipeline.stages import ports
from pipeline.stages.base import Stage, run_stages
from pipeline.stages.judging import ShardContexts
from pipeline.testing.stages import Context

ATTRIBUTE = "quality"
# Every absolute mode the simulated engine answers (options needs a criterion's options: not drawn here).
ABSOLUTE_MODES = (AbsoluteMode.g_eval, AbsoluteMode.implicit, AbsoluteMode.prompt_score)


@dataclass(frozen=True)
class Judge:
    """A simulated judge: its log-odds for slot A are ``scale (q_A - q_B) + bias + length * (L_A - L_B) / (L_A +
    L_B) + noise * eps`` with ``eps`` a standard normal keyed by the prompt's content."""

    scale: float = 2.0
    bias: float = 0.3
    length: float = 0.0
    noise: float = 0.5


@dataclass(frozen=True)
class World:
    """A world in index space (module docstring). ``sizes``: candidates per context (one context: a pool);
    ``models``: the generators (candidate ``k`` of a context is model ``k % models``; 0: no models); ``generate``:
    the input is a generate run's tasks and outputs (every context has one output per model)."""

    sizes: tuple[int, ...]
    models: int = 0
    judges: tuple[Judge, ...] = (Judge(),)
    templates: int = 1
    tie: bool = False
    absolute: tuple[AbsoluteMode, ...] = ()
    generate: bool = False
    human: bool = True
    seed: int = 0
    # per model: its outputs' length relative to the others (1 = as long), and its quality offset
    verbosity: tuple[float, ...] = ()
    skill: tuple[float, ...] = ()
    debias: Debias = Debias.average
    games: LeaderboardGames = LeaderboardGames.pair
    rounds: int = 20
    # scoring.calibrate=temperature: score on probabilities calibrated to people's preferences (cross-fitted)
    calibrate: bool = False
    # people's scores an objective label (1 for each context's best candidate, 0 for the others; contexts in two
    # categories): the judges meta-evaluated as the judge benchmarks do it
    objective: bool = False
    # the judges' answers recorded in a file (as a p_first, a verdict or a reward model's scores) and given back by
    # the product's recorded backend, checked against the run by its own stage; None: the simulated engine answers
    recorded: str | None = None
    # trust with a guarantee on people's scores: the labelled pairs drawn "random" or "active" (None: off)
    trust: str | None = None
    # each context a conversation (turns with roles, the candidates the next assistant turn) with a reference answer
    # and a checklist (1-3 items), each item asked by absolute mode checklist (TICK)
    conversation: bool = False
    # people's judgements as pairwise votes (Chatbot Arena's rows: context, model_a, model_b, response_a, response_b,
    # winner), read by the product's flat-table reader: every context a pair of the two models, VOTES votes each
    votes: bool = False

    @property
    def n_contexts(self) -> int:
        return len(self.sizes)

    def model_of(self, c: int, k: int) -> int | None:
        return k % self.models if self.models else None


@dataclass(frozen=True)
class Names:
    """The names of a world's things: contexts, candidates (per context), models, judges, templates."""

    contexts: tuple[str, ...]
    candidates: tuple[tuple[str, ...], ...]
    models: tuple[str, ...]
    judges: tuple[str, ...]
    templates: tuple[str, ...]

    @classmethod
    def plain(cls, world: World) -> Names:
        return cls(
            tuple(f"ctx{c}" for c in range(world.n_contexts)),
            tuple(tuple(f"cand{c}x{k}" for k in range(n)) for c, n in enumerate(world.sizes)),
            tuple(f"model{m}" for m in range(world.models)),
            tuple(f"judge{g}" for g in range(len(world.judges))),
            tuple(f"tmpl{t}" for t in range(world.templates)),
        )

    def flat(self) -> list[str]:
        return [
            *self.contexts,
            *(c for cs in self.candidates for c in cs),
            *self.models,
            *self.judges,
            *self.templates,
        ]

    def inverse(self, original: Names) -> dict[str, str]:
        """Each of these names -> the original name of the same thing."""
        return dict(zip(self.flat(), original.flat(), strict=True))


@dataclass(frozen=True)
class Order:
    """How the rows come: a permutation seed for the input's records and candidates, and for the judgments and
    ratings (None: as made)."""

    records: int | None = None
    judgments: int | None = None


# --- the truth -------------------------------------------------------------------------------------------------


def _noise(world: World, *key: int) -> float:
    """A standard normal keyed by the world's seed and the indices of what is judged (content, not names)."""
    return float(np.random.default_rng([world.seed, *key]).standard_normal())


def quality(world: World, c: int, k: int) -> float:
    """The latent quality of candidate ``k`` of context ``c``: the model's skill plus its own."""
    m = world.model_of(c, k)
    own = _noise(world, 1, c, k)
    return own + (world.skill[m] if m is not None and m < len(world.skill) else 0.0)


def text_of(world: World, c: int, k: int) -> str:
    """Candidate text: a unique opening and a length the world sets (models' verbosity included)."""
    m = world.model_of(c, k)
    factor = world.verbosity[m] if m is not None and m < len(world.verbosity) else 1.0
    words = max(1, int(round(8 * factor * (1.0 + 0.5 * abs(_noise(world, 2, c, k))))))
    body = " ".join(("lorem", "ipsum", "dolor", "sit", "amet")[(c + k + w) % 5] for w in range(words))
    return f"Answer {c}.{k}: {body}."


def context_text(world: World, c: int) -> str:
    return (
        "" if world.n_contexts == 1 and not world.generate else f"Context number {c}: summarise the matter."
    )


def human_score(world: World, c: int, k: int) -> float:
    """People's score: the quality read on a 1-5 scale (ties happen); or, in an objective world, 1 for the context's
    best candidate and 0 for the others."""
    if world.objective:
        return float(k == max(range(world.sizes[c]), key=lambda m: quality(world, c, m)))
    return float(np.clip(np.round(3 + quality(world, c, k) + 0.3 * _noise(world, 3, c, k)), 1, 5))


def category_of(world: World, c: int) -> str | None:
    """The category of context ``c`` in an objective world (two of them), else none."""
    return ("easy", "hard")[c % 2] if world.objective else None


# --- the input -------------------------------------------------------------------------------------------------


def _permutation(seed: int | None, n: int) -> list[int]:
    return list(range(n)) if seed is None else np.random.default_rng(seed).permutation(n).tolist()


def records(world: World, names: Names, order: Order) -> list[Record]:
    """The world as a data set's records (the documented JSONL layout), in the given order."""
    out = []
    for c in _permutation(order.records, world.n_contexts):
        candidates = []
        for k in _permutation(None if order.records is None else order.records + c + 1, world.sizes[c]):
            m = world.model_of(c, k)
            cand: dict[str, Any] = {"candidate_id": names.candidates[c][k], "text": text_of(world, c, k)}
            if m is not None:
                cand["system"] = names.models[m]
            if world.human:
                cand["scores"] = {ATTRIBUTE: human_score(world, c, k)}
            candidates.append(cand)
        data = {"context_id": names.contexts[c], "context": context_text(world, c), "candidates": candidates}
        if world.conversation:
            data["context"] = [
                {"role": "user", "content": context_text(world, c)},
                {"role": "assistant", "content": "Which part matters most?"},
                {"role": "user", "content": f"Part {c % 3}."},
            ]
            data["reference"] = f"The reference summary of matter {c}."
            data["checklist"] = [f"Does it name part {c % 3}?", "Is it brief?", f"Is it about matter {c}?"][
                : 1 + c % 3
            ]
        if category_of(world, c) is not None:
            data["category"] = category_of(world, c)
        out.append(Record(f"world:{c}", data))
    return out


VOTES = 3


def vote_of(world: World, c: int, v: int) -> float:
    """People's vote ``v`` on context ``c``'s pair: 1 for candidate 0, 0 for candidate 1, 0.5 for a tie."""
    diff = quality(world, c, 0) - quality(world, c, 1) + 0.8 * _noise(world, 6, c, v)
    return 0.5 if abs(diff) < 0.2 else float(diff > 0)


def vote_records(world: World, names: Names, order: Order) -> list[Record]:
    """The world's votes as a pairwise table (one row per vote, each listing the two sides in its own order, as a
    Chatbot Arena export does), read by the product's flat-table reader; the rows in the given order."""
    from pipeline.data.tables import read_records

    rows = []
    for c in range(world.n_contexts):
        for v in range(VOTES):
            turn = order.records is not None and (order.records + 7 * c + v) % 2 == 1
            a, b = (1, 0) if turn else (0, 1)
            won = vote_of(world, c, v)
            winner = "tie" if won == 0.5 else ("model_a" if (won == 1.0) != turn else "model_b")
            rows.append({"question_id": names.contexts[c], "prompt": context_text(world, c),
                         "model_a": names.models[a], "model_b": names.models[b], "response_a": text_of(world, c, a),
                         "response_b": text_of(world, c, b), "winner": winner})  # fmt: skip
    rows = [rows[k] for k in _permutation(order.records, len(rows))]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "votes.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return list(read_records(path, attributes=(ATTRIBUTE,)))


def generated(world: World, names: Names, order: Order) -> tuple[pa.Table, pa.Table, GenerateConfig]:
    """The world as a generate run's tasks and outputs (every context one output per model) and its config."""
    inputs = _permutation(order.records, world.n_contexts)
    tasks = pa.table(
        {
            "input_id": [names.contexts[c] for c in inputs],
            "task": [context_text(world, c) for c in inputs],
            "record": ["{}"] * world.n_contexts,
        },
        schema=TASKS,
    )
    rows: dict[str, list] = {f.name: [] for f in GENERATIONS}
    for c in inputs:
        for k in _permutation(None if order.records is None else order.records + c + 1, world.sizes[c]):
            rows["input_id"].append(names.contexts[c])
            rows["model"].append(names.models[world.model_of(c, k)])  # type: ignore[index]
            rows["output"].append(text_of(world, c, k))
            rows["finish_reason"].append("stop")
            rows["prompt_tokens"].append(10)
            rows["output_tokens"].append(10)
            rows["seconds"].append(0.0)
            rows["worker"].append("sim")
    models = [GeneratorConfig(name=names.models[m]) for m in _permutation(order.records, world.models)]
    return tasks, pa.table(rows, schema=GENERATIONS), GenerateConfig(models=models)


def input_tables(world: World, names: Names, order: Order) -> dict[str, pa.Table]:
    """CANDIDATES and HUMAN_SCORES as the product's input segment makes them (and a generate run's TASKS and
    GENERATIONS, the engine's part, as the world gives them)."""
    if world.generate:
        from pipeline.contracts.schemas import HUMAN_SCORES
        from pipeline.data.tasks import candidates_from_generations

        tasks, outputs, cfg = generated(world, names, order)
        candidates, _ = candidates_from_generations(outputs, tasks, cfg)
        return {
            "candidates": candidates,
            "human_scores": HUMAN_SCORES.empty_table(),
            "tasks": tasks,
            "generations": outputs,
        }
    rules = ValidationRules((ATTRIBUTE,), allow_empty_context=world.n_contexts == 1)
    checked = validate_records(
        vote_records(world, names, order) if world.votes else records(world, names, order), rules
    )
    return {"candidates": checked.candidates, "human_scores": checked.human_scores}


# --- the prompts and the simulated engine ----------------------------------------------------------------------


class WordTokenizer:
    """A tokenizer where every word the plan asks about is one token (the plan needs only that)."""

    chat_template = None

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [self.ids.setdefault(text, len(self.ids) + 1)]


def labels(world: World) -> Labels:
    words = (" A", " B", " C") if world.tie else (" A", " B")
    return Labels(words=words, token_ids=tuple(range(1, len(words) + 1)), n_a=1, n_tie=int(world.tie))


def prompt_plan(world: World, names: Names) -> PromptPlan:
    """The plan as ``plan_prompts`` and ``resolve_absolute`` settle it, with the world's templates and modes."""
    tokenizer = WordTokenizer()
    templates = [TemplateConfig(id=t) for t in names.templates]
    cfg = PromptConfig(templates=templates, chat_template=False)
    absolute = resolve_absolute(AbsoluteConfig(modes=list(world.absolute)), tokenizer, "sim")
    words = PromptWords("context", "answer", {ATTRIBUTE: "good"})
    return plan_prompts(cfg, [ATTRIBUTE], words, tokenizer, labels(world), "sim", absolute)


@dataclass
class Engine:
    """The simulated engine: PROMPTS in, RESPONSES out, every answer from the world's truth by content."""

    world: World
    names: Names
    plan: PromptPlan
    candidates: pa.Table
    judge: int = 0
    index: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    template: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a candidate is known by its text (what the engine reads), whatever the input called it
        where = {text_of(self.world, c, k): (c, k) for c, n in enumerate(self.world.sizes) for k in range(n)}
        for cid, cand, text in zip(
            *(self.candidates.column(x).to_pylist() for x in ("context_id", "candidate_id", "text")),
            strict=True,
        ):
            self.index[(cid, cand)] = where[text]
        self.template = {t: n for n, t in enumerate(self.names.templates)}

    def __call__(self, prompts: pa.Table) -> pa.Table:
        rows = prompts.to_pylist()
        answers = [self.answer(r) for r in rows]
        results = [
            Result(logprobs, texts, len(r["prompt"]) // 4, 0, 1, ["stop"])
            for r, (logprobs, texts) in zip(rows, answers, strict=True)
        ]
        seconds = [0.001 * (len(r["prompt"]) % 7) for r in rows]
        return responses(prompts, self.names.judges[self.judge], results, seconds, "sim")

    def answer(self, row: dict) -> tuple[list[float], list[str]]:
        c, a = self.index[(row["context_id"], row["cand_a"])]
        if row["mode"] == COMPARE:
            return self.compare(c, a, self.index[(row["context_id"], row["cand_b"])][1], row["template_id"])
        return self.rate(c, a, row["template_id"])

    def compare(self, c: int, a: int, b: int, template: str) -> tuple[list[float], list[str]]:
        w, j = self.world, self.world.judges[self.judge]
        la, lb = len(text_of(w, c, a)), len(text_of(w, c, b))
        t = self.template[template]
        logit = (
            j.scale * (quality(w, c, a) - quality(w, c, b))
            + j.bias
            + j.length * (la - lb) / (la + lb)
            + j.noise * _noise(w, 4, self.judge, t, c, a, b)
        )
        p_a = 1.0 / (1.0 + np.exp(-logit))
        if w.tie:
            tie = 0.1 + 0.2 / (1.0 + abs(logit))
            probs = [(1 - tie) * p_a, (1 - tie) * (1 - p_a), tie]
        else:
            probs = [p_a, 1 - p_a]
        mass = 0.9
        return [float(np.log(max(mass * q, 1e-300))) for q in probs], [" A" if p_a >= 0.5 else " B"]

    def rate(self, c: int, k: int, template_id: str) -> tuple[list[float], list[str]]:
        # a checklist item's prompt (<template>#<k>) reads as its template does, its noise its own
        template = next(t for t in self.plan.absolute if t.id == base_template(template_id))
        q = quality(self.world, c, k) + 0.3 * _noise(self.world, 5, stable_hash(template_id) % 97, c, k)
        if template.mode == AbsoluteMode.g_eval:
            centre = np.clip(
                template.low + (template.high - template.low) * (0.5 + q / 6), template.low, template.high
            )
            values = np.array(template.values)
            lp = -0.5 * (values - centre) ** 2
            return (lp - np.logaddexp.reduce(lp) + np.log(0.8)).tolist(), ["5"]
        if template.mode in (AbsoluteMode.implicit, AbsoluteMode.checklist):
            p_yes = 1.0 / (1.0 + np.exp(-q))
            lp = [np.log(0.8 * p_yes / template.n_yes)] * template.n_yes
            lp += [np.log(0.8 * (1 - p_yes) / (len(template.values) - template.n_yes))] * (
                len(template.values) - template.n_yes
            )
            return [float(x) for x in lp], [" Yes"]
        score = int(
            np.clip(
                np.round(template.low + (template.high - template.low) * (0.5 + q / 6)),
                template.low,
                template.high,
            )
        )
        return [], [str(score)]


def verdict_line(kind: str, p_a: float) -> dict[str, Any]:
    """A simulated judge's answer as a line of the verdict layout says it (``kind``: p_first, verdict, scores)."""
    if kind == "p_first":
        return {"p_first": p_a}
    if kind == "scores":  # a reward model: its scores' difference is the log-odds
        return {"scores": [float(np.log(p_a / (1 - p_a))) + 1.5, 1.5]}
    return {"verdict": "first" if p_a > 0.5 else "second" if p_a < 0.5 else "tie"}


def recorded_judge(
    world: World,
    names: Names,
    candidates: pa.Table,
    plan: PromptPlan,
    engine: Engine,
    order: Order,
    folder: Path,
) -> tuple[Callable[[pa.Table], pa.Table], pa.Table]:
    """The simulated judge's answers to every prompt of the run written to a file of verdicts (its lines in the
    order's permutation), then the product's recorded backend: its resolver, its check against the run (the product's
    stage), and the driver's answers from the file. (The answering function, the prompts the judge left out.)"""
    from pipeline.config.judging import JudgeConfig
    from pipeline.judge.recorded import resolve
    from pipeline.judge.recorded.answers import RecordedAnswers
    from pipeline.methods.verdicts.win_probability import p_a_wins, side_logprobs, tie_logprob
    from pipeline.stages.answers import CheckAnswers, run_prompts

    assert world.recorded is not None
    prompts = run_prompts(candidates, PairsConfig(), plan, 3)
    answered = engine(prompts.append_column("prompt", pa.array([""] * prompts.num_rows)))
    lp = np.array(answered.column("token_logprobs").to_pylist(), dtype=np.float64)
    lp_a, lp_b = side_logprobs(lp, plan.labels.n_a, plan.labels.n_tie)
    p = p_a_wins(lp_a, lp_b, tie_logprob(lp, plan.labels.n_tie) if plan.labels.n_tie else None)
    # one line per ordering, per template where the world has several (a line without one answers every template)
    lines = [
        {
            "context_id": r["context_id"],
            "first": r["cand_a"],
            "second": r["cand_b"],
            **({"template": r["template_id"]} if world.templates > 1 else {}),
            **verdict_line(world.recorded, q),
        }
        for r, q in zip(prompts.to_pylist(), p, strict=True)
    ]
    path = folder / "verdicts.jsonl"
    shuffled = _permutation(order.judgments, len(lines))
    path.write_text("".join(json.dumps(lines[k]) + "\n" for k in shuffled))
    name = names.judges[engine.judge]
    spec = resolve(JudgeConfig(backend="recorded", model=str(path), name=name), folder)
    left = CheckAnswers(PairsConfig(), 3).run(
        Context(folder), candidates=candidates, prompt_plan=plan, judge=spec
    )
    front = RecordedAnswers(spec, plan.labels)
    return (lambda chunk: front.answer(chunk)[0]), left["left_out"]


def judgments_and_ratings(
    world: World, names: Names, candidates: pa.Table, plan: PromptPlan, order: Order
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """Every prompt of the product's prompt stage (its shards, its pairs, both orderings, the absolute prompts of
    the first judge) answered by the simulated engine (or by the product's recorded backend from a file of the
    engine's answers), turned into JUDGMENTS and RATINGS by the product; and the prompts the judges left out."""
    pairs = PairsConfig()
    contexts = ShardContexts(pairs, max_shards=3).run(
        Context(Path(".")),
        candidates=candidates,
        prompt_plan=plan,
        judged=JUDGED_KEYS.empty_table(),
        left_out=LEFT_OUT.empty_table(),
    )["contexts"]
    judgments, ratings, left_out = [], [], []
    for g in range(len(world.judges)):
        judge_plan = plan if g == 0 else dataclasses.replace(plan, absolute=())
        engine = Engine(world, names, judge_plan, candidates, judge=g)
        answer: Callable[[pa.Table], pa.Table] = engine
        with tempfile.TemporaryDirectory() as folder:
            if world.recorded is not None:
                answer, left = recorded_judge(
                    world, names, candidates, judge_plan, engine, order, Path(folder)
                )
                left_out.append(left)
            for shard in split_shards(contexts):
                for chunk in generate_prompts(shard, pairs, judge_plan, chunk_rows=97):
                    got_j, got_r = split_responses(answer(chunk), judge_plan)
                    judgments.append(got_j)
                    ratings.append(got_r)
    out_j, out_r = pa.concat_tables(judgments), pa.concat_tables(ratings)
    left = pa.concat_tables(left_out) if left_out else LEFT_OUT.empty_table()
    if order.judgments is not None:
        out_j = out_j.take(np.array(_permutation(order.judgments, out_j.num_rows), dtype=np.int64))
        out_r = out_r.take(np.array(_permutation(order.judgments + 1, out_r.num_rows), dtype=np.int64))
    return out_j, out_r, left


# --- the score segment -----------------------------------------------------------------------------------------


def score_stages(world: World, base: RunConfig, names: Names, methods: tuple[str, ...]) -> tuple[Stage, ...]:
    """The product's score segment for this world (``segments.scoring`` over the base config), its card told which
    models run on each judge's model (the first model on the first judge, where the world has models)."""
    from pipeline.stages.card import Card
    from pipeline.workflows import segments

    cfg = dataclasses.replace(
        base,
        prompt=dataclasses.replace(base.prompt, templates=[TemplateConfig(id=t) for t in names.templates]),
        scoring=dataclasses.replace(
            base.scoring,
            methods=list(methods),
            debias=world.debias,
            jury=len(world.judges) * world.templates > 1,
            calibrate=Calibrate.temperature if world.calibrate else Calibrate.none,
        ),
        absolute=dataclasses.replace(base.absolute, modes=list(world.absolute)),
        trust=dataclasses.replace(
            base.trust,
            enabled=world.trust is not None,
            sample=LabelSample(world.trust or "random"),
            n=max(4, sum(n * (n - 1) // 2 for n in world.sizes) // 2),
            alpha=0.3,
            delta=0.2,
        ),
        leaderboard=dataclasses.replace(
            base.leaderboard,
            rounds=world.rounds,
            games=world.games,
            baseline=names.models[0] if world.models else None,
        ),
    )
    own = {names.judges[0]: (names.models[0],)} if world.models else {}
    stages = segments.scoring(cfg, derive(cfg, Path("."))).stages + plugin_stages(cfg)
    return tuple(Card(own) if stage.name == "card" else stage for stage in stages)


def plugin_stages(cfg: RunConfig) -> tuple[Stage, ...]:
    """Every installed stage from outside that joins the score segment, added as the product adds them
    (``extra_stages``, :func:`pipeline.workflows.catalog.extra_stages`): the battery checks their tables too."""
    from pipeline.config.stage_plugins import stage_plugins
    from pipeline.workflows.catalog import extra_stages

    joining = [name for name, entry in stage_plugins().items() if entry.segment == "score"]
    return extra_stages(dataclasses.replace(cfg, extra_stages=joining), Path(".")).get("score", ())


# Every table port (a schema and a file): what the battery can check, the installed stages' from outside included.
TABLE_PORTS = tuple(
    p for p in vars(ports).values() if isinstance(p, ports.Port) and p.schema is not None
) + tuple(p for stage in plugin_stages(RunConfig()) for p in stage.writes if p.schema is not None)

# What runs between the reduce and the stages after it (the sides check turns some comparisons round there).
Between = Callable[[pa.Table], pa.Table]


@dataclass(frozen=True)
class Outputs:
    tables: Mapping[str, pl.DataFrame]
    metrics: Mapping[str, float]


def run_world(
    world: World,
    base: RunConfig,
    methods: tuple[str, ...],
    names: Names | None = None,
    order: Order = Order(),
    between: Between | None = None,
    human: Callable[[pa.Table], pa.Table] | None = None,
) -> Outputs:
    """Every table with a file of the world's run (module docstring), under ``names`` and ``order``. ``between``:
    applied to the comparisons after the reduce; ``human``: applied to people's scores after the input."""
    names = names or Names.plain(world)
    inputs = input_tables(world, names, order)
    candidates = inputs["candidates"]
    if human is not None:
        inputs["human_scores"] = human(inputs["human_scores"])
    plan = prompt_plan(world, names)
    judgments, ratings, left_out = judgments_and_ratings(world, names, candidates, plan, order)
    values: dict[str, Any] = {
        **inputs,
        "judgments": judgments,
        "ratings": ratings,
        "left_out": left_out,
        "prompt_plan": plan,
        "judge": JudgeSpec("vllm", "sim", "", names.judges[0], 512),  # type: ignore[arg-type]
        "judges": tuple(names.judges),
        # what the judge stage would say: the first judge's replies name the model that served them
        "judge_stats": JudgeStats(
            prompts=judgments.num_rows,
            judged_now=judgments.num_rows,
            seconds=0.0,
            rate=float("nan"),
            rate_with_startup=float("nan"),
            prompt_tokens=0,
            cached_tokens=0,
            served_models=((names.judges[0], "sim-snapshot", judgments.num_rows),),
        ),
    }
    ctx = Context(Path("."))
    stages = score_stages(world, base, names, methods)
    run_stages(stages[:1], ctx, values)
    if between is not None:
        values["comparisons"] = ports.COMPARISONS.check(between(values["comparisons"]), "between")
    run_stages(stages[1:], ctx, values)
    tables = {
        port.name: pl.from_arrow(values[port.name])
        for port in TABLE_PORTS
        if port.name in values and port.file is not None
    }
    return Outputs(tables, dict(ctx.metrics))


# --- adaptive rounds -------------------------------------------------------------------------------------------


class EngineWorker:
    """The judge worker's place in the judge stage's stream: PROMPTS in, the simulated engine's RESPONSES out."""

    def __init__(self, engine: Engine, **_: object):
        self.engine = engine

    def __call__(self, batch: pa.Table, **_: object) -> pa.Table:
        return self.engine(batch)


def rounds_run(
    world: World,
    base: RunConfig,
    adaptive: Any,
    folder: Path,
    names: Names | None = None,
    order: Order = Order(),
) -> Outputs:
    """The world ranked in adaptive rounds as ``workflow=adaptive`` does it: the product's rounds stage (its run
    folder, its judge stage streaming prompts in-process with the simulated engine where the engine's worker would
    be, its stores), then the product's score segment with the rounds' settings. Every table with a file."""
    from pipeline.config.assessment import PairsConfig
    from pipeline.methods.scorers import poe_logit
    from pipeline.runtime.local import LocalExecutor
    from pipeline.stages.judging import Judge as JudgeStage
    from pipeline.stages.rounds import Rounds
    from pipeline.storage.parts import JudgmentParts, RatingParts
    from pipeline.workflows import segments

    names = names or Names.plain(world)
    inputs = input_tables(world, names, order)
    plan = prompt_plan(world, names)
    engine = Engine(world, names, plan, inputs["candidates"])

    class Executor(LocalExecutor):
        def stream(self, blocks, steps):
            swapped = [
                dataclasses.replace(step, fn=EngineWorker, kwargs={"engine": engine})
                if step.name == "judge"
                else step
                for step in steps
            ]
            yield from super().stream(blocks, swapped)

    ctx = Context(folder)
    ctx.executor = Executor()
    spec = JudgeSpec("vllm", "sim", "", names.judges[0], 512, placement=Placement(batch_size=16))  # type: ignore[arg-type]
    identity = {"battery": "rounds"}
    values: dict[str, Any] = {
        **inputs,
        "prompt_plan": plan,
        "judge": spec,
        "judges": (spec.name,),
        "parts": JudgmentParts(folder / "judgments", identity, plan.labels.words),
        "rating_parts": RatingParts(folder / "ratings", identity),
    }
    judge_stage = JudgeStage(PairsConfig(), 4096, 0, None)
    cfg = dataclasses.replace(base, adaptive=adaptive)
    a = adaptive
    logit = poe_logit.Settings(a.logit_clip, a.robust, a.censor, a.ridge, a.drop_contradicted)
    stages = (Rounds(adaptive, judge_stage), *segments.scoring(cfg, derive(cfg, Path(".")), logit).stages)
    run_stages(stages, ctx, values)
    ctx.executor.close()
    tables = {
        p.name: pl.from_arrow(values[p.name]) for p in TABLE_PORTS if p.name in values and p.file is not None
    }
    return Outputs(tables, dict(ctx.metrics))
