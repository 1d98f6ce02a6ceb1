"""Secrets never reach disk or logs: everything persisted passes through a Redactor."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Iterable
from pathlib import Path

MASK = "***"


class Redactor:
    """Replaces every known secret (and its JSON-escaped form) with ``***``."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        found = {s for s in secrets if s and len(s) >= 4}
        variants: set[str] = set()
        for s in found:
            variants.add(s)
            variants.add(json.dumps(s)[1:-1])
        # Longest first, so a secret that contains another is masked whole.
        self._text = sorted(variants, key=len, reverse=True)
        self._bytes = [v.encode() for v in self._text]

    def __bool__(self) -> bool:
        return bool(self._text)

    @property
    def byte_patterns(self) -> tuple[bytes, ...]:
        """The byte strings masked, longest first (for a stream redactor that must see a secret whole)."""
        return tuple(self._bytes)

    def text(self, value: str) -> str:
        for s in self._text:
            if s in value:
                value = value.replace(s, MASK)
        return value

    def bytes(self, value: bytes) -> bytes:
        for s in self._bytes:
            if s in value:
                value = value.replace(s, MASK.encode())
        return value


class RedactingFormatter(logging.Formatter):
    """A formatter whose output has every secret masked."""

    def __init__(self, fmt: str, redactor: Redactor) -> None:
        super().__init__(fmt)
        self._redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        return self._redactor.text(super().format(record))


class LogWriteState:
    """Shared by every log file of one run: after the first failed write (disk full, I/O error) the run's file
    logging stops, reported once on stderr instead of a ``--- Logging error ---`` traceback per record."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.error: BaseException | None = None

    def fail(self, exc: BaseException | None) -> None:
        if self.error is None:
            self.error = exc or OSError("unknown error")
            try:
                sys.stderr.write(f"agentcompass: file logging of {self.where} stopped: {self.error}\n")
            except Exception:  # stderr gone too: nothing left to tell
                pass


class RunLogHandler(logging.FileHandler):
    """A FileHandler that stops, quietly after one report, when its run's log files cannot be written.

    Lines logged on an event loop's thread are flushed together at the end of the loop's current round of
    callbacks (one ``write`` for the lot, not one per line); lines from other threads are flushed at once."""

    def __init__(self, path: str | Path, state: LogWriteState, *, delay: bool = False) -> None:
        self.state = state
        self._flush_due = False
        super().__init__(path, encoding="utf-8", delay=delay)

    def flush(self) -> None:
        if self._flush_due:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop on this thread: at once
            super().flush()
            return
        self._flush_due = True
        loop.call_soon(self._flush_batch)

    def _flush_batch(self) -> None:
        self.acquire()
        try:
            self._flush_due = False
            super().flush()
        except OSError as exc:
            self.state.fail(exc)
            self._drop_stream()
        finally:
            self.release()

    def emit(self, record: logging.LogRecord) -> None:
        if self.state.error is None:
            try:
                super().emit(record)
            except OSError as exc:  # opening a delayed file failed
                self.state.fail(exc)

    def handleError(self, record: logging.LogRecord) -> None:
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):  # a bad record (format args, a failing __repr__), not the disk
            super().handleError(record)
            return
        self.state.fail(exc)
        self._drop_stream()

    def _drop_stream(self) -> None:
        stream, self.stream = self.stream, None
        if stream is not None:
            try:
                stream.close()
            except OSError:  # the buffered tail cannot be written either
                pass

    def close(self) -> None:
        self._flush_due = False  # close() flushes what is buffered
        try:
            super().close()
        except OSError as exc:  # flushing the last lines failed (disk full)
            self.state.fail(exc)
            self._drop_stream()
