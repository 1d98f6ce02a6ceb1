"""The host-side model relay (``TcpRelay``): it pipes connections to its target, at most ``max_connections`` at
once; one over the cap is closed as it is accepted and never reaches the target (no daemon needed)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest

from agentcompass._errors import ConfigError
from agentcompass.environments.docker.network import RELAY_MAX_CONNECTIONS, TcpRelay
from agentcompass.environments.docker.provider import DockerProvider
from agentcompass.environments.ray.provider import RayDockerProvider
from agentcompass.interfaces import ComponentContext

pytestmark = pytest.mark.timeout(60)

_DEADLINE_S = 20.0


class _Target:
    """An echo server on 127.0.0.1 that counts the connections it accepted."""

    def __init__(self) -> None:
        self.accepted = 0
        self.server: asyncio.Server | None = None

    async def _echo(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            while data := await reader.read(4096):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])


@contextlib.asynccontextmanager
async def _target() -> AsyncIterator[_Target]:
    target = _Target()
    target.server = await asyncio.start_server(target._echo, "127.0.0.1", 0)
    try:
        yield target
    finally:
        target.server.close()


async def _round_trip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes) -> bytes:
    writer.write(data)
    await writer.drain()
    return await asyncio.wait_for(reader.readexactly(len(data)), _DEADLINE_S)


async def _closed_at_once(reader: asyncio.StreamReader) -> bool:
    """True when the relay ended the connection without a byte (EOF or a reset)."""
    try:
        return await asyncio.wait_for(reader.read(16), _DEADLINE_S) == b""
    except ConnectionError:
        return True


async def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait (bounded) until ``condition()`` holds: the relay's own count, not a sleep of a guessed length."""
    async with asyncio.timeout(_DEADLINE_S):
        while not condition():  # noqa: ASYNC110 - the relay's counters have nothing to await
            await asyncio.sleep(0.01)
    assert condition(), what


async def test_connections_over_the_cap_are_closed_at_accept_and_never_reach_the_target() -> None:
    async with _target() as target:
        relay = TcpRelay("127.0.0.1", "127.0.0.1", target.port, max_connections=3)
        await relay.start()
        try:
            held = [await asyncio.open_connection("127.0.0.1", relay.port) for _ in range(3)]
            for i, (reader, writer) in enumerate(held):
                assert await _round_trip(reader, writer, f"ping{i}".encode()) == f"ping{i}".encode()
            assert relay.open_connections == 3 and target.accepted == 3

            for _ in range(5):  # a flood beyond the cap: each closed, none relayed
                reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
                assert await _closed_at_once(reader)
                writer.close()
            assert relay.refused == 5
            assert target.accepted == 3 and relay.open_connections == 3 and relay.peak == 3

            # the relayed ones are untouched, and a freed slot is taken by the next connection
            assert await _round_trip(*held[1], b"still") == b"still"
            held[0][1].close()
            await _until(lambda: relay.open_connections == 2, "the closed connection to leave the relay")
            reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
            assert await _round_trip(reader, writer, b"again") == b"again"
            assert target.accepted == 4 and relay.refused == 5 and relay.peak == 3
            writer.close()
            for _, w in held[1:]:
                w.close()
        finally:
            await relay.aclose()
        assert relay.open_connections == 0


async def test_the_default_cap_holds_against_a_flood_of_idle_connections() -> None:
    # connections that never send a byte (what a hostile sandbox can open without limit) hold at most the cap
    async with _target() as target:
        relay = TcpRelay("127.0.0.1", "127.0.0.1", target.port)
        assert relay.max_connections == RELAY_MAX_CONNECTIONS
        relay.max_connections = 50  # the same code path as 1024, with fewer sockets for the test
        await relay.start()
        opened: list[asyncio.StreamWriter] = []
        try:
            for _ in range(80):
                _, writer = await asyncio.open_connection("127.0.0.1", relay.port)
                opened.append(writer)
            await _until(lambda: relay.open_connections + relay.refused == 80, "every connection to be accepted")
            assert relay.open_connections == 50 and relay.refused == 30 and relay.peak == 50
            await _until(lambda: target.accepted == 50, "the relayed ones to reach the target")
            assert target.accepted == 50
        finally:
            for writer in opened:
                writer.close()
            await relay.aclose()


def test_relay_max_connections_is_a_param_of_docker_and_ray_docker_and_below_one_is_refused() -> None:
    ctx = ComponentContext(run_id="relay-cap")
    assert DockerProvider({}, ctx).params.relay_max_connections == RELAY_MAX_CONNECTIONS
    assert DockerProvider({"relay_max_connections": 8}, ctx).params.relay_max_connections == 8
    assert RayDockerProvider({"relay_max_connections": 8}, ctx).params.relay_max_connections == 8
    for bad in (0, -1, 70000):
        with pytest.raises(ConfigError, match="relay_max_connections"):
            DockerProvider({"relay_max_connections": bad}, ctx)
    with pytest.raises(ValueError, match="max_connections"):
        TcpRelay("127.0.0.1", "127.0.0.1", 1, max_connections=0)
