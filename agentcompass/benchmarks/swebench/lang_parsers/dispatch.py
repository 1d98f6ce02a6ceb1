"""Repos whose official parser depends on the instance: jekyll (minitest or cucumber) and immutable-js (jest).

The official harness picks by the instance id's PR number; :func:`parser_name_for_instance` does the same.
Given only a log, :func:`parse_log_jekyll` and :func:`parse_log_immutable_js` pick by the log's format.
"""

from __future__ import annotations

import re

from agentcompass.benchmarks.swebench.lang_parsers.javascript import (
    parse_log_jest,
    parse_log_jest_json,
    parse_log_jest_v4,
)
from agentcompass.benchmarks.swebench.lang_parsers.ruby import parse_log_cucumber, parse_log_minitest

# parser name -> {PR number: concrete parser name}, as the official dispatchers read them off the instance id
INSTANCE_PARSER_NAMES: dict[str, dict[str, str]] = {
    "jekyll": {"9141": "minitest", "8047": "minitest", "8167": "minitest", "8761": "cucumber", "8771": "cucumber"},
    "immutable_js": {"2006": "jest", "2005": "jest_json"},
}

_CUCUMBER_SUMMARY = re.compile(r"^\d+ scenarios? \(", re.MULTILINE)
_JEST_JSON_LINE = re.compile(r"^\s*\[(?:PASSED|FAILED)\]\s", re.MULTILINE)


def parser_name_for_instance(parser_name: str, instance_id: str) -> str:
    """The concrete parser for ``instance_id`` when ``parser_name`` dispatches per instance, else ``parser_name``.

    jekyll reads the PR number as the second ``-`` field of the id, immutable-js as the last (as officially);
    an unknown PR keeps the format-detecting parser (the official one raises).
    """
    by_pr = INSTANCE_PARSER_NAMES.get(parser_name)
    if by_pr is None:
        return parser_name
    parts = instance_id.split("-")
    pr = parts[1] if parser_name == "jekyll" and len(parts) > 1 else parts[-1]
    return by_pr.get(pr, parser_name)


def parse_log_jekyll(log: str) -> dict[str, str]:
    """jekyll without its instance id: cucumber when the log has cucumber's ``N scenarios (...)`` summary."""
    if _CUCUMBER_SUMMARY.search(log):
        return parse_log_cucumber(log)
    return parse_log_minitest(log)


def parse_log_immutable_js(log: str) -> dict[str, str]:
    """immutable-js without its instance id: jest-json when a ``[PASSED]``/``[FAILED]`` line is present."""
    if _JEST_JSON_LINE.search(log):
        return parse_log_jest_json(log)
    return parse_log_jest(log)


def parse_log_immutable_js_v4(log: str) -> dict[str, str]:
    """``parse_log_immutable_js`` with jest read as swebench 4.1.0 reads it."""
    if _JEST_JSON_LINE.search(log):
        return parse_log_jest_json(log)
    return parse_log_jest_v4(log)
