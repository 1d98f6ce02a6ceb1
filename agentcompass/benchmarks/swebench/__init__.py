"""The SWE-bench family: the benchmarks (``swebench``, ``swebench_verified``, ``swebench_lite``, ``swebench_jsonl``,
``swebench_local``, ``swebench_multilingual``, ``swebench_pro``) and what they share: datasets, per-instance
images, eval scripts, log parsers and grading."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    # the names of ``agentcompass.benchmarks.swebench`` before it became this package (``benchmark``), imported
    # only when first asked for
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module(".benchmark", __name__), name)
