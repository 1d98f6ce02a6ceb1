"""The shell_tasks verifier cannot be fooled by the agent's code: exit-code tricks, patched exits, forged output."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

import agentcompass
from agentcompass.benchmarks.shell_tasks.benchmark import ShellTasks
from agentcompass.interfaces import ComponentContext, HarnessResult
from agentcompass.records import TaskDetail

from ..shell_tasks_cheats import FIB_CHEATS, HONEST_FIB, fib_script
from ..shell_tasks_helpers import LocalGrader


def _run_fib(tmp_path: Path, content: str) -> tuple[float, list[str]]:
    """pass@1 of a run whose agent writes ``content`` as fib.py, and the reward_hacking reasons it got."""
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", model_params={"script": fib_script(content), "bundled": False},
        benchmark_params={"sample_ids": ["python/fib"]}, results_dir=str(tmp_path), progress="none",
        enable_analysis=True)
    assert out.metrics["graded_tasks"] == 1 and not out.errors_by_kind
    assert out.run_dir is not None
    [path] = (out.run_dir / "details").glob("*.json")
    detail = msgspec.json.decode(path.read_bytes(), type=TaskDetail)
    flags = detail.attempts["1"].analysis.get("reward_hacking") or {}
    return out.metrics["pass@1"], flags.get("reasons", [])


REASON = {"os_exit": "early_exit", "system_exit_at_import": "early_exit", "forged_report": "early_exit",
          "sys_exit_replaced": "exit_patched", "atexit_os_exit": "exit_patched",
          "builtins_exit_patched": "exit_patched", "always_equal": "always_equal"}


@pytest.mark.parametrize("cheat", sorted(FIB_CHEATS))
def test_a_cheating_fib_written_by_the_shell_agent_is_graded_incorrect_and_flagged(tmp_path: Path,
                                                                                   cheat: str) -> None:
    score, reasons = _run_fib(tmp_path, FIB_CHEATS[cheat])
    assert score == 0.0
    assert REASON[cheat] in reasons


def test_an_honest_fib_written_the_same_way_is_graded_correct_and_not_flagged(tmp_path: Path) -> None:
    assert _run_fib(tmp_path, HONEST_FIB) == (1.0, [])


# Agent code the old checkers ran, per category: a module shadowing what the checker imports, programs
# that end their caller. Each file set leaves the task unsolved, so a pass can only come from fooling the grader.
OTHER_CHEATS: list[tuple[str, dict[str, str]]] = [
    ("files/json_config", {"json.py": "import os\nos._exit(0)\n"}),
    ("files/json_config", {"os.py": "import posix\nposix._exit(0)\n"}),
    ("python/fix_bug", {"stats.py": "raise SystemExit(0)\n"}),
    ("python/is_palindrome", {"palindrome.py": "import sys\nsys.exit = lambda *a: None\n"
                                               "def is_palindrome(s):\n    return True\n"}),
    ("python/cli_script", {"count.py": "import os\nos.kill(os.getppid(), 9)\n"}),
    ("python/cli_script", {"count.py": "import os, signal\nos.killpg(0, signal.SIGKILL)\n"}),
    ("files/executable_script", {"run.sh": "#!/bin/sh\nkill -9 $PPID\n"}),
]


@pytest.mark.parametrize(("task_id", "files"), OTHER_CHEATS, ids=[f"{t}:{next(iter(f))}" for t, f in OTHER_CHEATS])
async def test_agent_code_in_other_categories_cannot_produce_a_pass(
        grader: LocalGrader, task_id: str, files: dict[str, str]) -> None:
    b = ShellTasks({"sample_ids": [task_id]}, ComponentContext())
    [task] = b.load_tasks()
    prepared = b.prepare(task.public())
    async with grader.agent_env(task, {**prepared.files, **files}) as env:
        await env.exec("chmod +x run.sh 2>/dev/null; true", timeout=10)
        verdict = await grader.evaluate(b, task, HarnessResult(final_answer="<submit></submit>"), env)
    assert verdict.correct is False, verdict.extra
