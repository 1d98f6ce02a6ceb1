"""The ``bfcl-eval`` package BFCL's data and API classes come from, located (or installed without its dependencies).

``bfcl-eval`` pulls in some forty packages (model SDKs, torch through sentence-transformers, faiss, a pinned
numpy 1.26.4 that has no wheel for Python 3.13); the ``bfcl`` benchmark needs only its data files and the
multi-turn API classes, which import nothing but ``mpmath``. So it is installed ``--no-deps`` into a cache
directory of its own (``pip install --no-deps --target``), put on ``sys.path`` when used; an ``bfcl_eval``
already importable in the running interpreter at the pinned version is used as is.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import os
import shlex
import shutil
import sys
import tempfile
import threading
from pathlib import Path

from ..._errors import ConfigError
from ...common.pip_install import PipInstallError, locked, pip_argv

#: the release whose data and checker our grading is tested against.
BFCL_EVAL_VERSION = "2026.3.23"
#: what the multi-turn API classes import besides the standard library.
EXTRA_PACKAGES: tuple[str, ...] = ("mpmath==1.3.0",)
#: the cache directory (``pip --target``) to use instead of ``~/.cache/agentcompass/bfcl-eval-<version>``.
DIR_ENV = "AGENTCOMPASS_BFCL_DIR"
_PIP_TIMEOUT_S = 600.0
#: what is installed (``--no-deps``): bfcl-eval and what its API classes import.
PACKAGES: tuple[str, ...] = (f"bfcl-eval=={BFCL_EVAL_VERSION}", *EXTRA_PACKAGES)
_OPTIONS = ("--no-deps",)


def cache_dir() -> Path:
    """Where the ``--no-deps`` copy of bfcl-eval lives."""
    env = os.environ.get(DIR_ENV)
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "agentcompass" / f"bfcl-eval-{BFCL_EVAL_VERSION}"


def install_command(target: Path | None = None) -> list[str]:
    """The pip command that installs bfcl-eval (no dependencies) and mpmath into ``target``."""
    return pip_argv(PACKAGES, target=target or cache_dir(), options=_OPTIONS)


def _installed_here() -> bool:
    if importlib.util.find_spec("bfcl_eval") is None or importlib.util.find_spec("mpmath") is None:
        return False
    try:
        return importlib.metadata.version("bfcl-eval") == BFCL_EVAL_VERSION
    except importlib.metadata.PackageNotFoundError:
        return False


def _in_cache(target: Path) -> bool:
    return (target / "bfcl_eval" / "data").is_dir() and (target / "mpmath").is_dir() and any(
        target.glob(f"bfcl_eval-{BFCL_EVAL_VERSION}.dist-info"))


def _use(target: Path) -> None:
    if str(target) not in sys.path:
        sys.path.append(str(target))
    importlib.invalidate_caches()


def _lock_path(target: Path) -> Path:
    return target.parent / f".{target.name}.lock"


def _manual_hint(target: Path) -> str:
    return (f"install it by hand with `{shlex.join(install_command(target))}`, or point {DIR_ENV} at a directory "
            "holding it")


async def _install_async(target: Path, field: str, cancelled: threading.Event | None,
                         timeout_s: float = _PIP_TIMEOUT_S) -> None:
    """Install into ``target`` under its lock (one installer at a time per cache directory, across processes:
    test workers, concurrent runs); given up at ``timeout_s`` or when ``cancelled`` is set."""
    try:
        async with locked(f"bfcl-eval=={BFCL_EVAL_VERSION}", lock=_lock_path(target), timeout_s=timeout_s,
                          cancelled=cancelled) as install:
            if await asyncio.to_thread(_in_cache, target):  # another process installed it while this one waited
                return
            # pip writes into a fresh directory renamed into place once complete: a killed or cancelled install
            # leaves no half-written cache behind, and one left by an older version is replaced
            staging = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=f".{target.name}.", dir=target.parent))
            try:
                await install.pip(PACKAGES, target=staging, options=_OPTIONS)
                if not await asyncio.to_thread(_in_cache, staging):
                    raise ConfigError(f"installing bfcl-eval into {target} gave no complete package (data, mpmath, "
                                      f"dist-info)\n{_manual_hint(target)}", field=field)
                await asyncio.to_thread(_replace, staging, target)
            finally:
                await asyncio.to_thread(shutil.rmtree, staging, True)
    except PipInstallError as exc:
        raise ConfigError(f"installing bfcl-eval into {target}: {exc}\n{_manual_hint(target)}", field=field) from None


def _replace(staging: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)


def _install(target: Path, field: str, cancelled: threading.Event | None,
             timeout_s: float = _PIP_TIMEOUT_S) -> None:
    """:func:`_install_async` from synchronous code (the benchmark's constructor, in the engine's worker
    thread): on a loop of its own, never on a running one."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_install_async(target, field, cancelled, timeout_s))
    raise ConfigError(f"bfcl-eval=={BFCL_EVAL_VERSION} must be installed, which would block this event loop: "
                      "construct the benchmark in a worker thread (as the engine does) or await "
                      "ensure_bfcl_eval_async first.", field=field)


def _located(auto_install: bool, field: str) -> Path | None:
    """Where bfcl_eval is (put on ``sys.path``), None when it still has to be installed into the cache."""
    if _installed_here():
        return _package(field)
    target = cache_dir()
    if _in_cache(target):
        _use(target)
        return _package(field)
    if not auto_install:
        raise ConfigError(
            f"benchmark bfcl needs bfcl-eval=={BFCL_EVAL_VERSION} (its data and API classes), installed "
            f"without its ~40 dependencies: run `{shlex.join(install_command(target))}` or pass "
            "auto_install_dependencies=True.", field=field)
    return None


def _package(field: str) -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or spec.origin is None:
        raise ConfigError("bfcl_eval is not importable after locating it", field=field)
    return Path(spec.origin).parent


def ensure_bfcl_eval(*, auto_install: bool, field: str = "benchmark",
                     cancelled: threading.Event | None = None) -> Path:
    """The ``bfcl_eval`` package directory, importable afterwards. Without it: installed into the cache when
    ``auto_install`` (given up when ``cancelled`` is set; from a thread without a running event loop), else a
    ConfigError naming the command."""
    found = _located(auto_install, field)
    if found is not None:
        return found
    target = cache_dir()
    _install(target, field, cancelled)
    _use(target)
    return _package(field)


async def ensure_bfcl_eval_async(*, auto_install: bool, field: str = "benchmark",
                                 cancelled: threading.Event | None = None) -> Path:
    """:func:`ensure_bfcl_eval` for the event loop: the install is awaited."""
    found = await asyncio.to_thread(_located, auto_install, field)
    if found is not None:
        return found
    target = cache_dir()
    await _install_async(target, field, cancelled)
    await asyncio.to_thread(_use, target)
    return await asyncio.to_thread(_package, field)


def data_dir(package: Path) -> Path:
    """The package's data directory (question files, possible answers, multi-turn function docs)."""
    return package / "data"


def main() -> None:
    """``python -m agentcompass.benchmarks.bfcl.package``: install bfcl-eval into the cache now (CI does this when
    it builds its venvs, so the tests never reach PyPI)."""
    print(ensure_bfcl_eval(auto_install=True))


if __name__ == "__main__":
    main()


__all__ = ["BFCL_EVAL_VERSION", "DIR_ENV", "PACKAGES", "cache_dir", "data_dir", "ensure_bfcl_eval",
           "ensure_bfcl_eval_async", "install_command"]
