"""The stall watchdog: an attempt's harness that makes no progress for ``stall_timeout`` is ended.

Progress is cheap to see centrally: the harness gets its environment and model through thin wrappers that
stamp ``Activity.last`` whenever a call starts or finishes, and the watchdog counts the steps streamed into
``RunContext.trajectory``. A call in flight with its own timeout (``env.exec(..., timeout=t)``) holds the clock
until ``t`` (plus a grace) has passed, so a long command is not a stall while its own bound still runs; one
that never returns (a lost wakeup, a spawn that never completes) is. A model call holds the clock while it is
in flight: the client bounds it itself (per-read and total timeouts, a capped number of tries and waits), and
a healthy call on a throttled endpoint may queue and retry for longer than ``stall_timeout``.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..interfaces import HarnessResult
from ..models.waiting import counting_waits
from ..records import Trajectory
from .attempt_limits import AttemptBudget

#: what a call in flight may overrun its own timeout by before the watchdog stops waiting for it.
HOLD_GRACE_S = 60.0
#: how long a cancelled harness gets to unwind before the attempt moves on without it.
CANCEL_GRACE_S = 10.0
#: how often the working time is looked at again while a model call waits (it stands still meanwhile)
WORKING_RECHECK_S = 0.5

T = TypeVar("T")


class Stalled(Exception):
    """The harness made no progress for ``stall_timeout`` seconds."""


class Activity:
    """When a try last showed progress (``time.monotonic()``), and the calls in flight with their own bound."""

    __slots__ = ("_holds", "_ids", "last")

    def __init__(self) -> None:
        self.last = time.monotonic()
        self._holds: dict[int, float] = {}
        self._ids = itertools.count()

    def bump(self) -> None:
        self.last = time.monotonic()

    def stall_at(self, stall_s: float) -> float:
        """When the try counts as stalled unless something happens first."""
        return max([self.last + stall_s, *self._holds.values()])

    async def call(self, fn: Callable[..., Awaitable[T]], *args: Any, own_timeout: float | None = None,
                   self_bounded: bool = False, **kwargs: Any) -> T:
        """``await fn(*args, **kwargs)``, stamping its start and end; ``own_timeout`` holds the clock, and
        ``self_bounded`` holds it until the call returns (for calls bounded by their own deadlines)."""
        key = next(self._ids)
        self.bump()
        if self_bounded:
            self._holds[key] = math.inf
        elif own_timeout is not None and math.isfinite(own_timeout) and own_timeout > 0:
            self._holds[key] = time.monotonic() + own_timeout + HOLD_GRACE_S
        try:
            return await fn(*args, **kwargs)
        finally:
            self._holds.pop(key, None)
            self.bump()


class WatchedEnvironment:
    """The harness's view of its environment: the same object, with every async call stamped."""

    def __init__(self, env: Any, activity: Activity) -> None:
        self._env = env
        self._activity = activity

    def __repr__(self) -> str:
        return repr(self._env)

    async def exec(self, cmd: Any, *, timeout: float | None = None, **kwargs: Any) -> Any:
        own = timeout if isinstance(timeout, int | float) and not isinstance(timeout, bool) else None
        return await self._activity.call(self._env.exec, cmd, timeout=timeout, own_timeout=own, **kwargs)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._env, name)
        if inspect.iscoroutinefunction(attr):
            activity = self._activity

            async def stamped(*args: Any, **kwargs: Any) -> Any:
                return await activity.call(attr, *args, **kwargs)

            return stamped
        return attr


class WatchedModel:
    """The harness's model client, with every ``complete`` stamped (and counted against the try's ``budget``:
    refused with ``LimitReached`` once a limit is reached)."""

    def __init__(self, model: Any, activity: Activity, budget: AttemptBudget | None = None) -> None:
        self._model = model
        self._activity = activity
        self._budget = budget
        self.model_id = model.model_id

    def __repr__(self) -> str:
        return repr(self._model)

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        budget = self._budget
        if budget is None:
            return await self._activity.call(self._model.complete, *args, self_bounded=True, **kwargs)
        budget.check()
        with counting_waits(budget.wait_clock):  # the client's waits for a slot or a retry are not working time
            response = await self._activity.call(self._model.complete, *args, self_bounded=True, **kwargs)
        budget.charge(getattr(response, "usage", None))
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


async def run_watched(coro: Awaitable[HarnessResult], activity: Activity, trajectory: Trajectory, *,
                      timeout_s: float, stall_s: float, budget: AttemptBudget | None = None) -> HarnessResult:
    """The harness's result; ``TimeoutError`` after ``timeout_s``, ``Stalled`` after ``stall_s`` without
    progress, ``LimitReached`` as soon as ``budget`` refuses a model call (whatever the harness made of the
    refusal). The harness task is cancelled on every way out, and waited for at most ``CANCEL_GRACE_S``: one
    that ignores the cancel cannot hold the attempt (or a Ctrl-C) hostage."""
    task = asyncio.ensure_future(coro)
    stopped = asyncio.ensure_future(budget.stopped()) if budget is not None else None
    watched: set[asyncio.Future[Any]] = {task} if stopped is None else {task, stopped}
    deadline = time.monotonic() + timeout_s
    steps = len(trajectory.steps)
    try:
        while True:
            wake = min(deadline, activity.stall_at(stall_s))
            working_left = budget.working_left() if budget is not None else None
            if working_left is not None and budget is not None:
                # while a model call waits for a slot the working time stands still: look again a little later
                pause = max(working_left, WORKING_RECHECK_S) if budget.wait_clock.busy else working_left
                wake = min(wake, time.monotonic() + pause)
            done, _ = await asyncio.wait(watched, timeout=max(0.0, wake - time.monotonic()),
                                         return_when=asyncio.FIRST_COMPLETED)
            if budget is not None and budget.reached is None:
                budget.working_left()
            if budget is not None and budget.reached is not None:
                if task.done():
                    _retrieve(task)
                raise budget.error()
            if done:
                return task.result()
            now = time.monotonic()
            if now >= deadline:
                raise TimeoutError
            if len(trajectory.steps) != steps:  # a step was streamed: progress
                steps = len(trajectory.steps)
                activity.bump()
            elif now >= activity.stall_at(stall_s):
                raise Stalled
    finally:
        if stopped is not None:
            stopped.cancel()
        if not task.done():
            task.add_done_callback(_retrieve)
            task.cancel()
            await asyncio.wait({task}, timeout=CANCEL_GRACE_S)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # an abandoned harness's error is not "never retrieved"
