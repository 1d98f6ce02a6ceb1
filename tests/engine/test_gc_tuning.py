"""The cyclic GC collects less often while attempts run, and the application's setting comes back after."""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

import agentcompass
from agentcompass.engine.gc_tuning import RELAXED_GEN0, relaxed_gc
from agentcompass.interfaces import (
    ComponentContext,
    Environment,
    Harness,
    HarnessResult,
    ModelClient,
    PreparedTask,
    RunContext,
)

SEEN: list[tuple[int, int, int]] = []


class GcProbeHarness(Harness):
    """Records the GC thresholds in force while an attempt runs."""

    evaluates: ClassVar[bool] = False
    needs_environment: ClassVar[bool] = False

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        pass

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        SEEN.append(gc.get_threshold())
        return HarnessResult(final_answer="")


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    """The thresholds before the test, put back after it whatever happens."""
    before = gc.get_threshold()
    try:
        yield before
    finally:
        gc.set_threshold(*before)


def test_attempts_run_with_a_relaxed_young_generation_and_the_old_thresholds_come_back(
        tmp_path: Path, thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(700, 10, 10)
    SEEN.clear()
    out = agentcompass.run_evaluation("shell_tasks", f"{__name__}:GcProbeHarness", "scripted",
                                      benchmark_params={"limit": 3}, results_dir=str(tmp_path), progress="none")
    assert out.status == "completed" and out.counts.done == 3
    assert SEEN == [(RELAXED_GEN0, 10, 10)] * 3
    assert gc.get_threshold() == (700, 10, 10)


def test_overlapping_users_keep_it_relaxed_until_the_last_one_ends(thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(700, 5, 5)
    first, second = relaxed_gc(), relaxed_gc()
    first.__enter__()
    second.__enter__()
    assert gc.get_threshold() == (RELAXED_GEN0, 5, 5)
    first.__exit__(None, None, None)
    assert gc.get_threshold() == (RELAXED_GEN0, 5, 5)
    second.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 5, 5)


def test_launches_in_two_threads_restore_the_original_thresholds(thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(700, 10, 10)
    barrier = threading.Barrier(2)
    inside: list[tuple[int, int, int]] = []

    def worker() -> None:
        with relaxed_gc():
            barrier.wait(10)
            inside.append(gc.get_threshold())
            barrier.wait(10)

    workers = [threading.Thread(target=worker) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(20)
    assert inside == [(RELAXED_GEN0, 10, 10)] * 2
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("app_gen0", [0, 100_000])
def test_a_disabled_or_higher_application_threshold_is_left_alone(
        app_gen0: int, thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(app_gen0, 10, 10)
    with relaxed_gc():
        assert gc.get_threshold() == (app_gen0, 10, 10)
    assert gc.get_threshold() == (app_gen0, 10, 10)
