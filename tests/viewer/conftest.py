"""Fixtures for the viewer: a real run directory (shell_tasks x shell_agent x scripted, local) and servers."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

import agentcompass
from agentcompass.viewer import ViewerServer

REAL_TASKS = ["files/hello_world", "files/mkdir_tree", "answer/count_lines", "text/uppercase"]
REAL_KEY = "shell_tasks/shell_agent/scripted/real"


@pytest.fixture(scope="session")
def real_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results dir holding one real run of four shell tasks in three categories."""
    root = tmp_path_factory.mktemp("viewer-results")
    out = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", "local",
                                      benchmark_params={"sample_ids": REAL_TASKS}, results_dir=str(root),
                                      run_id="real", progress="none")
    assert out.ok and out.counts.done == len(REAL_TASKS), out
    return root


@pytest.fixture
def serve() -> Iterator[Callable[[Path], ViewerServer]]:
    """Start viewers on 127.0.0.1, port 0; all are closed at the end."""
    servers: list[ViewerServer] = []

    def start(path: Path) -> ViewerServer:
        server = ViewerServer(path).start()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.close()


def get(server: ViewerServer, route: str, **params: Any) -> tuple[int, Any]:
    """GET a JSON route; (status, decoded body), errors included."""
    url = server.url.rstrip("/") + route + (f"?{urlencode(params)}" if params else "")
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")
