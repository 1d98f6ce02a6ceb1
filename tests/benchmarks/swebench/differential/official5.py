"""The swebench 5.0.2 oracle: installed ``--no-deps`` into a cache once, run in a subprocess beside 4.1.0.

The test extra installs swebench 4.1.0 (imported in-process by the differential tests). 5.0.2 is the same
package name, so it runs in its own interpreter (``official5_worker.py``) with its cache directory first on
``sys.path``, fed a whole batch of cases at once. Its log parsers and grading import nothing but the standard
library (the worker skips ``swebench.harness/__init__``, which would import docker, datasets and modal), so
``pip install --no-deps --target`` is enough. ``tests/conftest.py`` installs it before the session, outside
the per-test timeouts; a host file lock makes one xdist worker install it and the others wait.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentcompass.common.file_lock import file_lock

VERSION = "5.0.2"
#: the cache directory to use instead of ``~/.cache/agentcompass/swebench-<version>``
DIR_ENV = "AGENTCOMPASS_SWEBENCH5_DIR"
_WORKER = Path(__file__).with_name("official5_worker.py")
_PIP_TIMEOUT_S = 600.0


def cache_dir() -> Path:
    """Where the ``--no-deps`` copy of swebench 5.0.2 lives."""
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "agentcompass" / f"swebench-{VERSION}"


def _installed(target: Path) -> bool:
    return (target / "swebench" / "harness" / "grading.py").is_file() and any(
        target.glob(f"swebench-{VERSION}.dist-info"))


def ensure_installed() -> Path:
    """The cache directory, with swebench 5.0.2 in it (installed by pip the first time)."""
    target = cache_dir()
    if _installed(target):
        return target

    def error(end: str) -> RuntimeError:
        return RuntimeError(f"waiting for the install lock of {target} ended: {end}")

    with file_lock(target.parent / f".{target.name}.lock", _PIP_TIMEOUT_S, error):
        if _installed(target):
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-deps",
                   "--target", str(staging), f"swebench=={VERSION}"]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=_PIP_TIMEOUT_S)
            if res.returncode != 0 or not _installed(staging):
                raise RuntimeError(f"`{' '.join(cmd)}` failed: {res.stderr[-2000:]}")
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def run_batch(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run ``jobs`` (see official5_worker.py) through swebench 5.0.2; one result per job, in order."""
    target = ensure_installed()
    res = subprocess.run([sys.executable, "-I", str(_WORKER), str(target)], input=json.dumps(jobs),
                         capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise RuntimeError(f"the swebench {VERSION} oracle failed:\n{res.stderr[-4000:]}")
    out: list[dict[str, Any]] = json.loads(res.stdout)
    assert len(out) == len(jobs)
    return out


@functools.cache
def version_in_cache() -> str:
    """``swebench.__version__`` as the worker imports it (proves the 5.0.2 copy, not 4.1.0, is the oracle)."""
    return str(run_batch([{"kind": "version"}])[0]["value"])
