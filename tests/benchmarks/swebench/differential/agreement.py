"""Compare our Python log parsers and grading with an official swebench release on generated cases.

``compare(version)`` runs every case through the official release (4.1.0 in-process, 5.0.2 in one subprocess
batch) and through ours under ``grading_version=version``, and tallies the agreement on logs (whole status
maps), names (each test's status), per-test reports (which list each FAIL_TO_PASS/PASS_TO_PASS name lands
in) and resolution status. A log the official parser raises on is compared with the official map of the log
without the lines a named deviation (deviations.py) explains, and counted under that deviation.
"""

from __future__ import annotations

import collections
import functools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentcompass.benchmarks.swebench import log_parsers as lp
from agentcompass.benchmarks.swebench.grading import (
    FAIL_TO_PASS,
    PASS_TO_PASS,
    GradeError,
    get_resolution_status,
    get_tests_report,
    grade,
    parse_test_output,
)
from agentcompass.benchmarks.swebench.test_specs import START_TEST_OUTPUT
from tests.benchmarks.swebench.differential import deviations as dev
from tests.benchmarks.swebench.differential import official4, official5
from tests.benchmarks.swebench.differential.python_logs import FRAMEWORKS, GeneratedLog, generate_many

LOGS_PER_FRAMEWORK = 500
RESOLUTION_CASES = 1000
EVAL_TYPES = ("pass_and_fail", "fail_only")
#: recorded values: every official status, plus what the official parsers also record (XPASS is never a
#: status, ``b]`` is the second word of ``t[a b] PASSED``)
_VALUES = ("PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS", "b]", "ERROR:")
#: names: full parametrized ids and the datasets' cut ones (``t.py::b[x`` is a prefix of ``t.py::b[x y]``)
_NAMES = ("t.py::a", "t.py::b[x y", "t.py::b[x", "t.py::b[x y]", "t.py::b[x z]", "t.py::c[1]", "t.py::c[1 2]",
          "t.py::c[", "test_d (m.C)", "Docstring line.", "[100%]", "t.py::e", "ünï", "t.py::f[/a/b]", "t.py::g",
          "t.py::h[a b] - reason", "t.py::h[a")


@dataclass
class Tally:
    """How many compared items agreed."""

    total: int = 0
    equal: int = 0

    def add(self, same: bool) -> None:
        self.total += 1
        self.equal += same

    @property
    def rate(self) -> float:
        return self.equal / self.total if self.total else 1.0

    def __str__(self) -> str:
        return f"{100 * self.rate:.2f}% ({self.equal}/{self.total})"


@dataclass
class Agreement:
    """One version's comparison: tallies, the deviations used, and every difference left unexplained."""

    version: str
    logs: Tally = field(default_factory=Tally)  # parser maps equal (whole log and its test section)
    names: Tally = field(default_factory=Tally)  # each name of either map: same status
    logs_eval: Tally = field(default_factory=Tally)  # parse_test_output == get_logs_eval
    reports: Tally = field(default_factory=Tally)  # each listed test: same list (success/failure/neither)
    status: Tally = field(default_factory=Tally)  # resolution status equal
    end_to_end: Tally = field(default_factory=Tally)  # whole eval logs: found, report and status equal
    deviations: collections.Counter[str] = field(default_factory=collections.Counter)
    differences: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"swebench {self.version}: logs {self.logs}, names {self.names}, get_logs_eval {self.logs_eval}, "
                f"per-test reports {self.reports}, resolution status {self.status}, whole eval logs "
                f"{self.end_to_end}; official raised (deviations): {dict(self.deviations)}")


def official(version: str) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """The batch runner of the official release ``version``."""
    return {dev.V5: official5.run_batch, dev.V4: official4.run_batch}[version]


def _answers(version: str, jobs: list[dict[str, Any]], frameworks: list[str]) -> tuple[list[dict[str, Any]],
                                                                                     list[str | None]]:
    """The official answers; a job that raised is run again on its log without the lines a deviation names."""
    out = official(version)(jobs)
    redo: dict[int, dict[str, Any]] = {}
    used: list[str | None] = [None] * len(jobs)
    for i, answer in enumerate(out):
        if "raised" in answer and "log" in jobs[i]:
            log, row = dev.without_crash_lines(jobs[i]["log"], frameworks[i], version)
            if row is not None:
                redo[i], used[i] = {**jobs[i], "log": log}, row
    for i, answer in zip(redo, official(version)(list(redo.values())), strict=True):
        out[i] = answer
    return out, used


def _section(case: GeneratedLog) -> str:
    return case.text.split(START_TEST_OUTPUT)[-1]


def _listing(name: str, report: dict[str, Any]) -> str:
    return next((f"{key}.{kind}" for key in (FAIL_TO_PASS, PASS_TO_PASS) for kind in ("success", "failure")
                 if name in report[key][kind]), "neither")


def _report_dict(report: Any) -> dict[str, dict[str, list[str]]]:
    return {key: {"success": report[key].success, "failure": report[key].failure} for key in (FAIL_TO_PASS,
                                                                                                PASS_TO_PASS)}


def _tally_report(agreement: Agreement, ours: dict[str, Any], theirs: dict[str, Any], f2p: list[str],
                  p2p: list[str]) -> None:
    for name in [*f2p, *p2p]:
        agreement.reports.add(_listing(name, ours) == _listing(name, theirs))


def _resolution_case(rng: random.Random) -> tuple[dict[str, str], list[str], list[str]]:
    status_map = {name: rng.choice(_VALUES) for name in rng.sample(_NAMES, rng.randint(0, len(_NAMES)))}
    lists = [[rng.choice(_NAMES) for _ in range(rng.choice((0, 0, 1, 2, 3, 5)))] for _ in range(2)]
    return status_map, lists[0], lists[1]


def _dataset_name(test: str) -> str:
    """A test's name as the datasets list it: a pytest id cut at its first space."""
    return test.split(" ")[0] if "::" in test else test


def _e2e_lists(rng: random.Random, case: GeneratedLog) -> tuple[list[str], list[str]]:
    names = [_dataset_name(t) for t, _ in case.tests] + ["tests/test_gone.py::test_missing"]
    rng.shuffle(names)
    cut = rng.randint(0, len(names))
    return names[:cut], names[cut:]


@functools.cache
def compare(version: str) -> Agreement:
    """Every generated case through the official ``version`` and ours (see the module doc)."""
    agreement = Agreement(version)
    jobs: list[dict[str, Any]] = []
    fws: list[str] = []
    ours: list[Callable[[], Any]] = []
    for fw in FRAMEWORKS:
        parser = lp.get_parser(None, fw, version)
        official_name = f"parse_log_{fw}"
        for case in generate_many(fw, LOGS_PER_FRAMEWORK, seed=14):
            for text in (case.text, _section(case)):
                jobs.append({"kind": "parse", "parser": official_name, "log": text})
                fws.append(fw)
                ours.append(functools.partial(parser, text))
        for case in generate_many(fw, LOGS_PER_FRAMEWORK, seed=41):
            jobs.append({"kind": "logs_eval", "parser": official_name, "log": case.text})
            fws.append(fw)
            ours.append(functools.partial(parse_test_output, case.text, fw, version=version))
        rng = random.Random(f"e2e-{fw}")
        for case in generate_many(fw, LOGS_PER_FRAMEWORK, seed=77):
            f2p, p2p = _e2e_lists(rng, case)
            jobs.append({"kind": "grade", "parser": official_name, "log": case.text, "f2p": f2p, "p2p": p2p,
                         "eval_type": "pass_and_fail"})
            fws.append(fw)
            instance = {"instance_id": "x__y-1", "repo": "x/y", FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p}
            ours.append(functools.partial(grade, instance, case.text, fw, version=version))
    for eval_type in EVAL_TYPES:
        rng = random.Random(f"resolution-{eval_type}")
        for _ in range(RESOLUTION_CASES):
            status_map, f2p, p2p = _resolution_case(rng)
            jobs.append({"kind": "report", "status_map": status_map, "f2p": f2p, "p2p": p2p, "eval_type": eval_type})
            fws.append("")
            ours.append(functools.partial(get_tests_report, status_map, f2p, p2p,
                                          fail_only=eval_type == "fail_only", version=version))
    answers, used = _answers(version, jobs, fws)
    for job, answer, row, mine in zip(jobs, answers, used, ours, strict=True):
        _tally(agreement, job, answer, row, mine())
    return agreement


def _tally(agreement: Agreement, job: dict[str, Any], answer: dict[str, Any], row: str | None, mine: Any) -> None:
    where = f"{job['kind']} {job.get('parser', '')}: {job}"
    if "raised" in answer:
        agreement.differences.append(f"the official code raised {answer['raised']} on {where}")
        return
    if row is not None:
        agreement.deviations[row] += 1
    kind = job["kind"]
    if kind == "parse":
        theirs = answer["map"]
        agreement.logs.add(mine == theirs)
        for name in {*mine, *theirs}:
            agreement.names.add(mine.get(name) == theirs.get(name))
        if mine != theirs:
            agreement.differences.append(f"parser maps differ: ours {mine} official {theirs} on {where}")
    elif kind == "logs_eval":
        status_map, error = mine
        same = (error is None) == answer["found"] and status_map == answer["map"]
        agreement.logs_eval.add(same)
        if not same:
            agreement.differences.append(
                f"get_logs_eval differs: ours {status_map, error} official {answer} on {where}")
    elif kind == "report":
        report = _report_dict(mine)
        _tally_report(agreement, report, answer["report"], job["f2p"], job["p2p"])
        status = get_resolution_status(mine).value
        agreement.status.add(status == answer["status"])
        if report != answer["report"] or status != answer["status"]:
            agreement.differences.append(f"report differs: ours {report} {status} official {answer} on {where}")
    else:  # a whole eval log graded
        found = mine.error is None
        report = _report_dict(mine.tests_status)
        same = found == answer["found"] and mine.status.value == answer["status"] and (
            not found or (report == answer["report"] and mine.test_results == answer["map"]))
        agreement.end_to_end.add(same)
        if found and answer["found"]:
            _tally_report(agreement, report, answer["report"], job["f2p"], job["p2p"])
        agreement.status.add(mine.status.value == answer["status"])
        if not same:
            agreement.differences.append(f"grade differs: ours {report_repr(mine)} official {answer} on {where}")


def report_repr(report: Any) -> str:
    """A short form of our GradeReport for a failure message."""
    error = report.error.value if isinstance(report.error, GradeError) else report.error
    return f"status={report.status.value} error={error} map={report.test_results}"
