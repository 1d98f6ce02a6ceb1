"""The built-in ``scripted`` model: JSON scripts, their wire formats and the HTTP server speaking them."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    # what ``agentcompass.models.scripted`` was before it became this package, now ``.model``:
    # imported when first asked for
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module(".model", __name__), name)
