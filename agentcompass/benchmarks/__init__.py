"""Built-in benchmarks (``shell_tasks``, the SWE-bench family), imported lazily through the registry.

The text helpers are shared with the harnesses (kept there so both packages use one implementation).
"""

from __future__ import annotations

from ..harnesses import truncate_middle

__all__ = ["truncate_middle"]
