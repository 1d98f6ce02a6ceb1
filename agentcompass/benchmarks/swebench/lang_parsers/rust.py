"""Rust: libtest (``cargo test``) result lines ``test path::name ... ok|FAILED``."""

from __future__ import annotations

import re

from agentcompass.benchmarks.swebench.lang_parsers._lines import match_lines
from agentcompass.benchmarks.swebench.log_parsers import TestStatus

_RESULT = re.compile(r"test\s+(?P<name>\S+)\s+\.\.\.\s+(?P<outcome>\w+)$")
# "ignored" is not recorded (the official parser drops it too)
_OUTCOMES = {"ok": TestStatus.PASSED, "FAILED": TestStatus.FAILED}


def parse_log_cargo(log: str) -> dict[str, str]:
    """``cargo test``: ``test name ... ok`` is PASSED, ``... FAILED`` FAILED; ignored tests are left out."""
    return match_lines(log, _RESULT, _OUTCOMES)
