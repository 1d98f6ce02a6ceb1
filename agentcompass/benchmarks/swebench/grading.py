"""Grade a SWE-bench attempt from its test log, as the official harness (``swebench/harness/grading.py``) does in
the chosen ``grading_version`` (5.0.2 by default, or 4.1.0).

A FAIL_TO_PASS test succeeds when it PASSED or XFAILed; a test missing from the log failed. 5.0.2: a
PASS_TO_PASS test also succeeds when SKIPPED (a skip is no regression) and a skipped F2P test fails; a listed
name with more ``[`` than ``]`` (a parametrized id the dataset cut at its first space) is graded from the
log's tests it is a prefix of, when they agree on passing. 4.1.0: names match exactly, and a skipped test is
in neither list. An instance whose ``eval_type`` is ``fail_only`` (without one: the repos of
``FAIL_ONLY_REPOS``) is graded fail-only: only a recorded FAILED fails. ``resolved`` means every F2P and
every P2P test succeeded. A log is not graded at all when it shows the patch or the reset failed, an error or
timeout marker, or no test-output markers; 5.0.2 also refuses a log with no results and no sign a suite ran,
and one whose recorded test exit code is non-zero with results but no failing test.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import msgspec

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench.grading_version import DEFAULT_GRADING_VERSION, V4, check_grading_version
from agentcompass.benchmarks.swebench.lang_parsers.dispatch import parser_name_for_instance
from agentcompass.benchmarks.swebench.log_parsers import TestStatus, get_parser, get_parser_name
from agentcompass.benchmarks.swebench.test_specs import (
    APPLY_PATCH_FAIL,
    APPLY_PATCH_PASS,
    END_TEST_OUTPUT,
    RESET_FAILED,
    START_TEST_OUTPUT,
    TEST_EXIT_CODE,
    TESTS_ERROR,
    TESTS_TIMEOUT,
)

FAIL_TO_PASS = "FAIL_TO_PASS"
PASS_TO_PASS = "PASS_TO_PASS"


class ResolvedStatus(StrEnum):
    """Official resolution levels: all F2P pass (FULL), some pass (PARTIAL), else NO; P2P must all pass."""

    NO = "RESOLVED_NO"
    PARTIAL = "RESOLVED_PARTIAL"
    FULL = "RESOLVED_FULL"


class GradeError(StrEnum):
    """Why a log could not be graded."""

    PATCH_APPLY_FAILED = "patch_apply_failed"
    RESET_FAILED = "reset_failed"
    TESTS_ERRORED = "tests_errored"
    TESTS_TIMED_OUT = "tests_timed_out"
    TEST_OUTPUT_MISSING = "test_output_missing"
    NO_TEST_RESULTS = "no_test_results"
    EXIT_CODE_MISMATCH = "exit_code_mismatch"


class TestOutcomes(msgspec.Struct):
    """The tests of one category (F2P or P2P) that succeeded and that failed."""

    __test__ = False  # not a pytest test class

    success: list[str] = msgspec.field(default_factory=list)
    failure: list[str] = msgspec.field(default_factory=list)


class GradeReport(msgspec.Struct, kw_only=True):
    """The verdict on one attempt; ``tests_status`` has the keys ``FAIL_TO_PASS`` and ``PASS_TO_PASS``."""

    instance_id: str
    resolved: bool
    status: ResolvedStatus
    patch_applied: bool  # False when the output shows the model patch failed to apply
    error: GradeError | None = None
    tests_status: dict[str, TestOutcomes]
    test_results: dict[str, str] = msgspec.field(default_factory=dict)  # test -> status, as parsed
    parser: str
    test_exit_code: int | None = None
    grading_version: str = DEFAULT_GRADING_VERSION  # the official release whose rules graded it


_BAD_MARKERS: tuple[tuple[str, GradeError], ...] = (
    (APPLY_PATCH_FAIL, GradeError.PATCH_APPLY_FAILED),
    (RESET_FAILED, GradeError.RESET_FAILED),
    (TESTS_ERROR, GradeError.TESTS_ERRORED),
    (TESTS_TIMEOUT, GradeError.TESTS_TIMED_OUT),
)
_EXIT_CODE_RE = re.compile(rf"{re.escape(TEST_EXIT_CODE)}:\s*(-?\d+)")
_PASSING = frozenset({TestStatus.PASSED.value, TestStatus.XFAIL.value})
_NOT_PASSING_V5 = frozenset({TestStatus.FAILED.value, TestStatus.ERROR.value, TestStatus.SKIPPED.value})
_NOT_PASSING_V4 = frozenset({TestStatus.FAILED.value, TestStatus.ERROR.value})

#: Repos the official harness grades fail-only (``EvalType.FAIL_ONLY``): their parsers record failures only.
FAIL_ONLY_REPOS = frozenset({"chartjs/Chart.js", "processing/p5.js", "markedjs/marked"})
#: 5.0.2's evidence that a test runner ran at least one test (karma, mocha, jest, tap, jasmine, openlayers):
#: without it a log with no parsed results is not graded. Every count must be non-zero.
SUITE_RAN = re.compile(
    r"Executed [1-9]\d* of \d+|TOTAL: [1-9]\d* (?:SUCCESS|FAILED)|[1-9]\d* passing|Tests:\s+[1-9]\d*"
    r"|Test Suites:\s+(?:\d+ \w+, )*[1-9]\d* total|^# tests [1-9]\d*|[1-9]\d* specs?, \d+ failures?|': ok$",
    re.MULTILINE)


def load_test_list(value: Any, field: str) -> list[str]:
    """A FAIL_TO_PASS / PASS_TO_PASS value as a list: a list, a JSON-encoded list (the HF datasets), or None."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{field} is not a JSON list: {exc}", field=field) from None
    if isinstance(value, Sequence) and not isinstance(value, str) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{field} must be a list of test names, got {type(value).__name__}", field=field)


def resolve_case(case: str, status_map: Mapping[str, str]) -> str | None:
    """The log's name for a listed test, by 5.0.2's rule: the name itself; else, for a name with more ``[``
    than ``]`` (a parametrized id cut at its first space), the first logged test it is a prefix of, when all
    such tests agree on passing (PASSED/XFAIL) or not; else None (missing)."""
    if case in status_map:
        return case
    if case.count("[") > case.count("]"):
        matches = [name for name in status_map if name.startswith(case)]
        if matches and len({status_map[name] in _PASSING for name in matches}) == 1:
            return matches[0]
    return None


def test_passed(case: str, status_map: Mapping[str, str], version: str = DEFAULT_GRADING_VERSION) -> bool:
    """PASSED or XFAIL."""
    key = case if version == V4 else resolve_case(case, status_map)
    return key is not None and status_map.get(key) in _PASSING


def test_maintained(case: str, status_map: Mapping[str, str], version: str = DEFAULT_GRADING_VERSION) -> bool:
    """P2P success: passed; in 5.0.2 also SKIPPED (a skip is no regression)."""
    if version == V4:
        return test_passed(case, status_map, version)
    key = resolve_case(case, status_map)
    return test_passed(case, status_map, version) or (key is not None and status_map[key] == TestStatus.SKIPPED)


def test_failed(case: str, status_map: Mapping[str, str], version: str = DEFAULT_GRADING_VERSION) -> bool:
    """Missing from the log, FAILED, ERROR, or (5.0.2) SKIPPED; any other recorded value is neither passed nor
    failed."""
    if version == V4:
        return case not in status_map or status_map[case] in _NOT_PASSING_V4
    key = resolve_case(case, status_map)
    return key is None or status_map[key] in _NOT_PASSING_V5


def _fail_only_success(case: str, status_map: Mapping[str, str]) -> bool:
    """Fail-only grading: everything but a recorded FAILED succeeds (missing, ERROR and SKIPPED too; names
    match exactly in both versions)."""
    return status_map.get(case) != TestStatus.FAILED


def get_tests_report(status_map: Mapping[str, str], fail_to_pass: Sequence[str], pass_to_pass: Sequence[str], *,
                     fail_only: bool = False, version: str = DEFAULT_GRADING_VERSION) -> dict[str, TestOutcomes]:
    """Sort the F2P and P2P tests into success and failure (``fail_only`` for the FAIL_ONLY_REPOS), by the rules
    of swebench ``version``."""
    version = check_grading_version(version)
    f2p, p2p = TestOutcomes(), TestOutcomes()
    for cases, outcomes, succeeded in ((fail_to_pass, f2p, test_passed), (pass_to_pass, p2p, test_maintained)):
        for case in cases:
            if fail_only:
                (outcomes.success if _fail_only_success(case, status_map) else outcomes.failure).append(case)
            elif succeeded(case, status_map, version):
                outcomes.success.append(case)
            elif test_failed(case, status_map, version):
                outcomes.failure.append(case)
    return {FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p}


def _rate(outcomes: TestOutcomes) -> float:
    total = len(outcomes.success) + len(outcomes.failure)
    return 1.0 if total == 0 else len(outcomes.success) / total


def get_resolution_status(report: Mapping[str, TestOutcomes]) -> ResolvedStatus:
    """FULL when all F2P and P2P succeed, PARTIAL when some but not all F2P do and all P2P do, else NO."""
    f2p, p2p = _rate(report[FAIL_TO_PASS]), _rate(report[PASS_TO_PASS])
    if f2p == 1 and p2p == 1:
        return ResolvedStatus.FULL
    if 0 < f2p < 1 and p2p == 1:
        return ResolvedStatus.PARTIAL
    return ResolvedStatus.NO


def model_patch_applied(apply_output: str) -> bool | None:
    """What the output of ``apply_patch_script`` says: True (applied), False (failed), None (no marker)."""
    if APPLY_PATCH_FAIL in apply_output:
        return False
    if APPLY_PATCH_PASS in apply_output:
        return True
    return None


def parse_test_exit_code(log: str) -> int | None:
    """The test command's exit code the eval script printed after the end marker, if any.

    Only the first such line after the last end marker counts (a deliberate deviation from 5.0.2, which reads
    the first line anywhere): the tests' own output, before the script's end marker, may print any line, an
    exit-code line of 0 in front of a failing run's real one too. On an honest log both read the same line.
    """
    if END_TEST_OUTPUT not in log:
        return None
    m = _EXIT_CODE_RE.search(log.rsplit(END_TEST_OUTPUT, 1)[1])
    return int(m.group(1)) if m else None


EVAL_TYPES = ("pass_and_fail", "fail_only")


def is_fail_only(instance: Mapping[str, Any]) -> bool:
    """Whether the instance is graded fail-only: its own ``eval_type`` (newer SWE-bench releases) when it has
    one, else the official repo rule (``FAIL_ONLY_REPOS``). ConfigError on another ``eval_type``."""
    eval_type = instance.get("eval_type")
    if eval_type in (None, ""):
        return instance.get("repo") in FAIL_ONLY_REPOS
    if eval_type not in EVAL_TYPES:
        raise ConfigError(f"instance {instance.get('instance_id', '')!r}: eval_type {eval_type!r} is not one of "
                          f"{', '.join(EVAL_TYPES)}", field="eval_type")
    return bool(eval_type == "fail_only")


def parse_test_output(log: str, parser_name: str, *, version: str = DEFAULT_GRADING_VERSION
                      ) -> tuple[dict[str, str], GradeError | None]:
    """The status map of an eval-script log, or the reason the log cannot be graded, as swebench ``version``'s
    ``get_logs_eval`` decides."""
    version = check_grading_version(version)
    for marker, error in _BAD_MARKERS:
        if marker in log:
            return {}, error
    if START_TEST_OUTPUT not in log or END_TEST_OUTPUT not in log:
        return {}, GradeError.TEST_OUTPUT_MISSING
    parser = get_parser(None, parser_name, version)
    # as officially: from the first start marker to the next start or end marker
    section = log.split(START_TEST_OUTPUT)[1].split(END_TEST_OUTPUT)[0]
    status_map = parser(section)
    if not status_map:
        # some runners print results outside the markers (stream ordering), so try the whole log
        status_map = parser(log)
    if version == V4:
        return status_map, None  # 4.1.0 grades every map, an empty one too
    if not status_map and not SUITE_RAN.search(log):
        return {}, GradeError.NO_TEST_RESULTS  # no results and no sign a suite ran
    # a patch can print its own PASSED lines: a non-zero exit with results but no failure is not believed
    exit_code = parse_test_exit_code(log)
    if exit_code not in (None, 0) and status_map and not any(
            s in (TestStatus.FAILED, TestStatus.ERROR) for s in status_map.values()):
        return {}, GradeError.EXIT_CODE_MISMATCH
    return status_map, None


def grade(
    instance: Mapping[str, Any],
    test_output: str,
    parser_name: str | None = None,
    *,
    apply_output: str | None = None,
    timed_out: bool = False,
    version: str = DEFAULT_GRADING_VERSION,
) -> GradeReport:
    """Grade one attempt from the eval script's output, by the rules of swebench ``version``.

    The parser is ``parser_name``, else the instance's ``log_parser``, else the official one for its repo.
    ``apply_output`` is the output of ``apply_patch_script`` when it ran separately; ``timed_out`` says the
    eval script was cut off by its caller.
    """
    version = check_grading_version(version)
    instance_id = str(instance.get("instance_id", ""))
    f2p = load_test_list(instance.get(FAIL_TO_PASS), FAIL_TO_PASS)
    p2p = load_test_list(instance.get(PASS_TO_PASS), PASS_TO_PASS)
    # jekyll and immutable-js switch parser by the instance's PR number, as the official harness does
    name = parser_name_for_instance(
        get_parser_name(instance.get("repo"), parser_name or instance.get("log_parser") or None), instance_id)

    fail_only = is_fail_only(instance)
    applied = model_patch_applied(apply_output) if apply_output is not None else None
    status_map: dict[str, str] = {}
    error: GradeError | None
    if applied is False:
        error = GradeError.PATCH_APPLY_FAILED
    elif timed_out:
        error = GradeError.TESTS_TIMED_OUT
    else:
        status_map, error = parse_test_output(test_output, name, version=version)

    tests_status = get_tests_report(status_map, f2p, p2p, fail_only=fail_only, version=version)
    status = ResolvedStatus.NO if error is not None else get_resolution_status(tests_status)
    return GradeReport(
        instance_id=instance_id,
        resolved=status is ResolvedStatus.FULL,
        status=status,
        patch_applied=error is not GradeError.PATCH_APPLY_FAILED,
        error=error,
        tests_status=tests_status,
        test_results=status_map,
        parser=name,
        test_exit_code=parse_test_exit_code(test_output),
        grading_version=version,
    )
