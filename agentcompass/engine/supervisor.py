"""Supervisor: one per launch. Owns the timeout, the shared task limit, cancellation, the event bus, the
environment pool, the scheduler and one RequestActor per request."""

from __future__ import annotations

import asyncio
import logging
import time

from .._errors import ConfigError
from ..records import RunStatus
from ..registry import Registries
from ..results import LaunchResult, LaunchStatus, RequestOutcome
from ..specs import OrchestrationSpec
from .env_pool import EnvironmentPool, validate_pool_settings
from .image_cache import ImageCache
from .model_access import ModelServices
from .progress import EventBus, OnProgress, make_display
from .redact import RedactingFormatter, Redactor
from .request_actor import RequestActor
from .scheduler import Scheduler

_console_log = logging.getLogger("agentcompass")


class _OneLineFormatter(RedactingFormatter):
    """Console lines stay short: the first line of a message (tracebacks are in the run's log files)."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        first, _, rest = text.partition("\n")
        return first[:400] + (" [...]" if rest or len(first) > 400 else "")


def request_names(spec: OrchestrationSpec) -> list[str]:
    """Given names, else ``benchmark/harness/model``; duplicates get ``#2``, ``#3``..."""
    names: list[str] = []
    for r in spec.requests:
        base = r.name or f"{r.benchmark.id}/{r.harness.id}/{r.model.id}"
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}#{n}"
        names.append(name)
    return names


class Supervisor:
    """Runs a launch to the end; every request gets an outcome, whatever happens to the others."""

    def __init__(self, spec: OrchestrationSpec, on_progress: OnProgress | None = None,
                 extra_secrets: tuple[str, ...] = (), invalid: dict[int, ConfigError] | None = None) -> None:
        self.spec = spec
        #: requests (by index) that failed validation: they end failed with this error, the others run.
        self.invalid = invalid or {}
        self.on_progress = on_progress
        self.extra_secrets = extra_secrets
        #: why the launch was stopped early ("timed_out" / "cancelled"), read by RequestActors when cancelled.
        self.stop_reason: RunStatus | None = None
        self.console_level = logging.getLevelName(spec.log_level)
        # This launch's own logger (not registered globally, so two launches never share handlers); it still
        # propagates to the "agentcompass" logger for applications that configure logging themselves.
        self.log = logging.Logger("agentcompass.launch", level=logging.DEBUG)
        self.log.parent = _console_log
        self.registries = Registries(spec.recipe_dirs)
        validate_pool_settings(spec.provider_limits, self.registries["environment"].names(),
                               env_open_qps=spec.env_open_qps, max_creates_in_flight=spec.max_env_creates_in_flight)
        self.bus = EventBus(make_display(spec.progress), on_progress)
        #: model endpoints' adaptive limits, the envelope signer and the gateway (started on first need).
        self.models = ModelServices(self.bus.emit)
        self.extra_secrets = (*extra_secrets, self.models.signer.secret_text)
        self.redactor = Redactor([r.model.api_key for r in spec.requests] + list(self.extra_secrets))
        self.pool = EnvironmentPool(spec.provider_limits, spec.env_open_qps, self.bus.emit,
                                    max_creates_in_flight=spec.max_env_creates_in_flight)
        self.scheduler = Scheduler(spec.task_concurrency)
        #: per-task images: fetch limit, dedup, prefetch, removal after their last task
        self.images = ImageCache(self.bus.emit)

    async def run(self) -> LaunchResult:
        t0 = time.monotonic()
        handler = logging.StreamHandler()
        handler.setLevel(self.console_level)
        handler.setFormatter(_OneLineFormatter("%(levelname)s %(name)s: %(message)s", self.redactor))
        self.log.addHandler(handler)
        self.bus.start()
        sched_task = asyncio.create_task(self.scheduler.run(), name="scheduler")
        actors = [RequestActor(i, r, n, self) for i, (r, n) in enumerate(zip(self.spec.requests,
                                                                            request_names(self.spec), strict=True))]
        tasks = [asyncio.create_task(a.run(), name=f"request-{a.name}") for a in actors]
        try:
            _, pending = await asyncio.wait(tasks, timeout=self.spec.timeout_seconds)
            if pending:
                self.stop_reason = "timed_out"
                await self._stop(pending)
        except asyncio.CancelledError:
            self.stop_reason = "cancelled"
            await asyncio.shield(self._stop({t for t in tasks if not t.done()}))
            raise
        finally:
            await self.scheduler.shutdown()
            sched_task.cancel()
            await asyncio.gather(sched_task, return_exceptions=True)
            await self.models.aclose()
            await self.pool.aclose()
            await self.bus.close()
            self.log.removeHandler(handler)
            handler.close()
        outcomes = [self._outcome(t, a) for t, a in zip(tasks, actors, strict=True)]
        return LaunchResult(status=self._status(outcomes), outcomes=outcomes,
                            duration_s=round(time.monotonic() - t0, 3),
                            peak_concurrent_tasks=self.scheduler.peak_running)

    async def _stop(self, pending: set[asyncio.Task[RequestOutcome]]) -> None:
        # Attempts first (their environments close in their own finally blocks), then the request actors,
        # which record what was interrupted.
        await self.scheduler.shutdown()
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def _outcome(self, task: asyncio.Task[RequestOutcome], actor: RequestActor) -> RequestOutcome:
        if task.cancelled() or task.exception() is not None:
            exc = None if task.cancelled() else task.exception()
            r = actor.spec
            return RequestOutcome(name=actor.name, status=self.stop_reason or "failed", benchmark=r.benchmark.id,
                                  harness=r.harness.id, model=r.model.id, environment=r.environment.id,
                                  error=repr(exc) if exc else self.stop_reason)
        return task.result()

    def _status(self, outcomes: list[RequestOutcome]) -> LaunchStatus:
        if self.stop_reason is not None:
            return self.stop_reason  # type: ignore[return-value]
        ok = sum(1 for o in outcomes if o.ok)
        if ok == len(outcomes):
            return "completed"
        return "failed" if ok == 0 else "partial"
