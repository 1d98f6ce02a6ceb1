"""The ``openhands`` harness: OpenHands in its own virtualenv, driven through a bridge script."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    # what ``agentcompass.harnesses.openhands`` was before it became this package, now ``.harness``:
    # imported when first asked for
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module(".harness", __name__), name)
