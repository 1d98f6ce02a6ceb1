"""EnvironmentPool: per-provider active limits, open pacing, a cap on creates in flight, cleanup."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

from .._errors import ConfigError
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

    async def wait(self) -> None:
        if not self.interval:
            return
        now = time.monotonic()
        slot = max(now, self._next)
        self._next = slot + self.interval
        delay = slot - now + random.uniform(0, self.jitter * self.interval)
        if delay > 0:
            await asyncio.sleep(delay)


class _ProviderState:
    def __init__(self, limit: int | None, qps: float, creates: int | None) -> None:
        self.active = asyncio.Semaphore(limit) if limit else None
        self.creates = asyncio.Semaphore(creates) if creates else None
        self.pacer = OpenPacer(qps)


class EnvironmentPool:
    """Shared by every request of a launch: limits are per provider name, process-wide."""

    def __init__(self, provider_limits: dict[str, int], env_open_qps: float | dict[str, float] | None,
                 emit: Callable[[ProgressEvent], None]) -> None:
        self._limits = dict(provider_limits)
        self._qps = env_open_qps
        self._emit = emit
        self._states: dict[str, _ProviderState] = {}
        self._held: dict[int, tuple[str, Environment]] = {}

    def _state(self, provider: EnvironmentProvider) -> _ProviderState:
        name = provider.name
        st = self._states.get(name)
        if st is None:
            if isinstance(self._qps, dict):
                qps = self._qps.get(name, DEFAULT_REMOTE_QPS if provider.remote else 0.0)
            elif self._qps is not None:
                qps = self._qps
            else:
                qps = DEFAULT_REMOTE_QPS if provider.remote else 0.0
            creates = getattr(provider, "max_creates_in_flight", None)
            st = self._states[name] = _ProviderState(self._limits.get(name), qps, creates)
        return st

    async def open(self, provider: EnvironmentProvider, spec: EnvOpenSpec, *, timeout: float,
                   request: str) -> Environment:
        """Open an environment within the provider's limits; the caller must ``close`` it."""
        st = self._state(provider)
        if st.active is not None:
            await st.active.acquire()
        try:
            await st.pacer.wait()
            t0 = time.monotonic()
            if st.creates is not None:
                async with st.creates:
                    env = await asyncio.wait_for(provider.open(spec), timeout)
            else:
                env = await asyncio.wait_for(provider.open(spec), timeout)
        except BaseException:
            if st.active is not None:
                st.active.release()
            raise
        self._held[id(env)] = (provider.name, env)
        self._emit(EnvOpened(ts=time.time(), request=request, run_id=spec.run_id, task_id=spec.task_id,
                             provider=provider.name, env_id=env.id, role=spec.role,
                             open_s=time.monotonic() - t0))
        return env

    async def close(self, env: Environment, *, timeout: float) -> None:
        """Close (bounded in time) and give the slot back, whatever happens."""
        entry = self._held.pop(id(env), None)
        try:
            await asyncio.wait_for(env.close(), timeout)
        except Exception as exc:  # a close that fails must not fail the task: log it, free the slot
            log.warning("closing environment %s failed: %r", env.id, exc)
        finally:
            if entry is not None:
                st = self._states[entry[0]]
                if st.active is not None:
                    st.active.release()

    async def aclose(self) -> None:
        """Close whatever is still held (cancel/timeout paths)."""
        for _, env in list(self._held.values()):
            await self.close(env, timeout=30)


def validate_pool_settings(provider_limits: dict[str, int], known_providers: list[str]) -> None:
    """provider_limits keys must be provider names."""
    for name in provider_limits:
        if name not in known_providers:
            raise ConfigError(
                f"Invalid `provider_limits`: unknown environment provider {name!r}. "
                f"Known providers: {', '.join(known_providers)}.", field="provider_limits")
