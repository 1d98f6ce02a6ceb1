"""EnvironmentPool: per-provider active limits, open pacing, a cap on creates in flight, cleanup.

One pool per launch, created by its Supervisor; its own state is asyncio-only (one loop, no lock). The counts
behind ``provider_limits`` and the creates-in-flight cap are process-wide (``process_slots.py``): every launch
in the process (on any event loop, in any thread) counts against one counter per provider, and each launch
opens only while that shared count is below its own limit. Pacing (``env_open_qps``) is per launch.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from .._errors import ConfigError, did_you_mean
from ..interfaces import Environment, EnvironmentProvider, EnvOpenSpec
from ..records import EnvOpened, ProgressEvent
from .process_slots import PROCESS_COUNTERS, ProcessSlots, ProviderCounters

__all__ = ["EnvironmentPool", "OpenPacer", "ProcessSlots", "ProviderCounters", "active_environments",
           "creates_in_flight", "provider_slots", "validate_pool_settings"]

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


def active_environments(provider: str) -> int:
    """Environments of ``provider`` (by name) that pools in this process hold open right now."""
    return PROCESS_COUNTERS.active(provider).count


def provider_slots(provider: str) -> tuple[ProcessSlots, ProcessSlots]:
    """The process-wide (active environments, creates in flight) counters of ``provider`` (by name), for a
    provider that holds environments ahead of need: they count against the same limits."""
    return PROCESS_COUNTERS.active(provider), PROCESS_COUNTERS.creates(provider)


def creates_in_flight(provider: str) -> int:
    """``provider.open`` calls of ``provider`` (by name) running right now across this process."""
    return PROCESS_COUNTERS.creates(provider).count


class _ProviderState:
    def __init__(self, name: str, limit: int | None, qps: float, creates: int | None,
                 counters: ProviderCounters) -> None:
        self.limit = limit or None
        self.creates_limit = creates or None
        self.active = counters.active(name)
        self.creates = counters.creates(name)
        self.pacer = OpenPacer(qps)


class EnvironmentPool:
    """One per launch: created by its Supervisor, handed to its requests (``LaunchServices.pool``) and through
    them to their attempts (``RequestRuntime.pool``), closed by the Supervisor at the end of the launch.

    A plain service, not an actor: ``open`` and ``close`` are awaited by the attempt that needs the environment,
    on the launch's loop, so its state (per-provider settings and pacers, the environments held) is touched by
    one loop only and needs no lock. Limits are per provider name and are counted in ``counters`` (by default
    the process's ``PROCESS_COUNTERS``, shared with the other launches of the process: see process_slots.py).

    ``max_creates_in_flight``: an int for every provider or a dict per provider name; a provider it does not
    cover uses its own ``max_creates_in_flight`` attribute, if any.
    """

    def __init__(self, provider_limits: dict[str, int], env_open_qps: float | dict[str, float] | None,
                 emit: Callable[[ProgressEvent], None], *,
                 max_creates_in_flight: int | dict[str, int] | None = None,
                 counters: ProviderCounters | None = None) -> None:
        self._counters = counters if counters is not None else PROCESS_COUNTERS
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
            st = self._states[name] = _ProviderState(name, self._limits.get(name), qps, creates, self._counters)
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
