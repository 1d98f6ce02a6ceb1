"""Secrets never reach disk or logs: everything persisted passes through a Redactor."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

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
