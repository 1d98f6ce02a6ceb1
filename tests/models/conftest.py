"""Fixtures for the model tests."""

from __future__ import annotations

import socket

import pytest

from tests.fixtures_scripted import scripted_base_url, scripted_server  # noqa: F401  (fixtures)


@pytest.fixture
def refused_base_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (the port was just released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
