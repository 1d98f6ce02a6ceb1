"""The documented deviations from the official harness (swebench 5.0.2 and 4.1.0), one named row each.

Our parsers and grading follow the chosen version exactly; they differ only where the official code raises.
Every difference the differential tests accept is matched by exactly one row here; the same list, with the
same names and reasons, is in docs/swebench.md ("Agreement with the official harness").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

V5, V4 = "5.0.2", "4.1.0"


@dataclass(frozen=True)
class ParserDeviation:
    """A log line the official parser raises on (so it gives no map at all) and ours skips."""

    name: str
    frameworks: frozenset[str]
    versions: frozenset[str]
    reason: str
    crash_line: Callable[[str], bool]  # a log line the official parser raises IndexError on


def _bare_seaborn_result(line: str) -> bool:
    return len(line.split()) < 2 and (line.startswith(("FAILED", "PASSED")) or " PASSED " in line)


def _bare_django_header(line: str) -> bool:
    return line.strip().startswith(("FAIL:", "ERROR:")) and len(line.split()) < 2


PARSER_DEVIATIONS = (
    ParserDeviation(
        "bare_result_line_skipped", frozenset({"seaborn"}), frozenset({V4}),
        "a line that is only `FAILED` or `PASSED` (a log cut mid-line, a printed word) makes the 4.1.0 seaborn "
        "parser raise IndexError; we skip the line (as swebench 5.0.2 does)",
        crash_line=_bare_seaborn_result),
    ParserDeviation(
        "bare_failure_header_skipped", frozenset({"django"}), frozenset({V4, V5}),
        "a line that is only `FAIL:` or `ERROR:` (a log cut mid-line) makes the django parser of both versions "
        "raise IndexError; we skip the line",
        crash_line=_bare_django_header),
)


def crash_rows(framework: str, version: str) -> tuple[ParserDeviation, ...]:
    """The deviations of ``framework``'s parser in ``version``."""
    return tuple(d for d in PARSER_DEVIATIONS if framework in d.frameworks and version in d.versions)


def without_crash_lines(log: str, framework: str, version: str) -> tuple[str, str | None]:
    """The log with the lines the official parser raises on blanked, and the deviation that names them (None:
    no such line, the official exception is unexplained)."""
    lines = log.split("\n")
    for row in crash_rows(framework, version):
        if any(map(row.crash_line, lines)):
            return "\n".join("" if row.crash_line(x) else x for x in lines), row.name
    return log, None
