"""The smoke test of each harness: the bundled scripts of the built-in ``scripted`` model solve some tasks of each
offline benchmark in each harness's own wire format (the tool-use ones in ``tool_agent``'s native tool calls) and
fail others for a visible reason (docs/harnesses.md, "Smoke test on the scripted model"). A harness that stops
speaking its format, or stops running what the model asked, changes its row's solved tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentcompass
from tests.environments.conftest import (  # noqa: F401 - fixtures used by name
    _sweep_session_leftovers,
    base_image,
    docker_available,
    docker_run_id,
)

from ..benchmarks.swebench.conftest import needs_host_py311
from ..run_details import details_by_task

SAMPLES = {
    "shell_tasks": ["files/hello_world", "answer/count_lines", "answer/sum_range", "files/mkdir_tree",
                    "files/concat_parts"],
    "humaneval": ["HumanEval/0", "HumanEval/2", "HumanEval/4", "HumanEval/5"],
    "agentdojo": ["banking/user_task_0", "banking/user_task_1", "banking/user_task_3", "banking/user_task_4"],
    "tau2": ["airline/0", "airline/5", "airline/10", "airline/19"],
    "bfcl": ["simple_python_0", "simple_python_1", "simple_python_2", "simple_python_3"],
    "qa_local": ["qa-local-01", "qa-local-03", "qa-local-04", "qa-local-13", "qa-local-14"],
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
    ("qa_local", "openai_chat"): ["qa-local-01", "qa-local-03", "qa-local-13"],
    ("qa_local", "tool_agent"): ["qa-local-01", "qa-local-03", "qa-local-13"],
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("benchmark", "harness"), sorted(ROWS))
def test_each_harness_solves_some_tasks_of_each_offline_benchmark_on_the_scripted_model(
        tmp_path: Path, benchmark: str, harness: str) -> None:
    sample = SAMPLES[benchmark]
    out = agentcompass.run_evaluation(benchmark, harness, "scripted", "local",
                                      benchmark_params={"sample_ids": sample, **PARAMS.get(benchmark, {})},
                                      results_dir=str(tmp_path), progress="none", task_concurrency=len(sample))
    assert out.ok and out.run_dir is not None, out.error
    solved = sorted(tid for tid, d in details_by_task(out.run_dir).items() if d.attempts["1"].correct)
    assert solved == ROWS[benchmark, harness]
    assert 0 < out.metrics["pass@1"] < 1 and out.metrics["graded_tasks"] == len(sample)  # every task graded
    assert out.counts.errors == 0  # failures are wrong answers or the harness's own limits, never an error


#: openhands on a smaller sample: each attempt starts its bridge, which imports the OpenHands SDK (~5 CPU-s)
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
    solved = sorted(tid for tid, d in details_by_task(out.run_dir).items() if d.attempts["1"].correct)
    assert solved == OPENHANDS_SOLVED[benchmark]
    assert 0 < out.metrics["pass@1"] < 1 and out.metrics["graded_tasks"] == len(sample)
    assert out.counts.errors == 0


def test_qa_local_graded_by_the_scripted_judge_gets_the_judges_own_verdicts(tmp_path: Path) -> None:
    """The bundled ``qa_local`` script answers the scripted judge too (``judge_model: scripted``): SimpleQA's
    letters for the answers it is shown, so the judged path runs offline to the same score as the match."""
    sample = SAMPLES["qa_local"]
    out = agentcompass.run_evaluation("qa_local", "openai_chat", "scripted", "local",
                                      benchmark_params={"sample_ids": sample, "judge_model": {"id": "scripted"}},
                                      results_dir=str(tmp_path), progress="none", task_concurrency=len(sample))
    assert out.ok and out.run_dir is not None and out.counts.errors == 0, out.error
    attempts = {tid: d.attempts["1"] for tid, d in details_by_task(out.run_dir).items()}
    grades = {tid: (a.extra["scoring"]["method"], a.extra["grade"]) for tid, a in attempts.items()}
    assert grades == {"qa-local-01": ("judge", "correct"), "qa-local-03": ("judge", "correct"),
                      "qa-local-04": ("judge", "incorrect"), "qa-local-13": ("judge", "correct"),
                      "qa-local-14": ("judge", "not_attempted")}
    assert out.metrics["pass@1"] == 0.6 and out.metrics["not_attempted_rate"] == 0.2


#: the offline benchmarks that grade in containers: one task solved, the other failed for a visible reason
DOCKER_SAMPLES = {"swebench_local": ["r1chardj0n3s__parse-178", "r1chardj0n3s__parse-184"],
                  "task_dir_local": ["hello-file", "word-stats"]}
#: every harness that acts in a container (the installed agents' CLIs are bound in from the host's venv)
DOCKER_HARNESSES = ("claude_code", "codex", "mini_swe_agent", "openhands", "shell_agent", "terminus")


def _docker_marks(bench: str, harness: str) -> list[pytest.MarkDecorator]:
    marks = [pytest.mark.slow] if harness == "openhands" else []  # its bridge: ~5 CPU-s per attempt
    if bench == "swebench_local":
        marks.append(needs_host_py311)
        # one worker builds the bundled instances' images, the others reuse them; not openhands, whose venv the
        # first of its tests installs (~3 min on a loaded CI machine): that would lengthen the group's one worker
        if harness != "openhands":
            marks.append(pytest.mark.xdist_group("swebench-local-images"))
    return marks


DOCKER_ROWS = [pytest.param(bench, harness, id=f"{bench}-{harness}", marks=_docker_marks(bench, harness))
               for bench in sorted(DOCKER_SAMPLES) for harness in DOCKER_HARNESSES]


@pytest.mark.timeout(900)  # openhands: the first of its tests to run installs its venv
@pytest.mark.parametrize(("benchmark", "harness"), DOCKER_ROWS)
def test_each_harness_solves_one_task_of_each_docker_benchmark_on_the_scripted_model(
        tmp_path: Path, base_image: str, docker_run_id: str, benchmark: str, harness: str) -> None:  # noqa: F811
    solved_id, failed_id = DOCKER_SAMPLES[benchmark]
    out = agentcompass.run_evaluation(benchmark, harness, "scripted", "docker", run_id=docker_run_id,
                                      benchmark_params={"sample_ids": [solved_id, failed_id]},
                                      harness_params={"max_iterations": 10} if harness == "openhands" else {},
                                      # the default data_dir: openhands' venv is installed there once per machine
                                      environment_params={"cache_level": "instance"}, results_dir=str(tmp_path),
                                      progress="none", task_concurrency=2, auto_install_dependencies=True)
    assert out.ok and out.run_dir is not None, out.error
    attempts = {tid: d.attempts["1"] for tid, d in details_by_task(out.run_dir).items()}
    assert attempts[solved_id].correct is True, attempts[solved_id]
    failed = attempts[failed_id]
    # swebench_local's second instance is unscripted: an empty patch, or the harness's own format limit
    assert failed.correct is False and failed.error_kind in (None, "format_error_limit"), failed
    if benchmark == "task_dir_local":  # word-stats: three of its four fields right, wrong on purpose
        assert failed.score == 0.75
    assert out.metrics["pass@1"] == 0.5 and out.counts.errors == 0
