"""``agentcompass view``: a local web viewer for run directories (runs, task tables, trajectories, live progress).

The server is stdlib-only (``http.server``); the page is one hand-written HTML, JS and CSS file in ``static/``.
"""

from __future__ import annotations

from .server import ViewerServer, run_viewer

__all__ = ["ViewerServer", "run_viewer"]
