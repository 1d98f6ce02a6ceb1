"""Where downloaded datasets, scripts and tools are kept: one data directory for every family."""

from __future__ import annotations

import os
from pathlib import Path


def default_data_dir(data_dir: str | None) -> Path:
    """``data_dir``, else ``$AGENTCOMPASS_DATA_DIR``, else ``~/.cache/agentcompass/data``."""
    if data_dir:
        return Path(data_dir).expanduser()
    env = os.environ.get("AGENTCOMPASS_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "agentcompass" / "data"
