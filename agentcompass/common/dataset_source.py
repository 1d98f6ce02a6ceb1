"""The record of where a benchmark's tasks came from, written to params.json."""

from __future__ import annotations

import msgspec


class DatasetSource(msgspec.Struct, frozen=True, omit_defaults=True):
    """Where a benchmark's instances came from (recorded in params.json): a file, the bundled set, or a Hub
    dataset at a resolved commit."""

    kind: str
    path: str = ""
    repo: str = ""
    revision: str = ""
    commit: str = ""
    files: list[str] = []
