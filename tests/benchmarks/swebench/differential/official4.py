"""The swebench 4.1.0 oracle (the test extra's package, imported in-process), answering the jobs of
official5_worker.py the same way, so one comparison drives both versions."""

from __future__ import annotations

import io
import types
from typing import Any
from unittest import mock

import swebench
from swebench.harness import grading
from swebench.harness.constants import FAIL_TO_PASS, MAP_REPO_VERSION_TO_SPECS, PASS_TO_PASS, EvalType
from swebench.harness.log_parsers import MAP_REPO_TO_PARSER

VERSION = swebench.__version__
#: official parser function name -> a repo 4.1.0 grades with it (its get_logs_eval looks the parser up by repo)
_REPO_OF: dict[str, str] = {}
for _repo, _fn in MAP_REPO_TO_PARSER.items():
    _REPO_OF.setdefault(_fn.__name__, _repo)


def _spec(parser: str) -> types.SimpleNamespace:
    repo = _REPO_OF[parser]
    return types.SimpleNamespace(repo=repo, version=next(iter(MAP_REPO_VERSION_TO_SPECS[repo])))


def _report(status_map: dict[str, str], job: dict[str, Any]) -> dict[str, Any]:
    tests = grading.get_eval_tests_report(status_map, {FAIL_TO_PASS: job["f2p"], PASS_TO_PASS: job["p2p"]},
                                          eval_type=EvalType(job["eval_type"]))
    return {"report": {k: tests[k] for k in (FAIL_TO_PASS, PASS_TO_PASS)},
            "status": grading.get_resolution_status(tests)}


def _run(job: dict[str, Any], log_file: list[str]) -> dict[str, Any]:
    kind = job["kind"]
    if kind == "version":
        return {"value": VERSION}
    if kind == "parser_map":
        return {"value": {repo: fn.__name__ for repo, fn in MAP_REPO_TO_PARSER.items()}}
    if kind == "parse":
        return {"map": MAP_REPO_TO_PARSER[_REPO_OF[job["parser"]]](job["log"], None)}
    if kind == "report":
        return _report(job["status_map"], job)
    log_file[0] = job["log"]
    status_map, found = grading.get_logs_eval(_spec(job["parser"]), "test_output.txt")
    if kind == "logs_eval":
        return {"map": status_map, "found": found}
    if not found:  # "grade"
        return {"found": False, "map": {}, "status": "RESOLVED_NO"}
    return {"found": True, "map": status_map, **_report(status_map, job)}


def run_batch(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Answer ``jobs`` with swebench 4.1.0; an exception is answered as ``{"raised": "Name"}``."""
    out: list[dict[str, Any]] = []
    log_file = [""]  # get_logs_eval reads the log from a file: served from memory (no disk write per case)
    with mock.patch.object(grading, "open", create=True, new=lambda *_a, **_k: io.StringIO(log_file[0])):
        for job in jobs:
            try:
                out.append(_run(job, log_file))
            except Exception as exc:  # the comparison decides what an official exception means
                out.append({"raised": type(exc).__name__})
    return out
