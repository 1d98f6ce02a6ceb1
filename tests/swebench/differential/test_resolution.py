"""Our grading of a status map agrees with the official swebench 4.1.0 ``get_eval_tests_report`` and
``get_resolution_status`` on random cases, but for the rows of deviations.py."""

from __future__ import annotations

import random

import pytest
from swebench.harness import grading as official
from swebench.harness.constants import FAIL_ONLY_REPOS as OFFICIAL_FAIL_ONLY_REPOS
from swebench.harness.constants import EvalType

from agentcompass.swebench.grading import (
    FAIL_ONLY_REPOS,
    FAIL_TO_PASS,
    PASS_TO_PASS,
    get_resolution_status,
    get_tests_report,
)
from tests.swebench.differential import deviations as dev

CASES = 1000
#: recorded values: every official status, plus what the official parsers also record (XPASS is never a
#: status, ``b]`` is the second word of ``t[a b] PASSED``)
_VALUES = ("PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS", "b]", "ERROR:")
_NAMES = ("t.py::a", "t.py::b[x y", "t.py::b[x", "t.py::c[1]", "test_d (m.C)", "Docstring line.", "[100%]",
          "t.py::e", "ünï", "t.py::f[/a/b]", "t.py::g", "t.py::h")


_RANK = {"RESOLVED_NO": 0, "RESOLVED_PARTIAL": 1, "RESOLVED_FULL": 2}


def _case(rng: random.Random) -> tuple[dict[str, str], list[str], list[str]]:
    status_map = {name: rng.choice(_VALUES) for name in rng.sample(_NAMES, rng.randint(0, len(_NAMES)))}
    lists = []
    for _ in range(2):  # names may repeat, be missing from the log, or the list be empty
        lists.append([rng.choice(_NAMES) for _ in range(rng.choice((0, 0, 1, 2, 3, 5)))])
    return status_map, lists[0], lists[1]


def test_fail_only_repos_are_the_official_ones() -> None:
    assert FAIL_ONLY_REPOS == OFFICIAL_FAIL_ONLY_REPOS


@pytest.mark.parametrize("eval_type", list(EvalType))
def test_reports_and_resolution_equal_the_official_ones_on_random_cases(eval_type: EvalType) -> None:
    rng = random.Random(f"resolution-{eval_type.value}")
    fail_only = eval_type is EvalType.FAIL_ONLY
    used = {d.name: 0 for d in dev.GRADING_DEVIATIONS}
    for i in range(CASES):
        status_map, f2p, p2p = _case(rng)
        where = f"case #{i}: {status_map=} {f2p=} {p2p=}"
        expected = official.get_eval_tests_report(status_map, {FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p},
                                                  eval_type=eval_type)
        report = get_tests_report(status_map, f2p, p2p, fail_only=fail_only)
        ours = {key: {"success": report[key].success, "failure": report[key].failure}
                for key in (FAIL_TO_PASS, PASS_TO_PASS)}
        skipped = {name for name, status in status_map.items() if status == "SKIPPED"}
        if not fail_only:
            # the documented rows: a skipped F2P test fails here, a skipped P2P test is maintained here;
            # officially both are in neither list
            used[dev.SKIPPED_F2P_FAILS.name] += sum(1 for name in ours[FAIL_TO_PASS]["failure"] if name in skipped)
            used[dev.SKIPPED_P2P_MAINTAINED.name] += sum(
                1 for name in ours[PASS_TO_PASS]["success"] if name in skipped)
            ours[FAIL_TO_PASS]["failure"] = [n for n in ours[FAIL_TO_PASS]["failure"] if n not in skipped]
            ours[PASS_TO_PASS]["success"] = [n for n in ours[PASS_TO_PASS]["success"] if n not in skipped]
        assert ours == {key: expected[key] for key in (FAIL_TO_PASS, PASS_TO_PASS)}, where
        status = get_resolution_status(report)
        if any(name in skipped for name in report[FAIL_TO_PASS].failure):
            # a skipped F2P test can only lower the resolution here: the official one ranks at least as high
            assert _RANK[official.get_resolution_status(expected)] >= _RANK[status.value], where
        else:
            # in particular a skipped P2P test never changes the resolution
            assert status.value == official.get_resolution_status(expected), where
    if not fail_only:
        assert used[dev.SKIPPED_F2P_FAILS.name] and used[dev.SKIPPED_P2P_MAINTAINED.name], used
