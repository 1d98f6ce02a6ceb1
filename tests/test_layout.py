"""The package shows its architecture: one folder per family, and the old module paths users imported still work
or are named in docs/changelog.md."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "agentcompass"

#: family -> at most this many modules directly in it (base, registry glue and the small ones)
FLAT_CAPS = {"benchmarks": 6, "environments": 10, "harnesses": 10, "models": 10}


@pytest.mark.parametrize("family", sorted(FLAT_CAPS))
def test_each_family_keeps_few_modules_at_its_top(family: str) -> None:
    flat = sorted(p.name for p in (PKG / family).glob("*.py"))
    assert len(flat) <= FLAT_CAPS[family], flat


def changelog_rows() -> list[tuple[str, str, bool]]:
    text = (REPO / "docs" / "changelog.md").read_text(encoding="utf-8")
    return [(m[1], m[2], m[3].strip() == "kept")
            for m in re.finditer(r"^\| `([\w.]+)` \| `([\w.]+)` \|([^|]*)\|$", text, flags=re.M)]


def test_the_changelog_names_every_moved_module_and_each_new_path_imports() -> None:
    rows = changelog_rows()
    assert len(rows) > 90
    for old, new, _ in rows:
        importlib.import_module(new)
        if old != new and not any(o == old for o, _, kept in rows if kept):
            with pytest.raises(ModuleNotFoundError):
                importlib.import_module(old)


@pytest.mark.parametrize("old,name", [
    ("agentcompass.benchmarks.swebench", "SWEBenchVerified"), ("agentcompass.benchmarks.shell_tasks", "ShellTasks"),
    ("agentcompass.benchmarks.humaneval", "HumanEval"), ("agentcompass.benchmarks.task_dir", "TaskDir"),
    ("agentcompass.benchmarks.bfcl", "BFCL"), ("agentcompass.benchmarks.tau2", "Tau2"),
    ("agentcompass.benchmarks.agentdojo", "AgentDojo"), ("agentcompass.environments.docker", "DockerProvider"),
    ("agentcompass.environments.local", "LocalProvider"), ("agentcompass.harnesses.terminus", "Terminus"),
    ("agentcompass.harnesses.mini_swe_agent", "MiniSweAgent"), ("agentcompass.harnesses.openhands", "OpenHands"),
    ("agentcompass.models.scripted", "ScriptedClient"), ("agentcompass.models.gateway", "canonical_path"),
])
def test_a_family_main_module_path_still_answers_its_names(old: str, name: str) -> None:
    module = importlib.import_module(old)
    assert getattr(module, name).__module__.startswith(old + ".")
    with pytest.raises(AttributeError):
        module.__getattr__("no_such_name")  # type: ignore[operator]


def test_every_ray_group_prefix_still_names_tests() -> None:
    """The xdist group that keeps Ray clusters one at a time is chosen by node id prefix: a file moved without
    its prefix silently runs its clusters alongside others (it did after the family move)."""
    from tests.conftest import RAY_GROUP

    files = [p for p in REPO.glob("tests/**/test_*.py") if p.is_file()]
    for prefix in RAY_GROUP:
        path, _, name = prefix.partition("::")
        matches = [p for p in files if p.relative_to(REPO).as_posix().startswith(path)]
        assert matches, f"RAY_GROUP prefix {prefix!r} names no test file"
        if name:
            assert any(f"def {name}" in m.read_text() for m in matches), f"{prefix!r} names no test"


def test_an_xdist_group_keeps_its_tests_on_one_worker() -> None:
    """``--dist loadgroup`` runs a group's tests on one worker: with pytest 9.2 and xdist 3.8 it silently did not
    (pytest-dev/pytest-xdist#1386; tests/conftest.py's GroupSuffix), and the Ray group's clusters ran at once."""
    res = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p",
                          "no:cacheprovider", "tests/environments/ray/test_ray_placement.py"],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    ran = re.findall(r"^\[(gw\d+)\] .*PASSED (\S+)", res.stdout, re.M)
    assert res.returncode == 0 and len(ran) >= 3, res.stdout[-3000:]
    assert len({worker for worker, _ in ran}) == 1 and all(nodeid.endswith("@ray") for _, nodeid in ran), ran
