"""Grade a SWE-bench Pro attempt from the result json its parser wrote, as the official evaluator does.

The parser (``run_scripts/<instance_id>/parser.py``) writes ``{"tests": [{"name": ..., "status":
"PASSED"|"FAILED"|"SKIPPED"|"ERROR"}, ...]}``. The attempt is resolved when every FAIL_TO_PASS and every
PASS_TO_PASS name is among the names with status ``PASSED`` (exactly that string: a SKIPPED PASS_TO_PASS test
fails, unlike SWE-bench). No result json, one that is not of that shape, or a run cut off by its deadline:
not completed, not resolved.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec

PASSED = "PASSED"
#: at most this many parsed tests are kept in the report (the verdict uses all of them)
MAX_REPORTED_TESTS = 5000


class ListOutcome(msgspec.Struct):
    """The tests of one list (F2P or P2P) that passed and that did not."""

    success: list[str] = msgspec.field(default_factory=list)
    failure: list[str] = msgspec.field(default_factory=list)


class ProReport(msgspec.Struct, kw_only=True):
    """The verdict on one attempt (``extra.eval_raw_data``). ``returncode`` is the run script's exit code."""

    completed: bool
    resolved: bool
    timed_out: bool = False
    returncode: int | None = None
    tests: list[dict[str, str]] = msgspec.field(default_factory=list)
    fail_to_pass: ListOutcome = msgspec.field(default_factory=ListOutcome)
    pass_to_pass: ListOutcome = msgspec.field(default_factory=ListOutcome)
    error: str | None = None


def read_results(output_json: str | bytes | None) -> tuple[list[dict[str, str]] | None, str | None]:
    """The ``tests`` of a parser's result json, or (None, why not) when there is none or it is malformed
    (the official evaluator fails those attempts with an exception)."""
    if output_json is None:
        return None, "the parser wrote no result json"
    try:
        data = json.loads(output_json)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"the result json is not valid JSON ({exc})"
    tests = data.get("tests") if isinstance(data, dict) else None
    if not isinstance(tests, list):
        return None, "the result json has no list `tests`"
    out: list[dict[str, str]] = []
    for t in tests:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or "status" not in t:
            return None, "an entry of `tests` lacks a string `name` or a `status`"
        out.append({"name": t["name"], "status": str(t["status"])})
    return out, None


def grade(output_json: str | bytes | None, fail_to_pass: Sequence[str], pass_to_pass: Sequence[str], *,
          timed_out: bool = False, returncode: int | None = None) -> ProReport:
    """The verdict from the parser's result json (None: there was none)."""
    if timed_out:
        return ProReport(completed=False, resolved=False, timed_out=True, returncode=returncode,
                         fail_to_pass=ListOutcome(failure=list(fail_to_pass)),
                         pass_to_pass=ListOutcome(failure=list(pass_to_pass)),
                         error="the run did not finish before eval_timeout")
    tests, error = read_results(output_json)
    passed = {t["name"] for t in tests or () if t["status"] == PASSED}
    f2p = ListOutcome([n for n in fail_to_pass if n in passed], [n for n in fail_to_pass if n not in passed])
    p2p = ListOutcome([n for n in pass_to_pass if n in passed], [n for n in pass_to_pass if n not in passed])
    completed = tests is not None
    resolved = completed and not f2p.failure and not p2p.failure
    return ProReport(completed=completed, resolved=resolved, returncode=returncode,
                     tests=(tests or [])[:MAX_REPORTED_TESTS], fail_to_pass=f2p, pass_to_pass=p2p, error=error)


def report_dict(report: ProReport) -> dict[str, Any]:
    """The report as plain data (for ``EvalResult.extra``)."""
    out: dict[str, Any] = msgspec.to_builtins(report)
    return out


__all__ = ["MAX_REPORTED_TESTS", "PASSED", "ListOutcome", "ProReport", "grade", "read_results", "report_dict"]
