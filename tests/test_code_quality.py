"""The package stays ruff-clean and mypy-clean (CI runs these with the tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing() -> None:
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "agentcompass", "tests", "benchmarks_perf",
                          "examples"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr


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
