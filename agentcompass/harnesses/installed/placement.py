"""The agent program's files on their way into an environment: guarded, and packed for a copy.

``_safe_root`` refuses program files that are ``/`` or hold the home directory (never mounted nor copied);
``_tar_dir`` packs a directory once per process while it is unchanged (a temporary file, removed at exit), for
environments that get the program by ``put_archive`` instead of a mount.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import tarfile
import tempfile
import threading
from typing import IO

from ..._errors import ConfigError


def _safe_root(name: str, root: str) -> str:
    """``root``, refused when mounting or copying it would expose ``/`` or the user's home directory."""
    real = os.path.realpath(root)
    home = os.path.realpath(os.path.expanduser("~"))
    if real == os.sep or real == home or home.startswith(real.rstrip(os.sep) + os.sep):
        raise ConfigError(f"harness {name}: its program files are {root!r}, which is / or holds the home directory: "
                          "give the program a directory of its own.", field="harness")
    return root


_spool_lock = threading.Lock()
_spools: dict[tuple[str, str], str] = {}


def _tree_signature(root: str) -> str:
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(d, f))
                h.update(f"{os.path.relpath(os.path.join(d, f), root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _remove_spools() -> None:
    for path in _spools.values():
        with contextlib.suppress(OSError):
            os.unlink(path)


atexit.register(_remove_spools)


def _tar_dir(root: str) -> IO[bytes]:
    """A tar of ``root``'s contents (read from its start), packed once per process while ``root`` is unchanged:
    an environment without mounts gets the copy sent per task, not re-packed per task."""
    key = (os.path.realpath(root), _tree_signature(root))
    with _spool_lock:
        path = _spools.get(key)
        if path is None or not os.path.exists(path):
            fd, path = tempfile.mkstemp(prefix="agentcompass-agent-", suffix=".tar")
            try:
                with os.fdopen(fd, "wb") as out, tarfile.open(fileobj=out, mode="w") as tar:
                    tar.add(root, arcname=".")
            except BaseException:
                os.unlink(path)
                raise
            _spools[key] = path
        return open(path, "rb")  # the caller closes it
