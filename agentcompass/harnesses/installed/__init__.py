"""Installed agent CLIs (``claude_code``, ``codex``): install, run, parse their transcripts."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    # what ``agentcompass.harnesses.installed`` was before it became this package, now ``.agent``:
    # imported when first asked for
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module(".agent", __name__), name)
