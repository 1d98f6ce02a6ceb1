"""Reusable helpers to run the scripted model as a real OpenAI-compatible server in tests.

    from tests.fixtures_scripted import start_scripted_server

    async with start_scripted_server({"script": [{"match": "hi", "turns": ["hello"]}]}) as base_url:
        ...  # ModelSpec(id="scripted", base_url=base_url)

Or import the ``scripted_server`` / ``scripted_base_url`` fixtures into a test module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest_asyncio

from agentcompass.models.scripted.server import ScriptedServer


@asynccontextmanager
async def running_scripted_server(params: Mapping[str, Any] | None = None,
                                  **options: Any) -> AsyncIterator[ScriptedServer]:
    """Start a ``ScriptedServer`` on 127.0.0.1 (ephemeral port) and stop it on exit; yields the server."""
    server = ScriptedServer(params, **options)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@asynccontextmanager
async def start_scripted_server(params: Mapping[str, Any] | None = None,
                                **options: Any) -> AsyncIterator[str]:
    """Like ``running_scripted_server`` but yields the base URL (``http://127.0.0.1:PORT/v1``)."""
    async with running_scripted_server(params, **options) as server:
        assert server.base_url is not None
        yield server.base_url


@pytest_asyncio.fixture
async def scripted_server() -> AsyncIterator[ScriptedServer]:
    """A scripted server with the default (bundled) scripts."""
    async with running_scripted_server() as server:
        yield server


@pytest_asyncio.fixture
async def scripted_base_url(scripted_server: ScriptedServer) -> str:
    """The base URL of the ``scripted_server`` fixture."""
    assert scripted_server.base_url is not None
    return scripted_server.base_url
