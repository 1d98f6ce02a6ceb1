"""``go test -v`` logs (a minimal parser for the Go end-to-end instance; the full per-language parsers replace it)."""

from __future__ import annotations

import re

_RESULT = re.compile(r"^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$")
_STATUS = {"PASS": "PASSED", "FAIL": "FAILED", "SKIP": "SKIPPED"}


def parse_log_gotest(log: str) -> dict[str, str]:
    """``--- PASS|FAIL|SKIP: name (duration)`` lines, indented subtests included, as the official parser reads
    them."""
    status_map: dict[str, str] = {}
    for line in log.split("\n"):
        m = _RESULT.match(line.strip())
        if m:
            status_map[m.group(2)] = _STATUS[m.group(1)]
    return status_map
