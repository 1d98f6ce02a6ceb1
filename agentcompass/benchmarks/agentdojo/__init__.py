"""The ``agentdojo`` benchmark: AgentDojo's suites, injections and grading."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    # what ``agentcompass.benchmarks.agentdojo`` was before it became this package, now ``.benchmark``:
    # imported when first asked for
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module(".benchmark", __name__), name)
