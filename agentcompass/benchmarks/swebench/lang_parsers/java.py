"""Java: Maven (one ``-Dtest=`` run per test), Ant's JUnit task, and Gradle with a per-test result logger.

``parse_log_maven`` and ``parse_log_gradle_custom`` read logs as swebench 5.0.2 does; the ``_v4`` ones as 4.1.0.
"""

from __future__ import annotations

import re

from agentcompass.benchmarks.swebench.lang_parsers._lines import match_lines
from agentcompass.benchmarks.swebench.log_parsers import TestStatus

_MAVEN_TEST = re.compile(r".*-Dtest=(\S+)")
_MAVEN_RESULT = re.compile(r".*BUILD (SUCCESS|FAILURE)$")
# A result seen before any "-Dtest=" command line is recorded under this name, as the official parser does.
MAVEN_NO_TEST_NAME = "---NO TEST NAME FOUND YET---"

_ANT_RESULT = re.compile(r"\s*\[junit\]\s+\[(?P<outcome>PASS|FAIL|ERR)\]\s+(?P<name>.*)$")
_ANT_OUTCOMES = {"PASS": TestStatus.PASSED, "FAIL": TestStatus.FAILED, "ERR": TestStatus.FAILED}

# Greedy name: only the last blank before the outcome is dropped ("t  PASSED" names "t ").
_GRADLE_RESULT = re.compile(r"(?P<name>[^>].+)\s+(?P<outcome>PASSED|FAILED)$")
_GRADLE_OUTCOMES = {"PASSED": TestStatus.PASSED, "FAILED": TestStatus.FAILED}
# 5.0.2: a "Class > method" line whose outcome comes on a later line of its own
_GRADLE_NAME_ONLY = re.compile(r"([^>]\S*\s+>\s+\S+)$")
_GRADLE_OUTCOME_ONLY = re.compile(r"(PASSED|FAILED)$")
_MAVEN_STATUS = {"SUCCESS": TestStatus.PASSED, "FAILURE": TestStatus.FAILED}


def parse_log_maven(log: str) -> dict[str, str]:
    """``mvn test -Dtest=X`` runs traced by ``set -x``, as 5.0.2 pairs them: the ``-Dtest`` names wait in a queue and
    each BUILD SUCCESS/FAILURE grades the oldest waiting one; results seen while none waits are kept, in order,
    for the names still waiting at the end."""
    status_map: dict[str, str] = {}
    pending: list[str] = []
    unmatched: list[str] = []
    for raw in log.split("\n"):
        line = raw.strip()
        m = _MAVEN_TEST.match(line)
        if m:
            pending.append(m.group(1))
        m = _MAVEN_RESULT.match(line)
        if m:
            if pending:
                status_map[pending.pop(0)] = _MAVEN_STATUS[m.group(1)]
            else:
                unmatched.append(m.group(1))
    for name, outcome in zip(pending, unmatched, strict=False):
        status_map[name] = _MAVEN_STATUS[outcome]
    return status_map


def parse_log_maven_v4(log: str) -> dict[str, str]:
    """``mvn test -Dtest=X`` runs traced by ``set -x``, as 4.1.0 reads them: each BUILD SUCCESS/FAILURE grades the
    last ``-Dtest``."""
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
    """``gradle test`` with the harness's logger, as 5.0.2 reads it: ``Class > method PASSED|FAILED`` (lines
    starting ``>`` skipped), or a ``Class > method`` line whose outcome is the next ``PASSED``/``FAILED`` line."""
    status_map: dict[str, str] = {}
    pending: str | None = None
    for raw in log.split("\n"):
        line = raw.strip()
        m = _GRADLE_RESULT.match(line)
        if m:
            status_map[m["name"]] = _GRADLE_OUTCOMES[m["outcome"]]
            pending = None
            continue
        m = _GRADLE_NAME_ONLY.match(line)
        if m:
            pending = m.group(1)
            continue
        if pending is not None and (m := _GRADLE_OUTCOME_ONLY.match(line)):
            status_map[pending] = _GRADLE_OUTCOMES[m.group(1)]
            pending = None
    return status_map


def parse_log_gradle_custom_v4(log: str) -> dict[str, str]:
    """``gradle test`` with the harness's logger, as 4.1.0 reads it: ``Class > method PASSED|FAILED`` lines only."""
    return match_lines(log, _GRADLE_RESULT, _GRADLE_OUTCOMES)
