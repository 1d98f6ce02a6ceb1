"""The task lines of logs/run.log honour the request's file_log_level, whatever the console level."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentcompass
from agentcompass.engine.run_dir import task_log_lines


def _task_logs(file_level: str, console_level: str, tmp_path: Path) -> tuple[str, str]:
    out = agentcompass.run_evaluation("shell_tasks", "openai_chat", "scripted",
                                      benchmark_params={"sample_ids": ["answer/count_lines"]},
                                      results_dir=str(tmp_path), progress="none", log_level=console_level,
                                      file_log_level=file_level)
    assert out.status == "completed" and out.counts.done == 1 and out.run_dir is not None
    assert not (out.run_dir / "logs" / "tasks").exists()  # no file per task: its lines are in run.log
    run_log = (out.run_dir / "logs" / "run.log").read_bytes()
    return task_log_lines(run_log, "answer/count_lines").decode(), run_log.decode()


def test_debug_file_level_writes_the_harness_debug_lines(tmp_path: Path) -> None:
    task_text, _ = _task_logs("DEBUG", "WARNING", tmp_path)
    assert " DEBUG " in task_text and "completion tokens" in task_text
    assert " INFO " in task_text and "attempt 1 finished" in task_text  # the attempt's own lines too


@pytest.mark.parametrize("console", ["DEBUG", "WARNING"])
def test_warning_file_level_keeps_debug_and_info_out_even_with_a_debug_console(console: str, tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]
                                                                               ) -> None:
    task_text, run_text = _task_logs("WARNING", console, tmp_path)
    assert " DEBUG " not in task_text and " INFO " not in task_text
    assert " DEBUG " not in run_text and " INFO " not in run_text
    if console == "DEBUG":  # the console still gets them: only the files follow file_log_level
        assert "completion tokens" in capsys.readouterr().err
