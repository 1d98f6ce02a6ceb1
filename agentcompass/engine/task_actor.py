"""AttemptRun: one attempt of one task, run once: open env -> harness -> collect -> close env -> verify.

Every failure is classified into an ``error_kind``; transient ones are retried (new try, same plan) up to
``max_retries``; every try is recorded. An agent that times out is still graded.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec

from .._errors import EnvironmentError_, EvalError, ModelError
from ..analyzers import run_analyzers
from ..common.backoff import HALF_JITTER, backoff_delay
from ..common.error_kinds import ErrorKind
from ..interfaces import (
    Environment,
    EnvOpenSpec,
    EvalContext,
    HarnessResult,
    Mount,
    PreparedTask,
    RunContext,
    TaskSpec,
)
from ..records import AttemptFinished, AttemptRecord, AttemptStarted, TryRecord, TryRetrying
from . import image_cache
from .attempt_limits import AttemptBudget, LimitReached
from .failures import kind_of, policy
from .messages import AttemptDone, AttemptInterrupted, MsgQueue, RequestMsg, WorkItem
from .model_access import AttemptSpend, gateway_usage_of, try_usage
from .runtime import CURRENT_TASK, RequestRuntime
from .watchdog import Activity, Stalled, WatchedEnvironment, WatchedModel, run_watched

BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 30.0
_ERROR_CHARS = 4000
#: the error of a try cut short by a cancel or the run's timeout (the request fills in which).
INTERRUPTED = "interrupted while running"


def describe(exc: BaseException) -> str:
    """``Type: message``, bounded."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:_ERROR_CHARS]


class _Failure(Exception):
    """Internal: ends a try with a classified failure."""

    def __init__(self, status: str, kind: ErrorKind, error: str, result: HarnessResult | None = None) -> None:
        super().__init__(error)
        self.status = status
        self.kind = ErrorKind.of(kind)
        self.error = error
        self.result = result


class _VerifierOpenFailed(EnvironmentError_):
    """The verifier environment could not be opened (``kind``: ``env_open_failed``, or ``engine_error``)."""

    def __init__(self, message: str, kind: ErrorKind) -> None:
        super().__init__(message)
        self.kind = kind


#: the longest a benchmark's tool session may take to close (a user-simulator client, a subprocess).
_TOOLS_CLOSE_S = 30.0


async def _close_tools(tools: Any, log: logging.Logger) -> None:
    """Close a try's tool session, bounded; a failure to close is logged, never the attempt's outcome."""
    try:
        async with asyncio.timeout(_TOOLS_CLOSE_S):
            await tools.aclose()
    except Exception as exc:
        log.warning("closing the benchmark's tools: %s", describe(exc))


class _TaskLogger(logging.Logger):
    """A task attempt's logger. Its lines name the task, not the source line (run.log's format has no
    ``%(filename)s``/``%(lineno)d``), so it skips the stack walk ``findCaller`` makes for every record."""

    def findCaller(self, stack_info: bool = False, stacklevel: int = 1) -> tuple[str, int, str, str | None]:
        if stack_info:
            return super().findCaller(stack_info, stacklevel)
        return "(task)", 0, "(task)", None


def _cut_short(ctx: RunContext, kind: ErrorKind, error: str) -> HarnessResult:
    """The result of a harness the engine stopped (a timeout, a stall, a limit): the steps it streamed into
    ``ctx`` so far, ``kind`` as their stop reason, and what it put in ``ctx.artifacts``."""
    partial = ctx.trajectory
    partial.finished_at = time.time()
    partial.stop_reason = kind.value
    return HarnessResult(error=error, error_kind=kind, trajectory=partial, artifacts=dict(ctx.artifacts))


class AttemptRun:
    """One attempt of one task, run once: a one-shot coroutine (``run``), not an actor. It has no inbox and
    receives nothing: the request's RequestActor starts one per ``Grant`` as an asyncio task, stops it by
    cancelling that task, and hears from it exactly once on its own inbox (``AttemptDone`` or
    ``AttemptInterrupted``). Its tries are its own state."""

    def __init__(self, rt: RequestRuntime, item: WorkItem, outbox: MsgQueue[RequestMsg], *,
                 upcoming: int | None = None) -> None:
        self.rt = rt
        self.item = item
        self.outbox = outbox
        #: the request's attempts still to start when this one started (a hint for providers that open ahead)
        self.upcoming = upcoming
        self._tries: list[TryRecord] = []
        self._started = time.time()
        #: True once its report is on the outbox (nothing after that may send a second one)
        self.reported = False

    # ------------------------------------------------------------------ entry point (reports on every path)

    async def run(self) -> None:
        """Run the attempt and report it: ``AttemptDone``, or ``AttemptInterrupted`` with the tries so far when
        cancelled. An exception anywhere in the engine's code for the attempt (its own bookkeeping included)
        is reported as an ``engine_error`` attempt, never lost."""
        log: logging.Logger = self.rt.log
        try:
            log = self._task_logger(self.item.task.task_id, self.item.attempt)
            record = await self._attempt(log)
            record = self._report(record, log)
        except asyncio.CancelledError:
            log.warning("attempt cancelled")
            if not self.reported:
                self.outbox.put(AttemptInterrupted(task_id=self.item.task.task_id, attempt=self.item.attempt,
                                                   tries=list(self._tries)))
                self.reported = True
            raise
        except Exception as exc:
            if self.reported:  # it failed after its report: the report stands
                log.error("engine error after the attempt reported: %s", traceback.format_exc())
                return
            record = self._report(self._engine_error(exc, log), log)
        self.rt.emit(AttemptFinished(ts=time.time(), request=self.rt.name, run_id=self.rt.run_id,
                                     task_id=self.item.task.task_id, attempt=self.item.attempt, status=record.status,
                                     correct=record.correct, duration_s=float(record.meta.get("duration_s", 0.0)),
                                     error_kind=record.error_kind))

    def _report(self, record: AttemptRecord, log: logging.Logger) -> AttemptRecord:
        """Send the attempt's AttemptDone; a record that cannot be sent becomes an engine error that can."""
        item = self.item
        try:
            self.outbox.put(AttemptDone(task_id=item.task.task_id, attempt=item.attempt, record=record))
        except Exception as exc:  # e.g. a value msgspec cannot encode (strict messages)
            record = self._engine_error(exc, log)
            self.outbox.put(AttemptDone(task_id=item.task.task_id, attempt=item.attempt, record=record))
        self.reported = True
        log.info("attempt %d finished: status=%s correct=%s", item.attempt, record.status, record.correct)
        return record

    def _engine_error(self, exc: Exception, log: logging.Logger) -> AttemptRecord:
        """A bug in the code running the attempt, as the attempt's classified error (the tries it made kept)."""
        log.error("engine error: %s", traceback.format_exc())
        now = time.time()
        return AttemptRecord(status="run_error", error_kind=ErrorKind.ENGINE_ERROR, error=describe(exc),
                             tries=list(self._tries),
                             meta={"started_at": self._started, "duration_s": round(now - self._started, 6)})

    async def _attempt(self, log: logging.Logger) -> AttemptRecord:
        """The attempt's tries (a retryable failure starts a new try, same plan), then its analysis."""
        rt = self.rt
        item = self.item
        task = item.task
        tries = self._tries
        spent = AttemptSpend()  # model usage over all tries
        try_no = 1
        t_start = self._started
        CURRENT_TASK.set(task.task_id)  # this asyncio task's own context
        try:
            while True:
                rt.emit(AttemptStarted(ts=time.time(), request=rt.name, run_id=rt.run_id, task_id=task.task_id,
                                       attempt=item.attempt, try_no=try_no))
                t_start = time.time()
                record = await self._try(task, item.attempt, try_no, log)
                tries.append(TryRecord(try_no=try_no, status=record.status, started_at=t_start,
                                       finished_at=time.time(), error=record.error, error_kind=record.error_kind,
                                       usage=spent.add_try(record.meta)))
                if record.status != "completed" and record.status != "skipped" and try_no <= rt.max_retries \
                        and self._retryable(record):
                    backoff = self._backoff(try_no, record)
                    log.warning("try %d failed (%s): %s; retrying in %.2fs", try_no, record.error_kind,
                                record.error, backoff)
                    rt.emit(TryRetrying(ts=time.time(), request=rt.name, run_id=rt.run_id, task_id=task.task_id,
                                        attempt=item.attempt, try_no=try_no, error_kind=record.error_kind,
                                        error=(record.error or "")[:500], backoff_s=backoff))
                    await asyncio.sleep(backoff)
                    try_no += 1
                    continue
                break
        except asyncio.CancelledError:
            if len(tries) < try_no:  # the try that was running (not a backoff sleep) is recorded too
                tries.append(TryRecord(try_no=try_no, status="run_error", started_at=t_start,
                                       finished_at=time.time(), error=INTERRUPTED, error_kind=ErrorKind.CANCELLED))
            raise
        except Exception as exc:  # an engine bug in a try: recorded like the try's failure, usage so far kept
            log.error("engine error: %s", traceback.format_exc())
            record = AttemptRecord(status="run_error", error_kind=ErrorKind.ENGINE_ERROR, error=describe(exc))
            tries.append(TryRecord(try_no=try_no, status="run_error", started_at=self._started,
                                   finished_at=time.time(), error=record.error, error_kind=ErrorKind.ENGINE_ERROR))
        record.tries = list(tries)
        if rt.analyzers and record.status != "skipped":
            # in a thread: a long trajectory must not stall the loop; analyzers never raise
            record.analysis = await asyncio.to_thread(run_analyzers, rt.analyzers, task.public(), record, rt.log)
        spent.write(record.meta)
        record.meta["started_at"] = self._started
        record.meta["duration_s"] = round(time.time() - self._started, 6)
        return record

    async def _setup(self, prepared: PreparedTask, env: Environment, log: logging.Logger) -> None:
        """The setup phase, bounded by ``setup_timeout``: the benchmark's ``setup(task, env)`` hook (e.g. git
        history hygiene), then the harness's ``setup(task, env, log)`` hook (e.g. installing the agent)."""
        rt = self.rt
        try:
            async with asyncio.timeout(rt.timeouts.setup):
                await rt.benchmark.setup(prepared, env)
                await rt.harness.setup(prepared, env, log)
        except TimeoutError:
            raise _Failure("run_error", ErrorKind.SETUP_TIMEOUT, f"setting up the agent environment took longer than "
                           f"{rt.timeouts.setup:g}s (harness_params.setup_timeout)") from None
        except EnvironmentError_ as exc:
            raise _Failure("run_error", ErrorKind.ENV_LOST,
                           f"setting up the agent environment: {describe(exc)}") from None
        except Exception as exc:
            log.error("setup failed: %s", traceback.format_exc())
            raise _Failure("run_error", kind_of(exc, ErrorKind.SETUP_ERROR), f"setting up the agent environment: "
                           f"{describe(exc)}") from None

    def _backoff(self, try_no: int, record: AttemptRecord) -> float:
        """Seconds before the next try: exponential with jitter, at least the model's Retry-After, at most
        ``max_backoff_s``. The launch's ``timeout_seconds`` cancels the wait, so no try starts after it (clamping
        the wait to the deadline instead would let the remaining retries spin at zero backoff before the cancel
        lands, and book a timed-out run as failed)."""
        rt = self.rt
        retry_after = record.meta.get("retry_after")
        floor = float(retry_after) if isinstance(retry_after, int | float) else None
        return min(backoff_delay(try_no, BACKOFF_BASE_S, BACKOFF_MAX_S, jitter=HALF_JITTER, retry_after=floor),
                   rt.max_backoff_s)

    def _retryable(self, record: AttemptRecord) -> bool:
        if policy(record.error_kind).retry:
            return True
        text = f"{record.error_kind or ''}: {record.error or ''}"
        return any(p.search(text) for p in self.rt.retry_patterns)

    def _task_logger(self, task_id: str, attempt: int) -> logging.Logger:
        rt = self.rt
        # Built directly (not via getLogger) so the logging manager does not keep one per task forever.
        # No file of its own: its lines go to run.log, named by the task and attempt (no file per task).
        log = _TaskLogger(f"agentcompass.task.{task_id}#{attempt}", level=rt.log.level)
        log.parent = rt.log
        return log

    # ------------------------------------------------------------------ one try

    async def _try(self, task: TaskSpec, attempt: int, try_no: int, log: logging.Logger) -> AttemptRecord:
        rt = self.rt
        meta: dict[str, Any] = {"environments": []}
        try:
            # The benchmark never sees ground truth while preparing what the agent gets.
            prepared = rt.benchmark.prepare(task.public())
        except Exception as exc:
            log.error("prepare failed: %s", traceback.format_exc())
            return AttemptRecord(status="run_error", error_kind=kind_of(exc, ErrorKind.PREPARE_ERROR),
                                 error=describe(exc), meta=meta)
        try:
            result, artifacts = await self._agent_phase(task, prepared, attempt, try_no, log, meta)
        except _Failure as f:
            r = f.result
            if r is not None or "gateway" in meta:
                meta["usage"] = msgspec.to_builtins(try_usage(r.usage if r else None, gateway_usage_of(meta),
                                                              rt.price))
            return AttemptRecord(status=f.status, error_kind=f.kind, error=f.error, meta=meta,  # type: ignore[arg-type]
                                 trajectory=r.trajectory if r else None,
                                 final_answer=r.final_answer if r else None)
        # in-process calls (the harness reports them) plus calls through the gateway (its ledger saw them)
        meta["usage"] = msgspec.to_builtins(try_usage(result.usage, gateway_usage_of(meta), rt.price))
        record = AttemptRecord(status="completed", final_answer=result.final_answer, trajectory=result.trajectory,
                               artifacts=dict(result.artifacts), meta=meta,
                               error=result.error, error_kind=result.error_kind)
        if result.patch is not None:
            record.artifacts["patch"] = result.patch
        if not rt.harness.evaluates:
            record.status = "skipped"
            return record
        t0 = time.monotonic()
        ctx = EvalContext(task, prepared, result, artifacts, self._verifier_opener(task, prepared, meta), log)
        try:
            async with asyncio.timeout(rt.timeouts.verify):  # in this task (wait_for would start another)
                verdict = await rt.benchmark.evaluate(ctx)
        except TimeoutError:
            record.status, record.error_kind = "eval_error", ErrorKind.EVAL_TIMEOUT
            record.error = f"verification timed out after {rt.timeouts.verify:g}s"
            record.extra = dict(ctx.partial_extra)  # e.g. the judge call that was still running
            return record
        except _VerifierOpenFailed as exc:
            # The world was flaky, not the grading: retryable like any environment that would not open.
            record.status, record.error_kind, record.error = "eval_error", exc.kind, str(exc)
            return record
        except EnvironmentError_ as exc:  # the verifier's sandbox broke (e.g. a fork failed): retryable
            record.status, record.error_kind = "eval_error", ErrorKind.ENV_LOST
            record.error = f"verifying the attempt: {describe(exc)}"
            return record
        except Exception as exc:
            log.error("evaluation failed: %s", traceback.format_exc())
            default_kind = exc.kind if isinstance(exc, EvalError) else ErrorKind.EVAL_ERROR
            record.status, record.error_kind, record.error = "eval_error", kind_of(exc, default_kind), describe(exc)
            if isinstance(exc, EvalError) and exc.extra:  # what grading saw (e.g. a judge's raw reply)
                record.extra = dict(exc.extra)
            elif ctx.partial_extra:
                record.extra = dict(ctx.partial_extra)
            return record
        finally:
            meta["verify_s"] = round(time.monotonic() - t0, 6)
        record.correct = bool(verdict.correct)
        record.score = verdict.score if verdict.score is not None else (1.0 if verdict.correct else 0.0)
        record.extra = dict(verdict.extra)
        if verdict.analysis:
            record.analysis = {**record.analysis, **verdict.analysis}
        return record

    async def _agent_phase(self, task: TaskSpec, prepared: PreparedTask, attempt: int, try_no: int,
                           log: logging.Logger, meta: dict[str, Any]) -> tuple[HarnessResult, dict[str, Any]]:
        rt = self.rt
        env: Environment | None = None
        # this try's access to the model through the gateway (env vars with an envelope / route token)
        budget = AttemptBudget(rt.limits, rt.price) if rt.limits else None  # this try's model use, both routes
        grant = (rt.model_access.open(task.task_id, attempt, try_no, budget=budget)
                 if rt.model_access is not None else None)
        try:
            if rt.harness.needs_environment:
                env_vars = {**prepared.env, **grant.sandbox_env} if grant is not None else prepared.env
                env = await self._open(task.task_id, "agent", prepared, prepared.image, prepared.workdir,
                                       env_vars, prepared.files, meta, log)
                await self._setup(prepared, env, log)
                if rt.network.run is not None:
                    try:
                        await env.set_network_policy(rt.network.run)
                    except Exception as exc:
                        raise _Failure("run_error", kind_of(exc, ErrorKind.ENV_LOST),
                                       f"setting run_network_policy: {describe(exc)}") from None
            # only a harness that declares itself the oracle is ever handed the task's reference solution
            try:
                solution = rt.benchmark.reference_solution(task) if rt.harness.oracle else None
            except Exception as exc:
                raise _Failure("run_error", kind_of(exc, ErrorKind.PREPARE_ERROR),
                               f"reading the reference solution: {describe(exc)}") from None
            ctx = RunContext(request=rt.name, run_id=rt.run_id, task_id=task.task_id, attempt=attempt,
                             try_no=try_no, model_env=grant.host_env if grant is not None else {},
                             solution=solution)
            try:  # the benchmark's tools for this try (tool-use benchmarks); it sees the task without ground truth
                ctx.tools = rt.benchmark.tool_session(task.public(), ctx)
            except Exception as exc:
                log.error("tool session failed: %s", traceback.format_exc())
                raise _Failure("run_error", kind_of(exc, ErrorKind.PREPARE_ERROR),
                               f"opening the benchmark's tools: {describe(exc)}") from None
            agent_timeout = rt.timeouts.agent
            if prepared.agent_timeout_s is not None and prepared.agent_timeout_s < agent_timeout:
                agent_timeout = prepared.agent_timeout_s
                meta["agent_timeout_s"] = agent_timeout
                meta["agent_timeout_from"] = "task"
            t0 = time.monotonic()
            if budget is not None:
                budget.start()
            activity = Activity()  # stamped by every env/model call of the harness; read by the watchdog
            watched_env = WatchedEnvironment(env, activity) if env is not None else None
            try:
                result = await run_watched(
                    rt.harness.run(prepared, watched_env, WatchedModel(rt.model, activity, budget), ctx, log),
                    activity, ctx.trajectory, timeout_s=agent_timeout, stall_s=rt.timeouts.stall, budget=budget)
            except Stalled:
                # Not the agent's doing (a lost wakeup, a wedged sandbox): retryable; the steps so far are kept.
                log.error("no progress for %gs: the attempt is stalled", rt.timeouts.stall)
                error = (f"no progress (no step, no command or model call started or finished) for "
                         f"{rt.timeouts.stall:g}s (harness_params.stall_timeout)")
                raise _Failure("run_error", ErrorKind.STALLED, error,
                               _cut_short(ctx, ErrorKind.STALLED, error)) from None
            except TimeoutError:
                # Still graded: the agent's work so far may be enough; the steps it streamed into ctx are kept.
                log.warning("agent timed out after %gs", agent_timeout)
                result = _cut_short(ctx, ErrorKind.AGENT_TIMEOUT, f"agent timed out after {agent_timeout:g}s")
            except LimitReached as exc:
                # Graded, as a timeout is: the agent used its budget; the steps it streamed into ctx are kept.
                log.warning("%s", exc)
                result = _cut_short(ctx, exc.kind, str(exc))
            except ModelError as exc:
                if exc.retry_after:
                    meta["retry_after"] = exc.retry_after
                raise _Failure("run_error", exc.kind, describe(exc)) from None
            except EnvironmentError_ as exc:
                raise _Failure("run_error", ErrorKind.ENV_LOST, describe(exc)) from None
            except Exception as exc:
                log.error("harness crashed: %s", traceback.format_exc())
                raise _Failure("run_error", kind_of(exc, ErrorKind.HARNESS_CRASH), describe(exc)) from None
            finally:
                meta["agent_s"] = round(time.monotonic() - t0, 6)
                if budget is not None:  # what the try used of its limits
                    meta["limits"] = budget.counts()
                if ctx.tools is not None:
                    await _close_tools(ctx.tools, log)
            if result.error_kind and not policy(result.error_kind).grade:
                raise _Failure("run_error", result.error_kind, result.error or result.error_kind, result)
            artifacts: dict[str, Any] = {}
            if env is not None and rt.harness.evaluates:
                try:
                    async with asyncio.timeout(rt.timeouts.verify):
                        artifacts = await rt.benchmark.collect(prepared, env, result)
                except EnvironmentError_ as exc:
                    raise _Failure("eval_error", ErrorKind.ENV_LOST, f"collecting the attempt: {describe(exc)}",
                                   result) from None
                except Exception as exc:
                    log.error("collect failed: %s", traceback.format_exc())
                    raise _Failure("eval_error", kind_of(exc, ErrorKind.EVAL_ERROR),
                                   f"collecting the attempt: {describe(exc)}", result) from None
            return result, artifacts
        finally:
            if env is not None:
                await rt.pool.close(env, timeout=rt.timeouts.env_close)
            if grant is not None and rt.model_access is not None:
                meta["gateway"] = msgspec.to_builtins(await rt.model_access.close(grant))

    async def _open(self, task_id: str, role: str, prepared: PreparedTask, image: str | None, workdir: str | None,
                    env_vars: dict[str, str], files: dict[str, str], meta: dict[str, Any],
                    log: logging.Logger) -> Environment:
        rt = self.rt
        policy = rt.network.verifier if role == "verifier" and rt.network.verifier else rt.network.baseline
        recipe = prepared.image_recipe if image == prepared.image else None
        spec = EnvOpenSpec(run_id=rt.run_id, task_id=task_id, role=role,  # type: ignore[arg-type]
                           image=image, image_recipe=recipe, workdir=workdir, env={**rt.container_env, **env_vars},
                           files=files, network=policy,
                           keep=rt.keep_environment, labels={"agentcompass.request": rt.name},
                           mounts=self._mounts(role), upcoming=self.upcoming, resources=prepared.resources)
        waiting_image = rt.images is not None
        try:
            if rt.images is not None:  # the image first: its fetch is shared, bounded and not the open's time
                await rt.images.ensure(task_id, image, recipe)
            waiting_image = False
            env = await rt.pool.open(rt.provider, spec, timeout=rt.timeouts.env_open, request=rt.name)
        except TimeoutError:
            if waiting_image:
                raise _Failure("run_error", ErrorKind.IMAGE_WAIT_TIMEOUT,
                               f"the {role} environment's image {image or rt.provider.image} was "
                               f"not ready after {image_cache.ENSURE_CAP_S:g}s (the wait for a pull slot and room on "
                               "disk, plus the pull or build)") from None
            raise _Failure("run_error", ErrorKind.ENV_OPEN_FAILED,
                           f"opening the {role} environment timed out after {rt.timeouts.env_open:g}s") from None
        except Exception as exc:
            log.error("opening %s environment failed: %s", role, traceback.format_exc())
            own = exc.kind if isinstance(exc, EnvironmentError_) else None  # e.g. an image pull's, disk_full
            raise _Failure("run_error", kind_of(exc, own or ErrorKind.ENV_OPEN_FAILED),
                           f"opening the {role} environment: {describe(exc)}") from None
        entry: dict[str, Any] = {"role": role, "id": env.id, "workdir": env.workdir, "provider": rt.provider.name}
        node = rt.provider.node_of(env)  # a provider spread over machines says which ran it
        if node is not None:
            entry["node"] = node
        image_ref = spec.image or rt.provider.image
        stats = rt.provider.pull_stats(image_ref) if image_ref else None
        if stats is not None:  # how the image came to be there: present, pulled (bytes, seconds, tries), built
            entry["image"] = msgspec.to_builtins(stats)
        if rt.keep_environment:
            entry["kept"] = True
            rt.log.warning("keep_environment: %s environment of task %s kept: %s (%s)", role, task_id, env.id,
                           env.workdir)
        meta["environments"].append(entry)
        log.debug("%s environment %s opened", role, env.id)  # its id is in the detail's meta too
        return env

    def _mounts(self, role: str) -> list[Mount]:
        """The harness's mounts, for the agent's environment only (the verifier never sees the agent's program)."""
        rt = self.rt
        if role != "agent" or not rt.provider.capabilities.mounts:
            return []
        return list(rt.harness.mounts())

    def _verifier_opener(self, task: TaskSpec, prepared: PreparedTask, meta: dict[str, Any]) -> Any:
        rt = self.rt

        @asynccontextmanager
        async def open_verifier(*, image: str | None, files: dict[str, str],
                                workdir: str | None) -> AsyncIterator[Environment]:
            log = rt.log
            try:
                env = await self._open(task.task_id, "verifier", prepared, image or prepared.image, workdir, {},
                                       files, meta, log)
            except _Failure as f:
                raise _VerifierOpenFailed(f.error, f.kind) from None
            try:
                yield env
            finally:
                await rt.pool.close(env, timeout=rt.timeouts.env_close)

        return open_verifier
