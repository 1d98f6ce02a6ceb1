"""The egress proxy of the docker ``allowlist`` network policy (stdlib only, Python >= 3.11).

The provider runs this file inside a proxy container (``python3 -c <program> <port> <entries>``, the program
being ``docker_network.helper_program`` of this module), which sits on ``bridge`` and on the internal network of
every environment under that allowlist. It speaks HTTP ``CONNECT`` (tunnels, e.g. HTTPS) and plain-HTTP
forwarding (absolute-URI requests), and opens a connection only when the requested host and port match an entry;
anything else gets ``403``. Host names are resolved here, never taken as addresses from the client: a name entry
matches a name target only, an address entry (``10.0.0.5``, ``[::1]:8080``) an address target only. Whatever
matches, addresses in the denied networks (the sandboxes' own internal networks, whose names Docker's DNS would
resolve here) are never connected to.

The provider imports :func:`parse_entry` to validate a policy's hosts before any container starts.
"""

import asyncio
import ipaddress
import json
import re
import socket
import sys
from urllib.parse import urlsplit

from .stream_pipe import pipe

#: where the proxy listens inside its container
LISTEN_PORT = 3128
_HEAD_LIMIT = 64 * 1024
_HEAD_TIMEOUT_S = 30.0
_CONNECT_TIMEOUT_S = 10.0
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")

Entry = tuple[str, int | None]


def _is_name(host: str) -> bool:
    """A DNS name (not an address in disguise: the last label of a real name is never all digits)."""
    labels = host.split(".")
    if len(host) > 253 or not all(_LABEL.match(label) for label in labels):
        return False
    last = labels[-1]
    return not (last.isdigit() or re.fullmatch(r"0x[0-9a-f]*", last))


def _split(text: str) -> tuple[str, str | None]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` -> (host, port text or None)."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("unclosed '['")
        rest = text[end + 1:]
        if rest and not rest.startswith(":"):
            raise ValueError("expected ':port' after ']'")
        return text[1:end], rest[1:] if rest else None
    if text.count(":") > 1:
        return text, None  # a bare IPv6 address
    host, sep, port = text.partition(":")
    return host, port if sep else None


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"port {text!r} is not 1..65535")
    return int(text)


def _normal_host(host: str) -> str:
    """Lower case, no trailing dot; an address in its canonical form."""
    host = host.strip().lower()
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host[:-1] if host.endswith(".") else host


def parse_entry(text: object) -> Entry:
    """An allowlist entry -> ``(host, port or None)``; ValueError (saying why) for anything else.

    ``host`` is a DNS name (``pypi.org``), a suffix wildcard (``*.example.com``: any name under it, not
    ``example.com`` itself) or an IPv4/IPv6 address; ``:port`` restricts it to one port (IPv6 as ``[::1]:443``).
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"expected a host like 'pypi.org', 'pypi.org:443', '*.example.com' or "
                         f"'10.0.0.5:8080', got {text!r}")
    raw_host, raw_port = _split(text.strip())
    port = _port(raw_port) if raw_port is not None else None
    host = _normal_host(raw_host)
    try:
        ipaddress.ip_address(host)
        return host, port
    except ValueError:
        pass
    name = host[2:] if host.startswith("*.") else host
    if not _is_name(name) or ("." not in name and host.startswith("*.")):
        raise ValueError(f"{text!r} is neither a host name, a '*.' wildcard of a domain nor an IP address")
    return host, port


def allowed(entries: list[Entry], host: str, port: int) -> bool:
    """Whether ``host:port`` (as a client asked for it) matches one of ``entries``."""
    host = _normal_host(host)
    try:
        ipaddress.ip_address(host)
        is_address = True
    except ValueError:
        is_address = False
        if not _is_name(host):
            return False
    for want, want_port in entries:
        if want_port is not None and want_port != port:
            continue
        if want.startswith("*."):
            if not is_address and host.endswith(want[1:]):
                return True
        elif want == host:
            return True
    return False


# ----------------------------------------------------------------------------- the proxy process


def _reply(writer: asyncio.StreamWriter, status: str, text: str) -> None:
    body = f"agentcompass egress proxy: {text}\n".encode()
    writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                 f"Connection: close\r\n\r\n".encode() + body)


def _target(method: str, target: str) -> tuple[str, int, str]:
    """(host, port, origin-form path) of a request; ValueError if it is not a proxy request."""
    if method == "CONNECT":
        host, port = _split(target)
        if port is None:
            raise ValueError("CONNECT needs host:port")
        return host, _port(port), ""
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise ValueError("expected an absolute http:// URL (use CONNECT for https)")
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    return url.hostname, url.port or 80, path


async def _connect(host: str, port: int, deny: list[ipaddress.IPv4Network | ipaddress.IPv6Network],
                   ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Resolve ``host`` here and connect to its first reachable address; PermissionError if one is denied."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if any(ipaddress.ip_address(a.split("%")[0]) in net for a in addresses for net in deny):
        raise PermissionError(f"{host} resolves to a sandbox network")
    error: OSError = OSError(f"{host} has no address")
    for address in addresses:
        try:
            return await asyncio.open_connection(address, port)
        except OSError as exc:
            error = exc
    raise error


async def _handle(entries: list[Entry], deny: list[ipaddress.IPv4Network | ipaddress.IPv6Network],
                  reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    upstream: asyncio.StreamWriter | None = None
    try:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            return
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ")
            host, port, path = _target(method.upper(), target)
        except ValueError as exc:
            _reply(writer, "400 Bad Request", str(exc))
            return
        if not allowed(entries, host, port):
            print(f"refused {method} {host}:{port}", file=sys.stderr, flush=True)
            _reply(writer, "403 Forbidden", f"{host}:{port} is not in the network allowlist")
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(_connect(_normal_host(host), port, deny),
                                                          _CONNECT_TIMEOUT_S)
        except PermissionError as exc:
            _reply(writer, "403 Forbidden", str(exc))
            return
        except (OSError, TimeoutError) as exc:
            _reply(writer, "502 Bad Gateway", f"cannot connect to {host}:{port}: {exc}")
            return
        upstream = up_writer
        if method.upper() == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            hop = ("proxy-connection", "proxy-authorization", "connection", "keep-alive")
            headers = [h for h in lines[1:] if h and h.split(":", 1)[0].strip().lower() not in hop]
            # One request per connection: whatever follows goes to this (allowed) upstream anyway.
            up_writer.write("\r\n".join([f"{method} {path} {version}", *headers, "Connection: close", "", ""])
                           .encode("latin-1"))
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
    finally:
        if upstream is not None:
            upstream.close()
        writer.close()


async def _serve(port: int, entries: list[Entry], deny: list[ipaddress.IPv4Network | ipaddress.IPv6Network],
                 ) -> None:
    server = await asyncio.start_server(lambda r, w: _handle(entries, deny, r, w), "0.0.0.0", port,
                                        reuse_address=True, limit=_HEAD_LIMIT)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> None:
    """``<port> <JSON list of [host, port or null]> [<denied network>...]``: serve until killed."""
    entries: list[Entry] = [(str(h), None if p is None else int(p)) for h, p in json.loads(argv[1])]
    asyncio.run(_serve(int(argv[0]), entries, [ipaddress.ip_network(n) for n in argv[2:]]))


if __name__ == "__main__":
    main(sys.argv[1:])
