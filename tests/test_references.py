"""Docstrings, comments and docs name only what exists: every ``pipeline.x.y`` (or ``benchmarks.x``) dotted name, every Sphinx role
(``:mod:``, ``:func:``, ``:class:``, ``:meth:``, ``:data:``, ``:attr:``; relative ones from the module they stand in)
and every ``pipeline/...`` (or ``benchmarks/...``) path resolves to a module, a file or a name defined there (read from the source, nothing
imported)."""

from __future__ import annotations

import ast
import builtins
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pipeline"
DOTTED = re.compile(r"(?<![\w/.-])(?:pipeline|benchmarks)(?:\.\w+)+")
ROLE = re.compile(r":(?:mod|func|class|meth|data|attr|exc):`~?([\w.]+)`")
PATH = re.compile(r"(?<![\w/.-])(?:pipeline|benchmarks)/(?:\w+/)*\w+\.py|(?<![\w/.-])pipeline/(?:\w+/)+")


def module_file(dotted: str) -> Path | None:
    base = ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


ANY = frozenset({"*"})  # an imported name: its members are not read here


@functools.cache
def defined(path: Path) -> dict[str, frozenset[str] | set[str]]:
    """A module's names (defined, assigned or imported), each with the names its class defines (:data:`ANY` for an
    imported one)."""
    tree = ast.parse(path.read_text())
    names: dict[str, frozenset[str] | set[str]] = {}

    def members(node: ast.ClassDef) -> set[str]:
        out: set[str] = set()
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(item.name)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                out.add(item.target.id)
            elif isinstance(item, ast.Assign):
                out |= {t.id for t in item.targets if isinstance(t, ast.Name)}
        return out

    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            names[node.name] = members(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.setdefault(node.name, set())
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Name):
                        names.setdefault(t.id, set())
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.setdefault(node.target.id, set())
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.setdefault((alias.asname or alias.name).split(".")[0], ANY)
    return names


def resolves(dotted: str) -> bool:
    """``dotted`` is a module, or a module's name, or a name of a class of a module."""
    parts = dotted.rstrip(".").split(".")
    for cut in range(len(parts), 0, -1):
        path = module_file(".".join(parts[:cut]))
        if path is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        names = defined(path)
        if rest[0] not in names:
            return False
        members = names[rest[0]]
        return len(rest) == 1 or members is ANY or rest[1] in members or len(rest) > 2
    return False


def relative(role: str, module: str) -> str:
    """A role's target as a dotted name: relative (``.x``) from the module's package, bare from the module itself."""
    if role.startswith(("pipeline", "benchmarks")):
        return role
    package = module if module.endswith("__init__") else module.rsplit(".", 1)[0]
    package = package.removesuffix(".__init__")
    if role.startswith("."):
        dots = len(role) - len(role.lstrip("."))
        base = package.rsplit(".", dots - 1)[0] if dots > 1 else package
        return f"{base}.{role.lstrip('.')}"
    return f"{module.removesuffix('.__init__')}.{role}"


def sources() -> list[Path]:
    docs = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [*sorted(PACKAGE.rglob("*.py")), *sorted((ROOT / "benchmarks").glob("*.py")), *docs]


def broken(path: Path) -> list[str]:
    text = path.read_text()
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts) if path.suffix == ".py" else None
    out = [name for name in DOTTED.findall(text) if not resolves(name)]
    if module is not None:
        members = {m for ms in defined(path).values() if ms is not ANY for m in ms}
        for role in ROLE.findall(text):
            if "." not in role and (role in members or hasattr(builtins, role)):
                continue  # a member of a class of the module (Sphinx reads it in its class), or a builtin
            name = relative(role, module)
            if name.startswith(("pipeline", "benchmarks")) and not resolves(name):
                out.append(f":{role}: ({name})")
    out += [p for p in PATH.findall(text) if not (ROOT / p).exists() and not (ROOT / f"{p}.py").exists()]
    return sorted(set(out))


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_function_and_path_named_exists(path):
    missing = broken(path)
    assert not missing, f"{path.relative_to(ROOT)} names what does not exist: {missing}"


def test_the_check_finds_what_is_not_there(tmp_path):
    assert resolves("pipeline.judge.vllm.mode.choose") and resolves("pipeline.stages.judging.Judge.mode")
    assert not resolves("pipeline.judge.prefill") and not resolves("pipeline.judge.vllm.mode.carry_over")
    assert not resolves("pipeline.stages.judging.Judge.nothing")
    assert relative(".engine", "pipeline.judge.vllm.__init__") == "pipeline.judge.vllm.engine"
    assert relative("choose", "pipeline.judge.vllm.mode") == "pipeline.judge.vllm.mode.choose"
