"""Transcript parsers of installed agents: the program's stdout, read incrementally, made into steps.

``Transcript`` is the contract (``feed`` bytes, ``finish``; the steps, usage, stop reason, final answer and the
agent's own error it found); ``JsonLinesTranscript`` reads one JSON object per line and hands each to ``handle``
(``claude_code.py`` and ``codex.py`` subclass it). A line longer than ``MAX_LINE_BYTES`` is dropped, counted
invalid, never buffered.
"""

from __future__ import annotations

import abc
import time
from typing import Any

import msgspec

from ...common.error_kinds import ErrorKind
from ...records import Step, Usage

__all__ = ["MAX_LINE_BYTES", "JsonLinesTranscript", "Transcript"]

#: a transcript line longer than this is dropped (counted invalid) instead of buffered.
MAX_LINE_BYTES = 16 * 1024 * 1024


class Transcript(abc.ABC):
    """An incremental transcript parser: ``feed`` gets the next bytes, returns the steps they completed or
    started (a step may still be filled in later, e.g. by its tool's result: it is the same object)."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        #: events the parser recognised / lines it could not read
        self.events = 0
        self.invalid_lines = 0
        #: what the agent reported it used (for artifacts; the gateway counts the engine's usage)
        self.usage = Usage()
        self.stop_reason: str | None = None
        self.final_answer: str | None = None
        #: an error the agent itself reported (e.g. a result event marked as an error)
        self.error: str | None = None
        #: the engine's kind for how the agent itself says it stopped (e.g. ``step_limit`` for a turn limit),
        #: used instead of ``agent_error`` when the program exits non-zero; None: nothing to say
        self.error_kind: ErrorKind | None = None
        #: facts from the transcript worth keeping (version, session, turns...): ``artifacts["agent"]``
        self.info: dict[str, Any] = {}

    @abc.abstractmethod
    def feed(self, data: bytes) -> list[Step]:
        """Take the next transcript bytes; the steps that are new."""

    def finish(self) -> list[Step]:
        """The transcript ended (a last line without newline is read now); the steps that are new."""
        return []

    @property
    def valid(self) -> bool:
        """Whether the transcript held anything the parser recognised."""
        return self.events > 0

    def new_step(self, **fields: Any) -> Step:
        """A step at the next index, kept in ``steps``."""
        step = Step(index=len(self.steps), started_at=time.time(), **fields)
        self.steps.append(step)
        return step


class JsonLinesTranscript(Transcript):
    """A transcript of one JSON object per line: ``handle`` turns each into steps."""

    def __init__(self) -> None:
        super().__init__()
        self._buf = bytearray()
        self._skipping = False  # inside a line longer than MAX_LINE_BYTES

    @abc.abstractmethod
    def handle(self, event: dict[str, Any]) -> list[Step] | None:
        """The steps one event makes (``[]``: none); None when the event is not one the parser knows."""

    def feed(self, data: bytes) -> list[Step]:
        self._buf += data
        out: list[Step] = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                if len(self._buf) > MAX_LINE_BYTES:
                    self._buf.clear()
                    if not self._skipping:
                        self.invalid_lines += 1
                    self._skipping = True
                return out
            line = bytes(self._buf[:nl])
            del self._buf[:nl + 1]
            if self._skipping:
                self._skipping = False
                continue
            out += self._line(line)

    def finish(self) -> list[Step]:
        line, self._buf = bytes(self._buf), bytearray()
        if self._skipping:
            self._skipping = False
            return []
        return self._line(line)

    def _line(self, line: bytes) -> list[Step]:
        if not line.strip():
            return []
        try:
            event = msgspec.json.decode(line)
        except msgspec.DecodeError:
            self.invalid_lines += 1
            return []
        steps = self.handle(event) if isinstance(event, dict) else None
        if steps is None:
            self.invalid_lines += 1
            return []
        self.events += 1
        return steps
