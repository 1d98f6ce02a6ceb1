"""The ``docker`` environment provider and its parts: the daemon API, images, pulls, networks, sweeps."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    # what ``agentcompass.environments.docker`` was before it became this package, now ``.provider``:
    # imported when first asked for
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module(".provider", __name__), name)
