"""Finding a Chromium binary on this machine (for the viewer's browser test and load benchmark).

Order: ``$AGENTCOMPASS_CHROMIUM``; Debian's real binary ``/usr/lib/chromium/chromium`` (the ``/usr/bin``
launcher is a shell wrapper around it); then ``chromium``, ``chromium-browser``, ``google-chrome`` on PATH.
"""

from __future__ import annotations

import os
import shutil

CANDIDATES = ("/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The path of a Chromium executable, or None."""
    override = os.environ.get("AGENTCOMPASS_CHROMIUM")
    if override:
        return override if os.access(override, os.X_OK) else None
    for name in CANDIDATES:
        path = name if os.path.isabs(name) and os.access(name, os.X_OK) else shutil.which(name)
        if path:
            return path
    return None
