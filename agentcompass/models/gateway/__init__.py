"""The model gateway: the HTTP proxy agents call instead of the model, its ledger, envelopes and redaction."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    # what ``agentcompass.models.gateway`` was before it became this package, now ``.server``:
    # imported when first asked for
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module(".server", __name__), name)
