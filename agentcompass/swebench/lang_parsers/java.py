"""Java: Maven (one ``-Dtest=`` run per test), Ant's JUnit task, and Gradle with a per-test result logger."""

from __future__ import annotations

import re

from agentcompass.swebench.lang_parsers._lines import match_lines
from agentcompass.swebench.log_parsers import TestStatus

_MAVEN_TEST = re.compile(r".*-Dtest=(\S+)")
_MAVEN_RESULT = re.compile(r".*BUILD (SUCCESS|FAILURE)$")
# A result seen before any "-Dtest=" command line is recorded under this name, as the official parser does.
MAVEN_NO_TEST_NAME = "---NO TEST NAME FOUND YET---"

_ANT_RESULT = re.compile(r"\s*\[junit\]\s+\[(?P<outcome>PASS|FAIL|ERR)\]\s+(?P<name>.*)$")
_ANT_OUTCOMES = {"PASS": TestStatus.PASSED, "FAIL": TestStatus.FAILED, "ERR": TestStatus.FAILED}

# Greedy name: only the last blank before the outcome is dropped ("t  PASSED" names "t ").
_GRADLE_RESULT = re.compile(r"(?P<name>[^>].+)\s+(?P<outcome>PASSED|FAILED)$")
_GRADLE_OUTCOMES = {"PASSED": TestStatus.PASSED, "FAILED": TestStatus.FAILED}


def parse_log_maven(log: str) -> dict[str, str]:
    """``mvn test -Dtest=X`` runs traced by ``set -x``: each BUILD SUCCESS/FAILURE grades the last ``-Dtest``."""
    status_map: dict[str, str] = {}
    current = MAVEN_NO_TEST_NAME
    for raw in log.split("\n"):
        line = raw.strip()
        m = _MAVEN_TEST.match(line)
        if m:
            current = m.group(1)
        m = _MAVEN_RESULT.match(line)
        if m:
            status_map[current] = TestStatus.PASSED if m.group(1) == "SUCCESS" else TestStatus.FAILED
    return status_map


def parse_log_ant(log: str) -> dict[str, str]:
    """Ant's ``[junit] [PASS|FAIL|ERR] name`` lines; ERR counts as FAILED."""
    return match_lines(log, _ANT_RESULT, _ANT_OUTCOMES)


def parse_log_gradle_custom(log: str) -> dict[str, str]:
    """``gradle test`` with the harness's logger: ``Class > method PASSED|FAILED`` (lines starting ``>`` skipped)."""
    return match_lines(log, _GRADLE_RESULT, _GRADLE_OUTCOMES)
