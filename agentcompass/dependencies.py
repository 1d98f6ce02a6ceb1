"""Declared Python package requirements of components, installed with pip without blocking the event loop.

A component declares what it imports on its class; the engine checks (and, with
``auto_install_dependencies=True``, installs) them before it constructs the component::

    from typing import ClassVar
    from agentcompass.dependencies import Requirement

    class MyBenchmark:
        requirements: ClassVar[tuple[Requirement, ...]] = (
            Requirement("huggingface_hub>=0.23", "huggingface_hub"),   # pip requirement, import name
            Requirement("pyarrow>=14", "pyarrow"),
        )

A requirement counts as present when its module can be imported (``importlib.util.find_spec``) and the
installed distribution's version (``importlib.metadata``) matches the requirement's specifier; a too-old (or
too-new) one counts as missing, so an install upgrades it. Missing ones are either refused with a
``ConfigError`` naming the ``pip install ...`` command and ``auto_install_dependencies=True``, or installed by
``sys.executable -m pip install`` through the engine's one installer (``common.pip_install``: an awaited
subprocess, killed with its process group on timeout or cancellation, under the target's lock across
processes). pip is run once per requirement per process: concurrent callers (other requests, other event loops,
other threads) await the same install; a success is remembered, a failure is reported to everyone waiting and a
later call tries again. Another process that installed it into the same target while this one waited for the
lock spares this one its pip run.

Settings (read from the environment, never written):

- ``AGENTCOMPASS_PIP_TIMEOUT``: seconds one install may take, its lock wait included (default 900, a slow mirror).
- ``AGENTCOMPASS_PIP_TARGET``: install into this directory (``pip --target``) instead of the running
  environment; the directory is appended to ``sys.path``. For read-only environments and tests.
- pip's own settings apply as usual (``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``, ``pip.conf``...).

``ensure_installed`` takes ``timeout_s``, ``target`` and ``pip_env`` (extra variables for pip's process only)
to override those per call. pip's output is returned in each ``InstallReport`` (capped, URL credentials
masked) for the caller's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import importlib.metadata
import importlib.util
import math
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.requirements import InvalidRequirement
from packaging.requirements import Requirement as _PipRequirement

from ._errors import ConfigError
from .common.pip_install import PipInstallError, mask_credentials, pip_install, pip_shell_command
from .common.process_once import ProcessOnce
from .records import DependencyInstalled, DependencyInstalling, ProgressEvent

__all__ = ["DEFAULT_PIP_TIMEOUT_S", "InstallReport", "Requirement", "ensure_installed", "install_counts",
           "mask_credentials", "missing", "missing_error", "pip_command", "reported_install"]

DEFAULT_PIP_TIMEOUT_S = 900.0
TIMEOUT_ENV = "AGENTCOMPASS_PIP_TIMEOUT"
TARGET_ENV = "AGENTCOMPASS_PIP_TARGET"


@dataclass(frozen=True)
class Requirement:
    """A package a component imports: the pip requirement (``"mini-swe-agent>=2.4,<3"``) and its import name."""

    pip: str
    module: str
    #: needed on some paths only (e.g. a download the user may have made unnecessary): installed with
    #: ``auto_install_dependencies``, else left to the component to report where it is used
    optional: bool = False

    def __post_init__(self) -> None:
        if not self.pip.strip() or self.pip.strip().startswith("-"):
            raise ConfigError(f"Requirement pip spec must be a requirement, got {self.pip!r}.", field="requirements")
        if not all(part.isidentifier() for part in self.module.split(".")):
            raise ConfigError(f"Requirement module must be an import name, got {self.module!r}.",
                              field="requirements")


@dataclass
class InstallReport:
    """One requirement that was missing: whether this call ran pip (else it awaited another caller's run)."""

    requirement: Requirement
    seconds: float
    ran_pip: bool
    #: pip's combined stdout/stderr, capped (head and tail), URL credentials masked.
    output: str = ""


def pip_command(reqs: Iterable[Requirement]) -> str:
    """The command a user runs to install ``reqs`` into the running interpreter."""
    return pip_shell_command([r.pip for r in reqs])


def _version_matches(req: Requirement) -> bool:
    """Whether the installed distribution of ``req`` satisfies its version specifier (True when there is no
    specifier, or nothing to compare: a URL requirement, a module without distribution metadata)."""
    try:
        parsed = _PipRequirement(req.pip)
    except InvalidRequirement:
        return True
    if not parsed.specifier:
        return True
    dists = list(importlib.metadata.distributions(name=parsed.name))  # in sys.path order
    if not dists:
        return True
    # The first folder's copy is the one imported; in it, any: ``pip --target --upgrade`` leaves the old
    # dist-info beside the new one.
    first = dists[0].locate_file("")
    return any(parsed.specifier.contains(d.version, prereleases=True) for d in dists if d.locate_file("") == first)


def missing(reqs: Iterable[Requirement]) -> list[Requirement]:
    """The requirements whose module cannot be imported or whose installed version does not match
    (``AGENTCOMPASS_PIP_TARGET`` is on the path first)."""
    _add_target_to_path(_target_from_env())
    out = []
    for r in dict.fromkeys(reqs):
        try:
            found = importlib.util.find_spec(r.module) is not None
        except (ImportError, ValueError):  # a parent package that is missing or broken
            found = False
        if not found or not _version_matches(r):
            out.append(r)
    return out


def missing_error(reqs: Iterable[Requirement], field: str, who: str = "") -> ConfigError:
    """The error for requirements that are missing and may not be installed."""
    reqs = list(reqs)
    names = ", ".join(f"{r.pip!r} (module {r.module!r})" for r in reqs)
    return ConfigError(f"{who or field} needs {names}, which is not installed (or not a matching version). Install "
                       f"it with: {pip_command(reqs)} "
                       "(or pass auto_install_dependencies=True to let the engine install it).", field=field)


# ----------------------------------------------------------------------------- the process-wide registry


_lock = threading.Lock()
#: each requirement's pip run, once per process
_installs: ProcessOnce[Requirement, InstallReport] = ProcessOnce()
_counts: dict[str, int] = {}
_path_lock = threading.Lock()


def install_counts() -> dict[str, int]:
    """How many times pip was run for each requirement in this process."""
    with _lock:
        return dict(_counts)


async def _install_once(req: Requirement, field: str,
                        run: Callable[[], Awaitable[InstallReport]]) -> InstallReport:
    """Run ``run()`` (pip for ``req``) unless another caller is running it or already did; then share its result
    (a failure shared is told for this caller's ``field``)."""
    started = time.monotonic()
    report, ran = await _installs.run(req, run, retell=lambda exc: ConfigError(str(exc), field=field))
    if ran:
        return report
    return InstallReport(req, round(time.monotonic() - started, 3), ran_pip=False, output=report.output)


# ----------------------------------------------------------------------------- running pip


def _target_from_env() -> str | None:
    target = os.environ.get(TARGET_ENV, "").strip()
    return target or None


def _timeout_from_env() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_PIP_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (0 < value < math.inf):
        raise ConfigError(f"{TIMEOUT_ENV} must be a number of seconds > 0, got {raw!r}.", field=TIMEOUT_ENV)
    return value


def _add_target_to_path(target: str | None) -> None:
    if target is None:
        return
    path = os.path.abspath(target)
    with _path_lock:
        if path not in sys.path:
            sys.path.append(path)
            importlib.invalidate_caches()


def _pip_target(target: str | None) -> tuple[str | None, tuple[str, ...]]:
    """pip's ``--target`` (absolute, made) and the options it needs."""
    if target is None:
        return None, ()
    os.makedirs(target, exist_ok=True)
    # --upgrade: without it pip --target keeps an older copy already there (a version that did not match)
    return os.path.abspath(target), ("--upgrade",)


async def _run_pip(req: Requirement, *, field: str, timeout_s: float, target: str | None,
                   pip_env: Mapping[str, str] | None) -> InstallReport:
    pip_target, options = await asyncio.to_thread(_pip_target, target)

    def count(_: list[str]) -> None:
        with _lock:
            _counts[req.pip] = _counts.get(req.pip, 0) + 1

    def present() -> bool:  # another process installed it into the same target while this one waited
        _add_target_to_path(target)
        importlib.invalidate_caches()
        return not missing([req])

    try:
        run = await pip_install([req.pip], timeout_s=timeout_s, target=pip_target, options=options, done=present,
                                env=pip_env, on_run=count)
    except PipInstallError as exc:
        hint = f" (set {TIMEOUT_ENV} for a slow mirror)" if exc.reason in ("timeout", "lock_timeout") else ""
        raise ConfigError(f"{exc}{hint}\nInstall it yourself: {pip_command([req])}", field=field) from None
    _add_target_to_path(target)
    importlib.invalidate_caches()
    if await asyncio.to_thread(missing, [req]):
        raise ConfigError(f"Installed {req.pip!r} but module {req.module!r} still cannot be imported (or an "
                          f"earlier copy on sys.path does not match). Install it yourself: {pip_command([req])}",
                          field=field)
    return InstallReport(req, run.seconds, ran_pip=run.ran, output=run.output)


async def ensure_installed(reqs: Iterable[Requirement], *, auto_install: bool, field: str, who: str = "",
                           emit: Callable[[ProgressEvent], None] | None = None, request: str = "",
                           run_id: str = "", timeout_s: float | None = None, target: str | None = None,
                           pip_env: Mapping[str, str] | None = None) -> list[InstallReport]:
    """Make every requirement importable, or raise a ConfigError for ``field``. Returns a report per requirement
    that was missing (none when all were present). ``emit`` gets a ``DependencyInstalling`` and a
    ``DependencyInstalled`` event (for ``request``) around each install; ``who`` names the component in errors;
    ``timeout_s`` / ``target`` default to ``AGENTCOMPASS_PIP_TIMEOUT`` / ``AGENTCOMPASS_PIP_TARGET``;
    ``pip_env`` adds variables for pip's process only."""
    target = target if target is not None else _target_from_env()
    await asyncio.to_thread(_add_target_to_path, target)
    reqs = [r for r in reqs if auto_install or not r.optional]
    todo = await asyncio.to_thread(missing, list(reqs))
    if not todo:
        return []
    if not auto_install:
        raise missing_error(todo, field, who)
    timeout = timeout_s if timeout_s is not None else _timeout_from_env()
    reports = []
    for req in todo:
        if emit is not None:
            emit(DependencyInstalling(ts=time.time(), request=request, run_id=run_id, package=req.pip,
                                      component=field))
        started = time.monotonic()
        try:
            report = await _install_once(req, field, functools.partial(
                _run_pip, req, field=field, timeout_s=timeout, target=target, pip_env=pip_env))
        except Exception as exc:
            if emit is not None:
                emit(DependencyInstalled(ts=time.time(), request=request, run_id=run_id, package=req.pip,
                                         component=field, seconds=round(time.monotonic() - started, 3), ok=False,
                                         error=str(exc)[:500]))
            raise
        if emit is not None:
            emit(DependencyInstalled(ts=time.time(), request=request, run_id=run_id, package=req.pip,
                                     component=field, seconds=round(time.monotonic() - started, 3), ok=True,
                                     shared=not report.ran_pip))
        reports.append(report)
    return reports


@contextlib.asynccontextmanager
async def reported_install(ctx: Any, component: str, package: str) -> AsyncIterator[None]:
    """Report a component's own install (an agent program, a venv) as progress through
    ``ctx.report_install`` (a ``ComponentContext``): started on entry, ended (with its error) on exit."""
    report = getattr(ctx, "report_install", None)
    if report is not None:
        report(component, package, None, None)
    started = time.monotonic()
    try:
        yield
    except BaseException as exc:
        if report is not None:
            report(component, package, time.monotonic() - started, str(exc) or type(exc).__name__)
        raise
    if report is not None:
        report(component, package, time.monotonic() - started, None)
