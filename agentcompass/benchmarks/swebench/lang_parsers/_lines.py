"""The line-by-line scan most multilingual parsers share: one regex per stripped log line."""

from __future__ import annotations

import re
from collections.abc import Mapping


def match_lines(log: str, pattern: re.Pattern[str], statuses: Mapping[str, str]) -> dict[str, str]:
    """``{name: status}`` from every stripped line ``pattern`` matches at its start.

    ``pattern`` has the groups ``name`` and ``outcome``; an outcome missing from ``statuses`` records nothing.
    A later line for the same name overrides an earlier one.
    """
    status_map: dict[str, str] = {}
    for line in log.split("\n"):
        m = pattern.match(line.strip())
        if m is None:
            continue
        status = statuses.get(m["outcome"])
        if status is not None:
            status_map[m["name"]] = status
    return status_map
