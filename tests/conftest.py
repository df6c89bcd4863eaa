"""Shared fixtures: the project root, the shared data sets, the real judge model and a composed config."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATASETS = Path(os.environ.get("CA_DATASETS", ROOT.parent / "shared" / "datasets"))


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
    from pipeline.models import resolve_model

    return resolve_model("smollm2-135m-instruct", cache_dir).path


@pytest.fixture(scope="session")
def tokenizer(judge_model: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(judge_model)


def compose(overrides: list[str] | None = None):
    """The real Hydra config (conf/), composed as the CLI does, converted to a RunConfig."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from pipeline.config import register_configs, to_run_config

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return to_run_config(hydra_compose("config", overrides=overrides or []))
