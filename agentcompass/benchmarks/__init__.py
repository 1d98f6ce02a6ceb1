"""Built-in benchmarks, one sub-package per family, imported lazily through the registry."""

from __future__ import annotations

from ..common.text import truncate_middle

__all__ = ["truncate_middle"]  # its old home
