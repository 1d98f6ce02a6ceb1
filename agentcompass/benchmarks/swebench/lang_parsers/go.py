"""Go: ``go test -v`` result lines ``--- PASS|FAIL|SKIP: TestName/subtest (0.01s)``."""

from __future__ import annotations

import re

from agentcompass.benchmarks.swebench.lang_parsers._lines import match_lines
from agentcompass.benchmarks.swebench.log_parsers import TestStatus

# The name is greedy: "--- PASS: TestX (a) (0.00s)" names "TestX (a)", as the official parser does.
_RESULT = re.compile(r"--- (?P<outcome>PASS|FAIL|SKIP): (?P<name>.+) \(.+\)$")
_OUTCOMES = {"PASS": TestStatus.PASSED, "FAIL": TestStatus.FAILED, "SKIP": TestStatus.SKIPPED}


def parse_log_gotest(log: str) -> dict[str, str]:
    """``go test -v``: every ``--- PASS|FAIL|SKIP`` line, subtests by their full ``Parent/child`` name."""
    return match_lines(log, _RESULT, _OUTCOMES)
