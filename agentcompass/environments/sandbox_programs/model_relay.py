"""The in-container model relay of the docker ``model`` and ``allowlist`` network policies (stdlib only).

The provider runs this file inside a forwarder container (``python3 -c <program> <listen port> <host> <port>``,
the program being ``docker_network.helper_program`` of this module), which sits on ``bridge`` and on the
internal network of every environment that may reach the model. Every connection to ``0.0.0.0:<listen
port>`` is piped to ``<host>:<port>`` (the host-side relay on the bridge gateway) and nowhere else.
"""

import asyncio
import sys

from .stream_pipe import pipe

_CONNECT_TIMEOUT_S = 10.0


async def _handle(host: str, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(host, port), _CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            print(f"cannot reach {host}:{port}: {exc}", file=sys.stderr, flush=True)
            return
        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            up_writer.close()
    finally:
        writer.close()


async def _serve(listen_port: int, host: str, port: int) -> None:
    server = await asyncio.start_server(lambda r, w: _handle(host, port, r, w), "0.0.0.0", listen_port,
                                        reuse_address=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> None:
    """``<listen port> <host> <port>``: serve until killed."""
    asyncio.run(_serve(int(argv[0]), argv[1], int(argv[2])))


if __name__ == "__main__":
    main(sys.argv[1:])
