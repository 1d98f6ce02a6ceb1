"""The ``mini_swe_agent`` harness: the mini-swe-agent package's loop on an AgentCompass environment."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    # what ``agentcompass.harnesses.mini_swe_agent`` was before it became this package, now ``.harness``:
    # imported when first asked for
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module(".harness", __name__), name)
