"""Builds one request before its attempts run: the RequestActor's builder.

``RequestBuilder.build`` resolves the spec (``resolve.py``, pure), picks the run id (``reuse.pick_run``),
installs the components' declared requirements, constructs the benchmark, harness and provider through the
registries, the analyzers and the model client, creates the run directory and the request's log file, and
writes ``params.json`` and the first ``run_info.json``. It returns the frozen ``RequestRuntime`` the request's
attempts get (before its model route is opened, see ``model_access.open_model_access``).

It sends and receives no messages. What it has made so far stays on the builder (``run_dir``, ``rt``,
``images``...) and in the ``closers`` / ``handlers`` lists it is handed, so that a build that fails or is
cancelled half-way is finished and released by the RequestActor like any other failure.
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from .. import __version__
from .._errors import ConfigError
from .._validate import MAX_K, count
from ..analyzers import build_analyzers
from ..dependencies import InstallReport, ensure_installed
from ..interfaces import ComponentContext
from ..metrics import DefaultAccumulator
from ..models.adaptive import AdaptiveLimiter
from ..models.factory import is_scripted
from ..models.retry import RetryingModelClient
from ..records import ModelRetrying, RunInfo
from ..specs import ModelSpec, RunRequestSpec
from .accounting import RequestAccount
from .image_cache import RequestImages
from .progress import download_reporter, install_reporter
from .redact import RedactingFormatter, Redactor
from .resolve import ResolvedRequest, resolve
from .reuse import pick_run, reuse_run_source, runs_dir
from .run_dir import RunDir, check_data_dir, check_results_dir, move_run_aside, safe_name
from .runtime import CURRENT_TASK, LaunchServices, NetworkPhases, PhaseTimeouts, RequestRuntime

__all__ = ["RequestBuilder", "component_settings"]


def component_settings(**components: Any) -> dict[str, Any]:
    """What each component chose beyond its params (its ``resolved_settings()``, e.g. the agent config a harness
    picked by default and its package version), by role, for params.json; roles with nothing to say left out."""
    return {role: settings for role, c in components.items()
            if c is not None and (settings := c.resolved_settings())}


class RequestBuilder:
    """Builds one request (one per RequestActor, used once)."""

    def __init__(self, index: int, spec: RunRequestSpec, name: str, *, services: LaunchServices, run_id: str,
                 account: RequestAccount, started_at: float, closers: list[Any],
                 handlers: list[logging.Handler]) -> None:
        self.index = index
        self.spec = spec
        self.name = name
        self.svc = services
        #: the run id asked for (or generated); ``build`` replaces it with the one ``pick_run`` chose
        self.run_id = run_id
        #: the request's account: its accumulator is set here, its counts go into run_info.json
        self.account = account
        self.started_at = started_at
        #: resources to release when the request ends, in creation order (the RequestActor releases them)
        self._closers = closers
        #: the request's log handlers (the RequestActor closes them last)
        self._handlers = handlers
        # ---- what the build has made so far (None until made)
        self.resolved: ResolvedRequest | None = None
        #: (label, details dir) of ``reuse_run_id`` (or of the latest run, see reuse.pick_run), checked before
        #: anything is written.
        self.reuse_source: tuple[str, Path] | None = None
        #: an earlier run at our run id that ``overwrite`` moves aside before the run directory is created.
        self._move_aside: Path | None = None
        self.model_spec: ModelSpec = spec.model
        self.limiter: AdaptiveLimiter | None = None
        self.images: RequestImages | None = None
        self.run_dir: RunDir | None = None
        self.rt: RequestRuntime | None = None
        self.run_info: RunInfo | None = None

    @property
    def identity(self) -> str:
        """The request's identity hash (once resolved)."""
        return self.resolved.identity if self.resolved is not None else ""

    async def build(self) -> RequestRuntime:
        """Build the request (see the module's docstring); the ``RequestRuntime`` its attempts run with."""
        spec, svc = self.spec, self.svc
        check_results_dir(spec.results_dir)
        check_data_dir(spec.data_dir)
        source = reuse_run_source(spec)  # before anything is created
        r = resolve(spec, svc.registries)
        self.resolved = r
        # may refuse: before any component, client or file is made
        choice = pick_run(spec, self.run_id, r.run_fields, source)
        self.run_id, self.reuse_source, self._move_aside = choice.run_id, choice.reuse_source, choice.move_aside
        bench_cls, harness_cls, provider_cls = r.benchmark_cls, r.harness_cls, r.provider_cls
        bench_params = dict(r.benchmark_params)
        harness_params = dict(r.harness_params)
        env_params = dict(r.environment_params)
        engine_params = r.model_engine_params
        cancelled = threading.Event()
        ctx = ComponentContext(cancelled=cancelled, run_id=self.run_id, request=self.name, data_dir=spec.data_dir,
                               auto_install_dependencies=spec.auto_install_dependencies,
                               environment=spec.environment.id, benchmark=spec.benchmark.id,
                               verify_timeout=r.timeouts.verify,
                               provider_limit=svc.provider_limits.get(provider_cls.name),
                               max_creates_in_flight=svc.pool.creates_limit(provider_cls),
                               open_pacer=svc.pool.pacer(provider_cls).wait,
                               price=engine_params.price,
                               report_download=download_reporter(svc.bus.emit, self.name, self.run_id),
                               report_install=install_reporter(svc.bus.emit, self.name, self.run_id))
        installed = await self._ensure_requirements((("benchmark", spec.benchmark.id, bench_cls),
                                                     ("harness", spec.harness.id, harness_cls),
                                                     ("environment", spec.environment.id, provider_cls)))
        # Off the loop: a benchmark may load a big dataset, a harness import a heavy package, while other
        # requests run. Providers stay on the loop (they may make loop-bound clients).
        try:
            bench_p = svc.registries["benchmark"].convert_params(bench_cls, bench_params, spec.benchmark.id)
            benchmark = await asyncio.to_thread(bench_cls, bench_p, ctx)
            self._closers.append(benchmark.aclose)
            ctx.k = count(benchmark.k or 1, "benchmark_params.k", maximum=MAX_K)  # what the others are built with
            harness_p = svc.registries["harness"].convert_params(harness_cls, harness_params, spec.harness.id)
            harness = await asyncio.to_thread(harness_cls, harness_p, ctx)
        except asyncio.CancelledError:  # the thread runs on (asyncio.run waits for it): tell it to stop
            cancelled.set()
            raise
        provider = provider_cls(svc.registries["environment"].convert_params(provider_cls, env_params,
                                                                           spec.environment.id), ctx)
        self._closers.append(provider.aclose)
        env_params.update(r.image_params)  # recorded in params.json as given
        if r.has_images:
            self.images = svc.images.open_request(self.name, self.run_id, provider, r.image_policy)
        analyzers = build_analyzers(spec.enable_analysis, svc.registries["analyzer"], ctx)
        for key, phase_policy in r.network_given.items():  # refused before any task starts, naming the param
            try:
                provider.check_network_policy(phase_policy)
            except ConfigError as exc:
                raise ConfigError(f"Invalid `environment_params.{key}`: {exc}",
                                  field=f"environment_params.{key}") from None

        from ..models.factory import create_model_client

        concurrency = min(spec.task_concurrency, svc.task_concurrency or spec.task_concurrency)
        def on_model_retry(kind: str, backoff_s: float, try_no: int) -> None:
            svc.bus.emit(ModelRetrying(ts=time.time(), request=self.name, run_id=self.run_id, error_kind=kind,
                                       try_no=try_no, backoff_s=backoff_s, task_id=CURRENT_TASK.get()))

        self.model_spec = r.model_spec
        if is_scripted(self.model_spec) and (harness_cls.needs_model_endpoint or r.network.uses_model_route()):
            self.model_spec = await self._serve_scripted(self.model_spec)
        model = create_model_client(self.model_spec, max_connections=max(concurrency, 1), on_retry=on_model_retry,
                                    max_backoff_s=spec.max_backoff_s, calls_model=harness_cls.calls_model)
        self._closers.append(model.aclose)
        if self.model_spec.base_url:
            # one adaptive limit per endpoint for the launch, shared with the gateway and other requests
            self.limiter = svc.models.limiter_for(self.name, self.run_id, self.model_spec.base_url, spec.model.id,
                                                  engine_params.max_concurrency or max(concurrency, 1))
            if isinstance(model, RetryingModelClient):
                model.limiter = self.limiter
        self._closers.append(lambda: svc.models.release(self.name))

        redactor = Redactor([spec.model.api_key, *svc.extra_secrets, *benchmark.secrets()])
        run_dir = self._choose_run_dir(redactor)
        log = self._make_logger(run_dir, redactor)
        self.run_dir = run_dir
        for report in installed:
            log.info("installed %s for the request (%.1fs%s); pip output:\n%s", report.requirement.pip, report.seconds,
                     "" if report.ran_pip else ", another request ran pip", report.output)
        # the model route is not open yet: _execute hands the attempts a copy with it (open_model_access)
        rt = self.rt = RequestRuntime(
            index=self.index, name=self.name, run_id=self.run_id, benchmark=benchmark, harness=harness,
            provider=provider, model=model, pool=svc.pool, run_dir=run_dir, log=log, emit=svc.bus.emit,
            k=ctx.k, max_retries=spec.max_retries, max_backoff_s=spec.max_backoff_s,
            retry_patterns=r.retry_patterns,
            keep_environment=spec.keep_environment, file_log_level=logging.getLevelName(spec.file_log_level),
            timeouts=r.timeouts, network=r.network,
            price=engine_params.price, images=self.images, analyzers=tuple(analyzers), limits=r.limits)
        new_acc = benchmark.new_accumulator()
        self.account.accumulator = new_acc if new_acc is not None else DefaultAccumulator(rt.k)
        self._write_params(bench_params, harness_params, env_params, r.timeouts, r.network, benchmark)
        self.run_info = RunInfo(
            run_id=self.run_id, request=self.name, status="running", benchmark=spec.benchmark.id,
            harness=spec.harness.id, model=spec.model.id, environment=spec.environment.id,
            started_at=self.started_at, paths=run_dir.paths, counts=self.account.counts, pid=os.getpid(),
            version=__version__)
        run_dir.write_run_info(self.run_info)
        svc.bus.attach_file(self.name, run_dir.paths.progress, redactor)
        log.info("request %s resolved: run_id=%s dir=%s", self.name, self.run_id, run_dir.path)
        return rt

    async def _serve_scripted(self, model: ModelSpec) -> ModelSpec:
        """The built-in scripted model served over HTTP on 127.0.0.1 for this request, for a harness whose agent
        process reaches its model only over HTTP (through the gateway): ``model`` with that ``base_url``."""
        from ..models.scripted.server import ScriptedServer

        server = ScriptedServer(model.params, model_id=model.id)
        await server.start()
        self._closers.append(server.stop)
        self.svc.log.debug("request %s: the scripted model is served at %s", self.name, server.base_url)
        return msgspec.structs.replace(model, base_url=server.base_url)

    async def _ensure_requirements(self, components: Iterable[tuple[str, str, Any]]) -> list[InstallReport]:
        """Each component class's declared ``requirements``, installed (pip, awaited) when allowed; else a
        ConfigError naming the command."""
        reports: list[InstallReport] = []
        for field, cid, cls in components:
            reqs = cls.requirements
            if reqs:
                reports += await ensure_installed(
                    reqs, auto_install=self.spec.auto_install_dependencies, field=field, who=f"{field} {cid!r}",
                    emit=self.svc.bus.emit, request=self.name, run_id=self.run_id)
        return reports

    def _choose_run_dir(self, redactor: Redactor) -> RunDir:
        path = runs_dir(self.spec) / safe_name(self.run_id)
        if self._move_aside is not None:
            backup = move_run_aside(self._move_aside)
            self.svc.log.warning("run %s: the earlier run was moved to %s (overwrite)", self.run_id, backup)
        rd = RunDir(path, redactor)
        rd.create()
        return rd

    def _make_logger(self, run_dir: RunDir, redactor: Redactor) -> logging.Logger:
        file_level = logging.getLevelName(self.spec.file_log_level)
        level = min(file_level, self.svc.console_level)
        log = logging.Logger(f"agentcompass.run.{self.name}", level=level)
        log.parent = self.svc.log
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
        orch = dict(self.svc.orchestration)
        self.run_dir.write_params({
            "request": self.name, "run_id": self.run_id, "identity": self.identity, "spec": spec,
            "resolved": {"benchmark_params": bench_params, "harness_params": harness_params,
                         "environment_params": env_params, "k": self.rt.k if self.rt else 1,
                         "timeouts": timeouts.__dict__,
                         "limits": msgspec.to_builtins(self.resolved.limits) if self.resolved else {},
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

