"""Process environment variables set for the length of a block (a third-party import that reads them), then
restored exactly: a variable that was unset is removed again."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping


@contextlib.contextmanager
def environ_set(values: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set inside the block; every named variable as it was afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
