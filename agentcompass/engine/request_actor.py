"""RequestActor: runs one request: has it built (``request_builder.py``), owns its run directory, asks the
scheduler for slots, starts one attempt run (``AttemptRun``, a one-shot coroutine) per granted attempt, commits
details and finishes the request.

Reached only through its inbox (``Grant``, ``AttemptDone``, ``AttemptInterrupted``); it is handed its inbox, the
scheduler's, and the launch's shared services. Why a launch stopped (``timed_out`` / ``cancelled``) arrives as
the message of the cancellation. Any failure here ends this request only (a failed outcome with a readable
error); the launch goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import traceback
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from .._errors import AgentCompassError, ConfigError
from ..common.error_kinds import ErrorKind
from ..interfaces import TaskSpec
from ..models.adaptive import AdaptiveLimiter
from ..records import (
    AttemptFinished,
    AttemptRecord,
    ModelCallsWaiting,
    RequestFinished,
    RequestStarted,
    RunInfo,
    RunStatus,
    Summary,
    TaskDetail,
    TaskFinished,
    TryRecord,
)
from ..results import RequestOutcome
from ..specs import ModelSpec, RunRequestSpec
from .accounting import RequestAccount, task_detail
from .cancel_safe import through_cancels
from .image_cache import DiskFull, RequestImages
from .messages import (
    AttemptDone,
    AttemptInterrupted,
    CancelRequest,
    Grant,
    MsgQueue,
    OpenLane,
    Release,
    RequestMsg,
    SchedulerMsg,
    Submit,
    WorkItem,
)
from .model_access import open_model_access, report_waiting_calls, wait_report_after
from .request_builder import RequestBuilder, component_settings
from .resolve import ResolvedRequest, parse_network_policy
from .reuse import THIS_RUN, plan_reuse
from .run_dir import RunDir, new_run_id
from .runtime import LaunchServices, RequestRuntime
from .task_actor import INTERRUPTED, AttemptRun, describe

__all__ = ["RequestActor", "component_settings", "parse_network_policy", "stop_reason_of"]

_RUN_INFO_EVERY_S = 2.0
#: the reasons a launch stops early, sent as the message of the request actors' cancellation
STOP_REASONS: tuple[RunStatus, ...] = ("timed_out", "cancelled")


@dataclass
class _InFlight:
    task: TaskSpec
    identity: str
    attempts: dict[int, AttemptRecord]


def stop_reason_of(exc: asyncio.CancelledError) -> RunStatus | None:
    """The launch's stop reason carried by a cancellation (``task.cancel(msg=reason)``), if it carries one."""
    msg = exc.args[0] if exc.args else None
    return next((r for r in STOP_REASONS if r == msg), None)


class RequestActor:
    """One per RunRequestSpec."""

    def __init__(self, index: int, spec: RunRequestSpec, name: str, *, services: LaunchServices,
                 inbox: MsgQueue[RequestMsg], scheduler: MsgQueue[SchedulerMsg],
                 invalid: ConfigError | None = None) -> None:
        self.index = index
        self.spec = spec
        self.name = name
        self.svc = services
        self.inbox = inbox
        self.scheduler = scheduler
        #: the error the request failed validation with (it ends failed with it; the others run)
        self._invalid = invalid
        self.account = RequestAccount()
        #: (label, details dir) of ``reuse_run_id`` (or of the latest run, see reuse.pick_run)
        self._reuse_source: tuple[str, Path] | None = None
        self.resolved: ResolvedRequest | None = None
        self.model_spec: ModelSpec = spec.model
        self.limiter: AdaptiveLimiter | None = None
        self.run_id = spec.run_id or new_run_id(spec.name)
        self.rt: RequestRuntime | None = None
        self.run_dir: RunDir | None = None
        self.run_info: RunInfo | None = None
        self.in_flight: dict[str, _InFlight] = {}
        self.reuse_report: dict[str, Any] = {}
        self._handlers: list[logging.Handler] = []
        #: resources to release when the request ends, in creation order (whatever stage it failed at).
        self._closers: list[Any] = []
        self._last_info_write = 0.0
        #: this request's handle on the launch's image cache (providers with images)
        self.images: RequestImages | None = None
        #: the running attempt runners (one asyncio task per granted attempt)
        self._runners: set[asyncio.Task[None]] = set()
        #: reports the model calls waiting long for an answer (``report_waiting_calls``) while attempts run
        self._waiting_watch: asyncio.Task[None] | None = None
        self._calls_waiting = 0  # what the last report said
        #: the tries of attempts that reported ``AttemptInterrupted``, by (task id, attempt)
        self._interrupted: dict[tuple[str, int], list[TryRecord]] = {}
        self._lane_open = False
        #: attempts of this request not started yet (passed to each attempt runner as a provider hint)
        self._to_start = 0
        self.started_at = time.time()

    @property
    def identity(self) -> str:
        """The request's identity hash (once resolved)."""
        return self.resolved.identity if self.resolved is not None else ""

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> RequestOutcome:
        status: RunStatus = "failed"
        error: BaseException | None = None
        try:
            await self._build()
            await self._execute()
            status = "completed"
        except asyncio.CancelledError as exc:
            reason = stop_reason_of(exc)
            status = reason or "cancelled"
            # a second cancel (Ctrl-C during a timeout's stop) must not cut the record and releases off
            outcome = await through_cancels(self._stop_and_finish(status))
            if reason is None:
                raise
            return outcome
        except AgentCompassError as exc:
            error = exc
        except Exception as exc:
            error = exc
            if self.rt is not None:
                self.rt.log.error("request failed: %s", traceback.format_exc())
        await self._stop_attempts()
        return await self._finish(status, error)

    async def _stop_and_finish(self, status: RunStatus) -> RequestOutcome:
        await self._stop_attempts()
        self._commit_interrupted(status)
        return await self._finish(status, None)

    async def _stop_attempts(self) -> None:
        """Cancel the request's running attempts, wait for them (their environments close on the way), take in
        what they reported, and close the lane (the scheduler takes back every slot of the request)."""
        runners = list(self._runners)
        for t in runners:
            t.cancel()
        if runners:
            await asyncio.gather(*runners, return_exceptions=True)
        while not self.inbox.empty():
            msg = self.inbox.get_nowait()
            if isinstance(msg, AttemptInterrupted):
                self._interrupted[(msg.task_id, msg.attempt)] = msg.tries
            elif isinstance(msg, AttemptDone):
                try:
                    self._on_done(msg)
                except Exception as exc:
                    log = self.rt.log if self.rt is not None else self.svc.log
                    log.error("could not commit task %s: %r", msg.task_id, exc)
            # a Grant not started: its slot goes back with the lane
        if self._lane_open:
            self._lane_open = False
            self.scheduler.put(CancelRequest(request=self.index))

    # ------------------------------------------------------------------ build

    async def _build(self) -> None:
        """Build the request (``request_builder.py``); what was made is the actor's even if the build fails."""
        if self._invalid is not None:
            raise self._invalid
        builder = RequestBuilder(self.index, self.spec, self.name, services=self.svc, run_id=self.run_id,
                                 account=self.account, started_at=self.started_at, closers=self._closers,
                                 handlers=self._handlers)
        try:
            await builder.build()
        finally:
            self.resolved, self.run_id, self._reuse_source = builder.resolved, builder.run_id, builder.reuse_source
            self.model_spec, self.limiter, self.images = builder.model_spec, builder.limiter, builder.images
            self.run_dir, self.rt, self.run_info = builder.run_dir, builder.rt, builder.run_info

    # ------------------------------------------------------------------ execute

    async def _load_tasks(self) -> list[TaskSpec]:
        assert self.rt is not None
        loaded = self.rt.benchmark.load_tasks()
        if isinstance(loaded, AsyncIterator):
            tasks = [t async for t in loaded]
        else:
            tasks = await asyncio.to_thread(list, loaded if isinstance(loaded, Iterable) else [])
        seen: set[str] = set()
        for t in tasks:
            if t.task_id in seen:
                raise ConfigError(f"benchmark {self.spec.benchmark.id!r} produced the task id {t.task_id!r} twice; "
                                  "task ids must be unique.", field="benchmark")
            seen.add(t.task_id)
        return tasks

    async def _execute(self) -> None:
        assert self.rt is not None and self.run_dir is not None
        tasks = await self._load_tasks()
        if self.rt.harness.needs_environment or self.rt.harness.evaluates:
            await self._start_provider(self.rt, tasks[0] if tasks else None)
        access = await open_model_access(self.svc.models, self.rt, self.model_spec, wrap=self.spec.wrap_api_key,
                                         limiter=self.limiter)
        if access is not None:
            self.rt = dataclasses.replace(self.rt, model_access=access)
        rt = self.rt
        if self.limiter is not None:
            self._waiting_watch = asyncio.get_running_loop().create_task(report_waiting_calls(
                self.limiter, wait_report_after(self.model_spec.params), self._report_waiting))
        self.account.counts.total = len(tasks)
        to_run, reused = self._apply_reuse(tasks)
        if self.images is not None and (rt.harness.needs_environment or rt.harness.evaluates):
            await self.images.plan(rt.benchmark, (t for t, _ in to_run))
        rt.emit(RequestStarted(ts=time.time(), request=self.name, run_id=self.run_id,
                               run_dir=str(self.run_dir.path), total_tasks=len(tasks),
                               reused_tasks=self.account.counts.reused))
        now = time.time()
        for d in reused:
            rt.emit(TaskFinished(ts=now, request=self.name, run_id=self.run_id, task_id=d.task_id,
                                 correct=d.correct, reused=True))
        lane_limit = self.spec.task_concurrency
        self.scheduler.put(OpenLane(request=self.index, limit=lane_limit))
        self._lane_open = True
        window = max(2 * lane_limit, 16)
        outstanding = 0
        self._to_start = len(to_run) * rt.k
        for task, ident in to_run:
            self.in_flight[task.task_id] = _InFlight(task, ident, {})
            for attempt in range(1, rt.k + 1):
                while outstanding >= window:
                    outstanding -= await self._receive()
                self.scheduler.put(Submit(WorkItem(self.index, task, attempt, ident)))
                outstanding += 1
        while outstanding:
            outstanding -= await self._receive()

    def _report_waiting(self, calls: int, oldest_s: float, queued: int) -> None:
        assert self.rt is not None and self.limiter is not None
        self._calls_waiting = calls
        self.rt.emit(ModelCallsWaiting(ts=time.time(), request=self.name, run_id=self.run_id,
                                       endpoint=self.limiter.endpoint, calls=calls, oldest_s=oldest_s, queued=queued))

    async def _receive(self) -> int:
        """Handle the next message on the inbox; 1 when it reported an attempt, else 0."""
        msg = await self.inbox.get()
        if isinstance(msg, Grant):
            self._start_attempt(msg.item)
            return 0
        self.scheduler.put(Release(request=self.index))
        if isinstance(msg, AttemptInterrupted):  # cancelled while the request runs on (not a stop): an error
            error = "the attempt was cancelled"
            msg = AttemptDone(task_id=msg.task_id, attempt=msg.attempt, record=AttemptRecord(
                status="run_error", error_kind=ErrorKind.CANCELLED, error=error, tries=msg.tries))
        self._on_done(msg)
        return 1

    def _start_attempt(self, item: WorkItem) -> None:
        """One attempt run (``AttemptRun``) for a granted attempt; it reports on the inbox on every path."""
        assert self.rt is not None
        self._to_start = max(0, self._to_start - 1)
        attempt = AttemptRun(self.rt, item, self.inbox, upcoming=self._to_start)
        runner = asyncio.create_task(attempt.run(),
                                     name=f"attempt-{self.index}-{item.task.task_id}#{item.attempt}")
        self._runners.add(runner)

        def _ended(t: asyncio.Task[None]) -> None:
            self._runners.discard(t)
            exc = None if t.cancelled() else t.exception()
            if exc is not None and not attempt.reported:  # it could not even report: still an engine error
                self.inbox.put(AttemptDone(task_id=item.task.task_id, attempt=item.attempt, record=AttemptRecord(
                    status="run_error", error_kind=ErrorKind.ENGINE_ERROR, error=describe(exc))))

        runner.add_done_callback(_ended)

    async def _start_provider(self, rt: RequestRuntime, first: TaskSpec | None) -> None:
        """Provider start hook (docker: orphan sweep, and a check that the first task's image exists or can
        be built or pulled, so a request that cannot run fails before any task starts). The model route for
        the ``model`` network policy is set up with the gateway (``open_model_access``)."""
        await asyncio.wait_for(rt.provider.start(), rt.timeouts.env_open)
        if rt.provider.capabilities.images:
            image, recipe = None, None
            if first is not None:
                try:
                    prepared = rt.benchmark.prepare(first.public())
                    image, recipe = prepared.image, prepared.image_recipe
                except Exception:  # reported as that task's prepare_error
                    pass
            if self.images is not None:  # fetched through the cache: shared, counted, removed after use
                try:
                    await self.images.ensure(first.task_id if first is not None else None, image, recipe)
                except DiskFull:  # not the request's fault: the tasks that need room fail with disk_full
                    pass
            else:
                # not bounded by open_timeout: a pull is bounded by its own inactivity timeout (a 3 GB image
                # takes what it takes); its failure (e.g. ImagePullError "image_not_found: ...") fails the request
                await rt.provider.ensure_image(image, recipe)

    def _on_done(self, msg: AttemptDone) -> None:
        entry = self.in_flight.get(msg.task_id)
        if entry is None or msg.attempt in entry.attempts:  # one record per attempt, whatever arrives twice
            return
        entry.attempts[msg.attempt] = msg.record
        rec = msg.record
        if len(rec.tries) > 1:
            self.account.counts.retries += len(rec.tries) - 1
        if len(entry.attempts) == (self.rt.k if self.rt else 1):
            del self.in_flight[msg.task_id]
            self._commit(entry)

    def _commit(self, entry: _InFlight) -> None:
        assert self.run_dir is not None and self.rt is not None
        detail = task_detail(entry.task, entry.identity, entry.attempts, self.rt.k)
        self.run_dir.write_detail(detail)
        self._add_detail(detail)

    def _add_detail(self, detail: TaskDetail) -> None:
        assert self.rt is not None
        self.account.add(detail)
        if self.images is not None:
            self.images.task_done(detail.task_id)
        self.rt.emit(TaskFinished(ts=time.time(), request=self.name, run_id=self.run_id, task_id=detail.task_id,
                                  correct=detail.correct, reused=False))
        self._maybe_write_run_info()

    def _maybe_write_run_info(self) -> None:
        now = time.monotonic()
        if now - self._last_info_write >= _RUN_INFO_EVERY_S and self.run_info is not None and self.run_dir:
            self._last_info_write = now
            self.run_info.updated_at = time.time()
            self.run_info.counts = self.account.counts
            self.run_info.usage = self.account.usage
            self.run_dir.write_run_info(self.run_info)

    # ------------------------------------------------------------------ reuse

    def _apply_reuse(self, tasks: list[TaskSpec]) -> tuple[list[tuple[TaskSpec, str]], list[TaskDetail]]:
        """(tasks to run, reused details); reused ones are committed (copied) right away."""
        assert self.run_dir is not None
        sources: list[tuple[str, Path]] = []
        if self.spec.reuse:
            sources.append((THIS_RUN, self.run_dir.details))
        if self._reuse_source is not None:
            sources.append(self._reuse_source)
        plan = plan_reuse(tasks, self.identity, sources)
        reused_details: list[TaskDetail] = []
        for label, d in plan.reused:
            self.account.counts.reused += 1
            reused_details.append(TaskDetail(task_id=d.task_id, k=d.k, attempts={}, correct=d.correct))
            if label != THIS_RUN:
                d.reused_from = label
                self.run_dir.write_detail(d)
            self.account.add(d)
        self.reuse_report = plan.report
        return plan.to_run, reused_details

    # ------------------------------------------------------------------ finish

    def _commit_interrupted(self, status: str) -> None:
        """Details for attempts that were running when the run was stopped: recorded, not lost."""
        if self.run_dir is None or self.rt is None:
            return
        kind = ErrorKind.RUN_TIMEOUT if status == "timed_out" else ErrorKind.CANCELLED
        # Only tasks that had started; queued ones simply did not run (a resumed run picks them up).
        running = {task_id for task_id, _ in self._interrupted}
        started = [e for e in self.in_flight.values() if e.attempts or e.task.task_id in running]
        error = "the run hit timeout_seconds" if kind == ErrorKind.RUN_TIMEOUT else "the run was cancelled"
        for entry in started:
            for attempt in range(1, self.rt.k + 1):
                if attempt in entry.attempts:
                    continue
                # the tries it made before the stop (a stuck retry loop shows why it was stuck)
                tries = [msgspec.structs.replace(t, error_kind=kind, error=error) if t.error == INTERRUPTED else t
                         for t in self._interrupted.pop((entry.task.task_id, attempt), [])]
                self.account.counts.retries += max(0, len(tries) - 1)
                entry.attempts[attempt] = AttemptRecord(status="run_error", error_kind=kind, error=error,
                                                        tries=tries)
                if tries:  # it had started: close it in the event stream too (live counts, progress.jsonl)
                    self.rt.emit(AttemptFinished(ts=time.time(), request=self.name, run_id=self.run_id,
                                                 task_id=entry.task.task_id, attempt=attempt, status="run_error",
                                                 error_kind=kind))
            try:
                self._commit(entry)
            except Exception as exc:
                self.rt.log.error("could not commit interrupted task %s: %r", entry.task.task_id, exc)
        self.in_flight.clear()

    async def _finish(self, status: RunStatus, error: BaseException | None) -> RequestOutcome:
        if self._waiting_watch is not None:
            self._waiting_watch.cancel()  # it only sleeps and emits: it ends at once, before RequestFinished
            if self._calls_waiting:  # nothing waits once the request ends: the last report says so
                self._report_waiting(0, 0.0, 0)
        finished = time.time()
        acc = self.account
        metrics: dict[str, Any] = {}
        by_category: dict[str, dict[str, Any]] = {}
        err_text = None
        if error is not None:
            err_text = str(error) if isinstance(error, AgentCompassError) else describe(error)
        if self.run_dir is not None and self.run_dir.write_error is not None:
            # the disk filled up (or failed): say how far the run got; everything counted is on disk
            err_text = (f"{self.run_dir.write_error} after {acc.counts.done} of {acc.counts.total} details were "
                        "written; the run stopped")
            status = "failed"
        if acc.accumulator is not None:
            try:
                metrics, by_category = acc.accumulator.result()
            except Exception as exc:
                err_text = err_text or f"aggregating metrics failed: {describe(exc)}"
                status = "failed"
        status, err_text = acc.verdict(status, err_text)
        rt = self.rt
        image_counts: dict[str, int] = {}
        if self.images is not None:
            try:
                image_counts = await self.images.close()
            except Exception as exc:  # the run's result stands; the images are the sweep's to find
                self.svc.log.warning("request %s: closing its images failed: %r", self.name, exc)
        if self.run_dir is not None:
            self.run_dir.release_reserve()  # room for the last two files, even on a full disk
            dimension = rt.benchmark.dimension if rt is not None else None
            try:
                summary = Summary(run_id=self.run_id, benchmark=self.spec.benchmark.id, harness=self.spec.harness.id,
                                  model=self.spec.model.id, environment=self.spec.environment.id, status=status,
                                  metrics=metrics, by_category=by_category,
                                  dimension=dimension,
                                  errors_by_kind=acc.errors_by_kind,
                                  counts=acc.counts, reuse=self.reuse_report, usage=acc.usage,
                                  duration_s=round(finished - self.started_at, 3),
                                  analysis=dict(sorted(acc.analysis_counts.items())), images=image_counts,
                                  nodes=acc.node_summary())
                self.run_dir.write_summary(summary)
            except Exception as exc:  # nothing already written is lost; report what failed
                err_text = err_text or f"writing the summary failed: {describe(exc)}"
                status = "failed"
            try:
                if self.run_info is not None:
                    self.run_info.status = status
                    self.run_info.finished_at = finished
                    self.run_info.updated_at = finished
                    self.run_info.duration_s = round(finished - self.started_at, 3)
                    self.run_info.metrics = metrics
                    self.run_info.counts = acc.counts
                    self.run_info.usage = acc.usage
                    self.run_info.error = err_text
                    self.run_dir.write_run_info(self.run_info)
            except Exception as exc:
                err_text = err_text or f"writing run_info.json failed: {describe(exc)}"
                status = "failed"
        if rt is not None:
            if err_text:
                rt.log.error("request %s %s: %s", self.name, status, err_text)
            rt.emit(RequestFinished(ts=finished, request=self.name, run_id=self.run_id, status=status,
                                    metrics=metrics, error=err_text))
        await self._release()
        spec = self.spec
        return RequestOutcome(
            name=self.name, status=status, benchmark=spec.benchmark.id, harness=spec.harness.id, model=spec.model.id,
            environment=spec.environment.id, run_id=self.run_id if self.run_dir else None, metrics=metrics,
            by_category=by_category, errors_by_kind=acc.errors_by_kind, counts=acc.counts,
            paths=self.run_dir.paths if self.run_dir else None, reuse=self.reuse_report, error=err_text,
            error_type=type(error).__name__ if error is not None else None,
            error_field=error.field if isinstance(error, ConfigError) else None, started_at=self.started_at,
            finished_at=finished,
            duration_s=round(finished - self.started_at, 3))

    async def _release(self) -> None:
        log = self.rt.log if self.rt is not None else self.svc.log
        while self._closers:
            closer = self._closers.pop()
            try:
                await asyncio.wait_for(closer(), 60)
            except Exception as exc:
                log.warning("closing %r failed: %r", closer, exc)
        for h in self._handlers:  # the last lines on disk while the run is still ours
            h.close()
        if self.run_dir is not None:
            self.run_dir.close()  # last: another run may continue this one from here on
