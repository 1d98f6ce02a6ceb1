"""The public entry points: run_evaluation, launch, async_launch."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from typing import Any

from ._errors import ConfigError, NotSupportedYet, RunInsideLoopError
from .engine.progress import OnProgress
from .engine.workers import DaemonThreadPool
from .results import EvaluationResult, LaunchResult
from .run_options import SDK_DEFAULTS as _D
from .run_options import evaluation_spec
from .specs import OrchestrationSpec, parse_orchestration_isolated


async def async_launch(spec: OrchestrationSpec | dict[str, Any], *,
                       on_progress: OnProgress | None = None) -> LaunchResult:
    """Run every request of ``spec`` on the running event loop; one outcome per request, in order.

    A request that fails (a field of the wrong type, bad params, a benchmark that raises while loading, ...)
    gets a failed outcome; the others are untouched. Launch-wide bad input (e.g. unknown provider in
    provider_limits) raises ConfigError before anything runs."""
    _check_on_progress(on_progress)
    parsed, invalid = parse_orchestration_isolated(spec)
    return await _run_supervisor(parsed, invalid, on_progress)


def _check_on_progress(on_progress: Any) -> None:
    if on_progress is not None and not callable(on_progress):
        raise ConfigError(f"Invalid `on_progress`: expected a callable taking one progress event (sync or async), "
                          f"or None; got {type(on_progress).__name__}.", field="on_progress")


async def _run_supervisor(spec: OrchestrationSpec, invalid: dict[int, ConfigError],
                          on_progress: OnProgress | None) -> LaunchResult:
    from .engine.supervisor import Supervisor

    return await Supervisor(spec, on_progress, invalid=invalid).run()


#: picks ``launch()``'s event loop: ``auto`` (uvloop where installed, else the stdlib loop), ``asyncio`` (the
#: stdlib loop, e.g. to test the path a machine without uvloop takes) or ``uvloop`` (an error without it).
EVENT_LOOP_ENV = "AGENTCOMPASS_EVENT_LOOP"
EVENT_LOOPS = ("auto", "asyncio", "uvloop")


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop factory ``EVENT_LOOP_ENV`` asks for; ``ConfigError`` naming it for a value not allowed
    or for ``uvloop`` where it is not installed."""
    choice = os.environ.get(EVENT_LOOP_ENV, "").strip().lower() or "auto"
    if choice not in EVENT_LOOPS:
        raise ConfigError(f"Invalid `{EVENT_LOOP_ENV}` {os.environ[EVENT_LOOP_ENV]!r}; allowed: "
                          f"{', '.join(EVENT_LOOPS)}.", field=EVENT_LOOP_ENV)
    if choice == "asyncio":
        return asyncio.new_event_loop
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise ConfigError(f"`{EVENT_LOOP_ENV}=uvloop` but uvloop is not installed; install it or use "
                              f"`auto` / `asyncio`.", field=EVENT_LOOP_ENV) from None
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def launch(spec: OrchestrationSpec | dict[str, Any], *, on_progress: OnProgress | None = None) -> LaunchResult:
    """Like ``async_launch`` but on a private event loop (uvloop where available; ``AGENTCOMPASS_EVENT_LOOP``
    = ``asyncio`` picks the stdlib loop).

    Raises RunInsideLoopError when called from a running event loop: use ``await async_launch(...)``."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RunInsideLoopError(
            "launch()/run_evaluation() cannot run inside a running event loop (e.g. Jupyter, an async app). "
            "Use `await agentcompass.async_launch(spec)` there instead.")
    _check_on_progress(on_progress)
    loop_factory = _loop_factory()
    parsed, invalid = parse_orchestration_isolated(spec)
    terminated = False

    async def main() -> LaunchResult | None:
        # SIGTERM (kill, `timeout`, CI cancelling, `docker stop`) takes the Ctrl-C path: every environment is
        # closed and the run recorded as cancelled, then the process exits 143. Only when nobody else handles it.
        nonlocal terminated
        loop, me = asyncio.get_running_loop(), asyncio.current_task()
        # a worker thread stuck in a blocking call must not hold the process after the run (see workers.py)
        loop.set_default_executor(DaemonThreadPool())
        installed = False
        if me is not None and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            def on_term() -> None:
                nonlocal terminated
                terminated = True
                me.cancel()
            try:
                loop.add_signal_handler(signal.SIGTERM, on_term)
                installed = True
            except (ValueError, RuntimeError, NotImplementedError):  # not the main thread / no signals here
                pass
        try:
            return await _run_supervisor(parsed, invalid, on_progress)
        except asyncio.CancelledError:
            if terminated:
                return None
            raise
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGTERM)

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        result = runner.run(main())
    if result is None:
        raise SystemExit(128 + signal.SIGTERM)
    return result


def run_evaluation(
    benchmark: str,
    harness: str,
    model: str,
    environment: str = _D["environment"],
    *,
    benchmark_params: dict[str, Any] | None = _D["benchmark_params"],
    harness_params: dict[str, Any] | None = _D["harness_params"],
    environment_params: dict[str, Any] | None = _D["environment_params"],
    model_base_url: str | None = _D["model_base_url"],
    model_api_key: str | None = _D["model_api_key"],
    model_api_protocol: str = _D["model_api_protocol"],
    model_params: dict[str, Any] | None = _D["model_params"],
    wrap_api_key: bool = _D["wrap_api_key"],
    task_concurrency: int = _D["task_concurrency"],
    max_retries: int = _D["max_retries"],
    max_backoff_s: float = _D["max_backoff_s"],
    retry_pattern_list: list[str] | None = _D["retry_pattern_list"],
    provider_limits: dict[str, int] | None = _D["provider_limits"],
    env_open_qps: float | dict[str, float] | None = _D["env_open_qps"],
    timeout_seconds: float | None = _D["timeout_seconds"],
    reuse: bool = _D["reuse"],
    reuse_run_id: str | None = _D["reuse_run_id"],
    overwrite: bool = _D["overwrite"],
    keep_environment: bool = _D["keep_environment"],
    progress: str = _D["progress"],
    on_progress: OnProgress | None = _D["on_progress"],
    log_level: str = _D["log_level"],
    file_log_level: str = _D["file_log_level"],
    auto_install_dependencies: bool = _D["auto_install_dependencies"],
    recipe_dirs: list[str] | None = _D["recipe_dirs"],
    results_dir: str = _D["results_dir"],
    data_dir: str | None = _D["data_dir"],
    run_id: str | None = _D["run_id"],
    run_name: str | None = _D["run_name"],
    enable_analysis: bool | list[Any] = _D["enable_analysis"],
) -> EvaluationResult:
    """Evaluate one (benchmark, harness, model, environment) selection and return its outcome.

    Each argument is a run option of ``agentcompass.run_options`` (its spec field, default and description).
    Bad input raises ConfigError naming the field; a feature not built yet raises NotSupportedYet. Failures
    while running are in the returned outcome (``status``, ``error``), details in its run directory."""
    options = dict(locals())  # every argument by name, first thing: the options table places each in the spec
    _check_on_progress(on_progress)
    spec = evaluation_spec(options)
    result = launch(spec, on_progress=on_progress)
    outcome = result.outcomes[0]
    if outcome.status == "failed" and outcome.error:
        if outcome.error_type == "ConfigError":
            raise ConfigError(outcome.error, field=outcome.error_field)
        if outcome.error_type == "NotSupportedYet":
            raise NotSupportedYet(outcome.error)
    return outcome
