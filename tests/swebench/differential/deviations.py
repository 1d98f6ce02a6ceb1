"""The documented deviations from the official harness (swebench 4.1.0), one named row each.

Every difference the differential tests accept is matched by exactly one row here; the same list, with the
same names and reasons, is in docs/swebench.md ("Agreement with the official harness").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_SKIP_COUNT = re.compile(r"\[\d+\]")
_PYTEST_SUMMARY = frozenset({"pytest", "pytest_options", "pytest_v2", "matplotlib"})


@dataclass(frozen=True)
class ParserDeviation:
    """Official parser output we do not produce: an entry it records, or a log line it raises on."""

    name: str
    frameworks: frozenset[str]
    reason: str
    entry: Callable[[str, str], bool] | None = None  # (test, status) recorded officially, not by us
    crash_line: Callable[[str], bool] | None = None  # a log line the official parser raises IndexError on


def _bare_seaborn_result(line: str) -> bool:
    return len(line.split()) < 2 and (line.startswith(("FAILED", "PASSED")) or " PASSED " in line)


def _bare_django_header(line: str) -> bool:
    return line.strip().startswith(("FAIL:", "ERROR:")) and len(line.split()) < 2


PARSER_DEVIATIONS = (
    ParserDeviation(
        "skip_summary_is_no_test", _PYTEST_SUMMARY,
        "`SKIPPED [2] path:12: reason` counts skips at one location; 4.1.0 records a test named `[2]`, which no "
        "dataset names (swebench 5.x drops it too)",
        entry=lambda test, status: status == "SKIPPED" and _SKIP_COUNT.fullmatch(test) is not None),
    ParserDeviation(
        "bare_result_line_skipped", frozenset({"seaborn"}),
        "a line that is only `FAILED` or `PASSED` (a log cut mid-line, a printed word) makes the 4.1.0 seaborn "
        "parser raise IndexError; we skip the line (swebench 5.x does too)",
        crash_line=_bare_seaborn_result),
    ParserDeviation(
        "bare_failure_header_skipped", frozenset({"django"}),
        "a line that is only `FAIL:` or `ERROR:` (a log cut mid-line) makes the 4.1.0 django parser raise "
        "IndexError; we skip the line",
        crash_line=_bare_django_header),
)


@dataclass(frozen=True)
class GradingDeviation:
    """A grading rule of ours that differs from 4.1.0 on purpose."""

    name: str
    reason: str


NO_TEST_RESULTS = GradingDeviation(
    "no_results_is_not_graded",
    "a log whose parser finds no test result is not graded (error no_test_results, RESOLVED_NO); 4.1.0 grades "
    "the empty map, which resolves an instance with empty FAIL_TO_PASS and PASS_TO_PASS, and every "
    "FAIL_ONLY instance, although no test ran (swebench 5.x refuses such logs too); a FAIL_ONLY repo's empty map "
    "is graded when its runner's summary shows a test ran (an all-passing run), as 5.x")
EXIT_CODE_MISMATCH = GradingDeviation(
    "nonzero_exit_without_failure_is_not_graded",
    "for the Python parsers, a non-zero test exit code (the first exit-code line after the last end marker) with "
    "no FAILED or ERROR result means the log does not describe the run (a patch printing its own PASSED lines); "
    "not graded (error exit_code_mismatch), as swebench 5.x; 4.1.0 grades it")
SKIPPED_F2P_FAILS = GradingDeviation(
    "skipped_fail_to_pass_fails",
    "a SKIPPED FAIL_TO_PASS test is a failure; 4.1.0 leaves it out of both lists, so a patch that makes every "
    "FAIL_TO_PASS test skip is RESOLVED_FULL there (fixed the same way in swebench 5.x)")
SKIPPED_P2P_MAINTAINED = GradingDeviation(
    "skipped_pass_to_pass_maintained",
    "a SKIPPED PASS_TO_PASS test is listed as success; 4.1.0 lists it nowhere. The resolution is the same either "
    "way (a skip is no regression), only the report's lists differ (as swebench 5.x)")
GRADING_DEVIATIONS = (NO_TEST_RESULTS, EXIT_CODE_MISMATCH, SKIPPED_F2P_FAILS, SKIPPED_P2P_MAINTAINED)
