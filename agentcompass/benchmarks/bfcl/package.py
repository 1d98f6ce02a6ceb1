"""The ``bfcl-eval`` package BFCL's data and API classes come from, located (or installed without its dependencies).

``bfcl-eval`` pulls in some forty packages (model SDKs, torch through sentence-transformers, faiss, a pinned
numpy 1.26.4 that has no wheel for Python 3.13); the ``bfcl`` benchmark needs only its data files and the
multi-turn API classes, which import nothing but ``mpmath``. So it is installed ``--no-deps`` into a cache
directory of its own (``pip install --no-deps --target``), put on ``sys.path`` when used; an ``bfcl_eval``
already importable in the running interpreter at the pinned version is used as is.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..._errors import ConfigError
from ...common.file_lock import LockWaitEnd, file_lock

#: the release whose data and checker our grading is tested against.
BFCL_EVAL_VERSION = "2026.3.23"
#: what the multi-turn API classes import besides the standard library.
EXTRA_PACKAGES: tuple[str, ...] = ("mpmath==1.3.0",)
#: the cache directory (``pip --target``) to use instead of ``~/.cache/agentcompass/bfcl-eval-<version>``.
DIR_ENV = "AGENTCOMPASS_BFCL_DIR"
_PIP_TIMEOUT_S = 600.0


def cache_dir() -> Path:
    """Where the ``--no-deps`` copy of bfcl-eval lives."""
    env = os.environ.get(DIR_ENV)
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "agentcompass" / f"bfcl-eval-{BFCL_EVAL_VERSION}"


def install_command(target: Path | None = None) -> list[str]:
    """The pip command that installs bfcl-eval (no dependencies) and mpmath into ``target``."""
    return [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-deps",
            "--target", str(target or cache_dir()), f"bfcl-eval=={BFCL_EVAL_VERSION}", *EXTRA_PACKAGES]


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


def _install_lock(target: Path, field: str, cancelled: threading.Event | None,
                  timeout_s: float = _PIP_TIMEOUT_S) -> contextlib.AbstractContextManager[None]:
    """One installer at a time per cache directory (test workers, concurrent runs), across processes; waiting
    for it is given up at ``timeout_s`` or when ``cancelled`` is set."""
    path = _lock_path(target)

    def error(end: LockWaitEnd) -> ConfigError:
        if end == "cancelled":
            return ConfigError(f"installing bfcl-eval was cancelled while waiting for the lock {path}", field=field)
        return ConfigError(f"another process held the install lock {path} for over {timeout_s:.0f}s (remove it if "
                           "no installer is running)", field=field)

    return file_lock(path, timeout_s, error, cancelled=cancelled)


def _manual_hint(target: Path) -> str:
    return (f"install it by hand with `{shlex.join(install_command(target))}`, or point {DIR_ENV} at a directory "
            "holding it")


def _install(target: Path, field: str, cancelled: threading.Event | None) -> None:
    with _install_lock(target, field, cancelled):
        if _in_cache(target):  # another process installed it while this one waited
            return
        # pip writes into a fresh directory renamed into place once complete: a killed or cancelled install
        # leaves no half-written cache behind, and one left by an older version is replaced
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            _pip(staging, target, field, cancelled)
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _pip(staging: Path, target: Path, field: str, cancelled: threading.Event | None) -> None:
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(install_command(staging), stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + _PIP_TIMEOUT_S
            while proc.poll() is None:
                if cancelled is not None and cancelled.is_set():
                    raise ConfigError("installing bfcl-eval was cancelled", field=field)
                if time.monotonic() > deadline:
                    raise ConfigError(f"installing bfcl-eval into {target} took over {_PIP_TIMEOUT_S:.0f}s",
                                      field=field)
                time.sleep(0.2)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        err.seek(0)
        tail = err.read()[-2000:].decode(errors="replace")
    if proc.returncode != 0 or not _in_cache(staging):
        raise ConfigError(f"installing bfcl-eval into {target} failed: {tail.strip()}\n{_manual_hint(target)}",
                          field=field)


def ensure_bfcl_eval(*, auto_install: bool, field: str = "benchmark",
                     cancelled: threading.Event | None = None) -> Path:
    """The ``bfcl_eval`` package directory, importable afterwards. Without it: installed into the cache when
    ``auto_install`` (given up when ``cancelled`` is set), else a ConfigError naming the command."""
    if not _installed_here():
        target = cache_dir()
        if not _in_cache(target):
            if not auto_install:
                raise ConfigError(
                    f"benchmark bfcl needs bfcl-eval=={BFCL_EVAL_VERSION} (its data and API classes), installed "
                    f"without its ~40 dependencies: run `{shlex.join(install_command(target))}` or pass "
                    "auto_install_dependencies=True.", field=field)
            _install(target, field, cancelled)
        _use(target)
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or spec.origin is None:
        raise ConfigError("bfcl_eval is not importable after locating it", field=field)
    return Path(spec.origin).parent


def data_dir(package: Path) -> Path:
    """The package's data directory (question files, possible answers, multi-turn function docs)."""
    return package / "data"


def main() -> None:
    """``python -m agentcompass.benchmarks.bfcl.package``: install bfcl-eval into the cache now (CI does this when
    it builds its venvs, so the tests never reach PyPI)."""
    print(ensure_bfcl_eval(auto_install=True))


if __name__ == "__main__":
    main()


__all__ = ["BFCL_EVAL_VERSION", "DIR_ENV", "cache_dir", "data_dir", "ensure_bfcl_eval", "install_command"]
