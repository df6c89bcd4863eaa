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
COMMAND = re.compile(r'make (?:run|check|stages) ARGS="((?:[^"\\]|\\.)*)"')
PRESET = re.compile(r"```yaml\n((?:#[^\n]*\n){0,2}?# @package _global_\n.*?)```", re.S)


def commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for match in COMMAND.finditer(page.read_text()):
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
