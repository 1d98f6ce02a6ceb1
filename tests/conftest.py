"""Shared fixtures: a scripted model server in a subprocess (for sync tests that call launch())."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def start_server_process(*extra: str) -> tuple[subprocess.Popen[str], str]:
    """Start ``agentcompass serve-scripted --port 0`` and return (process, base_url)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "agentcompass.cli", "serve-scripted", "--port", "0", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    url = next((w for w in line.split() if w.startswith("http://")), None)
    if url is None:
        proc.kill()
        raise RuntimeError(f"scripted server did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc, url


@pytest.fixture(scope="session")
def scripted_url() -> Iterator[str]:
    """Base URL of a real OpenAI-compatible scripted server (bundled scripts), for the whole session."""
    proc, url = start_server_process()
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
