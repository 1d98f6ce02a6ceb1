"""Capping command output: keep the head and the tail of a stream, count everything.

Shared by the environment providers so every ``ExecResult`` is capped the same way.
"""

from __future__ import annotations


class CappedBuffer:
    """Collects a byte stream keeping at most ``limit`` bytes: the first half and the last half.

    ``total`` is the real number of bytes fed; ``truncated`` tells whether anything was dropped.
    """

    def __init__(self, limit: int) -> None:
        if limit < 2:
            raise ValueError(f"limit must be >= 2 bytes, got {limit}")
        self.limit = limit
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def feed(self, data: bytes) -> None:
        """Add a chunk of the stream."""
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
            return
        self._tail += data
        # Trim lazily (at twice the limit) so a stream of small chunks costs amortised O(1) per byte.
        if len(self._tail) > 2 * self._tail_limit:
            del self._tail[: len(self._tail) - self._tail_limit]

    def getvalue(self) -> bytes:
        """The kept bytes, with a marker where bytes were dropped."""
        tail = bytes(self._tail[-self._tail_limit:]) if self._tail else b""
        kept = len(self._head) + len(tail)
        if self.total <= kept:
            return bytes(self._head) + tail
        return bytes(self._head) + truncation_marker(self.total - kept, self.total).encode() + tail

    def text(self) -> str:
        """The kept bytes decoded as UTF-8 (invalid sequences replaced)."""
        return self.getvalue().decode("utf-8", errors="replace")


def truncation_marker(omitted: int, total: int) -> str:
    """The note inserted where output was dropped."""
    return f"\n[... {omitted} bytes omitted, {total} bytes in total ...]\n"


def cap_bytes(data: bytes, limit: int) -> tuple[str, bool]:
    """Cap an already complete output: (decoded text with head and tail kept, whether it was cut)."""
    buf = CappedBuffer(limit)
    buf.feed(data)
    return buf.text(), buf.truncated
