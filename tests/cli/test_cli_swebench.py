"""``agentcompass run swebench_* ...`` on a machine without the dataset or the images fails fast and says
what to provide; nothing is reported as a success."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLE = '{"sample_ids":["astropy__astropy-12907"]}'


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), HOME=str(home), HF_HOME=str(home / "hf"),
               XDG_CONFIG_HOME=str(home / ".config"))
    env.pop("AGENTCOMPASS_DATA_DIR", None)
    return subprocess.run([sys.executable, "-m", "agentcompass.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def _reported_success(results: Path) -> list[Path]:
    return [p for p in results.rglob("run_info.json") if json.loads(p.read_text()).get("status") == "completed"]


def test_missing_dataset_fails_fast_naming_the_file_to_provide(tmp_path: Path) -> None:
    results = tmp_path / "results"
    t0 = time.monotonic()
    res = _cli(tmp_path, "run", "swebench_verified", "mini_swe_agent", "M", "--env", "docker",
               "--benchmark-params", SAMPLE, "--results-dir", str(results), "--progress", "none")
    elapsed = time.monotonic() - t0
    assert res.returncode != 0
    expected = tmp_path / ".cache" / "agentcompass" / "data" / "swebench_verified.jsonl"
    # no Hub here: the download fails (the request's error, in the final table) naming the file to place
    output = res.stdout + res.stderr
    assert str(expected) in output, output
    assert "Hugging Face Hub" in output, output
    assert "Traceback" not in output
    assert _reported_success(results) == []
    assert elapsed < 60, f"took {elapsed:.0f}s to fail"


def test_dataset_without_its_image_fails_before_any_task_with_what_to_provide(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    row = {"instance_id": "astropy__astropy-12907", "repo": "astropy/astropy", "base_commit": "d16bfe05a7" * 4,
           "problem_statement": "separability_matrix is wrong for nested CompoundModels",
           "patch": "diff --git a/a.py b/a.py\n", "test_patch": "diff --git a/t.py b/t.py\n",
           "FAIL_TO_PASS": "[\"t.py::test_x\"]", "PASS_TO_PASS": "[]", "version": "4.3"}
    (data / "swebench_verified.jsonl").write_text(json.dumps(row) + "\n")
    results = tmp_path / "results"
    res = _cli(tmp_path, "run", "swebench_verified", "shell_agent", "scripted", "--env", "docker",
               "--data-dir", str(data), "--benchmark-params", SAMPLE, "--results-dir", str(results),
               "--progress", "none", "--environment-params", '{"pull_timeout": 20}')
    assert res.returncode != 0
    assert "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert _reported_success(results) == []
    assert not list(results.rglob("details/*.json")), "a task ran although the request could not"
