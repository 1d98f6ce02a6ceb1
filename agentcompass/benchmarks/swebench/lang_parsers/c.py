"""C/C++: redis/valkey's Tcl runner, jq's ``PASS:``/``FAIL:`` lines, doctest XML, micropython, googletest."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from agentcompass.benchmarks.swebench.lang_parsers._lines import match_lines
from agentcompass.benchmarks.swebench.log_parsers import TestStatus

_REDIS_RESULT = re.compile(r"\[(ok|err|skip|ignore)\]:\s(.+?)(?:\s\(\d+\s*m?s\))?$")
_REDIS_OUTCOMES = {"ok": TestStatus.PASSED, "err": TestStatus.FAILED, "skip": TestStatus.SKIPPED,
                   "ignore": TestStatus.SKIPPED}
_REDIS_ERR_LOCATION = re.compile(r"\s+in\s+\S+$")

_JQ_RESULT = re.compile(r"\s*(?P<outcome>PASS|FAIL):\s(?P<name>.+)$")
_JQ_OUTCOMES = {"PASS": TestStatus.PASSED, "FAIL": TestStatus.FAILED}

_MICROPYTHON_RESULT = re.compile(r"(?P<outcome>pass|FAIL|skip)\s+(?P<name>.+)$")
_MICROPYTHON_OUTCOMES = {"pass": TestStatus.PASSED, "FAIL": TestStatus.FAILED, "skip": TestStatus.SKIPPED}

# Greedy prefix: the last "[ OK ]"/"[ FAILED ]" of the line counts; the name ends before the last " (".
_GTEST_RESULT = re.compile(r".*\[\s*(?P<outcome>OK|FAILED)\s*\]\s(?P<name>.*)\s\(.*\)$")
_GTEST_OUTCOMES = {"OK": TestStatus.PASSED, "FAILED": TestStatus.FAILED}

_DOCTEST_OPEN = "<doctest"
_DOCTEST_CLOSE = "</doctest>"


def parse_log_redis(log: str) -> dict[str, str]:
    """redis/valkey ``runtest``: ``[ok|err|skip|ignore]: name (12 ms)``; a failure's `` in tests/x.tcl`` is cut."""
    status_map: dict[str, str] = {}
    for line in log.split("\n"):
        m = _REDIS_RESULT.match(line.strip())
        if m is None:
            continue
        outcome, name = m.group(1), m.group(2)
        if outcome == "err":
            name = _REDIS_ERR_LOCATION.sub("", name)
        status_map[name] = _REDIS_OUTCOMES[outcome]
    return status_map


def parse_log_jq(log: str) -> dict[str, str]:
    """jq's ``tests/*test`` runners: ``PASS: name`` / ``FAIL: name``."""
    return match_lines(log, _JQ_RESULT, _JQ_OUTCOMES)


def parse_log_micropython_test(log: str) -> dict[str, str]:
    """micropython ``run-tests.py``: ``pass|FAIL|skip  tests/path.py``."""
    return match_lines(log, _MICROPYTHON_RESULT, _MICROPYTHON_OUTCOMES)


def parse_log_googletest(log: str) -> dict[str, str]:
    """googletest: ``[       OK ] Suite.Test (0 ms)`` / ``[  FAILED  ] Suite.Test (1 ms)``."""
    return match_lines(log, _GTEST_RESULT, _GTEST_OUTCOMES)


def parse_log_doctest(log: str) -> dict[str, str]:
    """doctest ``-s -r=xml``: each SubCase ``TestCase > SubCase``, PASSED when all its Expressions succeeded.

    Only the first ``<doctest ...>...</doctest>`` document is read; XML that does not parse yields ``{}``
    (the official parser raises, which leaves the instance unresolved).
    """
    start = log.find(_DOCTEST_OPEN)
    if start == -1:
        return {}
    # Without a closing tag the official slice ends at len("</doctest>") - 1: reproduced, it never parses.
    end = log.find(_DOCTEST_CLOSE, start) + len(_DOCTEST_CLOSE)
    try:
        root = ET.fromstring(log[start:end])
    except ET.ParseError:
        return {}
    status_map: dict[str, str] = {}
    for case in root.iter("TestCase"):
        if case is root:
            continue
        for sub in case.iter("SubCase"):
            if sub is case:
                continue
            ok = all(expr.get("success") == "true" for expr in sub.iter("Expression") if expr is not sub)
            status_map[f"{case.get('name')} > {sub.get('name')}"] = TestStatus.PASSED if ok else TestStatus.FAILED
    return status_map
