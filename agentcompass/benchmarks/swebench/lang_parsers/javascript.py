"""JavaScript/TypeScript: jest, vitest, karma, TAP and the per-repo formats of SWE-bench Multilingual.

Where the official parser raises on an unexpected line (calypso, karma), these return ``{}``: the official
harness then records an error for the instance, which grades as unresolved, and so does an empty map here.
"""

from __future__ import annotations

import re

from agentcompass.benchmarks.swebench.lang_parsers._lines import match_lines
from agentcompass.benchmarks.swebench.log_parsers import TestStatus

_ANSI = re.compile(r"\x1b(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (CSI and two-byte escapes)."""
    return _ANSI.sub("", text)


# --- jest, vitest, TAP ---------------------------------------------------------------------------------------

_JEST_RESULT = re.compile(r"\s*(?P<outcome>✓|✕|○)\s(?P<name>.+?)(?:\s\(\d+\s*m?s\))?$")
_JEST_OUTCOMES = {"✓": TestStatus.PASSED, "✕": TestStatus.FAILED, "○": TestStatus.SKIPPED}

_JEST_JSON_RESULT = re.compile(r"\[(?P<outcome>PASSED|FAILED)\]\s(?P<name>.+)$")
_JEST_JSON_OUTCOMES = {"PASSED": TestStatus.PASSED, "FAILED": TestStatus.FAILED}

# vitest marks failures with U+00D7 (multiplication sign). The trailing duration is optional and loose:
# "✓ adds 2" names "adds", as the official parser does.
_VITEST_RESULT = re.compile(r"\s*(?P<outcome>✓|\u00d7|↓)\s(?P<name>.+?)(?:\s(?:\d+\s*m?s?|\[skipped\]))?$")
_VITEST_OUTCOMES = {"✓": TestStatus.PASSED, "\u00d7": TestStatus.FAILED, "↓": TestStatus.SKIPPED}

_TAP_RESULT = re.compile(r"(?P<outcome>ok|not ok) \d+ (?P<name>.+)$")
_TAP_OUTCOMES = {"ok": TestStatus.PASSED, "not ok": TestStatus.FAILED}


def parse_log_jest(log: str) -> dict[str, str]:
    """jest ``--verbose``: ``✓|✕|○ test title (5 ms)`` (titles only, without their describe blocks), the title
    stripped of surrounding blanks (swebench 5.0.2)."""
    status_map: dict[str, str] = {}
    for line in log.split("\n"):
        m = _JEST_RESULT.match(line.strip())
        if m is not None:
            status_map[m["name"].strip()] = _JEST_OUTCOMES[m["outcome"]]
    return status_map


def parse_log_jest_v4(log: str) -> dict[str, str]:
    """jest ``--verbose`` as swebench 4.1.0 reads it: the title as matched (a blank before it or before the
    duration stays)."""
    return match_lines(log, _JEST_RESULT, _JEST_OUTCOMES)


def parse_log_jest_json(log: str) -> dict[str, str]:
    """jest ``--json`` flattened by the harness's ``jq`` into ``[PASSED|FAILED] full name`` lines."""
    return match_lines(log, _JEST_JSON_RESULT, _JEST_JSON_OUTCOMES)


def parse_log_vitest(log: str) -> dict[str, str]:
    """vitest ``--reporter=verbose``: ``✓ file > suite > test 3ms`` (failures and skips with their own marks)."""
    return match_lines(log, _VITEST_RESULT, _VITEST_OUTCOMES)


def parse_log_tap(log: str) -> dict[str, str]:
    """TAP (three.js's qunit, axios): ``ok 3 name`` / ``not ok 4 name``."""
    return match_lines(log, _TAP_RESULT, _TAP_OUTCOMES)


# --- wp-calypso: jest --verbose runs, the describe blocks read from indentation -------------------------------

_CALYPSO_RUN = " ./node_modules/.bin/jest "
_CALYPSO_STOP = ("Test Suites", "  ● ")
_CALYPSO_MARKS = {"✓": TestStatus.PASSED, "✕": TestStatus.FAILED}
_CALYPSO_MS = re.compile(r"\(\d+ms\)")
_CALYPSO_TIMED = {mark: re.compile(rf"\s+{mark}\s(.*)\(\d+ms\)$") for mark in _CALYPSO_MARKS}
_CALYPSO_UNTIMED = {mark: re.compile(rf"\s+{mark}\s(.*)") for mark in _CALYPSO_MARKS}


def parse_log_calypso(log: str) -> dict[str, str]:
    """wp-calypso: results after each `` ./node_modules/.bin/jest `` command, named ``suite - ... - title``.

    Indented non-result lines open (or, at a lower indent, close) describe blocks; the block stack carries
    over between jest runs. Each run's results end at ``Test Suites`` or a ``  ● `` failure detail.
    """
    status_map: dict[str, str] = {}
    suite: list[tuple[str, int]] = []
    for run in log.split(_CALYPSO_RUN)[1:]:
        for line in run.split("\n"):
            if line.startswith(_CALYPSO_STOP):
                break
            mark = line.strip()[:1]
            if mark in _CALYPSO_MARKS:
                patterns = _CALYPSO_TIMED if _CALYPSO_MS.search(line) else _CALYPSO_UNTIMED
                m = patterns[mark].match(line)
                if m is None:
                    return {}  # the official parser raises here
                name = " - ".join([" - ".join(block for block, _ in suite), m.group(1)]).strip()
                status_map[name] = _CALYPSO_MARKS[mark]
                continue
            indent = len(line) - len(line.lstrip())
            if indent > 0:
                while suite and suite[-1][1] >= indent:
                    suite.pop()
                suite.append((line.strip(), indent))
    return status_map


# --- Chart.js (karma in Chrome), marked, p5.js (mocha), react-pdf (jest per file) ------------------------------

# [^\S\r\n] keeps one Chrome result from running into the next line.
_CHART_JS_FAILURE = re.compile(r"Chrome\s[\d\.]+[^\S\r\n]\(.+?\)[^\S\r\n](.*)FAILED$", re.MULTILINE)


def parse_log_chart_js(log: str) -> dict[str, str]:
    """Chart.js karma output: only failures, ``Chrome 120.0 (Linux x86_64) suite test FAILED``."""
    return {name: TestStatus.FAILED for name in _CHART_JS_FAILURE.findall(strip_ansi(log))}


_MARKED_FAILURE = re.compile(r"\d+\)\s(.*)")


def parse_log_marked(log: str) -> dict[str, str]:
    """marked's jasmine output: only the numbered failures ``1) suite test``."""
    status_map: dict[str, str] = {}
    for line in log.split("\n"):
        m = _MARKED_FAILURE.match(line)
        if m:
            status_map[m.group(1).strip()] = TestStatus.FAILED
    return status_map


_XML_ELEMENT = re.compile(r"<(\w+)>[\s\S]*?<\/\1>", re.MULTILINE)
_MOCHA_FAILURE = re.compile(r"^\s*(\d+)\)(.{0,1000}?):", re.MULTILINE | re.DOTALL)


def _drop_json_lines(log: str) -> str:
    """Drop JSON-looking blocks (a line ending ``{``/``[`` up to a line ``}``/``]``) and one-line objects."""
    kept: list[str] = []
    in_object = in_list = False
    for line in log.split("\n"):
        text = line.rstrip()
        if text.endswith("{"):
            in_object = True
        elif text.endswith("["):
            in_list = True
        elif text == "}" and in_object:
            in_object = False
        elif text == "]" and in_list:
            in_list = False
        elif not (in_object or in_list) and not (text.startswith("{") and text.endswith("}")) \
                and not (text.startswith("[") and text.endswith("]")):
            kept.append(line)
    return "\n".join(kept)


def _drop_xml_elements(log: str) -> str:
    """Collapse ``<tag>...</tag>`` spans (shortest first) to their unclosed nested opening tags."""
    while (m := _XML_ELEMENT.search(log)) is not None:
        tag = m.group(1)
        reopened = max(m.group().count(f"<{tag}>") - 1, 0)
        log = log[: m.start()] + f"<{tag}>" * reopened + log[m.end():]
    return log


def _indents_grow(title: str) -> bool:
    """Each line of a mocha failure title is indented deeper than the one before (the first by at least 1)."""
    previous = 0
    for line in title.split("\n"):
        indent = len(line) - len(line.lstrip())
        if indent <= previous:
            return False
        previous = indent
    return True


def parse_log_p5js(log: str) -> dict[str, str]:
    """p5.js mocha output: only the numbered failures, their nested title lines joined by ``:``.

    JSON and XML dumps in the output are removed first so that their lines are not taken for titles.
    """
    text = _drop_xml_elements(_drop_json_lines(strip_ansi(log)))
    status_map: dict[str, str] = {}
    for m in _MOCHA_FAILURE.finditer(text):
        if _indents_grow(m.group(2)):
            status_map[":".join(part.strip() for part in m.group(2).split("\n"))] = TestStatus.FAILED
    return status_map


# Tried in order; the first that matches names the file.
_REACT_PDF_RESULTS = tuple(
    (re.compile(rf"{word}\s(.*){duration}"), status)
    for word, status in (("PASS", TestStatus.PASSED), ("FAIL", TestStatus.FAILED))
    for duration in (r"\s\([\d\.]+ms\)", r"\s\([\d\.]+\ss\)", r"\s\([\d\.]+s\)", "")
)


def parse_log_react_pdf(log: str) -> dict[str, str]:
    """react-pdf's jest output: per test file, ``PASS|FAIL path (1.2 s)``."""
    status_map: dict[str, str] = {}
    for line in log.split("\n"):
        for pattern, status in _REACT_PDF_RESULTS:
            m = pattern.match(line)
            if m:
                status_map[m.group(1)] = status
                break
    return status_map


# --- preact: karma with mocha's reporter, describe blocks from indentation ------------------------------------

_KARMA_LINE = re.compile(r"(\s*)?([✔✖])?\s(.*)$")


def parse_log_karma(log: str) -> dict[str, str]:
    """preact's karma output after ``Starting browser``, up to ``SUMMARY:``: ``✔|✖ test`` named ``suite > test``.

    The suite stack follows indentation one level per change, as the official parser does.
    """
    status_map: dict[str, str] = {}
    indent = -1
    suite: list[str] = []
    started = False
    for line in log.split("\n"):
        if line.startswith("SUMMARY:"):
            break
        if "Starting browser" in line:
            started = True
            continue
        if not started:
            continue
        m = _KARMA_LINE.match(line)
        if m is None:
            continue
        lead, mark, name = m.groups()
        if lead and not mark:
            if len(lead) > indent:
                indent = len(lead)
                suite.append(name)
            elif len(lead) < indent:
                indent = len(lead)
                if not suite:
                    return {}  # the official parser raises (pop from an empty stack)
                suite.pop()
                continue
        if mark:
            status_map[" > ".join([*suite, name])] = TestStatus.PASSED if mark == "✔" else TestStatus.FAILED
    return status_map
