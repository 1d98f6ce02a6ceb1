"""Our Python log parsers and log handling agree with the official swebench 4.1.0 harness on generated logs.

Per framework, LOGS_PER_FRAMEWORK seeded logs (tests/swebench/differential/python_logs.py): our parser's
test -> status map must equal the official parser's, and our ``parse_test_output`` on the whole log must
equal the official ``get_logs_eval``. A difference passes only when a named row of deviations.py explains it.
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest
import swebench.harness.grading as official_grading
import swebench.harness.log_parsers.python as official_py
from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

from agentcompass.swebench import log_parsers as lp
from agentcompass.swebench.grading import GradeError, parse_test_exit_code, parse_test_output
from agentcompass.swebench.test_specs import START_TEST_OUTPUT
from tests.swebench.differential import deviations as dev
from tests.swebench.differential.python_logs import FRAMEWORKS, generate_many

LOGS_PER_FRAMEWORK = 500

OFFICIAL: dict[str, Callable[[str, object], dict[str, str]]] = {
    "pytest": official_py.parse_log_pytest,
    "pytest_options": official_py.parse_log_pytest_options,
    "pytest_v2": official_py.parse_log_pytest_v2,
    "django": official_py.parse_log_django,
    "seaborn": official_py.parse_log_seaborn,
    "sympy": official_py.parse_log_sympy,
    "matplotlib": official_py.parse_log_matplotlib,
}
#: a repo the official harness grades with each framework's parser (get_logs_eval looks the parser up by repo)
REPO = {"pytest": "pytest-dev/pytest", "pytest_options": "psf/requests", "pytest_v2": "astropy/astropy",
        "django": "django/django", "seaborn": "mwaskom/seaborn", "sympy": "sympy/sympy",
        "matplotlib": "matplotlib/matplotlib"}
_STATUSES = {s.value for s in lp.TestStatus}
_NOT_GRADED = {GradeError.PATCH_APPLY_FAILED, GradeError.RESET_FAILED, GradeError.TESTS_ERRORED,
               GradeError.TESTS_TIMED_OUT, GradeError.TEST_OUTPUT_MISSING}


class _Adjusted:
    """The official parser with the documented deviations applied, counting each one used."""

    def __init__(self, framework: str, used: collections.Counter[str]) -> None:
        self.official = OFFICIAL[framework]
        self.rows = [d for d in dev.PARSER_DEVIATIONS if framework in d.frameworks]
        self.used = used

    def __call__(self, log: str, test_spec: object = None) -> dict[str, str]:
        try:
            status_map = self.official(log, test_spec)
        except IndexError:
            # we skip the lines it raises on: compare with the official map of the log without them
            lines = log.split("\n")
            rows = [d for d in self.rows if d.crash_line and any(map(d.crash_line, lines))]
            assert rows, f"the official parser raised on a log no deviation explains:\n{log}"
            self.used[rows[0].name] += 1
            status_map = self.official("\n".join("" if rows[0].crash_line(x) else x for x in lines), test_spec)
        kept: dict[str, str] = {}
        for test, status in status_map.items():
            row = next((d for d in self.rows if d.entry and d.entry(test, status)), None)
            if row is None:
                kept[test] = status
            else:
                self.used[row.name] += 1
        return kept


def test_every_official_python_repo_uses_the_same_parser_here() -> None:
    for repo, official in official_py.MAP_REPO_TO_PARSER_PY.items():
        assert lp.get_parser(repo).__name__ == official.__name__, repo
    assert set(lp.MAP_REPO_TO_PARSER_NAME) >= set(official_py.MAP_REPO_TO_PARSER_PY)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_parser_maps_equal_the_official_ones_on_generated_logs(framework: str) -> None:
    used: collections.Counter[str] = collections.Counter()
    official = _Adjusted(framework, used)
    ours = lp.PARSERS[framework]
    compared = 0
    for i, case in enumerate(generate_many(framework, LOGS_PER_FRAMEWORK, seed=14)):
        section = case.text.split(START_TEST_OUTPUT)[-1]
        for text in (case.text, section):
            assert ours(text) == official(text), f"log #{i} of {framework}:\n{text}"
            compared += 1
    assert compared == 2 * LOGS_PER_FRAMEWORK
    print(f"{framework}: {compared} parses compared, deviations used: {dict(used)}")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_parse_test_output_equals_the_official_get_logs_eval(framework: str, tmp_path: Path) -> None:
    used: collections.Counter[str] = collections.Counter()
    repo = REPO[framework]
    spec = types.SimpleNamespace(repo=repo, version=next(iter(MAP_REPO_VERSION_TO_SPECS[repo])))
    log_file = tmp_path / "test_output.txt"
    outcomes: collections.Counter[str] = collections.Counter()
    with mock.patch.dict(official_grading.MAP_REPO_TO_PARSER, {repo: _Adjusted(framework, used)}):
        for i, case in enumerate(generate_many(framework, LOGS_PER_FRAMEWORK, seed=41)):
            log_file.write_text(case.text, encoding="utf-8")
            ours, error = parse_test_output(case.text, framework)
            expected, found = official_grading.get_logs_eval(spec, str(log_file))
            where = f"log #{i} of {framework}:\n{case.text}"
            if error in _NOT_GRADED:
                assert (expected, found) == ({}, False), where
            elif error is GradeError.NO_TEST_RESULTS:
                assert found and not set(expected.values()) & _STATUSES, where
                used[dev.NO_TEST_RESULTS.name] += 1
            elif error is GradeError.EXIT_CODE_MISMATCH:
                assert found and expected and parse_test_exit_code(case.text) not in (None, 0), where
                assert not {"FAILED", "ERROR"} & set(expected.values()), where
                used[dev.EXIT_CODE_MISMATCH.name] += 1
            else:
                assert error is None and found and ours == expected, where
            outcomes[str(error) if error else "graded"] += 1
    assert outcomes["graded"] >= LOGS_PER_FRAMEWORK // 3, outcomes
    print(f"{framework}: {sum(outcomes.values())} logs compared {dict(outcomes)}, deviations used: {dict(used)}")


def test_every_parser_deviation_is_exercised_by_the_generated_logs() -> None:
    used: collections.Counter[str] = collections.Counter()
    for framework in FRAMEWORKS:
        official = _Adjusted(framework, used)
        for case in generate_many(framework, LOGS_PER_FRAMEWORK, seed=14):
            official(case.text)
    assert {d.name for d in dev.PARSER_DEVIATIONS} <= set(used), used


def test_every_deviation_is_documented_with_its_reason() -> None:
    doc = (Path(__file__).parents[3] / "docs" / "swebench.md").read_text(encoding="utf-8")
    section = doc.split("## Agreement with the official harness: log parsers and grading", 1)[1]
    for row in (*dev.PARSER_DEVIATIONS, *dev.GRADING_DEVIATIONS):
        assert f"`{row.name}`" in section, row.name


def test_the_package_never_imports_the_official_swebench() -> None:
    root = Path(__file__).parents[3]
    code = ("import sys, agentcompass.swebench.grading, agentcompass.swebench.log_parsers, "
            "agentcompass.swebench.test_specs; print(sorted(m for m in sys.modules if m.split('.')[0] == 'swebench'))")
    res = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert res.stdout.strip() == "[]", res.stdout + res.stderr
    for path in (root / "agentcompass").rglob("*.py"):
        assert not re.search(r"^\s*(from|import)\s+swebench\b", path.read_text(encoding="utf-8"), re.M), path
