"""The ``local`` environment provider: host subprocesses in temp workspaces, cgroups and pid namespaces."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    # what ``agentcompass.environments.local`` was before it became this package, now ``.provider``:
    # imported when first asked for
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module(".provider", __name__), name)
