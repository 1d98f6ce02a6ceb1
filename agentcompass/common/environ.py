"""Process environment variables: set for the length of a block (a third-party import that reads them), then
restored exactly (a variable that was unset is removed again); and a secret taken out of the environment so
that neither our children nor ``/proc/<pid>/environ`` show it."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator, Mapping

_PR_SET_DUMPABLE = 4


@contextlib.contextmanager
def environ_set(values: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set inside the block; every named variable as it was afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _initial_block() -> tuple[int, int] | None:
    """(start, end) address of this process's initial environment block: the strings the kernel shows in
    ``/proc/<pid>/environ`` (fields 50 and 51 of ``/proc/self/stat``); None where there is no such file."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # fields from the 3rd (state) on
        start, end = int(fields[47]), int(fields[48])
    except (OSError, IndexError, ValueError):
        return None
    return (start, end) if 0 < start < end else None


def _wipe_initial(name: str) -> bool:
    """Overwrite every ``name=...`` entry of the initial environment block with NULs; True if one was found."""
    block = _initial_block()
    if block is None:
        return False
    start, end = block
    data = ctypes.string_at(start, end - start)
    prefix = name.encode() + b"="
    found, pos = False, 0
    while pos < len(data):
        nul = data.find(b"\0", pos)
        nul = len(data) if nul < 0 else nul
        if data.startswith(prefix, pos):
            ctypes.memset(start + pos, 0, nul - pos)
            found = True
        pos = nul + 1
    return found


def take_secret(name: str) -> str | None:
    """The value of environment variable ``name`` (None when unset), removed from this process's environment:
    processes started later do not inherit it, and on Linux its bytes are also wiped from the environment
    block the process started with.

    ``os.environ.pop`` alone leaves that block as it was, and it is what ``/proc/<pid>/environ`` shows to every
    process allowed to read it (the same user, root), e.g. a local agent reading its engine's."""
    value = os.environ.pop(name, None)  # unsetenv first: libc's environ must not point at what is wiped next
    if sys.platform == "linux":
        _wipe_initial(name)
    return value


def deny_process_inspection() -> bool:
    """Make this process non-dumpable (Linux ``prctl(PR_SET_DUMPABLE, 0)``): processes of the same user can
    no longer read its ``/proc/<pid>/environ`` or ``/proc/<pid>/mem`` nor ptrace it (a process with
    CAP_SYS_PTRACE, e.g. root, still can). Children that ``exec`` are dumpable again. True if it took."""
    if sys.platform != "linux":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
