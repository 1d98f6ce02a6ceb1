"""Fixtures for harness tests: a real local environment and the scripted model over real HTTP."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from agentcompass.environments.local.provider import LocalProvider
from agentcompass.interfaces import ComponentContext, Environment, EnvOpenSpec, ModelClient, RunContext
from agentcompass.models.factory import create_model_client
from agentcompass.models.scripted.server import ScriptedServer
from agentcompass.specs import ModelSpec

ServeScript = Callable[..., Awaitable[tuple[ModelClient, ScriptedServer]]]


@pytest.fixture
async def local_env() -> AsyncIterator[Environment]:
    """A fresh local workspace, closed (and removed) after the test."""
    provider = LocalProvider({}, ComponentContext(run_id="test"))
    env = await provider.open(EnvOpenSpec(run_id="test", task_id="t1", files={"seed.txt": "seed\n"}))
    try:
        yield env
    finally:
        await env.close()
        await provider.aclose()


@pytest.fixture
async def serve_script() -> AsyncIterator[ServeScript]:
    """Start a scripted OpenAI-compatible server with inline turns; return an HTTP client for it."""
    started: list[tuple[ModelClient, ScriptedServer]] = []

    async def serve(turns: list[str] | None = None, *, match: str = "", bundled: bool = False,
                    **server_kwargs: Any) -> tuple[ModelClient, ScriptedServer]:
        params: dict[str, Any] = {"bundled": bundled}
        if turns is not None:
            params["script"] = [{"match": match, "turns": turns}]
        server = ScriptedServer(params, **server_kwargs)
        base_url = await server.start()
        spec = ModelSpec(id="scripted", base_url=base_url, params={"retries": 0})
        client = create_model_client(spec, max_connections=4, timeout=30)
        started.append((client, server))
        return client, server

    try:
        yield serve
    finally:
        for client, server in started:
            await client.aclose()
            await server.stop()


@pytest.fixture
def run_ctx() -> RunContext:
    return RunContext(request="test", run_id="test", task_id="t1", attempt=1)


@pytest.fixture
def log() -> logging.Logger:
    return logging.getLogger("agentcompass.tests.harnesses")
