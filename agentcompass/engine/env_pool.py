"""EnvironmentPool: per-provider active limits, open pacing, a cap on creates in flight, cleanup.

The counts behind ``provider_limits`` and the creates-in-flight cap are process-wide: every launch in the
process (on any event loop, in any thread) counts against one counter per provider, and each launch opens
only while that shared count is below its own limit. Pacing (``env_open_qps``) is per launch.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .._errors import ConfigError, did_you_mean
from ..interfaces import Environment, EnvironmentProvider, EnvOpenSpec
from ..records import EnvOpened, ProgressEvent

log = logging.getLogger("agentcompass.pool")

DEFAULT_REMOTE_QPS = 10.0


class OpenPacer:
    """Spaces opens ``1/qps`` seconds apart with a little jitter; ``qps == 0`` disables pacing."""

    def __init__(self, qps: float, *, jitter: float = 0.1) -> None:
        self.interval = 1.0 / qps if qps > 0 else 0.0
        self.jitter = jitter
        self._next = 0.0

    async def wait(self) -> float:
        """Wait for the next slot; the monotonic time of the slot granted (0.0 when pacing is off)."""
        if not self.interval:
            return 0.0
        now = time.monotonic()
        slot = max(now, self._next)
        self._next = slot + self.interval
        delay = slot - now + random.uniform(0, self.jitter * self.interval)
        if delay > 0:
            await asyncio.sleep(delay)
        return slot


class _Waiter:
    __slots__ = ("future", "granted", "limit", "loop")

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        self.limit = limit
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.granted = False  # read and written only under the counter's lock


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class ProcessSlots:
    """A counter shared by every launch in the process, each acquirer bringing its own limit.

    ``acquire(limit)`` returns once the count is below ``limit`` (``None``: at once) and adds one; ``release``
    takes one off and wakes, in FIFO order, every waiter whose own limit the count is now below. Waiters may
    sit on different event loops in different threads: a thread lock guards the count and each waiter is
    woken on its own loop. A waiter whose loop is closed is dropped without taking a slot.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._count = 0
        self._waiters: deque[_Waiter] = deque()
        #: (loop, callback) of holders that yield their slots when someone has to wait (see ``on_wait``)
        self._yielders: list[tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = []

    @property
    def waiting(self) -> bool:
        """Whether an ``acquire`` is waiting for a slot."""
        return bool(self._waiters)

    def on_wait(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on the running loop whenever an ``acquire`` starts waiting (a holder of slots it can
        give up, such as containers started ahead, yields them); returns the function that unregisters it."""
        entry = (asyncio.get_running_loop(), callback)
        with self._lock:
            self._yielders.append(entry)

        def unregister() -> None:
            with self._lock:
                if entry in self._yielders:
                    self._yielders.remove(entry)
        return unregister

    @property
    def count(self) -> int:
        """Slots held right now (including ones granted to a waiter that has not resumed yet)."""
        return self._count

    async def acquire(self, limit: int | None) -> None:
        """Take a slot once the process-wide count is below ``limit``; give it back with ``release``."""
        loop = asyncio.get_running_loop()
        with self._lock:
            # Every waiter that could use a free slot has already been granted one (see _wake_locked), so
            # taking one here jumps over nobody who could have had it.
            if limit is None or self._count < limit:
                self._count += 1
                return
            waiter = _Waiter(limit, loop)
            self._waiters.append(waiter)
            yielders = list(self._yielders)
        for yloop, callback in yielders:
            try:
                yloop.call_soon_threadsafe(callback)
            except RuntimeError:  # its loop is closed
                continue
        try:
            await waiter.future
        except BaseException:
            with self._lock:
                granted = waiter.granted
                if not granted and waiter in self._waiters:  # not there if its loop was found closed
                    self._waiters.remove(waiter)
            if granted:  # granted while being cancelled: the caller never gets it, so give it back
                self.release()
            raise

    def try_acquire(self, limit: int | None, *, spare: int = 0) -> bool:
        """Take a slot only if that leaves at least ``spare`` more below ``limit`` and nobody is waiting; never
        waits. For holders that must not compete with waiters (containers started ahead of need)."""
        with self._lock:
            if self._waiters or (limit is not None and self._count + 1 + spare > limit):
                return False
            self._count += 1
            return True

    def release(self) -> None:
        """Give one slot back and wake whoever may now take it."""
        with self._lock:
            if self._count <= 0:
                raise RuntimeError(f"slots of {self.name!r} released more often than acquired")
            self._count -= 1
            self._wake_locked()

    def _wake_locked(self) -> None:
        if not self._waiters:
            return
        kept: deque[_Waiter] = deque()
        for waiter in self._waiters:
            if self._count >= waiter.limit:
                kept.append(waiter)
                continue
            try:
                waiter.loop.call_soon_threadsafe(_resolve, waiter.future)
            except RuntimeError:  # its loop is closed: nobody is waiting there any more
                continue
            waiter.granted = True
            self._count += 1
        self._waiters = kept


_registry_lock = threading.Lock()
_active_slots: dict[str, ProcessSlots] = {}
_create_slots: dict[str, ProcessSlots] = {}


def _slots(table: dict[str, ProcessSlots], name: str) -> ProcessSlots:
    with _registry_lock:
        slots = table.get(name)
        if slots is None:
            slots = table[name] = ProcessSlots(name)
        return slots


def active_environments(provider: str) -> int:
    """Environments of ``provider`` (by name) that pools in this process hold open right now."""
    return _slots(_active_slots, provider).count


def provider_slots(provider: str) -> tuple[ProcessSlots, ProcessSlots]:
    """The process-wide (active environments, creates in flight) counters of ``provider`` (by name), for a
    provider that holds environments ahead of need: they count against the same limits."""
    return _slots(_active_slots, provider), _slots(_create_slots, provider)


def creates_in_flight(provider: str) -> int:
    """``provider.open`` calls of ``provider`` (by name) running right now across this process."""
    return _slots(_create_slots, provider).count


class _ProviderState:
    def __init__(self, name: str, limit: int | None, qps: float, creates: int | None) -> None:
        self.limit = limit or None
        self.creates_limit = creates or None
        self.active = _slots(_active_slots, name)
        self.creates = _slots(_create_slots, name)
        self.pacer = OpenPacer(qps)


class EnvironmentPool:
    """One per launch, shared by its requests. Limits are per provider name and count process-wide.

    ``max_creates_in_flight``: an int for every provider or a dict per provider name; a provider it does not
    cover uses its own ``max_creates_in_flight`` attribute, if any.
    """

    def __init__(self, provider_limits: dict[str, int], env_open_qps: float | dict[str, float] | None,
                 emit: Callable[[ProgressEvent], None], *,
                 max_creates_in_flight: int | dict[str, int] | None = None) -> None:
        self._limits = dict(provider_limits)
        self._qps = env_open_qps
        self._creates = max_creates_in_flight
        self._emit = emit
        self._states: dict[str, _ProviderState] = {}
        self._held: dict[int, tuple[_ProviderState, Environment]] = {}

    def _state(self, provider: EnvironmentProvider | type[EnvironmentProvider]) -> _ProviderState:
        name = provider.name
        st = self._states.get(name)
        if st is None:
            remote = provider.capabilities.remote  # on the class as on an instance
            if isinstance(self._qps, dict):
                qps = self._qps.get(name, DEFAULT_REMOTE_QPS if remote else 0.0)
            elif self._qps is not None:
                qps = self._qps
            else:
                qps = DEFAULT_REMOTE_QPS if remote else 0.0
            creates: Any = self._creates.get(name) if isinstance(self._creates, dict) else self._creates
            if creates is None:
                creates = provider.capabilities.max_creates_in_flight
            st = self._states[name] = _ProviderState(name, self._limits.get(name), qps, creates)
        return st

    def creates_limit(self, provider: EnvironmentProvider | type[EnvironmentProvider]) -> int | None:
        """The cap on ``provider``'s creates in flight that this launch's opens wait for (None: none)."""
        return self._state(provider).creates_limit

    def pacer(self, provider: EnvironmentProvider | type[EnvironmentProvider]) -> OpenPacer:
        """This launch's open pacing of ``provider`` (``env_open_qps``), shared with a provider that creates
        environments ahead of need."""
        return self._state(provider).pacer

    async def open(self, provider: EnvironmentProvider, spec: EnvOpenSpec, *, timeout: float,
                   request: str) -> Environment:
        """Open an environment within the provider's limits; the caller must ``close`` it."""
        st = self._state(provider)
        await st.active.acquire(st.limit)
        try:
            await provider.reserve(spec)  # the provider's own queue (a full cluster): not the open's time
            try:
                granted_at = await st.pacer.wait()
                t0 = time.monotonic()
                await st.creates.acquire(st.creates_limit)
                try:
                    async with asyncio.timeout(timeout):  # in this task: wait_for would start one per open
                        env = await provider.open(spec)
                finally:
                    st.creates.release()
            except BaseException:
                await asyncio.shield(provider.unreserve(spec))
                raise
        except BaseException:
            st.active.release()
            raise
        self._held[id(env)] = (st, env)
        self._emit(EnvOpened(ts=time.time(), request=request, run_id=spec.run_id, task_id=spec.task_id,
                             provider=provider.name, env_id=env.id, role=spec.role,
                             open_s=time.monotonic() - t0, granted_at=granted_at,
                             node=provider.node_of(env)))
        return env

    async def close(self, env: Environment, *, timeout: float) -> None:
        """Close (bounded in time) and give the slot back, whatever happens."""
        entry = self._held.pop(id(env), None)
        try:
            async with asyncio.timeout(timeout):
                await env.close()
        except Exception as exc:  # a close that fails must not fail the task: log it, free the slot
            log.warning("closing environment %s failed: %r", env.id, exc)
        finally:
            if entry is not None:
                entry[0].active.release()

    async def aclose(self) -> None:
        """Close whatever is still held (cancel/timeout paths)."""
        for _, env in list(self._held.values()):
            await self.close(env, timeout=30)


def _check_keys(field: str, keys: Any, known_providers: list[str]) -> None:
    for name in keys:
        if name not in known_providers:
            hint = did_you_mean(str(name), known_providers)
            raise ConfigError(
                f"Invalid `{field}.{name}`: unknown environment provider {name!r}. "
                f"Known providers: {', '.join(known_providers)}.{hint}", field=f"{field}.{name}")


def validate_pool_settings(provider_limits: dict[str, int], known_providers: list[str], *,
                           env_open_qps: float | dict[str, float] | None = None,
                           max_creates_in_flight: int | dict[str, int] | None = None) -> None:
    """Keys of ``provider_limits`` and of ``env_open_qps`` / ``max_env_creates_in_flight`` given as dicts
    must be provider names."""
    _check_keys("provider_limits", provider_limits, known_providers)
    if isinstance(env_open_qps, dict):
        _check_keys("env_open_qps", env_open_qps, known_providers)
    if isinstance(max_creates_in_flight, dict):
        _check_keys("max_env_creates_in_flight", max_creates_in_flight, known_providers)
