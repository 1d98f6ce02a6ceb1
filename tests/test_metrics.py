"""Confidence intervals of pass@k and avg@k, checked against published and closed-form values."""

from __future__ import annotations

import pytest

from agentcompass.metrics import DefaultAccumulator, clustered_wilson_interval, wilson_interval
from agentcompass.records import AttemptRecord, TaskDetail


@pytest.mark.parametrize(("successes", "n", "lo", "hi"), [
    # Newcombe (1998), Statistics in Medicine 17:857-872, Table I, method 3 (Wilson score, no continuity corr.)
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0000, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_interval_matches_published_values(successes: int, n: int, lo: float, hi: float) -> None:
    got = wilson_interval(successes, n)
    assert got == pytest.approx((lo, hi), abs=5e-5)


def test_wilson_interval_is_symmetric_and_bounded() -> None:
    lo, hi = wilson_interval(3, 10)
    lo2, hi2 = wilson_interval(7, 10)
    assert lo == pytest.approx(1 - hi2) and hi == pytest.approx(1 - lo2)
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0) and wilson_interval(0, 0) == (0.0, 1.0)


def test_clustered_interval_reduces_to_tasks_when_attempts_agree_and_to_attempts_when_they_vary_alike() -> None:
    # every task all-or-nothing over k=4: 30 of 100 tasks solved -> no more information than 100 tasks
    assert clustered_wilson_interval(30.0, 30.0, 100, 4) == pytest.approx(wilson_interval(30, 100))
    # every task solved exactly half the time: no between-task variance -> all 400 attempts count
    assert clustered_wilson_interval(50.0, 25.0, 100, 4) == pytest.approx(wilson_interval(200, 400))
    # k=1 is the plain Wilson interval
    assert clustered_wilson_interval(12.0, 12.0, 40, 1) == pytest.approx(wilson_interval(12, 40))


def _task(i: int, outcomes: list[bool | None], category: str = "c") -> TaskDetail:
    attempts = {str(n + 1): AttemptRecord(status="completed" if o is not None else "run_error", correct=o,
                                          score=None if o is None else float(o)) for n, o in enumerate(outcomes)}
    return TaskDetail(task_id=f"t{i}", k=len(outcomes), attempts=attempts, category=category)


def test_accumulator_reports_intervals_for_the_run_and_each_category() -> None:
    acc = DefaultAccumulator(k=2, primary="avg@2")
    for i in range(6):
        acc.add(_task(i, [True, True], "a"))
    for i in range(6, 10):
        acc.add(_task(i, [False, None], "b"))  # an errored attempt counts as a failure
    metrics, by_cat = acc.result()
    assert metrics["pass@2"] == 0.6 and metrics["avg@2"] == 0.6
    assert metrics["pass@2_ci"] == pytest.approx(list(wilson_interval(6, 10)), abs=1e-4)
    # all-or-nothing tasks: the avg@2 interval is the task-level one, not one over 20 attempts
    assert metrics["avg@2_ci"] == metrics["pass@2_ci"]
    assert metrics["primary_ci"] == metrics["avg@2_ci"]
    assert by_cat["a"]["pass@2_ci"] == pytest.approx(list(wilson_interval(6, 6)), abs=1e-4)
    assert by_cat["b"]["pass@2_ci"][0] == 0.0


def test_avg_interval_is_narrower_than_pass_interval_when_attempts_disagree_within_tasks() -> None:
    acc = DefaultAccumulator(k=4)
    for i in range(50):
        acc.add(_task(i, [True, False, True, False]))
    metrics, _ = acc.result()
    width = metrics["avg@4_ci"][1] - metrics["avg@4_ci"][0]
    assert metrics["avg@4_ci"] == pytest.approx(list(wilson_interval(100, 200)), abs=1e-4)
    assert width < 0.15


def test_no_tasks_means_no_rate_and_no_interval() -> None:
    metrics, _ = DefaultAccumulator(k=1).result()
    assert metrics == {"tasks": 0, "graded_tasks": 0, "solved": 0}  # no pass@1 0.0 for nothing asked
