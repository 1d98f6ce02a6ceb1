"""PHP: ``phpunit --testdox`` output, a ``Suite (Fully\\Qualified\\Class)`` header then ``✔|✘|↩ test`` lines."""

from __future__ import annotations

import re

from agentcompass.benchmarks.swebench.log_parsers import TestStatus

_SUITE = re.compile(r"(\w.+) \(.+\)$")
_TEST = re.compile(r"\s*([✔✘↩])\s*(.*)$")
_OUTCOMES = {"✔": TestStatus.PASSED, "✘": TestStatus.FAILED, "↩": TestStatus.SKIPPED}


def parse_log_phpunit(log: str) -> dict[str, str]:
    """testdox lines named ``Suite > test``; before any suite header the suite reads ``None`` (as officially)."""
    status_map: dict[str, str] = {}
    suite: str | None = None
    for line in log.split("\n"):
        m = _SUITE.match(line)
        if m:
            suite = m.group(1)
            continue
        m = _TEST.match(line)
        if m:
            status_map[f"{suite} > {m.group(2)}"] = _OUTCOMES[m.group(1)]
    return status_map
