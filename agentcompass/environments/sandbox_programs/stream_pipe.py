"""The one copy loop of every TCP relay: the host-side model relay, the in-container model relay
(``_model_relay.py``) and the egress proxy (``_egress_proxy.py``).

Standard library only and free of ``from __future__`` imports: the provider runs the in-container helpers as
this file's source followed by theirs (``docker_network.helper_program``).
"""

import asyncio


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until EOF, then half-close; a connection reset ends the copy quietly."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass
