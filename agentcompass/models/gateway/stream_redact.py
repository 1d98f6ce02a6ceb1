"""Masking secrets in a byte stream whose chunks may cut a secret in two."""

from __future__ import annotations

from ...engine.redact import MASK, Redactor

_MASK = MASK.encode()


class StreamRedactor:
    """Feeds a stream's chunks through a ``Redactor``, holding back the tail of each chunk that could be the
    start of a secret until the next chunk shows whether it is one. ``flush`` at the end masks a held tail
    (a secret's first bytes are a part of it)."""

    __slots__ = ("_patterns", "_redactor", "_tail")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._patterns = redactor.byte_patterns
        self._tail = b""

    def feed(self, chunk: bytes) -> bytes:
        """The bytes of ``chunk`` (and of the tail held before) that can be passed on, masked."""
        if not self._patterns:
            return chunk
        data = self._redactor.bytes(self._tail + chunk)
        keep = self._held_back(data)
        self._tail = data[len(data) - keep:] if keep else b""
        return data[:len(data) - keep] if keep else data

    def flush(self) -> bytes:
        """What is still held at the stream's end: a secret's start of 4 bytes or more is masked."""
        tail, self._tail = self._tail, b""
        return _MASK if len(tail) >= 4 else tail

    def _held_back(self, data: bytes) -> int:
        """The length of the longest suffix of ``data`` that is a proper prefix of a secret."""
        best = 0
        for p in self._patterns:
            first = p[:1]
            start = max(len(data) - len(p) + 1, 0)
            pos = data.find(first, start)
            while pos != -1:
                k = len(data) - pos
                if k <= best:
                    break
                if p.startswith(data[pos:]):
                    best = k
                    break
                pos = data.find(first, pos + 1)
        return best
