"""Functions the host-worker tests run in the worker process (imported there by name)."""

from __future__ import annotations

import os

_STATE: dict[str, int] = {}


def spin() -> None:
    """Never returns: a tool call that runs away."""
    while True:
        pass


def count(step: int) -> int:
    """State kept in the worker between calls."""
    _STATE["n"] = _STATE.get("n", 0) + step
    return _STATE["n"]


def chatty() -> str:
    """Prints to stdout (must not corrupt the answers)."""
    print("noise " * 1000)
    return "ok"


def fail() -> None:
    raise KeyError("no such thing")


def die() -> None:
    os._exit(3)


def environment() -> dict[str, str]:
    return dict(os.environ)


def pid() -> int:
    """The worker's process id: which worker served a call."""
    return os.getpid()


def nap(seconds: float) -> int:
    """Sleeps, then its pid: calls that overlap."""
    import time

    time.sleep(seconds)
    return os.getpid()
