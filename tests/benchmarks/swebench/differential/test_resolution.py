"""Our grading of a status map and of whole eval logs agrees with the official swebench 5.0.2 and 4.1.0
(``get_eval_tests_report``, ``get_resolution_status``, and ``get_logs_eval`` before them), under the matching
``grading_version``: random (status map, FAIL_TO_PASS, PASS_TO_PASS) cases per evaluation type, with cut
parametrized ids, every status, values that are no status, missing tests, empty lists and duplicates; and the
generated logs of every framework graded end to end with lists of their tests cut as the datasets cut them."""

from __future__ import annotations

import pytest
from swebench.harness.constants import FAIL_ONLY_REPOS as OFFICIAL_FAIL_ONLY_REPOS

from agentcompass.benchmarks.swebench.grading import FAIL_ONLY_REPOS, FAIL_TO_PASS, PASS_TO_PASS, get_tests_report
from tests.benchmarks.swebench.differential import deviations as dev
from tests.benchmarks.swebench.differential.agreement import compare

pytestmark = pytest.mark.xdist_group("swebench-differential")  # one worker computes each comparison once
VERSIONS = (dev.V5, dev.V4)
MIN_AGREEMENT = 0.995


def test_fail_only_repos_are_the_official_ones() -> None:
    assert FAIL_ONLY_REPOS == OFFICIAL_FAIL_ONLY_REPOS


@pytest.mark.parametrize("version", VERSIONS)
def test_reports_resolution_and_whole_logs_equal_the_official_ones(version: str) -> None:
    agreement = compare(version)
    print(agreement.summary())
    assert not agreement.differences, "\n".join(agreement.differences[:20])
    for tally in (agreement.reports, agreement.status, agreement.end_to_end):
        assert tally.total >= 3000 and tally.rate >= MIN_AGREEMENT, agreement.summary()


def test_a_cut_parametrized_id_is_graded_from_the_full_ids_in_5_0_2_only() -> None:
    """The datasets list ``test_nested_nan_negative[Tr`` for the log's ``...[True]``: 5.0.2 grades it from the
    full names when they agree, 4.1.0 books it failed; a name with balanced brackets never matches a prefix."""
    log = {"t.py::test_nested_nan_negative[True]": "PASSED", "t.py::test_nested_nan_negative[True-x]": "XFAIL",
           "t.py::test_mixed[a]": "PASSED", "t.py::test_mixed[a b]": "FAILED", "t.py::test_plain": "PASSED"}
    f2p = ["t.py::test_nested_nan_negative[Tr", "t.py::test_mixed[a", "t.py::test_plai"]
    v5 = get_tests_report(log, f2p, [])[FAIL_TO_PASS]
    assert v5.success == ["t.py::test_nested_nan_negative[Tr"]
    assert v5.failure == ["t.py::test_mixed[a", "t.py::test_plai"]  # disagreeing matches; no '[' to cut
    v4 = get_tests_report(log, f2p, [], version=dev.V4)[FAIL_TO_PASS]
    assert v4.success == [] and v4.failure == f2p


def test_skipped_tests_by_version() -> None:
    log = {"a": "SKIPPED", "b": "SKIPPED"}
    v5 = get_tests_report(log, ["a"], ["b"])
    assert (v5[FAIL_TO_PASS].failure, v5[PASS_TO_PASS].success) == (["a"], ["b"])
    v4 = get_tests_report(log, ["a"], ["b"], version=dev.V4)
    assert all(not outcome.success and not outcome.failure for outcome in v4.values())
