"""EnvironmentPool: process-wide provider limits and creates-in-flight caps (across launches, loops and
threads), release on every path, settings validation; and the daemon-call retry helper.

Pool-level tests drive a real EnvironmentPool against a fake provider at the outside edge (``FakeDaemon``
stands for the daemon: it counts live environments and creates in flight). Launch-level tests run real
launches on the ``local`` environment with a harness that counts the workspaces alive in its base_dir."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

import aiodocker
import aiohttp
import pytest

import agentcompass
from agentcompass import ConfigError, OrchestrationSpec, RunRequestSpec
from agentcompass._errors import EnvironmentError_
from agentcompass.engine.env_pool import (
    EnvironmentPool,
    ProcessSlots,
    active_environments,
    creates_in_flight,
    provider_slots,
    validate_pool_settings,
)
from agentcompass.environments.docker.api import call
from agentcompass.environments.local.provider import LocalProvider
from agentcompass.interfaces import (
    ComponentContext,
    Environment,
    EnvironmentProvider,
    EnvOpenSpec,
    Harness,
    HarnessResult,
    ModelClient,
    PreparedTask,
    ProviderCapabilities,
    RunContext,
)
from agentcompass.records import ProgressEvent
from agentcompass.specs import ComponentSpec, ModelSpec

SAMPLE = ["files/hello_world", "text/reverse_lines", "answer/count_lines", "python/fizzbuzz"]
SPEC = EnvOpenSpec(run_id="r", task_id="t")


# ----------------------------------------------------------------------------- the outside edge


class FakeDaemon:
    """What a container daemon would see: environments alive and creates running, with their peaks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live = 0
        self.peak_live = 0
        self.creating = 0
        self.peak_creating = 0
        self.opened = 0

    def _change(self, live: int = 0, creating: int = 0) -> None:
        with self.lock:
            self.live += live
            self.creating += creating
            self.peak_live = max(self.peak_live, self.live)
            self.peak_creating = max(self.peak_creating, self.creating)
            self.opened += max(live, 0)


class FakeEnv:
    def __init__(self, daemon: FakeDaemon, n: int, *, close_error: bool = False) -> None:
        self.id = f"fake-{n}"
        self.workdir = "/"
        self._daemon = daemon
        self._close_error = close_error
        self.closed = False

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._daemon._change(live=-1)
        if self._close_error:
            raise RuntimeError("close failed")


class FakeProvider(EnvironmentProvider):
    """A provider (one per request, as the engine makes them) opening ``FakeEnv``s on a shared daemon."""

    def __init__(self, name: str, daemon: FakeDaemon, *, open_s: float = 0.0, fail: bool = False,
                 hang: bool = False, close_error: bool = False, max_creates: int | None = None) -> None:
        self.name = name
        self.daemon = daemon
        self.open_s = open_s
        self.fail = fail
        self.hang = hang
        self.close_error = close_error
        self.started = asyncio.Event()
        if max_creates is not None:
            self.capabilities = ProviderCapabilities(max_creates_in_flight=max_creates)

    async def open(self, spec: EnvOpenSpec) -> FakeEnv:
        self.daemon._change(creating=1)
        self.started.set()
        try:
            if self.hang:
                await asyncio.Event().wait()
            await asyncio.sleep(self.open_s)
            if self.fail:
                raise RuntimeError("daemon said no")
            self.daemon._change(live=1)
            return FakeEnv(self.daemon, self.daemon.opened, close_error=self.close_error)
        finally:
            self.daemon._change(creating=-1)


def _name() -> str:
    """A provider name of its own per test, so a failing test cannot leave counts to the next one."""
    return f"fake-{uuid.uuid4().hex[:8]}"


def _pool(limits: dict[str, int] | None = None, **kw: Any) -> EnvironmentPool:
    events: list[ProgressEvent] = []
    return EnvironmentPool(limits or {}, 0, events.append, **kw)


async def _open(pool: EnvironmentPool, provider: FakeProvider, *, timeout: float = 30) -> Environment:
    return await pool.open(cast(EnvironmentProvider, provider), SPEC, timeout=timeout, request="test")


async def _cycle(pool: EnvironmentPool, provider: FakeProvider, hold_s: float) -> None:
    env = await _open(pool, provider)
    try:
        await asyncio.sleep(hold_s)
    finally:
        await pool.close(env, timeout=30)


async def _waits_for_a_slot(name: str, task: asyncio.Task[Any]) -> bool:
    """Whether ``task`` sits in the queue for one of ``name``'s slots: waits (bounded) until the process-wide
    counter shows a waiter, so the verdict is the counter's, not whether the task got there in some time."""
    active, _ = provider_slots(name)
    for _ in range(3000):  # 30 s
        if active.waiting or task.done():
            break
        await asyncio.sleep(0.01)
    return active.waiting and not task.done()


# ----------------------------------------------------------------------------- provider_limits, process-wide


async def test_two_pools_on_one_loop_share_one_provider_limit() -> None:
    name, daemon = _name(), FakeDaemon()
    pools = [_pool({name: 2}), _pool({name: 2})]
    async with asyncio.timeout(60):
        await asyncio.gather(*(_cycle(p, FakeProvider(name, daemon), 0.02) for p in pools for _ in range(8)))
    assert daemon.opened == 16
    assert daemon.peak_live == 2
    assert active_environments(name) == 0


def test_pools_on_two_threads_share_one_provider_limit() -> None:
    name, daemon = _name(), FakeDaemon()
    errors: list[BaseException] = []

    async def launch() -> None:
        pool = _pool({name: 2})
        async with asyncio.timeout(60):
            await asyncio.gather(*(_cycle(pool, FakeProvider(name, daemon), 0.01) for _ in range(10)))

    def thread() -> None:
        try:
            asyncio.run(launch())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=thread) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert daemon.opened == 30
    assert daemon.peak_live == 2
    assert active_environments(name) == 0


def test_a_release_on_one_thread_wakes_an_open_waiting_on_another_threads_loop() -> None:
    name, daemon = _name(), FakeDaemon()
    holding, release, b_opened = threading.Event(), threading.Event(), threading.Event()
    errors: list[BaseException] = []

    async def a() -> None:
        pool = _pool({name: 2})
        envs = [await _open(pool, FakeProvider(name, daemon)) for _ in range(2)]
        holding.set()
        await asyncio.to_thread(release.wait, 60)
        for env in envs:
            await pool.close(env, timeout=30)

    async def b() -> None:
        await asyncio.to_thread(holding.wait, 60)
        pool = _pool({name: 2})
        async with asyncio.timeout(60):
            env = await _open(pool, FakeProvider(name, daemon))
        b_opened.set()
        await pool.close(env, timeout=30)

    def run(coro: Any) -> None:
        try:
            asyncio.run(coro)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(a(),)), threading.Thread(target=run, args=(b(),))]
    for t in threads:
        t.start()
    assert holding.wait(60)
    active, _ = provider_slots(name)
    for _ in range(600):  # until B queues for a slot (bounded: 60 s)
        if active.waiting or b_opened.is_set():
            break
        time.sleep(0.1)
    assert active.waiting and not b_opened.is_set()  # both slots are A's: B waits
    release.set()
    for t in threads:
        t.join(120)
    assert not errors
    assert b_opened.is_set()
    assert daemon.peak_live == 2
    assert active_environments(name) == 0


async def test_each_pool_opens_only_below_its_own_limit_and_unlimited_pools_still_count() -> None:
    name, daemon = _name(), FakeDaemon()
    unlimited, wide, tight = _pool(), _pool({name: 4}), _pool({name: 2})
    held = [await _open(unlimited, FakeProvider(name, daemon)) for _ in range(3)]
    waiting = asyncio.create_task(_open(tight, FakeProvider(name, daemon)))
    assert await _waits_for_a_slot(name, waiting)
    # A pool with a higher limit is not held up behind the waiting tight one.
    async with asyncio.timeout(30):
        fourth = await _open(wide, FakeProvider(name, daemon))
    assert active_environments(name) == 4
    await wide.close(fourth, timeout=30)
    await unlimited.close(held.pop(), timeout=30)
    assert active_environments(name) == 2
    assert await _waits_for_a_slot(name, waiting)  # 2 alive is not below 2
    await unlimited.close(held.pop(), timeout=30)
    async with asyncio.timeout(30):
        env = await waiting
    assert active_environments(name) == 2
    await tight.close(env, timeout=30)
    await unlimited.close(held.pop(), timeout=30)
    assert active_environments(name) == 0
    assert daemon.live == 0


async def test_waiters_with_the_same_limit_are_woken_in_arrival_order() -> None:
    slots = ProcessSlots("fifo")
    await slots.acquire(1)
    order: list[int] = []

    async def waiter(i: int) -> None:
        await slots.acquire(1)
        order.append(i)

    tasks = []
    for i in range(4):
        tasks.append(asyncio.create_task(waiter(i)))
        await asyncio.sleep(0)  # queue them in this order
    async with asyncio.timeout(30):
        for task in tasks:
            slots.release()  # one slot: only the next waiter in line may get it
            await task
    assert order == [0, 1, 2, 3]
    slots.release()
    assert slots.count == 0


# ----------------------------------------------------------------------------- release on every path


async def test_cancelling_an_open_that_waits_for_a_slot_takes_no_slot() -> None:
    name, daemon = _name(), FakeDaemon()
    pool = _pool({name: 1})
    first = await _open(pool, FakeProvider(name, daemon))
    waiting = asyncio.create_task(_open(pool, FakeProvider(name, daemon)))
    assert await _waits_for_a_slot(name, waiting)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert active_environments(name) == 1
    await pool.close(first, timeout=30)
    assert active_environments(name) == 0
    async with asyncio.timeout(30):  # the single slot is free again
        await _cycle(pool, FakeProvider(name, daemon), 0)
    assert active_environments(name) == 0 and daemon.live == 0


async def test_a_slot_granted_to_a_waiter_that_is_cancelled_at_the_same_moment_is_given_back() -> None:
    slots = ProcessSlots("race")
    await slots.acquire(1)
    waiting = asyncio.create_task(slots.acquire(1))
    await asyncio.sleep(0)
    slots.release()   # grants the slot to the waiter...
    waiting.cancel()  # ...which is cancelled before it resumes
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert slots.count == 0
    async with asyncio.timeout(30):
        await slots.acquire(1)
    assert slots.count == 1
    slots.release()


def test_a_waiter_whose_event_loop_was_closed_takes_no_slot() -> None:
    slots = ProcessSlots("closed-loop")
    loop = asyncio.new_event_loop()
    loop.run_until_complete(slots.acquire(1))
    abandoned = loop.create_task(slots.acquire(1))
    loop.run_until_complete(asyncio.sleep(0))  # the task's first step runs before this one's
    assert slots.waiting and not abandoned.done()
    loop.close()  # without cancelling it, as an application that drops its loop would
    slots.release()
    assert slots.count == 0


async def test_a_failing_or_timed_out_open_gives_both_slots_back() -> None:
    name, daemon = _name(), FakeDaemon()
    pool = _pool({name: 1})
    with pytest.raises(RuntimeError, match="daemon said no"):
        await _open(pool, FakeProvider(name, daemon, fail=True))
    with pytest.raises(TimeoutError):
        await _open(pool, FakeProvider(name, daemon, hang=True), timeout=0.2)
    assert active_environments(name) == 0 and creates_in_flight(name) == 0
    async with asyncio.timeout(30):
        await _cycle(pool, FakeProvider(name, daemon), 0)
    assert daemon.live == 0


async def test_cancelling_an_open_in_progress_gives_both_slots_back() -> None:
    name, daemon = _name(), FakeDaemon()
    pool = _pool({name: 1})
    provider = FakeProvider(name, daemon, hang=True)
    opening = asyncio.create_task(_open(pool, provider))
    async with asyncio.timeout(30):
        await provider.started.wait()
    assert active_environments(name) == 1 and creates_in_flight(name) == 1
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    assert active_environments(name) == 0 and creates_in_flight(name) == 0


class RoomyProvider(FakeProvider):
    """A provider with room for ``capacity`` environments of its own (a cluster's nodes): an open without a
    reservation waits for room itself, inside the open's deadline, as a provider without ``reserve`` would."""

    def __init__(self, name: str, daemon: FakeDaemon, capacity: int, **kw: Any) -> None:
        super().__init__(name, daemon, **kw)
        self.capacity = capacity
        self.taken = 0
        self.queued = 0
        self.reserved: set[int] = set()
        self.room = asyncio.Condition()
        self.someone_queued = asyncio.Event()

    async def _take(self) -> None:
        async with self.room:
            self.queued += 1
            self.someone_queued.set()
            try:
                await self.room.wait_for(lambda: self.taken < self.capacity)
            finally:
                self.queued -= 1
            self.taken += 1

    async def give_back(self) -> None:
        async with self.room:
            self.taken -= 1
            self.room.notify_all()

    async def reserve(self, spec: EnvOpenSpec) -> None:
        await self._take()
        self.reserved.add(id(spec))

    async def unreserve(self, spec: EnvOpenSpec) -> None:
        if id(spec) in self.reserved:
            self.reserved.discard(id(spec))
            await self.give_back()

    async def open(self, spec: EnvOpenSpec) -> FakeEnv:
        if id(spec) in self.reserved:
            self.reserved.discard(id(spec))
        else:
            await self._take()
        try:
            return await super().open(spec)
        except BaseException:
            await asyncio.shield(self.give_back())
            raise


async def test_an_open_queued_for_the_providers_own_room_is_not_bounded_by_the_open_timeout() -> None:
    """A full cluster queues opens (``reserve``) instead of failing them when the open's deadline runs out:
    only the open itself is timed."""
    name, daemon = _name(), FakeDaemon()
    pool, provider = _pool(), RoomyProvider(name, daemon, capacity=1)
    first = await _open(pool, provider)
    # the open itself (no work) has a second, an age on a loaded machine; it sits in the queue for twice that
    second = asyncio.create_task(pool.open(cast(EnvironmentProvider, provider), EnvOpenSpec(run_id="r", task_id="u"),
                                           timeout=1.0, request="test"))
    async with asyncio.timeout(30):
        await provider.someone_queued.wait()
    await asyncio.sleep(2.0)  # not synchronisation: twice the open's deadline passes while it is queued
    assert not second.done() and provider.queued == 1 and active_environments(name) == 2
    await pool.close(first, timeout=30)
    await provider.give_back()
    async with asyncio.timeout(30):
        env = await second
    assert provider.taken == 1 and not provider.reserved
    await pool.close(env, timeout=30)
    await provider.give_back()
    assert active_environments(name) == 0


async def test_a_reservation_is_given_back_when_the_open_fails_times_out_or_is_cancelled_in_the_queue() -> None:
    name, daemon = _name(), FakeDaemon()
    pool = _pool()
    failing = RoomyProvider(name, daemon, capacity=1, fail=True)
    with pytest.raises(RuntimeError, match="daemon said no"):
        await _open(pool, failing)
    hanging = RoomyProvider(name, daemon, capacity=1, hang=True)
    with pytest.raises(TimeoutError):
        await _open(pool, hanging, timeout=0.2)
    for provider in (failing, hanging):
        assert (provider.taken, provider.reserved) == (0, set())
    full = RoomyProvider(name, daemon, capacity=0)
    queued = asyncio.create_task(_open(pool, full))
    async with asyncio.timeout(30):
        await full.someone_queued.wait()
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert (full.taken, full.queued, full.reserved) == (0, 0, set())
    assert active_environments(name) == 0 and creates_in_flight(name) == 0


async def test_a_failing_close_frees_the_slot_and_a_second_close_frees_nothing_more() -> None:
    name, daemon = _name(), FakeDaemon()
    pool = _pool({name: 2})
    bad = await _open(pool, FakeProvider(name, daemon, close_error=True))
    other = await _open(pool, FakeProvider(name, daemon))
    await pool.close(bad, timeout=30)
    await pool.close(bad, timeout=30)
    assert active_environments(name) == 1
    await pool.aclose()  # closes what is still held
    assert active_environments(name) == 0
    assert isinstance(other, FakeEnv) and other.closed


# ----------------------------------------------------------------------------- creates in flight


async def test_creates_in_flight_cap_from_the_provider_counts_across_pools() -> None:
    name, daemon = _name(), FakeDaemon()
    pools = [_pool(), _pool()]
    async with asyncio.timeout(60):
        await asyncio.gather(*(_cycle(p, FakeProvider(name, daemon, open_s=0.05, max_creates=2), 0)
                               for p in pools for _ in range(6)))
    assert daemon.opened == 12
    assert daemon.peak_creating == 2
    assert creates_in_flight(name) == 0


@pytest.mark.parametrize("setting", [1, "dict"])
async def test_max_creates_in_flight_setting_overrides_the_provider_attribute(setting: Any) -> None:
    name, daemon = _name(), FakeDaemon()
    pool = _pool(max_creates_in_flight={name: 1} if setting == "dict" else setting)
    async with asyncio.timeout(60):
        await asyncio.gather(*(_cycle(pool, FakeProvider(name, daemon, open_s=0.05, max_creates=4), 0)
                               for _ in range(6)))
    assert daemon.opened == 6
    assert daemon.peak_creating == 1


# ----------------------------------------------------------------------------- settings validation


def test_unknown_provider_in_env_open_qps_dict_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"env_open_qps\.dokcer.*Known providers: docker, local") as info:
        validate_pool_settings({}, ["docker", "local"], env_open_qps={"dokcer": 2})
    assert info.value.field == "env_open_qps.dokcer"
    assert "Did you mean 'docker'" in str(info.value)
    validate_pool_settings({"docker": 2}, ["docker", "local"], env_open_qps=3.0)
    validate_pool_settings({}, ["docker", "local"], env_open_qps={"docker": 2, "local": 0})


def test_unknown_provider_in_max_env_creates_in_flight_dict_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"max_env_creates_in_flight\.dokcer") as info:
        validate_pool_settings({}, ["docker", "local"], max_creates_in_flight={"dokcer": 2})
    assert info.value.field == "max_env_creates_in_flight.dokcer"
    validate_pool_settings({}, ["docker", "local"], max_creates_in_flight=2)


# ----------------------------------------------------------------------------- real launches, local environment


class WorkspaceCountingHarness(Harness):
    """Records how many local workspaces are alive in ``base_dir`` while it runs, then sleeps."""

    evaluates: ClassVar[bool] = True
    needs_environment: ClassVar[bool] = True
    samples: ClassVar[list[int]] = []

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        self.base_dir = str(params["base_dir"])
        self.seconds = float(params.get("seconds", 0.3))

    def _sample(self) -> None:
        self.samples.append(sum(1 for n in os.listdir(self.base_dir) if n.startswith("agentcompass-")))

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        assert env is not None
        self._sample()
        await env.exec(f"sleep {self.seconds}", timeout=self.seconds + 60)
        self._sample()
        return HarnessResult(final_answer="")


def _spec(base: Path, results: Path, name: str) -> OrchestrationSpec:
    # each holds its workspace 1 s: the other slot's task opens within that on a loaded machine, so the peak of 2
    # is reached (a 0.3 s hold could end before the second open)
    harness = ComponentSpec("tests.engine.test_env_pool:WorkspaceCountingHarness",
                            {"base_dir": str(base), "seconds": 1.0})
    req = RunRequestSpec(benchmark=ComponentSpec("shell_tasks", {"sample_ids": SAMPLE}), harness=harness,
                         model=ModelSpec("scripted"), environment=ComponentSpec("local", {"base_dir": str(base)}),
                         name=name, task_concurrency=4, results_dir=str(results))
    return OrchestrationSpec(requests=[req], provider_limits={"local": 2}, progress="none")


def _check_launches(results: Sequence[agentcompass.LaunchResult], base: Path) -> None:
    for r in results:
        assert r.status == "completed", r
        assert r.outcomes[0].counts.done == len(SAMPLE)
    samples = WorkspaceCountingHarness.samples
    assert len(samples) == 2 * 2 * len(SAMPLE)
    assert max(samples) == 2  # never more than 2 local environments alive in the process
    assert active_environments("local") == 0
    assert not [n for n in os.listdir(base) if n.startswith("agentcompass-")]


class ContextRecordingLocal(LocalProvider):
    """The ``local`` provider (its name inherited), given by import path; records the context it is built with."""

    contexts: ClassVar[list[ComponentContext]] = []

    def __init__(self, params: Any, ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        self.contexts.append(ctx)


@pytest.mark.parametrize("creates", [1, "dict", None])
def test_a_provider_is_told_the_launchs_limits_under_its_registered_name(tmp_path: Path, creates: Any) -> None:
    # what a provider that opens environments ahead of need keeps within: the provider limit and creates cap the
    # engine's own opens use (looked up by the provider's name, though the request names it by import path)
    ContextRecordingLocal.contexts.clear()
    req = RunRequestSpec(benchmark=ComponentSpec("shell_tasks", {"sample_ids": SAMPLE[:1]}),
                         harness=ComponentSpec("shell_agent"), model=ModelSpec("scripted"),
                         environment=ComponentSpec("tests.engine.test_env_pool:ContextRecordingLocal",
                                                   {"base_dir": str(tmp_path)}),
                         name="r", results_dir=str(tmp_path / "results"))
    spec = OrchestrationSpec(requests=[req], provider_limits={"local": 3}, progress="none", env_open_qps=5.0,
                             max_env_creates_in_flight={"local": 1} if creates == "dict" else creates)
    out = agentcompass.launch(spec)["r"]
    assert out.status == "completed", (out.error, out.errors_by_kind)
    [ctx] = ContextRecordingLocal.contexts
    assert ctx.provider_limit == 3
    # ``local`` has no cap of its own: without the setting, none
    assert ctx.max_creates_in_flight == (None if creates is None else 1)
    assert ctx.open_pacer is not None


async def test_two_concurrent_async_launches_share_the_provider_limit(tmp_path: Path) -> None:
    WorkspaceCountingHarness.samples.clear()
    base = tmp_path / "ws"
    base.mkdir()
    results = await asyncio.gather(*(agentcompass.async_launch(_spec(base, tmp_path / "results", f"l{i}"))
                                     for i in range(2)))
    _check_launches(results, base)


def test_two_launches_on_two_threads_share_the_provider_limit(tmp_path: Path) -> None:
    WorkspaceCountingHarness.samples.clear()
    base = tmp_path / "ws"
    base.mkdir()
    results: list[agentcompass.LaunchResult] = []
    errors: list[BaseException] = []

    def run(name: str) -> None:
        try:
            results.append(agentcompass.launch(_spec(base, tmp_path / "results", name)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f"t{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    assert not errors
    _check_launches(results, base)


# ----------------------------------------------------------------------------- the daemon-call retry helper


class _Op:
    """A daemon call that fails with ``errors`` in turn, then returns "ok" (or hangs)."""

    def __init__(self, *errors: BaseException, hang: bool = False) -> None:
        self.errors = list(errors)
        self.hang = hang
        self.tries = 0

    async def __call__(self) -> str:
        self.tries += 1
        if self.errors:
            raise self.errors.pop(0)
        if self.hang:
            await asyncio.Event().wait()
        return "ok"


async def test_call_retries_transient_daemon_errors_then_returns() -> None:
    op = _Op(aiodocker.DockerError(500, "busy"), aiohttp.ClientConnectionError("reset"))
    assert await call(op, what="x", timeout_s=30, retries=2) == "ok"
    assert op.tries == 3


async def test_call_gives_up_after_a_bounded_number_of_transient_failures() -> None:
    op = _Op(*(aiodocker.DockerError(503, "busy") for _ in range(10)))
    with pytest.raises(EnvironmentError_, match="docker x failed"):
        await call(op, what="x", timeout_s=30, retries=2)
    assert op.tries == 3


async def test_call_passes_non_transient_errors_through_at_once() -> None:
    op = _Op(aiodocker.DockerError(404, "no such container"))
    with pytest.raises(aiodocker.DockerError) as info:
        await call(op, what="x", timeout_s=30, retries=2)
    assert info.value.status == 404
    assert op.tries == 1


@pytest.mark.parametrize(("retry_timeouts", "tries"), [(False, 1), (True, 2)])
async def test_call_bounds_a_hanging_daemon_call_by_its_timeout(retry_timeouts: bool, tries: int) -> None:
    op = _Op(hang=True)
    async with asyncio.timeout(60):
        with pytest.raises(EnvironmentError_, match="timed out after 0.2s"):
            await call(op, what="x", timeout_s=0.2, retries=1, retry_timeouts=retry_timeouts)
    assert op.tries == tries


@pytest.mark.parametrize("concurrency", [1, 3])
def test_each_open_tells_the_provider_how_many_attempts_are_still_to_start(tmp_path: Path,
                                                                           concurrency: int) -> None:
    # 2 tasks x k=4 = 8 attempts: each open carries the attempts still to start when its attempt started, 7
    # down to 0 (what a provider that opens ahead of need bounds its pool by)
    record = tmp_path / "upcoming.txt"
    out = agentcompass.run_evaluation(
        "shell_tasks", "shell_agent", "scripted", "tests.engine.components:UpcomingRecordingProvider",
        benchmark_params={"sample_ids": ["files/hello_world", "answer/count_lines"], "k": 4},
        environment_params={"record": str(record)}, task_concurrency=concurrency,
        results_dir=str(tmp_path / "runs"), progress="none")
    assert out.ok and out.counts.done == 2, out.errors_by_kind
    upcoming = [int(line.split()[1]) for line in record.read_text().splitlines()]
    assert sorted(upcoming, reverse=True) == list(range(7, -1, -1))
    if concurrency == 1:  # one at a time: opened in the order they started
        assert upcoming == list(range(7, -1, -1))
