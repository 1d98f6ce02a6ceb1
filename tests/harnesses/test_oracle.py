"""The oracle harness is refused up front on a benchmark without reference solutions (not once per task)."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentcompass
from agentcompass._errors import ConfigError
from agentcompass.cli import EXIT_BAD_INPUT, main


@pytest.mark.parametrize("benchmark", ["shell_tasks", "humaneval", "qa_local"])
def test_the_oracle_on_a_benchmark_without_reference_solutions_is_refused_before_any_task(
        tmp_path: Path, benchmark: str) -> None:
    with pytest.raises(ConfigError, match=f"benchmark '{benchmark}' has none") as info:
        agentcompass.run_evaluation(benchmark, "oracle", "scripted", progress="none", results_dir=str(tmp_path))
    assert info.value.field == "harness"
    assert not list(tmp_path.rglob("details"))  # no run directory, no per-task failure


def test_the_command_line_says_so_once_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["run", "shell_tasks", "oracle", "scripted", "--progress", "none", "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == EXIT_BAD_INPUT and err.count("error:") == 1 and "reference solution" in err

