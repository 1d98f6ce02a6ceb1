"""The package stays ruff-clean and mypy-clean (CI runs these with the tests)."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing() -> None:
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "agentcompass", "tests", "benchmarks_perf",
                          "examples"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.slow
def test_mypy_finds_nothing_in_the_package() -> None:
    res = subprocess.run([sys.executable, "-m", "mypy", "agentcompass"], cwd=REPO, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr


def test_import_is_cheap() -> None:
    # Heavy modules (httpx, rich, aiodocker, the engine) load lazily.
    code = "import sys, agentcompass; print(sorted(m for m in ('httpx','rich','aiodocker','agentcompass.engine') " \
           "if m in sys.modules))"
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.stdout.strip() == "[]", res.stdout + res.stderr


# ----------------------------------------------------------------------------- declared dependencies


#: scripts that run in an interpreter of their own (with their own packages), never imported by the package.
OWN_INTERPRETER = {"agentcompass/harnesses/openhands/bridge.py"}  # the openhands harness's Python>=3.12 venv


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    """(base distributions, {extra: distributions}) of pyproject.toml, names normalised; the test extras left out."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    extras = {extra: {canonicalize_name(Requirement(r).name) for r in reqs}
              for extra, reqs in project.get("optional-dependencies", {}).items() if not extra.startswith("test")}
    return base, extras


def _third_party_imports() -> dict[str, dict[str, bool]]:
    """{top-level module: {file: imported at module level}} of every absolute import in agentcompass/ that is
    neither the standard library nor the package itself (imports inside functions count as guarded)."""
    import ast

    found: dict[str, dict[str, bool]] = {}

    def visit(node: ast.AST, file: str, guarded: bool) -> None:
        for child in ast.iter_child_nodes(node):
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "agentcompass":
                    at_top = found.setdefault(top, {})
                    at_top[file] = at_top.get(file, False) or not guarded
            inner = guarded or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.If | ast.Try)
            visit(child, file, inner)

    for path in sorted((REPO / "agentcompass").rglob("*.py")):
        if str(path.relative_to(REPO)) in OWN_INTERPRETER:
            continue
        visit(ast.parse(path.read_text()), str(path.relative_to(REPO)), False)
    return found


@functools.cache
def _packages_distributions() -> dict[str, list[str]]:
    """{top-level module: distributions}: one walk of every installed distribution's files (seconds each)."""
    from importlib.metadata import packages_distributions

    return packages_distributions()


def _distributions_of(module: str) -> set[str]:
    from packaging.utils import canonicalize_name

    return {canonicalize_name(d) for d in _packages_distributions().get(module, [])}


def test_every_third_party_import_is_a_declared_dependency() -> None:
    base, extras = _declared()
    in_extras = set().union(*extras.values())
    imports = _third_party_imports()
    assert "msgspec" in imports and "aiodocker" in imports  # the walk sees the package's imports
    problems = []
    for module, files in sorted(imports.items()):
        dists = _distributions_of(module)
        assert dists, f"{module} (imported by {sorted(files)}) is not installed: cannot tell its distribution"
        unguarded = sorted(f for f, at_top in files.items() if at_top)
        if dists & base:
            continue
        if unguarded:
            problems.append(f"{module}: imported at module level by {unguarded} but not a base dependency "
                            f"(distribution {sorted(dists)})")
        elif not dists & in_extras:
            problems.append(f"{module}: imported by {sorted(files)} but declared neither in the base dependencies "
                            f"nor in an extra (distribution {sorted(dists)})")
    assert not problems, "\n".join(problems)


def test_every_base_dependency_is_imported_somewhere() -> None:
    base, _ = _declared()
    imported = set().union(*(_distributions_of(m) for m in _third_party_imports()))
    assert not base - imported, f"declared but never imported by agentcompass/: {sorted(base - imported)}"
