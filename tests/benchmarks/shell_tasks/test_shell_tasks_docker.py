"""The shell_tasks cheats in docker: the scripted shell agent writes each cheating fib.py; none is graded correct."""

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

from ..shell_tasks_cheats import FIB_CHEATS, HONEST_FIB, fib_script

CASES = {**FIB_CHEATS, "honest": HONEST_FIB}


@pytest.mark.timeout(1800)  # the first docker test may build the base image
@pytest.mark.parametrize("case", sorted(CASES))
def test_fib_cheats_are_graded_incorrect_in_docker(tmp_path: Path, base_image: str, docker_run_id: str,  # noqa: F811
                                                   case: str) -> None:
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", "docker", run_id=docker_run_id,
        environment_params={"image": base_image}, model_params={"script": fib_script(CASES[case]), "bundled": False},
        benchmark_params={"sample_ids": ["python/fib"]}, results_dir=str(tmp_path), progress="none")
    assert out.metrics["graded_tasks"] == 1 and not out.errors_by_kind
    assert out.metrics["pass@1"] == (1.0 if case == "honest" else 0.0)
