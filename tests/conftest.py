"""Shared fixtures and builders: the project root, the shared data sets, the real judge model, a composed config,
a local Ray for the end-to-end tests, and small tables in the stages' schemas."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shutil
import sys
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

ROOT = Path(__file__).resolve().parent.parent
DATASETS = Path(os.environ.get("CA_DATASETS", ROOT.parent / "shared" / "datasets"))


def pytest_configure(config) -> None:
    """With the tests spread over workers (pytest-xdist), each worker's engines compute on cores of their own
    (``VLLM_CPU_OMP_THREADS_BIND``, which conf/judge/smollm2_cpu.yaml takes from the environment): two engines each
    binding every core would spin their OpenMP threads against each other's. A user's own setting is kept."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    cores = sorted(os.sched_getaffinity(0))
    if (
        worker.startswith("gw")
        and 1 < workers <= len(cores)
        and "VLLM_CPU_OMP_THREADS_BIND" not in os.environ
    ):
        k, share = int(worker[2:]) % workers, len(cores) // workers
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in cores[k * share : (k + 1) * share])


def pytest_collection_modifyitems(config, items: list) -> None:
    """The files with the most tests on a real engine or Ray first, each file's tests in their order: with the tests
    spread over workers a file at a time (``make test``: pytest-xdist, ``--dist loadfile``), the long files start
    at once and the short ones fill in around them, instead of one long file starting last."""
    weight: dict[str, int] = {}
    for item in items:
        # a test on a cluster of its own (nodes, a job server) takes minutes; an end-to-end run one or two; a test
        # with an engine or a Ray tens of seconds
        heavy = max(
            [
                w
                for marker, w in (("cluster", 10), ("slow", 2), ("engine", 1), ("ray", 1))
                if item.get_closest_marker(marker)
            ]
            or [0]
        )
        weight[item.nodeid.split("::")[0]] = weight.get(item.nodeid.split("::")[0], 0) + heavy
    order = {item.nodeid: k for k, item in enumerate(items)}
    items.sort(key=lambda item: (-weight[item.nodeid.split("::")[0]], order[item.nodeid]))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def datasets() -> Path:
    if not (DATASETS / "summeval" / "summeval.jsonl").exists():
        pytest.skip(f"the shared data sets are not at {DATASETS} (set CA_DATASETS)")
    return DATASETS


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    return Path(os.environ.get("CA_CACHE_DIR", ROOT / ".cache"))


@pytest.fixture(scope="session")
def judge_model(cache_dir: Path) -> str:
    """The real default judge (SmolLM2-135M-Instruct), converted into the cache once."""
    from pipeline.judge.models import resolve_model

    return resolve_model("smollm2-135m-instruct", cache_dir).path


@pytest.fixture(scope="session")
def tokenizer(judge_model: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(judge_model)


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray (2 CPUs) shared by every end-to-end test of the session: started once, stopped at the end."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module", autouse=True)
def an_engine_inside_stays_with_its_file():
    """What a vLLM engine inside the test process (``compose``) changes in that process is set back once the file's
    tests are done, so that it does not reach the servers, runs and engines of a later file:

    - the ``VLLM_*`` and ``OMP_*`` variables, as they were when the file started (pipeline.judge.vllm.engine puts an
      engine's settings in its process's environment, where vLLM reads them: ``VLLM_ENABLE_V1_MULTIPROCESSING=0``
      and its OpenMP threads would pass to every process started after);
    - ``torch.set_num_threads``, which vLLM's CPU worker replaces in its engine's process by one that does nothing
      (a later hf engine could not set its threads)."""
    prefixes = ("VLLM_", "OMP_")
    kept = {k: v for k, v in os.environ.items() if k.startswith(prefixes)}
    yield
    for key in [k for k in os.environ if k.startswith(prefixes) and k not in kept]:
        del os.environ[key]
    os.environ.update(kept)
    torch = sys.modules.get("torch")
    if torch is not None and torch.set_num_threads is not torch._C.set_num_threads:
        torch.set_num_threads = torch._C.set_num_threads


@pytest.fixture(scope="session", autouse=True)
def tracking_stores_start_as_copies(tmp_path_factory):
    """A local MLflow store a run of this process makes (pipeline.run.tracking.local_store) starts as a copy of an
    empty one, made once per test process by MLflow itself: MLflow builds a new store's schema (its migrations) in
    one to three seconds, and the suite makes about 60. The run then opens and writes the real store as a user's run
    does, when and where it would make it; the runs the tests start as a process (tests/run/test_cli.py and others)
    still make theirs from nothing."""
    from pipeline.run import tracking

    make = tracking.local_store

    @functools.cache
    def empty() -> Path:
        root = tmp_path_factory.mktemp("empty-mlflow")
        from mlflow import MlflowClient

        uri = make(root)[0]
        MlflowClient(tracking_uri=uri).search_experiments()
        return Path(uri.removeprefix("sqlite:///"))

    def local_store(output_root: Path) -> tuple[str, str]:
        made = make(output_root)
        db = Path(made[0].removeprefix("sqlite:///"))  # where the run's store is, as the product says
        if not db.exists():
            seed = db.with_name(f".{db.name}.{os.getpid()}.{threading.get_ident()}")
            shutil.copyfile(empty(), seed)
            with contextlib.suppress(FileExistsError):  # another run of the same folder was first
                os.link(seed, db)
            seed.unlink()
        return made

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tracking, "local_store", local_store)
        yield


def stored_replies(store: Path) -> int:
    """Answers in a judgement store (pipeline.storage.judgements), read while a run may be writing it; 0 before it exists."""
    import sqlite3

    if not store.exists():
        return 0
    try:
        with sqlite3.connect(store, timeout=5) as db:
            return db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]
    except sqlite3.Error:
        return 0


# Under pytest-xdist (``make test``) the workers share the machine: a test that looks for processes (a run's
# engines) looks among its own worker's, which carry the worker's name in their environment as every process a
# test starts (its local Ray, Ray's workers, their engines, a run in a subprocess) inherits it.
XDIST_MARKS = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_TESTRUNUID")


def ours(p) -> bool:
    """Whether process ``p`` was started by this test process (by its environment's xdist marks; every process
    is, outside xdist)."""
    import psutil

    mine = {key: os.environ.get(key) for key in XDIST_MARKS}
    if mine[XDIST_MARKS[0]] is None:
        return True
    try:
        env = p.environ()
    except psutil.Error:
        return False
    return all(env.get(key) == value for key, value in mine.items())


def ray_worker(p) -> bool:
    """Whether a process is a Ray worker: by its title (``ray::...``) or, where the title did not take, its command
    line (Ray's ``default_worker.py``)."""
    from pipeline.judge.hosting.watchdog import process_text

    text = process_text(p)
    return "ray::" in text or "default_worker.py" in text


def judge_engines(under: int | None = None) -> list:
    """vLLM engine-core processes of this test process's runs (:func:`ours`) whose parent is a Ray worker (a judge
    actor's engine); with ``under``, only the
    descendants of that process (a run started as a subprocess: its own local Ray is below it). An engine is told
    as the watchdog tells it (``engine_like``: vLLM's title, or multiprocessing's spawn where the title did not
    take), a Ray worker by its title or its command line (``default_worker.py``).

    Fresh ``psutil.Process`` objects on every call, never ``psutil.process_iter``: that keeps the objects it made
    between calls, with the start time of the first process it saw under a pid, so after a pid is given again (pids
    wrap at 32768 in a long session) ``identity`` of the new engine reads as the old one's."""
    import psutil

    from pipeline.judge.hosting.watchdog import descendants, engine_like, process_text

    candidates = psutil.pids() if under is None else [pid for pid, _ in descendants(under)]
    found = []
    for pid in candidates:
        try:
            p = psutil.Process(pid)
            if p.status() == psutil.STATUS_ZOMBIE or not engine_like(process_text(p)) or not ours(p):
                continue
            # the parent by its pid (psutil's ``parent()`` also compares start times, see ``descendants``)
            if ray_worker(psutil.Process(p.ppid())):
                found.append(p)
        except psutil.Error:
            continue
    return found


def vllm_processes() -> str:
    """Every process of this test process's runs (:func:`ours`) that looks like a vLLM engine's, with its parent,
    for a test's message when it finds no engine."""
    import psutil

    from pipeline.judge.hosting.watchdog import engine_like, process_text

    lines = []
    for pid in psutil.pids():
        try:
            p = psutil.Process(pid)
            if engine_like(process_text(p)) and ours(p):
                parent = psutil.Process(p.ppid())
                lines.append(
                    f"{pid} {process_text(p)[:60]} {p.status()} under {parent.pid} {process_text(parent)[:60]}"
                )
        except psutil.Error:
            continue
    return "; ".join(lines) or "none"


def started_engines(events: Path) -> list[dict]:
    """The ``engine_started`` records of a run's ``logs/engine_events.jsonl`` (one per judge worker that started
    its engine): ``worker`` (host:pid of the worker's process), ``inside`` (the engine in that process) and
    ``pids`` (the engine's own processes otherwise)."""
    from pipeline.storage.events import read_events

    return [e for e in read_events(events) if e.get("event") == "engine_started"]


def worker_pid(event: dict) -> int:
    """The process id of the worker an engine event names (``host:pid``)."""
    return int(event["worker"].rsplit(":", 1)[1])


def open_batches(events: Path) -> list[dict]:
    """The ``batch_started`` records of a run's events with no ``batch_done`` of the same worker and batch yet
    (pipeline.judge.hosting.worker): the batches inside the workers now."""
    from pipeline.storage.events import read_events

    marks = read_events(events)
    done = {(e["worker"], e["batch"]) for e in marks if e.get("event") == "batch_done"}
    return [e for e in marks if e.get("event") == "batch_started" and (e["worker"], e["batch"]) not in done]


def in_a_batch(events: Path, worker: str) -> bool:
    """Whether ``worker`` (``host:pid``) has started a batch it has not finished (:func:`open_batches`). A worker is
    between batches for a moment after each one; a kill there loses no batch, so a test that kills a worker to see a
    batch judged again waits for this."""
    return any(e["worker"] == worker for e in open_batches(events))


def kill_in_a_batch(events: Path, worker: str, pid: int, seconds: float = 300.0) -> None:
    """SIGKILL ``pid`` (the worker's process, or its engine's) while ``worker`` is inside a batch: polled every 10 ms,
    so the kill lands within a batch that takes far longer (a batch of the small judge takes a second or so)."""
    import os
    import signal
    import time

    deadline = time.monotonic() + seconds
    while not in_a_batch(events, worker):
        assert time.monotonic() < deadline, f"{worker} started no batch in {seconds:.0f} s"
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)


def identity(p) -> tuple[int, float]:
    """A process told from a later one with the same pid: (pid, start time)."""
    import psutil

    try:
        return p.pid, p.create_time()
    except psutil.Error:
        return p.pid, 0.0


#: What :func:`compose` sets unless a test sets the key itself.
COMPOSE_DEFAULTS = {
    "judge.store": "judge.store=false",
    "tracking.plots": "tracking.plots=false",
    "judge.engine_process": "judge.engine_process=worker",
}


def compose(overrides: list[str] | None = None):
    """The real Hydra config (conf/), composed as the CLI does, converted to a RunConfig, with three defaults of its
    own (``COMPOSE_DEFAULTS``):

    - the judgement store (pipeline.storage.judgements) is off unless a test sets ``judge.store`` or
      ``judge.store_path``: a test of the engine or of resuming must see the engine judge, not answers an earlier
      test left in the project's cache;
    - the figures are off unless a test sets ``tracking.plots``: a run draws them in about a second and a figure
      that cannot be drawn never fails a run (pipeline.reporting.plots.draw), so only the tests that look at them
      draw them (``tracking.plots=true``);
    - a vLLM engine runs inside the process that makes it (``judge.engine_process=worker``) unless a test sets
      ``judge.engine_process``: on a judge's Ray actor that is what ``auto`` chooses on the CPU; in a test's own
      process (an in-process run, an engine made by the test) it starts in 3-9 s against 20-35 s in vLLM's own
      processes (two more processes that each import torch and vLLM), the same answers within 3e-5 nats. The
      default of an in-process run, vLLM's own processes watched by the worker, is tested where it matters:
      tests/run/test_faults.py (its engine killed), tests/run/test_folder.py, the reference engine
      (tests/run/test_reference.py), and the runs the tests start as a process (the CLI), which keep every default."""
    from pipeline.config.hydra import compose as compose_config

    overrides = list(overrides or [])
    for key, default in COMPOSE_DEFAULTS.items():
        if not any(o.startswith((key, f"+{key}")) for o in overrides):
            overrides.append(default)
    return compose_config(overrides)


def run_fresh(tmp_path_factory, overrides: list[str]):
    """The config of ``overrides`` (:func:`compose`) run with its outputs in a new folder: (config, result)."""
    from pipeline.run.context import run

    cfg = compose([*overrides, f"paths.output_root={tmp_path_factory.mktemp('outputs')}"])
    return cfg, run(cfg)


def run_table(result, name: str):
    """The table ``name`` a run wrote (``tables/<name>.parquet`` in its folder), as a Polars frame."""
    import polars as pl

    return pl.read_parquet(result.run_dir / "tables" / f"{name}.parquet")


# --- builders of tables in the stages' schemas ----------------------------------------------------------------


def candidates_table(sizes: dict[str, int], ids: str = "{context}:{k}") -> pa.Table:
    """CANDIDATES: contexts named by ``sizes`` with that many candidates each (ids ``ids`` filled with the context
    and the candidate's index)."""
    from pipeline.contracts.schemas import CANDIDATES

    rows: dict[str, list] = {name: [] for name in CANDIDATES.names}
    for cid, n in sizes.items():
        for k in range(n):
            rows["context_id"].append(cid)
            rows["context"].append(f"context {cid}")
            rows["candidate_id"].append(ids.format(context=cid, k=k))
            rows["candidate_index"].append(k)
            rows["system"].append(None)
            rows["text"].append(f"text {cid} {k}")
            rows["category"].append(None)
            rows["checklist"].append(None)
    return pa.table(rows, schema=CANDIDATES)


def judgment_rows(
    n: int = 5,
    bias: float = 1.0,
    seed: int = 0,
    orderings: str = "both",
    context: str = "c",
    candidate: str = "k{}",
) -> tuple[list[dict], np.ndarray]:
    """JUDGMENTS rows from a known judge, logit p(A wins) = s_a - s_b + bias, with its true scores ``s``.

    Two label words per side and some probability mass outside the labels, as a real judge has.
    """
    from pipeline.methods.verdicts.win_probability import label_mass, p_a_wins, side_logprobs

    rng = np.random.default_rng(seed)
    s = rng.normal(size=n)
    pairs = (
        itertools.permutations(range(n), 2) if orderings == "both" else itertools.combinations(range(n), 2)
    )
    rows = []
    for a, b in pairs:
        logit = s[a] - s[b] + bias
        la, lb = -np.log1p(np.exp(-logit)) - 0.2, -np.log1p(np.exp(logit)) - 0.2
        labels = [la, la - 5, lb, lb - 5]
        lp_a, lp_b = side_logprobs(np.array([labels]), 2)
        rows.append(
            {
                "context_id": context,
                "attribute": "coherence",
                "template_id": "c1",
                "cand_a": candidate.format(a),
                "cand_b": candidate.format(b),
                "judge": "j",
                "label_logprobs": labels,
                "logprob_a": float(lp_a[0]),
                "logprob_b": float(lp_b[0]),
                "p_a": float(p_a_wins(lp_a, lp_b)[0]),
                "p_tie": 0.0,
                "label_mass": float(label_mass(lp_a, lp_b)[0]),
                "top_token": " A",
                "prompt_tokens": 100,
                "cached_tokens": 60,
                "seconds": 0.01,
                "worker": "host:1",
            }
        )
    return rows, s


def judgments_table(**kwargs) -> pa.Table:
    """JUDGMENTS (Arrow) from :func:`judgment_rows`."""
    from pipeline.contracts.schemas import JUDGMENTS

    rows, _ = judgment_rows(**kwargs)
    return pa.Table.from_pylist(rows, schema=JUDGMENTS)


def run_notebook(run_dir: Path, monkeypatch) -> dict:
    """Execute notebooks/explore_run.ipynb's code cells on ``run_dir``; return its namespace."""
    import json

    notebook = json.loads((ROOT / "notebooks" / "explore_run.ipynb").read_text())
    monkeypatch.setenv("CA_RUN_DIR", str(run_dir))
    namespace: dict = {}
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), "explore_run.ipynb", "exec"), namespace)
    return namespace
