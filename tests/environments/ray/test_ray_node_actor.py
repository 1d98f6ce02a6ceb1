"""Errors raised on a node cross to the coordinator as the types the engine classifies."""

from __future__ import annotations

import asyncio

import pytest

from agentcompass._errors import ConfigError, EnvironmentError_
from agentcompass.environments.docker.pull import ImagePullError
from agentcompass.environments.ray.node_actor import decode_error, encode_error


def test_a_config_error_keeps_its_field_and_a_pull_error_its_kind() -> None:
    err = decode_error(encode_error(ConfigError("bad cwd", field="cwd")), "n1")
    assert isinstance(err, ConfigError) and err.field == "cwd"
    pull = decode_error(encode_error(ImagePullError("gone", kind="image_not_found", image="x:1")), "n1")
    assert isinstance(pull, ImagePullError) and pull.kind == "image_not_found" and not pull.retryable


def test_file_errors_stay_file_errors_and_anything_else_is_an_environment_error_naming_the_node() -> None:
    assert isinstance(decode_error(encode_error(FileNotFoundError("no /x")), "n1"), FileNotFoundError)
    env = decode_error(encode_error(EnvironmentError_("container is gone")), "n2")
    assert isinstance(env, EnvironmentError_) and "node n2" in str(env)

    class Odd(Exception):
        pass

    odd = decode_error(encode_error(Odd("strange")), "n3")
    assert isinstance(odd, EnvironmentError_) and "Odd: strange" in str(odd)


async def test_the_heartbeat_answers_while_every_connection_of_the_node_s_docker_client_is_busy(
        base_image: str, docker_run_id: str) -> None:
    import os

    import aiohttp

    from agentcompass.environments.ray.node_actor import NodeActor

    actor = NodeActor({"image": base_image, "prestart": 0}, {"run_id": docker_run_id}, node_id="n1",
                      creates_in_flight=1, open_qps=0.0, env_limit=1)
    assert (await actor.start())[0] == "ok"
    client = actor._provider.docker
    pool = client.connector.limit  # aiohttp's default: 100 connections, each held by a streaming exec
    url = client._canonicalize_url("events", versioned_api=False)

    async def hold() -> None:  # a long-running request, as an attached exec is
        async with client.session.get(url, timeout=aiohttp.ClientTimeout(total=None)) as resp:
            await resp.content.read()

    holders = [asyncio.create_task(hold()) for _ in range(pool)]
    try:
        for _ in range(1200):  # 100 connections to the daemon: seconds on a loaded machine (hang guard: 60 s)
            if len(client.connector._acquired) >= pool:
                break
            await asyncio.sleep(0.05)
        assert len(client.connector._acquired) >= pool
        with pytest.raises(TimeoutError):  # the provider's own pool is saturated: a ping there would queue
            await asyncio.wait_for(client.version(), 1.0)
        assert await asyncio.wait_for(actor.ping(), 90.0) == ("ok", os.getpid())  # hang guard, not a race
    finally:
        for t in holders:
            t.cancel()
        await asyncio.gather(*holders, return_exceptions=True)
        assert (await actor.aclose())[0] == "ok"
