"""Supervisor: one per launch. Owns the timeout, cancellation, the event bus, the environment pool, the model
services, the image cache, the scheduler and one RequestActor per request; hands each actor its inbox, the
scheduler's, and those shared services. A stop (launch timeout or cancel) reaches the request actors as the
message of their cancellation."""

from __future__ import annotations

import asyncio
import logging
import time

import msgspec

from .._errors import ConfigError
from ..records import RunStatus
from ..registry import Registries
from ..results import LaunchResult, LaunchStatus, RequestOutcome
from ..specs import OrchestrationSpec, RunRequestSpec
from .cancel_safe import through_cancels
from .env_pool import EnvironmentPool, validate_pool_settings
from .image_cache import ImageCache
from .messages import MsgQueue, RequestMsg, Shutdown
from .model_access import ModelServices
from .progress import EventBus, OnProgress, make_display
from .redact import RedactingFormatter, Redactor
from .request_actor import RequestActor
from .runtime import LaunchServices
from .scheduler import Scheduler

#: how long the scheduler gets to answer ``Shutdown`` (it only has to read its inbox) before it is cancelled
_SCHEDULER_STOP_S = 10.0

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
        #: why the launch was stopped early ("timed_out" / "cancelled"); sent to the RequestActors as the message
        #: of their cancellation.
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
        #: per-task images: fetch limit, dedup, prefetch, removal after their last task
        self.images = ImageCache(self.bus.emit)
        self._inboxes: dict[int, MsgQueue[RequestMsg]] = {i: MsgQueue(RequestMsg) for i in range(len(spec.requests))}
        self.scheduler = Scheduler(spec.task_concurrency, self._inboxes)
        orchestration = msgspec.to_builtins(spec)
        orchestration.pop("requests", None)
        self.services = LaunchServices(
            registries=self.registries, bus=self.bus, pool=self.pool, models=self.models, images=self.images,
            log=self.log, console_level=self.console_level, extra_secrets=self.extra_secrets,
            task_concurrency=spec.task_concurrency, orchestration=orchestration,
            provider_limits=dict(spec.provider_limits))

    async def run(self) -> LaunchResult:
        t0 = time.monotonic()
        handler = logging.StreamHandler()
        handler.setLevel(self.console_level)
        handler.setFormatter(_OneLineFormatter("%(levelname)s %(name)s: %(message)s", self.redactor))
        self.log.addHandler(handler)
        self.bus.start()
        sched_task = asyncio.create_task(self.scheduler.run(), name="scheduler")
        names = request_names(self.spec)
        actors = [RequestActor(i, r, n, services=self.services, inbox=self._inboxes[i], scheduler=self.scheduler.inbox,
                               invalid=self.invalid.get(i))
                  for i, (r, n) in enumerate(zip(self.spec.requests, names, strict=True))]
        tasks = [asyncio.create_task(a.run(), name=f"request-{a.name}") for a in actors]
        peak = 0
        try:
            _, pending = await asyncio.wait(tasks, timeout=self.spec.timeout_seconds)
            if pending:
                self.stop_reason = "timed_out"
                await self._stop(pending, self.stop_reason)
        except asyncio.CancelledError:
            self.stop_reason = "cancelled"
            await asyncio.shield(self._stop({t for t in tasks if not t.done()}, self.stop_reason))
            raise
        finally:
            peak = await self._stop_scheduler(sched_task)
            await self.models.aclose()
            await self.pool.aclose()
            await self.bus.close()
            self.log.removeHandler(handler)
            handler.close()
        outcomes = [self._outcome(t, r, n) for t, r, n in zip(tasks, self.spec.requests, names, strict=True)]
        return LaunchResult(status=self._status(outcomes), outcomes=outcomes,
                            duration_s=round(time.monotonic() - t0, 3), peak_concurrent_tasks=peak)

    async def _stop(self, pending: set[asyncio.Task[RequestOutcome]], reason: RunStatus) -> None:
        # Each request actor cancels its running attempts (their environments close in their own finally
        # blocks), waits for them and records what was interrupted, under the reason it is given.
        for t in pending:
            t.cancel(msg=reason)
        # a second Ctrl-C meanwhile must not cancel them again half-way through their records and releases
        await through_cancels(asyncio.gather(*pending, return_exceptions=True))

    async def _stop_scheduler(self, sched_task: asyncio.Task[int]) -> int:
        """Ask the scheduler to end; its answer is the peak number of attempts that ran at once."""
        self.scheduler.inbox.put(Shutdown())
        try:
            return await asyncio.wait_for(asyncio.shield(sched_task), _SCHEDULER_STOP_S)
        except Exception:
            self.log.warning("the scheduler did not stop in %gs", _SCHEDULER_STOP_S)
            sched_task.cancel()
            await asyncio.gather(sched_task, return_exceptions=True)
            return 0

    def _outcome(self, task: asyncio.Task[RequestOutcome], r: RunRequestSpec, name: str) -> RequestOutcome:
        if task.cancelled() or task.exception() is not None:
            exc = None if task.cancelled() else task.exception()
            return RequestOutcome(name=name, status=self.stop_reason or "failed", benchmark=r.benchmark.id,
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
