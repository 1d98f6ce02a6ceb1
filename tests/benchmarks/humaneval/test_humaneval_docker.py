"""HumanEval in docker: canonical solutions pass and empty completions fail on the container's Python; cheats fail in
docker too."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentcompass
from tests.environments.conftest import (  # noqa: F401 - fixtures used by name
    _sweep_session_leftovers,
    base_image,
    busybox_image,
    docker_available,
    docker_run_id,
)

from .test_humaneval import CHEATS, FULL_RUNS, HARNESSES, SAMPLED, run

#: every 16th problem (all 164 with AGENTCOMPASS_HUMANEVAL_TESTS=full): one verifier container each, per run; the
#: local test grades every 8th through the same runner, and the differential test every canonical solution
SAMPLED_IN_DOCKER = SAMPLED if FULL_RUNS else SAMPLED[::2]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the first docker test may build the base image
def test_canonical_solutions_pass_and_empty_completions_fail_in_docker(
        tmp_path: Path, base_image: str, docker_run_id: str) -> None:  # noqa: F811
    # answers: no agent container, so each task costs one verifier container
    docker = {"environment_params": {"image": base_image}, "run_id": docker_run_id, "task_concurrency": 6,
              "benchmark_params": {"sample_ids": SAMPLED_IN_DOCKER}}
    out = run("AnswerHarness", "canonical", "docker", tmp_path=tmp_path / "canonical", **docker)
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (len(SAMPLED_IN_DOCKER), len(SAMPLED_IN_DOCKER))
    out = run("AnswerHarness", "empty", "docker", tmp_path=tmp_path / "empty", **docker)
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (len(SAMPLED_IN_DOCKER), 0)


@pytest.mark.timeout(1800)
def test_solution_files_written_in_a_docker_container_are_graded(
        tmp_path: Path, base_image: str, docker_run_id: str) -> None:  # noqa: F811
    out = run("FileHarness", "canonical", "docker", tmp_path=tmp_path, environment_params={"image": base_image},
              run_id=docker_run_id, benchmark_params={"limit": 4})
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (4, 4)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("cheat", ["os_exit_at_import", "builtins_abs_patched", "forged_recording",
                                   "reads_the_tests_file", "finds_the_tests_in_memory"])
def test_a_cheating_completion_is_graded_incorrect_in_docker(
        tmp_path: Path, base_image: str, docker_run_id: str, cheat: str) -> None:  # noqa: F811
    task_id, code = CHEATS[cheat]
    out = run("FileHarness", "given", "docker", tmp_path=tmp_path, code=code, environment_params={"image": base_image},
              run_id=docker_run_id, benchmark_params={"sample_ids": task_id})
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 0)


@pytest.mark.timeout(600)
def test_a_verifier_image_without_python_is_an_eval_error_naming_python3_not_a_zero(
        tmp_path: Path, busybox_image: str, docker_run_id: str) -> None:  # noqa: F811
    out = agentcompass.run_evaluation(
        "humaneval", f"{HARNESSES}:AnswerHarness", "scripted", "docker", run_id=docker_run_id,
        environment_params={"image": busybox_image}, benchmark_params={"sample_ids": "HumanEval/0"},
        results_dir=str(tmp_path), progress="none")
    assert out.metrics["graded_tasks"] == 0 and sum(out.errors_by_kind.values()) == 1, out.errors_by_kind
    assert out.run_dir is not None
    [detail] = (out.run_dir / "details").glob("*.json")
    assert "needs python3 in the verifier's image" in detail.read_text()
