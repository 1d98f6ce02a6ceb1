"""A TCP relay process: every connection to ``LISTEN_HOST:LISTEN_PORT`` is piped to ``TARGET_HOST:TARGET_PORT``.

    python -m tests.standins.tcp_relay LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT

Prints ``ready`` once listening. Runs until killed. ``SecondNode.share_host_port`` runs one on each side of a
namespace's veth pair, so ``127.0.0.1:<port>`` means the same host service on the host and in the namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

CONNECT_TIMEOUT_S = 10.0
CHUNK = 1 << 16


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


async def serve(listen_host: str, listen_port: int, target_host: str, target_port: int) -> None:
    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                up_reader, up_writer = await asyncio.open_connection(target_host, target_port)
        except (OSError, TimeoutError):
            writer.close()
            return
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for w in (up_writer, writer):
                with contextlib.suppress(OSError):
                    w.close()

    server = await asyncio.start_server(relay, listen_host, listen_port, reuse_address=True)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    asyncio.run(serve(argv[0], int(argv[1]), argv[2], int(argv[3])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
