"""RequestActor: resolves one request, owns its run directory, feeds the scheduler, commits details.

Any failure here ends this request only (a failed outcome with a readable error); the launch goes on.
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import re
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from .. import __version__
from .._errors import AgentCompassError, ConfigError
from .._validate import MAX_K, count, seconds
from ..analyzers import ERRORS_KEY, build_analyzers, flag_names
from ..dependencies import InstallReport, ensure_installed
from ..interfaces import ComponentContext, NetworkPolicy, TaskSpec
from ..metrics import DefaultAccumulator
from ..models.adaptive import AdaptiveLimiter
from ..models.retry import RetryingModelClient
from ..params import selection_params
from ..records import (
    AttemptFinished,
    AttemptRecord,
    ModelRetrying,
    RequestCounts,
    RequestFinished,
    RequestStarted,
    RunInfo,
    RunStatus,
    Summary,
    TaskDetail,
    TaskFinished,
    Usage,
)
from ..results import RequestOutcome
from ..specs import RunRequestSpec
from .failures import policy
from .identity import request_identity, run_fields, task_identity
from .image_cache import DiskFull, RequestImages, pop_image_policy
from .messages import AttemptDone, CancelRequest, MsgQueue, Submit, WorkItem
from .model_access import open_model_access, split_engine_params
from .progress import download_reporter
from .redact import RedactingFormatter, Redactor
from .run_dir import (
    RunDir,
    check_data_dir,
    check_results_dir,
    move_run_aside,
    new_run_id,
    read_detail_file,
    request_dir,
    run_changes,
    safe_name,
)
from .runtime import CURRENT_TASK, NetworkPhases, PhaseTimeouts, RequestRuntime
from .task_actor import INTERRUPTED, TaskActor, describe

if TYPE_CHECKING:
    from .supervisor import Supervisor

_NET_KEYS = ("network_policy", "run_network_policy", "verifier_network_policy")
_RUN_INFO_EVERY_S = 2.0
_REUSE_LIST_CAP = 200


@dataclass
class _InFlight:
    task: TaskSpec
    identity: str
    attempts: dict[int, AttemptRecord]


def _pop_float(params: dict[str, Any], key: str, default: float, field: str) -> float:
    return seconds(params.pop(key, default), f"{field}.{key}")


def parse_network_policy(value: Any, field: str) -> NetworkPolicy:
    """``"none"`` or ``{"mode": "allowlist", "hosts": [...]}`` -> NetworkPolicy, with a readable error."""
    raw = {"mode": value} if isinstance(value, str) else value
    try:
        return msgspec.convert(raw, NetworkPolicy)
    except msgspec.ValidationError as exc:
        raise ConfigError(
            f"Invalid `environment_params.{field}`: {str(exc).split(' - at')[0]}. Allowed: \"public\", \"none\", "
            f"\"model\", or {{\"mode\": \"allowlist\", \"hosts\": [...]}}.", field=f"environment_params.{field}"
        ) from None


def component_settings(**components: Any) -> dict[str, Any]:
    """What each component chose beyond its params (its ``resolved_settings()``, e.g. the agent config a harness
    picked by default and its package version), by role, for params.json; roles with nothing to say left out."""
    return {role: settings for role, c in components.items()
            if c is not None and (settings := c.resolved_settings())}


class RequestActor:
    """One per RunRequestSpec."""

    def __init__(self, index: int, spec: RunRequestSpec, name: str, sup: Supervisor) -> None:
        self.index = index
        self.spec = spec
        self.name = name
        self.sup = sup
        self.inbox: MsgQueue[AttemptDone] = MsgQueue(AttemptDone)
        self.counts = RequestCounts()
        self.errors_by_kind: dict[str, int] = {}
        self._attempts_counted = 0  # attempts that ran (not skipped), for "did anything reach a result"
        self._first_error: str | None = None
        self._first_engine_error: str | None = None
        #: (label, details dir) of ``reuse_run_id`` (or of the latest run, see _pick_run_dir), checked in _resolve
        #: before anything is written.
        self._reuse_source: tuple[str, Path] | None = None
        #: an earlier run at our run id that ``overwrite`` moves aside before the run directory is created.
        self._move_aside: Path | None = None
        self.analysis_counts: dict[str, int] = {}
        self.usage = Usage()
        self.model_spec = spec.model
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
        self._accumulator: Any = None
        #: this request's handle on the launch's image cache (providers with images)
        self.images: RequestImages | None = None
        self.started_at = time.time()

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> RequestOutcome:
        status: RunStatus = "failed"
        error: BaseException | None = None
        try:
            await self._resolve()
            await self._execute()
            status = "completed"
        except asyncio.CancelledError:
            status = self.sup.stop_reason or "cancelled"
            self._commit_interrupted(status)
            if self.sup.stop_reason is None:
                await self._finish(status, None)
                raise
        except AgentCompassError as exc:
            error = exc
        except Exception as exc:
            error = exc
            if self.rt is not None:
                self.rt.log.error("request failed: %s", traceback.format_exc())
        if status == "failed":
            self._cancel_lane()
        return await self._finish(status, error)

    def _cancel_lane(self) -> None:
        if self.rt is not None:
            self.sup.scheduler.inbox.put(CancelRequest(request=self.index))

    # ------------------------------------------------------------------ resolve

    async def _resolve(self) -> None:
        spec, sup = self.spec, self.sup
        if self.index in sup.invalid:
            raise sup.invalid[self.index]
        for i, pat in enumerate(spec.retry_pattern_list):
            try:
                re.compile(pat)
            except re.error as exc:
                raise ConfigError(f"Invalid `retry_pattern_list[{i}]` {pat!r}: not a regular expression ({exc}).",
                                  field=f"retry_pattern_list[{i}]") from None
        check_results_dir(spec.results_dir)
        check_data_dir(spec.data_dir)
        if spec.reuse_run_id:  # before anything is created: a typo must not leave an empty failed run behind
            src = request_dir(spec.results_dir, spec.benchmark.id, spec.harness.id, spec.model.id, spec.reuse_run_id)
            if not src.is_dir():
                raise ConfigError(f"Invalid `reuse_run_id` {spec.reuse_run_id!r}: no run directory at {str(src)!r}.",
                                  field="reuse_run_id")
            self._reuse_source = (spec.reuse_run_id, src / "details")
        reg = sup.registries
        bench_cls = reg["benchmark"].resolve(spec.benchmark.id, field="benchmark")
        # Hashed from the params as given (network policies, agent/verify timeouts shape results too; the
        # operational keys are left out in request_identity).
        id_parts: dict[str, Any] = dict(
            benchmark=spec.benchmark.id, benchmark_params=spec.benchmark.params,
            benchmark_version=str(bench_cls.version), harness=spec.harness.id,
            harness_params=spec.harness.params, model=spec.model.id, model_params=spec.model.params,
            api_protocol=spec.model.api_protocol, environment=spec.environment.id,
            environment_params=spec.environment.params)
        self.identity = request_identity(**id_parts, selection_params=selection_params(bench_cls))
        self.run_fields = run_fields(**id_parts)
        self._pick_run_dir()  # may refuse: before any component, client or file is made
        harness_cls = reg["harness"].resolve(spec.harness.id, field="harness")
        provider_cls = reg["environment"].resolve(spec.environment.id, field="environment")

        bench_params = dict(spec.benchmark.params)
        harness_params = dict(spec.harness.params)
        env_params = dict(spec.environment.params)
        env_timeouts: dict[str, Any] = {k: env_params[k] for k in ("open_timeout", "close_timeout") if k in env_params}
        timeouts = PhaseTimeouts(
            env_open=_pop_float(env_params, "open_timeout", 600.0, "environment_params"),
            env_close=_pop_float(env_params, "close_timeout", 60.0, "environment_params"),
            setup=_pop_float(harness_params, "setup_timeout", 600.0, "harness_params"),
            agent=_pop_float(harness_params, "agent_timeout", 3600.0, "harness_params"),
            stall=_pop_float(harness_params, "stall_timeout", 900.0, "harness_params"),
            verify=_pop_float(bench_params, "verify_timeout", 1800.0, "benchmark_params"),
        )
        net = {k: parse_network_policy(env_params.pop(k), k) for k in _NET_KEYS if k in env_params}
        network = NetworkPhases(baseline=net.get("network_policy", NetworkPolicy()),
                                run=net.get("run_network_policy"), verifier=net.get("verifier_network_policy"))

        # price_per_million / max_concurrency are the engine's: they never reach the client or the upstream
        engine_params = split_engine_params(spec.model.params)
        cancelled = threading.Event()
        ctx = ComponentContext(cancelled=cancelled, run_id=self.run_id, request=self.name, data_dir=spec.data_dir,
                               auto_install_dependencies=spec.auto_install_dependencies,
                               environment=spec.environment.id, benchmark=spec.benchmark.id,
                               provider_limit=sup.spec.provider_limits.get(spec.environment.id),
                               price=engine_params.price,
                               report_download=download_reporter(sup.bus.emit, self.name, self.run_id))
        installed = await self._ensure_requirements((("benchmark", spec.benchmark.id, bench_cls),
                                                     ("harness", spec.harness.id, harness_cls),
                                                     ("environment", spec.environment.id, provider_cls)))
        # Off the loop: a benchmark may load a big dataset, a harness import a heavy package, while other
        # requests run. Providers stay on the loop (they may make loop-bound clients).
        try:
            benchmark = await asyncio.to_thread(
                bench_cls, reg["benchmark"].convert_params(bench_cls, bench_params, spec.benchmark.id), ctx)
            ctx.k = count(benchmark.k or 1, "benchmark_params.k", maximum=MAX_K)  # what the others are built with
            harness = await asyncio.to_thread(
                harness_cls, reg["harness"].convert_params(harness_cls, harness_params, spec.harness.id), ctx)
        except asyncio.CancelledError:  # the thread runs on (asyncio.run waits for it): tell it to stop
            cancelled.set()
            raise
        if provider_cls.capabilities.phase_timeouts:
            env_params.update(env_timeouts)
        has_images = provider_cls.capabilities.images
        image_policy, image_params = pop_image_policy(env_params, supported=has_images, provider=spec.environment.id)
        provider = provider_cls(reg["environment"].convert_params(provider_cls, env_params, spec.environment.id), ctx)
        self._closers.append(provider.aclose)
        env_params.update(image_params)  # recorded in params.json as given
        if has_images:
            self.images = sup.images.open_request(self.name, self.run_id, provider, image_policy)
        analyzers = build_analyzers(spec.enable_analysis, reg["analyzer"], ctx)
        for key, phase_policy in net.items():  # refused before any task starts, naming the param that asked
            try:
                provider.check_network_policy(phase_policy)
            except ConfigError as exc:
                raise ConfigError(f"Invalid `environment_params.{key}`: {exc}",
                                  field=f"environment_params.{key}") from None

        from ..models.factory import create_model_client

        concurrency = min(spec.task_concurrency, sup.spec.task_concurrency or spec.task_concurrency)
        def on_model_retry(kind: str, backoff_s: float, try_no: int) -> None:
            sup.bus.emit(ModelRetrying(ts=time.time(), request=self.name, run_id=self.run_id, error_kind=kind,
                                       try_no=try_no, backoff_s=backoff_s, task_id=CURRENT_TASK.get()))

        self.model_spec = msgspec.structs.replace(spec.model, params=engine_params.client_params)
        model = create_model_client(self.model_spec, max_connections=max(concurrency, 1), on_retry=on_model_retry,
                                    max_backoff_s=spec.max_backoff_s)
        self._closers.append(model.aclose)
        if spec.model.base_url:
            # one adaptive limit per endpoint for the launch, shared with the gateway and other requests
            self.limiter = sup.models.limiter_for(self.name, self.run_id, spec.model.base_url, spec.model.id,
                                                  engine_params.max_concurrency or max(concurrency, 1))
            if isinstance(model, RetryingModelClient):
                model.limiter = self.limiter
        self._closers.append(lambda: sup.models.release(self.name))

        redactor = Redactor([spec.model.api_key, *sup.extra_secrets])
        run_dir = self._choose_run_dir(redactor)
        log = self._make_logger(run_dir, redactor)
        self.run_dir = run_dir
        for report in installed:
            log.info("installed %s for the request (%.1fs%s); pip output:\n%s", report.requirement.pip, report.seconds,
                     "" if report.ran_pip else ", another request ran pip", report.output)
        self.rt = RequestRuntime(
            index=self.index, name=self.name, run_id=self.run_id, benchmark=benchmark, harness=harness,
            provider=provider, model=model, pool=sup.pool, run_dir=run_dir, log=log, emit=sup.bus.emit,
            k=ctx.k,
            max_retries=spec.max_retries, max_backoff_s=spec.max_backoff_s,
            retry_patterns=[re.compile(p) for p in spec.retry_pattern_list],
            keep_environment=spec.keep_environment, file_log_level=logging.getLevelName(spec.file_log_level),
            timeouts=timeouts, network=network,
            price=engine_params.price, images=self.images)
        self.rt.analyzers = analyzers
        new_acc = benchmark.new_accumulator()
        self._accumulator = new_acc if new_acc is not None else DefaultAccumulator(self.rt.k)
        self._write_params(bench_params, harness_params, env_params, timeouts, network, benchmark)
        self.run_info = RunInfo(
            run_id=self.run_id, request=self.name, status="running", benchmark=spec.benchmark.id,
            harness=spec.harness.id, model=spec.model.id, environment=spec.environment.id,
            started_at=self.started_at, paths=run_dir.paths, counts=self.counts, pid=os.getpid(),
            version=__version__)
        run_dir.write_run_info(self.run_info)
        sup.bus.attach_file(self.name, run_dir.paths.progress, redactor)
        log.info("request %s resolved: run_id=%s dir=%s", self.name, self.run_id, run_dir.path)

    async def _ensure_requirements(self, components: Iterable[tuple[str, str, Any]]) -> list[InstallReport]:
        """Each component class's declared ``requirements``, installed (pip, awaited) when allowed; else a
        ConfigError naming the command."""
        reports: list[InstallReport] = []
        for field, cid, cls in components:
            reqs = cls.requirements
            if reqs:
                reports += await ensure_installed(
                    reqs, auto_install=self.spec.auto_install_dependencies, field=field, who=f"{field} {cid!r}",
                    emit=self.sup.bus.emit, request=self.name, run_id=self.run_id)
        return reports

    def _base_dir(self) -> Path:
        spec = self.spec
        return request_dir(spec.results_dir, spec.benchmark.id, spec.harness.id, spec.model.id, "x").parent

    def _pick_run_dir(self) -> None:
        """Never write over an earlier run. ``reuse=True`` without a run_id continues the most recent run of
        this selection if it was made with the same params, else starts a new run id that copies its matching
        tasks. An existing run id is continued only with ``reuse=True`` and the same params; otherwise refused,
        or moved aside with ``overwrite=True``."""
        spec, base = self.spec, self._base_dir()
        if spec.reuse and not spec.run_id and base.is_dir():
            runs = sorted((p for p in base.iterdir()  # runs moved aside by `overwrite` are not candidates
                           if (p / "run_info.json").exists() and ".overwritten-" not in p.name),
                          key=lambda p: p.stat().st_mtime)
            if runs and not run_changes(runs[-1], self.run_fields):
                self.run_id = runs[-1].name
            elif runs and self._reuse_source is None:
                self._reuse_source = (runs[-1].name, runs[-1] / "details")
            return
        path = base / safe_name(self.run_id)
        if not path.is_dir() or not any(path.iterdir()):
            return
        if not spec.reuse:
            why = (f"Run directory {str(path)!r} already exists. Pass `reuse=True` (`--reuse`) to continue that run "
                   "with the same params")
        else:
            changes = run_changes(path, self.run_fields)
            if not changes:
                return
            why = (f"Run {self.run_id!r} at {str(path)!r} was made with other params, so continuing it would mix two "
                   f"runs: {'; '.join(changes)}. Nothing was written. Pass the same params to continue it")
        if spec.overwrite:
            self._move_aside = path
            return
        raise ConfigError(f"{why}, a different `run_id` (with `reuse_run_id={self.run_id!r}` to copy its matching "
                          "tasks), or `overwrite=True` (`--overwrite`) to move it aside and start over.",
                          field="run_id")

    def _choose_run_dir(self, redactor: Redactor) -> RunDir:
        path = self._base_dir() / safe_name(self.run_id)
        if self._move_aside is not None:
            backup = move_run_aside(self._move_aside)
            self.sup.log.warning("run %s: the earlier run was moved to %s (overwrite)", self.run_id, backup)
        rd = RunDir(path, redactor)
        rd.create()
        return rd

    def _make_logger(self, run_dir: RunDir, redactor: Redactor) -> logging.Logger:
        file_level = logging.getLevelName(self.spec.file_log_level)
        level = min(file_level, self.sup.console_level)
        log = logging.Logger(f"agentcompass.run.{self.name}", level=level)
        log.parent = self.sup.log
        handler = run_dir.log_handler(run_dir.paths.log)
        handler.setLevel(file_level)
        handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s", redactor))
        log.addHandler(handler)
        self._handlers.append(handler)
        return log

    def _write_params(self, bench_params: dict[str, Any], harness_params: dict[str, Any], env_params: dict[str, Any],
                      timeouts: PhaseTimeouts, network: NetworkPhases, benchmark: Any) -> None:
        assert self.run_dir is not None
        spec = msgspec.to_builtins(self.spec)
        if spec.get("model", {}).get("api_key"):
            spec["model"]["api_key"] = "***"
        orch = msgspec.to_builtins(self.sup.spec)
        orch.pop("requests", None)
        self.run_dir.write_params({
            "request": self.name, "run_id": self.run_id, "identity": self.identity, "spec": spec,
            "resolved": {"benchmark_params": bench_params, "harness_params": harness_params,
                         "environment_params": env_params, "k": self.rt.k if self.rt else 1,
                         "timeouts": timeouts.__dict__,
                         # where the benchmark's data came from (e.g. a Hub dataset's resolved commit)
                         "benchmark_source": msgspec.to_builtins(benchmark.source),
                         "network": {"baseline": msgspec.to_builtins(network.baseline),
                                     "run": msgspec.to_builtins(network.run),
                                     "verifier": msgspec.to_builtins(network.verifier)}},
            "orchestration": orch,
            "component_settings": component_settings(benchmark=benchmark, harness=self.rt.harness if self.rt else None),
            "versions": {"agentcompass": __version__, "python": sys.version.split()[0],
                         "platform": platform.platform(), "benchmark": str(benchmark.version)},
        })

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
        rt = self.rt
        assert rt is not None and self.run_dir is not None
        tasks = await self._load_tasks()
        if rt.harness.needs_environment or rt.harness.evaluates:
            await self._start_provider(rt, tasks[0] if tasks else None)
        rt.model_access = await open_model_access(self.sup.models, rt, self.model_spec, wrap=self.spec.wrap_api_key,
                                                  limiter=self.limiter)
        self.counts.total = len(tasks)
        to_run, reused = self._apply_reuse(tasks)
        if self.images is not None and (rt.harness.needs_environment or rt.harness.evaluates):
            await self.images.plan(rt.benchmark, (t for t, _ in to_run))
        rt.emit(RequestStarted(ts=time.time(), request=self.name, run_id=self.run_id,
                               run_dir=str(self.run_dir.path), total_tasks=len(tasks),
                               reused_tasks=self.counts.reused))
        now = time.time()
        for d in reused:
            rt.emit(TaskFinished(ts=now, request=self.name, run_id=self.run_id, task_id=d.task_id,
                                 correct=d.correct, reused=True))
        lane_limit = self.spec.task_concurrency
        actor = TaskActor(rt)
        self.sup.scheduler.add_lane(self.index, lane_limit, actor.run, self.inbox)
        window = max(2 * lane_limit, 16)
        outstanding = 0
        for task, ident in to_run:
            self.in_flight[task.task_id] = _InFlight(task, ident, {})
            for attempt in range(1, rt.k + 1):
                while outstanding >= window:
                    self._on_done(await self.inbox.get())
                    outstanding -= 1
                self.sup.scheduler.inbox.put(Submit(WorkItem(self.index, task, attempt, ident)))
                outstanding += 1
        while outstanding:
            self._on_done(await self.inbox.get())
            outstanding -= 1

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
        if entry is None:
            return
        entry.attempts[msg.attempt] = msg.record
        rec = msg.record
        if len(rec.tries) > 1:
            self.counts.retries += len(rec.tries) - 1
        if len(entry.attempts) == (self.rt.k if self.rt else 1):
            del self.in_flight[msg.task_id]
            self._commit(entry)

    def _commit(self, entry: _InFlight, *, reused_from: str | None = None) -> None:
        detail = self._build_detail(entry)
        detail.reused_from = reused_from
        assert self.run_dir is not None and self.rt is not None
        self.run_dir.write_detail(detail)
        self._account(detail)
        if self.images is not None:
            self.images.task_done(detail.task_id)
        self.rt.emit(TaskFinished(ts=time.time(), request=self.name, run_id=self.run_id, task_id=detail.task_id,
                                  correct=detail.correct, reused=reused_from is not None))
        self._maybe_write_run_info()

    def _build_detail(self, entry: _InFlight) -> TaskDetail:
        k = self.rt.k if self.rt else 1
        attempts = {str(i): entry.attempts[i] for i in sorted(entry.attempts)}
        graded = [(i, a) for i, a in sorted(entry.attempts.items()) if a.correct is not None]
        solved_at = next((i for i, a in graded if a.correct), None)
        scores = [a.score for _, a in graded if a.score is not None]
        return TaskDetail(
            task_id=entry.task.task_id, category=entry.task.category, k=k, attempts=attempts,
            correct=(solved_at is not None) if graded else None,
            score=sum(scores) / len(scores) if scores else None,
            attempts_tried=sum(1 for a in entry.attempts.values() if a.status != "skipped"),
            solved_at=solved_at, identity=entry.identity)

    def _account(self, detail: TaskDetail) -> None:
        self.counts.done += 1
        if detail.correct:
            self.counts.correct += 1
        for a in detail.attempts.values():
            if a.status == "skipped":
                self.counts.skipped += 1
            else:
                self._attempts_counted += 1
                if a.status != "completed":
                    self.counts.errors += 1
                    if self._first_error is None:
                        self._first_error = f"{detail.task_id}: {a.error or a.error_kind or a.status}"
                if a.error_kind == "engine_error":
                    self.counts.engine_errors += 1
                    self._first_engine_error = self._first_engine_error or f"{detail.task_id}: {a.error}"
            if a.error_kind:
                self.errors_by_kind[a.error_kind] = self.errors_by_kind.get(a.error_kind, 0) + 1
            u = a.meta.get("usage")
            if u:
                self.usage.add(Usage(**u))
            if a.analysis:
                self._count_analysis(a.analysis)
        self._accumulator.add(detail)

    def _count_analysis(self, analysis: dict[str, Any]) -> None:
        for flag in flag_names(analysis):
            self.analysis_counts[flag] = self.analysis_counts.get(flag, 0) + 1
        if analysis.get(ERRORS_KEY):
            self.analysis_counts[ERRORS_KEY] = self.analysis_counts.get(ERRORS_KEY, 0) + 1

    def _maybe_write_run_info(self) -> None:
        now = time.monotonic()
        if now - self._last_info_write >= _RUN_INFO_EVERY_S and self.run_info is not None and self.run_dir:
            self._last_info_write = now
            self.run_info.updated_at = time.time()
            self.run_info.counts = self.counts
            self.run_info.usage = self.usage
            self.run_dir.write_run_info(self.run_info)

    # ------------------------------------------------------------------ reuse

    def _apply_reuse(self, tasks: list[TaskSpec]) -> tuple[list[tuple[TaskSpec, str]], list[TaskDetail]]:
        """(tasks to run, reused details); reused ones are committed (copied) right away."""
        assert self.run_dir is not None
        spec = self.spec
        sources: list[tuple[str, Path]] = []
        if spec.reuse:
            sources.append(("this run", self.run_dir.details))
        if self._reuse_source is not None:
            sources.append(self._reuse_source)
        out: list[tuple[TaskSpec, str]] = []
        reused_details: list[TaskDetail] = []
        reused = 0
        rerun: dict[str, list[str]] = {"identity_mismatch": [], "not_normal": [], "missing": []}
        for task in tasks:
            ident = task_identity(self.identity, task)
            hit = None
            why = "missing"
            for label, details_dir in sources:
                d = read_detail_file(details_dir / f"{safe_name(task.task_id)}.json")
                if d is None:
                    continue
                if d.task_id != task.task_id or d.identity != ident:
                    why = "identity_mismatch"
                    continue
                if any(a.status not in ("completed", "skipped") or not policy(a.error_kind).valid
                       for a in d.attempts.values()):
                    why = "not_normal"
                    continue
                hit = (label, d)
                break
            if hit is None:
                if sources:
                    lst = rerun[why]
                    if len(lst) < _REUSE_LIST_CAP:
                        lst.append(task.task_id)
                out.append((task, ident))
                continue
            label, d = hit
            reused += 1
            self.counts.reused += 1
            reused_details.append(TaskDetail(task_id=d.task_id, k=d.k, attempts={}, correct=d.correct))
            if label == "this run":
                self._account(d)
            else:
                d.reused_from = label
                self.run_dir.write_detail(d)
                self._account(d)
        if sources:
            self.reuse_report = {"sources": [s for s, _ in sources], "reused": reused,
                                 "rerun": {k: v for k, v in rerun.items() if v},
                                 "rerun_count": len(tasks) - reused}
        return out, reused_details

    # ------------------------------------------------------------------ finish

    def _commit_interrupted(self, status: str) -> None:
        """Details for attempts that were running when the run was stopped: recorded, not lost."""
        if self.run_dir is None or self.rt is None:
            return
        kind = "run_timeout" if status == "timed_out" else "cancelled"
        # Only tasks that had started; queued ones simply did not run (a resumed run picks them up).
        running = {task_id for task_id, _ in self.rt.partial_tries}
        started = [e for e in self.in_flight.values() if e.attempts or e.task.task_id in running]
        error = "the run hit timeout_seconds" if kind == "run_timeout" else "the run was cancelled"
        for entry in started:
            for attempt in range(1, self.rt.k + 1):
                if attempt in entry.attempts:
                    continue
                # the tries it made before the stop (a stuck retry loop shows why it was stuck)
                tries = [msgspec.structs.replace(t, error_kind=kind, error=error) if t.error == INTERRUPTED else t
                         for t in self.rt.partial_tries.pop((entry.task.task_id, attempt), [])]
                self.counts.retries += max(0, len(tries) - 1)
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
        finished = time.time()
        metrics: dict[str, Any] = {}
        by_category: dict[str, dict[str, Any]] = {}
        err_text = None
        if error is not None:
            err_text = str(error) if isinstance(error, AgentCompassError) else describe(error)
        if self.run_dir is not None and self.run_dir.write_error is not None:
            # the disk filled up (or failed): say how far the run got; everything counted is on disk
            err_text = (f"{self.run_dir.write_error} after {self.counts.done} of {self.counts.total} details were "
                        "written; the run stopped")
            status = "failed"
        if self._accumulator is not None:
            try:
                metrics, by_category = self._accumulator.result()
            except Exception as exc:
                err_text = err_text or f"aggregating metrics failed: {describe(exc)}"
                status = "failed"
        if status == "completed" and self._attempts_counted and self.counts.errors == self._attempts_counted:
            # Nothing ran to a result (a dead endpoint, a bad key, a harness that always crashes): a failure,
            # not a score of 0. The metrics and every detail are still written.
            kinds = ", ".join(f"{k} x{n}" for k, n in sorted(self.errors_by_kind.items()))
            status = "failed"
            err_text = err_text or (f"every attempt failed ({kinds}); first: {(self._first_error or '')[:500]}")
        if status == "completed" and self.counts.engine_errors:
            # A bug in the code running the attempts (e.g. a broken install): their 0s are not the agent's score.
            n = self.counts.engine_errors
            status = "failed"
            err_text = (f"{n} attempt{'s' if n > 1 else ''} ended with an engine error (a bug in the code running "
                        f"the attempt, not the agent's result); first: {(self._first_engine_error or '')[:500]}")
        rt = self.rt
        image_counts: dict[str, int] = {}
        if self.images is not None:
            try:
                image_counts = await self.images.close()
            except Exception as exc:  # the run's result stands; the images are the sweep's to find
                self.sup.log.warning("request %s: closing its images failed: %r", self.name, exc)
        if self.run_dir is not None:
            self.run_dir.release_reserve()  # room for the last two files, even on a full disk
            try:
                summary = Summary(run_id=self.run_id, benchmark=self.spec.benchmark.id, harness=self.spec.harness.id,
                                  model=self.spec.model.id, environment=self.spec.environment.id, status=status,
                                  metrics=metrics, by_category=by_category, errors_by_kind=self.errors_by_kind,
                                  counts=self.counts, reuse=self.reuse_report, usage=self.usage,
                                  duration_s=round(finished - self.started_at, 3),
                                  analysis=dict(sorted(self.analysis_counts.items())), images=image_counts)
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
                    self.run_info.counts = self.counts
                    self.run_info.usage = self.usage
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
        for h in self._handlers:
            h.close()
        spec = self.spec
        return RequestOutcome(
            name=self.name, status=status, benchmark=spec.benchmark.id, harness=spec.harness.id, model=spec.model.id,
            environment=spec.environment.id, run_id=self.run_id if self.run_dir else None, metrics=metrics,
            by_category=by_category, errors_by_kind=self.errors_by_kind, counts=self.counts,
            paths=self.run_dir.paths if self.run_dir else None, reuse=self.reuse_report, error=err_text,
            error_type=type(error).__name__ if error is not None else None,
            error_field=error.field if isinstance(error, ConfigError) else None, started_at=self.started_at,
            finished_at=finished,
            duration_s=round(finished - self.started_at, 3))

    async def _release(self) -> None:
        log = self.rt.log if self.rt is not None else self.sup.log
        while self._closers:
            closer = self._closers.pop()
            try:
                await asyncio.wait_for(closer(), 60)
            except Exception as exc:
                log.warning("closing %r failed: %r", closer, exc)
        if self.run_dir is not None:
            self.run_dir.close()  # last: another run may continue this one from here on
