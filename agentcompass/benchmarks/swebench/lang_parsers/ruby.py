"""Ruby: minitest ``-v``, cucumber ``--format progress``, test-unit ``-v``, and rspec JSON flattened by ``jq``."""

from __future__ import annotations

import re

from agentcompass.benchmarks.swebench.lang_parsers._lines import match_lines
from agentcompass.benchmarks.swebench.log_parsers import TestStatus

# "TestSite#test_x = 0.01 s = ." -- greedy: the name ends at the last ". " before a "=", the outcome is the
# last ".", "F" or "E" after it.
_MINITEST_RESULT = re.compile(r"(?P<name>.+)\. .*=.*(?P<outcome>\.|F|E).*$")
_MINITEST_OUTCOMES = {".": TestStatus.PASSED, "F": TestStatus.FAILED, "E": TestStatus.FAILED}

_CUCUMBER_RESULT = re.compile(r"(?P<name>.*) \.+(?P<outcome>\.|F)")
_CUCUMBER_OUTCOMES = {".": TestStatus.PASSED, "F": TestStatus.FAILED}

_TEST_UNIT_RESULT = re.compile(r"\s*(?:test: )?(?P<name>.+):\s+(?P<outcome>\.|E\b|F\b|O\b)")
_TEST_UNIT_OUTCOMES = {".": TestStatus.PASSED, "E": TestStatus.FAILED, "F": TestStatus.FAILED,
                       "O": TestStatus.SKIPPED}

# "description - passed|failed" lines: the harness's jq prints pending examples too, but they never match.
_RSPEC_RESULT = re.compile(r"(?P<name>.+) - (?P<outcome>passed|failed)")
_RSPEC_OUTCOMES = {"passed": TestStatus.PASSED, "failed": TestStatus.FAILED}


def parse_log_minitest(log: str) -> dict[str, str]:
    """minitest ``-v``: ``Class#test_name = 0.00 s = .|F|E``."""
    return match_lines(log, _MINITEST_RESULT, _MINITEST_OUTCOMES)


def parse_log_cucumber(log: str) -> dict[str, str]:
    """cucumber ``--format progress``: ``name ...`` then ``.`` (passed) or ``F`` (failed)."""
    return match_lines(log, _CUCUMBER_RESULT, _CUCUMBER_OUTCOMES)


def parse_log_ruby_unit(log: str) -> dict[str, str]:
    """test-unit ``-v``: ``test: name: .|F|E|O`` (O, omitted, is SKIPPED)."""
    return match_lines(log, _TEST_UNIT_RESULT, _TEST_UNIT_OUTCOMES)


def parse_log_rspec_transformed_json(log: str) -> dict[str, str]:
    """rspec ``--format json`` flattened by the harness's ``jq`` to ``description - status`` lines."""
    return match_lines(log, _RSPEC_RESULT, _RSPEC_OUTCOMES)
