"""Fewer cyclic-GC passes while attempts run.

With hundreds of attempts in flight many objects stay alive, and CPython's default young-generation
threshold (700 allocations) then triggers frequent collections that rescan them: at 1,000 attempts in flight
that was 60-90 us of CPU per task, ~15% of the engine's own cost (see docs/performance.md). Reference
counting still frees almost everything at once; only cyclic garbage waits a little longer.

The threshold is process-wide, so launches share one relaxation: the first running launch raises it, the last
one to finish puts back what it found. A threshold already above ours (set by the application) is left alone.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: young-generation threshold while attempts run (CPython's default is 700).
RELAXED_GEN0 = 50_000

_lock = threading.Lock()
_users = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def relaxed_gc() -> Iterator[None]:
    """Raise the young-generation GC threshold for the duration of the block (nested / concurrent safe)."""
    global _users, _saved
    with _lock:
        _users += 1
        if _users == 1:
            current = gc.get_threshold()
            if current[0] and current[0] < RELAXED_GEN0:  # 0 = the application disabled automatic GC
                _saved = current
                gc.set_threshold(RELAXED_GEN0, *current[1:])
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
