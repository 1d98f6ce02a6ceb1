"""Tailing ``progress.jsonl`` by byte offset: whole lines only, torn or garbled lines skipped."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

MAX_CHUNK = 1 << 20


class ProgressChunk(msgspec.Struct):
    """Events decoded from ``offset`` on, and where to continue."""

    events: list[dict[str, Any]]
    offset: int  # the byte after the last whole line consumed
    size: int  # the file's size when read
    reset: bool = False  # the file shrank (rewritten): reading restarted at 0
    skipped: int = 0  # lines that did not decode (e.g. torn by a SIGKILL before a resumed run appended)


def read_progress(path: Path, offset: int, max_bytes: int = MAX_CHUNK) -> ProgressChunk:
    """Complete lines of ``path`` from ``offset``. A last line without its newline is left for the next call.

    An offset in the middle of a line (a client starting near the end) skips to the next line start."""
    try:
        f = open(path, "rb")
    except OSError:
        return ProgressChunk(events=[], offset=0, size=0, reset=offset > 0)
    with f:
        size = os.fstat(f.fileno()).st_size
        reset = offset > size
        if reset or offset < 0:
            offset = 0
        if offset > 0:
            f.seek(offset - 1)
            if f.read(1) != b"\n":  # mid-line: drop the rest of this line
                rest = f.read(max_bytes)
                cut = rest.find(b"\n")
                if cut < 0:
                    return ProgressChunk(events=[], offset=offset + len(rest) if len(rest) >= max_bytes else offset,
                                         size=size, reset=reset)
                offset += cut + 1
        f.seek(offset)
        chunk = f.read(max_bytes)
    end = chunk.rfind(b"\n")
    if end < 0:
        # No newline: an unfinished last line, or one line longer than max_bytes (skip that one).
        if len(chunk) >= max_bytes:
            return ProgressChunk(events=[], offset=offset + len(chunk), size=size, reset=reset, skipped=1)
        return ProgressChunk(events=[], offset=offset, size=size, reset=reset)
    events: list[dict[str, Any]] = []
    skipped = 0
    for line in chunk[:end].split(b"\n"):
        if not line.strip():
            continue
        try:
            value = msgspec.json.decode(line)
        except msgspec.DecodeError:
            skipped += 1
            continue
        if isinstance(value, dict):
            events.append(value)
        else:
            skipped += 1
    return ProgressChunk(events=events, offset=offset + end + 1, size=size, reset=reset, skipped=skipped)
