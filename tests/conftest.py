"""Shared fixtures: a scripted model server in a subprocess (for sync tests that call launch())."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentcompass.models.scripted_server import spawn_server_process, stop_process

REPO = Path(__file__).resolve().parent.parent


def start_server_process(*extra: str) -> tuple[subprocess.Popen[str], str]:
    """Start ``agentcompass serve-scripted --port 0`` and return (process, base_url)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return spawn_server_process(*extra, env=env, capture_stderr=True)


@pytest.fixture(scope="session")
def scripted_url() -> Iterator[str]:
    """Base URL of a real OpenAI-compatible scripted server (bundled scripts), for the whole session."""
    proc, url = start_server_process()
    try:
        yield url
    finally:
        stop_process(proc)
