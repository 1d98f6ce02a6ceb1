"""The examples run as shipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("script", ["run_evaluation.py", "launch.py", "async_launch.py"])
def test_example_script_runs(script: str, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run([sys.executable, str(REPO / "examples" / script)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    assert "completed" in res.stdout


def test_example_spec_launches(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run([sys.executable, "-m", "agentcompass.cli", "launch", str(REPO / "examples" / "spec.yaml"),
                          "--progress", "none"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    assert "launch completed" in res.stdout
