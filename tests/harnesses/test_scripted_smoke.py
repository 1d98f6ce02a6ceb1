"""The smoke test of each harness: the bundled scripts of the built-in ``scripted`` model solve some tasks of each
offline benchmark in each harness's own wire format (the tool-use ones in ``tool_agent``'s native tool calls) and
fail others for a visible reason (docs/harnesses.md, "Smoke test on the scripted model"). A harness that stops
speaking its format, or stops running what the model asked, changes its row's solved tasks."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import pytest

import agentcompass

SAMPLES = {
    "shell_tasks": ["files/hello_world", "answer/count_lines", "answer/sum_range", "files/mkdir_tree",
                    "files/concat_parts"],
    "humaneval": ["HumanEval/0", "HumanEval/2", "HumanEval/4", "HumanEval/5"],
    "agentdojo": ["banking/user_task_0", "banking/user_task_1", "banking/user_task_3", "banking/user_task_4"],
    "tau2": ["airline/0", "airline/5", "airline/10", "airline/19"],
    "bfcl": ["simple_python_0", "simple_python_1", "simple_python_2", "simple_python_3"],
}
#: benchmark params beyond the sample: tau2's simulated customer is the scripted model too
PARAMS = {"tau2": {"user_model": {"id": "scripted"}}}
#: (benchmark, harness) -> the sample's tasks solved; every other task of the sample fails
ROWS = {
    ("shell_tasks", "shell_agent"): ["answer/count_lines", "answer/sum_range", "files/hello_world", "files/mkdir_tree"],
    ("shell_tasks", "openai_chat"): ["answer/count_lines", "answer/sum_range"],
    ("shell_tasks", "mini_swe_agent"): ["answer/count_lines", "files/hello_world"],
    ("shell_tasks", "terminus"): ["files/hello_world"],
    ("shell_tasks", "claude_code"): ["answer/count_lines", "files/hello_world"],
    ("shell_tasks", "codex"): ["answer/count_lines", "files/hello_world"],
    ("humaneval", "shell_agent"): ["HumanEval/0", "HumanEval/2"],
    ("humaneval", "openai_chat"): ["HumanEval/0", "HumanEval/2"],
    ("humaneval", "mini_swe_agent"): ["HumanEval/0"],
    ("humaneval", "terminus"): ["HumanEval/0"],
    ("humaneval", "claude_code"): ["HumanEval/0", "HumanEval/2"],
    ("humaneval", "codex"): ["HumanEval/0", "HumanEval/2"],
    ("agentdojo", "tool_agent"): ["banking/user_task_0", "banking/user_task_1"],
    ("tau2", "tool_agent"): ["airline/0", "airline/19"],
    ("bfcl", "tool_agent"): ["simple_python_0", "simple_python_1"],
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("benchmark", "harness"), sorted(ROWS))
def test_each_harness_solves_some_tasks_of_each_offline_benchmark_on_the_scripted_model(
        tmp_path: Path, benchmark: str, harness: str) -> None:
    sample = SAMPLES[benchmark]
    out = agentcompass.run_evaluation(benchmark, harness, "scripted", "local",
                                      benchmark_params={"sample_ids": sample, **PARAMS.get(benchmark, {})},
                                      results_dir=str(tmp_path), progress="none", task_concurrency=len(sample))
    assert out.ok, out.error
    details = [json.loads(Path(p).read_text()) for p in glob.glob(str(out.run_dir / "details" / "*.json"))]
    solved = sorted(d["task_id"] for d in details if d["attempts"]["1"].get("correct"))
    assert solved == ROWS[benchmark, harness]
    assert 0 < out.metrics["pass@1"] < 1 and out.metrics["graded_tasks"] == len(sample)  # every task graded
    assert out.counts.errors == 0  # failures are wrong answers or the harness's own limits, never an error


#: openhands on a smaller sample: each attempt starts its bridge, which imports the OpenHands SDK (~10 CPU-s)
OPENHANDS_SAMPLES = {"shell_tasks": ["answer/count_lines", "answer/sum_range", "files/hello_world"],
                     "humaneval": ["HumanEval/0", "HumanEval/4"]}
OPENHANDS_SOLVED = {"shell_tasks": ["answer/count_lines", "files/hello_world"], "humaneval": ["HumanEval/0"]}


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first openhands test to run installs its venv (from PyPI, then cached)
@pytest.mark.parametrize("benchmark", sorted(OPENHANDS_SAMPLES))
def test_openhands_solves_some_tasks_of_each_offline_benchmark_on_the_scripted_model(
        tmp_path: Path, benchmark: str) -> None:
    sample = OPENHANDS_SAMPLES[benchmark]
    out = agentcompass.run_evaluation(benchmark, "openhands", "scripted", "local",
                                      benchmark_params={"sample_ids": sample}, harness_params={"max_iterations": 10},
                                      auto_install_dependencies=True, results_dir=str(tmp_path), progress="none",
                                      task_concurrency=len(sample))
    assert out.ok and out.run_dir is not None, out.error
    details = [json.loads(Path(p).read_text()) for p in glob.glob(str(out.run_dir / "details" / "*.json"))]
    solved = sorted(d["task_id"] for d in details if d["attempts"]["1"].get("correct"))
    assert solved == OPENHANDS_SOLVED[benchmark]
    assert 0 < out.metrics["pass@1"] < 1 and out.metrics["graded_tasks"] == len(sample)
    assert out.counts.errors == 0
