"""The in-container helpers (model relay, egress proxy) as the provider ships them: each one's ``python3 -c``
program, run here with this machine's Python against servers on 127.0.0.1 (no Docker needed)."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import AsyncIterator
from types import ModuleType

import pytest
import pytest_asyncio

from agentcompass.environments.docker.network import helper_program
from agentcompass.environments.sandbox_programs import egress_proxy as _egress_proxy
from agentcompass.environments.sandbox_programs import model_relay as _model_relay

pytestmark = pytest.mark.timeout(60)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest_asyncio.fixture
async def echo_port() -> AsyncIterator[int]:
    """A server on 127.0.0.1 that answers each connection with ``echo:`` + everything it read, then closes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read()  # until the client's half-close: the relay must pass EOF on
        writer.write(b"echo:" + data)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        yield int(server.sockets[0].getsockname()[1])


async def _started(module: ModuleType, *args: str, port: int) -> asyncio.subprocess.Process:
    """The helper's program running under this Python (isolated: no agentcompass), once it listens on ``port``."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-I", "-c", helper_program(module), *args,
                                                stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(20):
        while True:
            if proc.returncode is not None:
                raise AssertionError(f"helper exited {proc.returncode}: {(await proc.communicate())[1]!r}")
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                return proc
            except OSError:
                await asyncio.sleep(0.05)


async def _stop(proc: asyncio.subprocess.Process) -> bytes:
    """Kill the helper; what it wrote to stderr."""
    if proc.returncode is None:
        proc.kill()
    return (await proc.communicate())[1]


async def _exchange(port: int, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        try:
            writer.write(payload)
            await writer.drain()
            writer.write_eof()
        except OSError:  # the peer closed first (a relay that cannot forward may, before our bytes are out)
            pass
        async with asyncio.timeout(10):
            try:
                return await reader.read()
            except ConnectionResetError:  # closed with our bytes unread: nothing came back
                return b""
    finally:
        writer.close()


def test_both_programs_carry_the_one_copy_loop_and_nothing_of_the_package() -> None:
    for module in (_model_relay, _egress_proxy):
        program = helper_program(module)
        compile(program, module.__name__, "exec")
        assert program.count("async def pipe(") == 1
        assert "from ." not in program and "import agentcompass" not in program


async def test_the_model_relay_pipes_both_ways_and_passes_the_half_close_on(echo_port: int) -> None:
    listen = _free_port()
    proc = await _started(_model_relay, str(listen), "127.0.0.1", str(echo_port), port=listen)
    try:
        payload = b"x" * 300_000  # several reads of the copy loop
        assert await _exchange(listen, payload) == b"echo:" + payload
        assert await _exchange(listen, b"again") == b"echo:again"
    finally:
        await _stop(proc)


async def test_the_model_relay_closes_a_connection_it_cannot_forward() -> None:
    listen, nowhere = _free_port(), _free_port()
    proc = await _started(_model_relay, str(listen), "127.0.0.1", str(nowhere), port=listen)
    try:
        assert await _exchange(listen, b"hello") == b""
    finally:
        stderr = await _stop(proc)
    assert f"cannot reach 127.0.0.1:{nowhere}".encode() in stderr


async def test_the_egress_proxy_tunnels_to_a_listed_port_only(echo_port: int) -> None:
    listen = _free_port()
    proc = await _started(_egress_proxy, str(listen), json.dumps([["127.0.0.1", echo_port]]), port=listen)
    try:
        allowed = await _exchange(listen, f"CONNECT 127.0.0.1:{echo_port} HTTP/1.1\r\n\r\nping".encode())
        assert allowed == b"HTTP/1.1 200 Connection established\r\n\r\necho:ping"
        refused = await _exchange(listen, f"CONNECT 127.0.0.1:{listen} HTTP/1.1\r\n\r\n".encode())
        assert refused.startswith(b"HTTP/1.1 403 Forbidden")
    finally:
        await _stop(proc)
