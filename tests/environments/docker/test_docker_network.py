"""Network policies on real containers: what a container can reach under each mode, switched live.

Servers run on this machine only: one on 0.0.0.0 (reachable from containers through the bridge gateway)
and a "model" on 127.0.0.1 that only the model route may reach; one inside a container, for lateral probes;
HTTP servers on 0.0.0.0 as the hosts of ``allowlist`` policies.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from agentcompass._errors import ConfigError
from agentcompass.environments.docker.provider import DockerEnvironment, DockerProvider
from agentcompass.environments.docker.sweep import sweep_orphans
from agentcompass.environments.sandbox_programs.egress_proxy import allowed, parse_entry
from agentcompass.interfaces import ComponentContext, EnvOpenSpec, NetworkPolicy

from ..conftest import containers_of, docker_cli, networks_of, open_then_cancel

pytestmark = pytest.mark.timeout(120)

_PROBE = """
import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    print("OK", s.recv(64).decode().strip())
except Exception as e:
    print("FAIL", type(e).__name__)
"""


class Banner:
    """A TCP server that greets every connection with its name."""

    def __init__(self, name: str, host: str) -> None:
        self.name, self.host = name, host
        self.server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> Banner:
        async def greet(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            w.write(f"{self.name}\n".encode())
            await w.drain()
            w.close()

        self.server = await asyncio.start_server(greet, self.host, 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


class HttpServer(Banner):
    """An HTTP server answering every request with ``<name> <request target>``."""

    async def __aenter__(self) -> HttpServer:
        async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                head = await r.readuntil(b"\r\n\r\n")
                body = f"{self.name} {head.split()[1].decode()}".encode()
                w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
                await w.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            w.close()

        self.server = await asyncio.start_server(answer, self.host, 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self


# GET through the env's proxies (urllib reads them), or a CONNECT tunnel through $https_proxy ("tunnel").
_HTTP = """
import http.client, os, sys, urllib.error, urllib.parse, urllib.request
target, how = sys.argv[1], sys.argv[2]
try:
    if how == "tunnel":
        proxy = urllib.parse.urlsplit(os.environ["https_proxy"])
        c = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=10)
        host, port = target.rsplit(":", 1)
        c.set_tunnel(host, int(port))
        c.request("GET", "/tunnelled")
        print("OK", c.getresponse().read().decode())
    else:
        print("OK", urllib.request.urlopen(target, timeout=10).read().decode())
except urllib.error.HTTPError as e:
    print("HTTP", e.code, e.read().decode().strip())
except Exception as e:
    print("FAIL", e)
"""


async def _http(env: DockerEnvironment, target: str, how: str = "get") -> str:
    res = await env.exec(["python3", "-c", _HTTP, target, how], timeout=40)
    assert res.exit_code == 0, res
    return res.stdout.strip()


def _allow(*hosts: str) -> NetworkPolicy:
    return NetworkPolicy(mode="allowlist", hosts=list(hosts))


async def _reach(env: DockerEnvironment, host: str, port: int, wait: float = 2.0) -> str:
    res = await env.exec(["python3", "-c", _PROBE, host, str(port), str(wait)], timeout=wait + 20)
    assert res.exit_code == 0, res
    return res.stdout.strip()


@pytest_asyncio.fixture
async def host_server() -> AsyncIterator[Banner]:
    async with Banner("host", "0.0.0.0") as server:
        yield server


@pytest_asyncio.fixture
async def gateway(docker_provider: DockerProvider) -> str:
    return await docker_provider.networks._bridge_gateway()


def _spec(run_id: str, mode: str, task_id: str = "net", keep: bool = False) -> EnvOpenSpec:
    return EnvOpenSpec(run_id=run_id, task_id=task_id, network=NetworkPolicy(mode=mode),  # type: ignore[arg-type]
                       keep=keep)


def _networks(env: DockerEnvironment) -> dict[str, dict[str, object]]:
    """The networks the container is attached to, by name, as the daemon sees them."""
    info = json.loads(docker_cli("inspect", env.id))
    networks: dict[str, dict[str, object]] = info[0]["NetworkSettings"]["Networks"]
    return networks


async def _serve_inside(env: DockerEnvironment, port: int) -> str:
    """Start a TCP banner server on 0.0.0.0:``port`` inside ``env``; the container's own address."""
    server = f"""
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", {port})); s.listen()
while True:
    c, _ = s.accept(); c.sendall(b"inside\\n"); c.close()
"""
    await env.write_file("banner.py", server)
    await env.exec("nohup python3 banner.py >/dev/null 2>&1 &", timeout=10)
    for _ in range(100):  # until it listens
        if await _reach(env, "127.0.0.1", port, 1.0) == "OK inside":
            break
        await asyncio.sleep(0.1)
    return (await env.exec("hostname -i")).stdout.split()[0]


def test_allowlist_hosts_are_checked_before_anything_starts() -> None:
    provider = DockerProvider({}, ComponentContext())
    provider.check_network_policy(_allow("pypi.org", "files.pythonhosted.org:443", "10.0.0.5:8080",
                                         "*.example.com", "[::1]:443", "PyPI.org."))
    for hosts, where in [([], "hosts"), (["pypi.org", ""], "hosts\\[1\\]"), (["a", "b", "not a host"], "hosts\\[2\\]"),
                         (["pypi.org:0"], "hosts\\[0\\].*port"), (["pypi.org:http"], "port"),
                         (["*.com"], "wildcard"), (["http://pypi.org"], "hosts\\[0\\]"), (["127.1"], "hosts\\[0\\]"),
                         (["*"], "hosts\\[0\\]"), (["[::1"], "hosts\\[0\\]")]:
        with pytest.raises(ConfigError, match=where) as info:
            provider.check_network_policy(_allow(*hosts))
        assert info.value.field is not None and info.value.field.startswith("network.hosts"), hosts
    with pytest.raises(ConfigError, match="hosts"):
        provider.check_network_policy(NetworkPolicy(mode="public", hosts=["example.com"]))
    remote = DockerProvider({"docker_host": "tcp://10.0.0.1:2375"}, ComponentContext())
    for policy in (NetworkPolicy(mode="model"), _allow("pypi.org")):
        with pytest.raises(ConfigError, match=policy.mode):
            remote.check_network_policy(policy)


def test_allowlist_entries_match_names_wildcards_ports_and_addresses() -> None:
    entries = [parse_entry(h) for h in ("PyPI.org", "files.pythonhosted.org:443", "*.example.com",
                                        "10.0.0.5:8080", "[::1]:80")]
    assert allowed(entries, "pypi.org", 8443) and allowed(entries, "PYPI.ORG.", 443)
    assert allowed(entries, "files.pythonhosted.org", 443)
    assert not allowed(entries, "files.pythonhosted.org", 80)
    assert allowed(entries, "a.b.example.com", 1) and not allowed(entries, "example.com", 443)
    assert not allowed(entries, "evilexample.com", 443) and not allowed(entries, "pypi.org.evil.net", 443)
    assert allowed(entries, "10.0.0.5", 8080) and not allowed(entries, "10.0.0.5", 8081)
    assert allowed(entries, "::1", 80) and allowed(entries, "0:0::1", 80)
    # a name entry never lets an address through, nor an address in disguise
    assert not allowed(entries, "151.101.0.223", 443)
    for disguised in ("10.0.0.5.example.com.1", "0x0a000005", "167772165", "10.5"):
        assert not allowed(entries, disguised, 8080), disguised


async def test_public_reaches_a_server_on_the_host(docker_provider: DockerProvider, docker_run_id: str,
                                                   host_server: Banner, gateway: str) -> None:
    env = await docker_provider.open(_spec(docker_run_id, "public"))
    try:
        assert await _reach(env, gateway, host_server.port) == "OK host"
    finally:
        await env.close()


async def test_none_reaches_nothing_not_even_the_host(docker_provider: DockerProvider, docker_run_id: str,
                                                      host_server: Banner, gateway: str) -> None:
    env = await docker_provider.open(_spec(docker_run_id, "none"))
    try:
        # created without a network (not created on bridge, then disconnected)
        info = json.loads(docker_cli("inspect", env.id))[0]
        assert info["HostConfig"]["NetworkMode"] == "none"
        assert list(_networks(env)) == ["none"]
        assert (await _reach(env, gateway, host_server.port)).startswith("FAIL")
        interfaces = (await env.exec("ls /sys/class/net")).stdout.split()
        assert interfaces == ["lo"]
        # and switched live like any other: out of ``none`` onto bridge, and back
        await env.set_network_policy(NetworkPolicy(mode="public"))
        assert list(_networks(env)) == ["bridge"]
        assert await _reach(env, gateway, host_server.port) == "OK host"
        await env.set_network_policy(NetworkPolicy(mode="none"))
        assert (await _reach(env, gateway, host_server.port)).startswith("FAIL")
        assert (await env.exec("ls /sys/class/net")).stdout.split() == ["lo"]
    finally:
        await env.close()


async def test_model_mode_reaches_the_model_route_and_nothing_else(
        docker_provider: DockerProvider, docker_run_id: str, host_server: Banner, gateway: str) -> None:
    async with Banner("model", "127.0.0.1") as model:
        route_host, route_port = await docker_provider.ensure_model_route("127.0.0.1", model.port)
        assert await docker_provider.ensure_model_route("127.0.0.1", model.port) == (route_host, route_port)
        env = await docker_provider.open(_spec(docker_run_id, "model"))
        try:
            assert await _reach(env, route_host, route_port) == "OK model"
            # neither the host (by any of its addresses) nor the model's real address
            assert (await _reach(env, gateway, host_server.port, 1.0)).startswith("FAIL")
            assert (await _reach(env, gateway, model.port, 1.0)).startswith("FAIL")
            [network] = _networks(env)
            internal = json.loads(docker_cli("network", "inspect", network))[0]
            assert internal["Internal"] is True
            # the first address of its subnet would be the host's, had the bridge one
            first = str(next(ipaddress.ip_network(internal["IPAM"]["Config"][0]["Subnet"]).hosts()))
            assert (await _reach(env, first, host_server.port, 1.0)).startswith("FAIL")
        finally:
            await env.close()
    assert networks_of(docker_run_id), "a released network waits for the next environment until the provider closes"
    await docker_provider.aclose()
    assert networks_of(docker_run_id) == [] and containers_of(docker_run_id) == []


async def test_model_mode_containers_of_one_run_cannot_reach_each_other(
        docker_provider: DockerProvider, docker_run_id: str) -> None:
    async with Banner("model", "127.0.0.1") as model:
        route = await docker_provider.ensure_model_route("127.0.0.1", model.port)
        a, b = await asyncio.gather(*(docker_provider.open(_spec(docker_run_id, "model", task_id=t))
                                      for t in ("a", "b")))
        try:
            assert set(_networks(a)).isdisjoint(_networks(b)), "each environment has a network of its own"
            b_ip = await _serve_inside(b, 8099)
            assert await _reach(b, b_ip, 8099) == "OK inside"  # B's server answers on B's address...
            assert (await _reach(a, b_ip, 8099)).startswith("FAIL")  # ...but not to A
            assert await _reach(a, *route) == "OK model"
            assert await _reach(b, *route) == "OK model"
        finally:
            await asyncio.gather(a.close(), b.close())


async def test_a_route_added_after_the_open_reaches_open_and_reused_networks(
        docker_provider: DockerProvider, docker_run_id: str) -> None:
    first = await docker_provider.open(_spec(docker_run_id, "model", task_id="first"))
    network = set(_networks(first))
    await first.close()
    env = await docker_provider.open(_spec(docker_run_id, "model", task_id="second"))
    try:
        assert set(_networks(env)) == network, "the released network went to the next environment"
        async with Banner("model", "127.0.0.1") as model:
            route = await docker_provider.ensure_model_route("127.0.0.1", model.port)
            assert await _reach(env, *route) == "OK model"
    finally:
        await env.close()


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3])
async def test_a_cancelled_model_mode_open_leaves_nothing_behind(
        docker_provider: DockerProvider, docker_run_id: str, delay: float) -> None:
    async with Banner("model", "127.0.0.1") as model:
        await docker_provider.ensure_model_route("127.0.0.1", model.port)
        await open_then_cancel(docker_provider, _spec(docker_run_id, "model"), delay)
        assert len(containers_of(docker_run_id)) == 1  # the forwarder only
        await docker_provider.aclose()
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []


async def test_a_kept_model_mode_environment_keeps_its_network_until_cleanup(
        docker_provider: DockerProvider, docker_run_id: str) -> None:
    env = await docker_provider.open(_spec(docker_run_id, "model", keep=True))
    [network] = _networks(env)
    await env.close()
    await docker_provider.aclose()
    assert networks_of(docker_run_id) == [json.loads(docker_cli("network", "inspect", network))[0]["Id"][:12]]
    assert (await sweep_orphans(run_id=docker_run_id)).removed == 0  # kept, and its owner is alive anyway
    report = await sweep_orphans(run_id=docker_run_id, only_dead=False)
    assert report.errors == [] and report.networks == [network]
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []


async def test_policy_switches_on_the_live_container(docker_provider: DockerProvider, docker_run_id: str,
                                                     host_server: Banner, gateway: str) -> None:
    async with Banner("model", "127.0.0.1") as model:
        route = await docker_provider.ensure_model_route("127.0.0.1", model.port)
        env = await docker_provider.open(_spec(docker_run_id, "public"))
        try:
            await env.exec("echo survives > marker.txt")
            assert await _reach(env, gateway, host_server.port) == "OK host"
            await env.set_network_policy(NetworkPolicy(mode="none"))
            assert (await _reach(env, gateway, host_server.port, 1.0)).startswith("FAIL")
            await env.set_network_policy(NetworkPolicy(mode="model"))
            assert await _reach(env, *route) == "OK model"
            assert (await _reach(env, gateway, host_server.port, 1.0)).startswith("FAIL")
            assert [n.startswith("agentcompass-model-") for n in _networks(env)] == [True]
            await env.set_network_policy(NetworkPolicy(mode="public"))
            assert await _reach(env, gateway, host_server.port) == "OK host"
            assert (await env.exec("cat marker.txt")).stdout == "survives\n"
            with pytest.raises(ConfigError, match="hosts"):
                await env.set_network_policy(NetworkPolicy(mode="allowlist", hosts=["not a host"]))
        finally:
            await env.close()


async def test_model_route_rejects_a_bad_port(docker_provider: DockerProvider) -> None:
    with pytest.raises(ConfigError, match="model_port"):
        await docker_provider.ensure_model_route("127.0.0.1", 70000)


async def test_allowlist_reaches_listed_host_ports_through_the_proxy_and_nothing_else(
        docker_provider: DockerProvider, docker_run_id: str, host_server: Banner, gateway: str) -> None:
    async with HttpServer("listed", "0.0.0.0") as listed, HttpServer("other", "0.0.0.0") as other:
        env = await docker_provider.open(EnvOpenSpec(run_id=docker_run_id, task_id="allow",
                                                     network=_allow(f"{gateway}:{listed.port}", "pypi.org",
                                                                    "ac-egress-proxy")))
        try:
            assert await _http(env, f"http://{gateway}:{listed.port}/a?b=1") == "OK listed /a?b=1"
            assert await _http(env, f"{gateway}:{listed.port}", "tunnel") == "OK listed /tunnelled"
            # the same host on another port, through the proxy either way
            assert (await _http(env, f"http://{gateway}:{other.port}/")).startswith("HTTP 403")
            assert "403" in await _http(env, f"{gateway}:{other.port}", "tunnel")
            # a listed name that resolves into the sandboxes' networks (here: the proxy's own alias)
            assert "sandbox network" in await _http(env, "http://ac-egress-proxy:3128/")
            # ignoring the proxy: no route at all, not even to the listed port
            assert (await _reach(env, gateway, listed.port, 1.0)).startswith("FAIL")
            assert (await _reach(env, gateway, host_server.port, 1.0)).startswith("FAIL")
            no_proxy = await env.exec("env -u https_proxy -u http_proxy -u HTTP_PROXY -u HTTPS_PROXY python3 -c "
                                      f"'import urllib.request; urllib.request.urlopen(\"http://{gateway}:"
                                      f"{listed.port}/\", timeout=3)'", timeout=30)
            assert no_proxy.exit_code != 0
            # a variable given to the exec wins over the proxy's
            mine = await env.exec("echo $NO_PROXY", env={"NO_PROXY": "mine"})
            assert mine.stdout.strip() == "mine"
        finally:
            await env.close()
    await docker_provider.aclose()
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []


@pytest.mark.slow
async def test_allowlist_switches_live_with_none_public_and_another_allowlist(
        docker_provider: DockerProvider, docker_run_id: str, gateway: str) -> None:
    async with Banner("model", "127.0.0.1") as model, HttpServer("one", "0.0.0.0") as one, \
            HttpServer("two", "0.0.0.0") as two:
        route = await docker_provider.ensure_model_route("127.0.0.1", model.port)
        env = await docker_provider.open(_spec(docker_run_id, "public"))
        try:
            assert "proxy" not in (await env.exec("env")).stdout.lower()
            await env.set_network_policy(_allow(f"{gateway}:{one.port}"))
            assert await _http(env, f"http://{gateway}:{one.port}/x") == "OK one /x"
            assert (await _http(env, f"http://{gateway}:{two.port}/x")).startswith("HTTP 403")
            assert await _reach(env, *route) == "OK model", "the model route stays reachable, directly"
            assert route[0] in (await env.exec("echo $no_proxy")).stdout
            await env.set_network_policy(NetworkPolicy(mode="none"))
            assert (await env.exec("ls /sys/class/net")).stdout.split() == ["lo"]
            assert (await _http(env, f"http://{gateway}:{one.port}/x")).startswith("FAIL")
            await env.set_network_policy(NetworkPolicy(mode="public"))
            assert await _http(env, f"http://{gateway}:{two.port}/y") == "OK two /y"
            assert "proxy" not in (await env.exec("env")).stdout.lower()
            await env.set_network_policy(_allow(f"{gateway}:{two.port}"))
            assert await _http(env, f"http://{gateway}:{two.port}/z") == "OK two /z"
            assert (await _http(env, f"http://{gateway}:{one.port}/z")).startswith("HTTP 403"), "old allowlist gone"
            await env.set_network_policy(NetworkPolicy(mode="model"))
            assert await _reach(env, *route) == "OK model"
            assert (await _reach(env, "ac-egress-proxy", 3128, 1.0)).startswith("FAIL"), "no proxy in model mode"
        finally:
            await env.close()
        # the released network carries no proxy to its next environment
        nxt = await docker_provider.open(_spec(docker_run_id, "model", task_id="next"))
        try:
            assert (await _reach(nxt, "ac-egress-proxy", 3128, 1.0)).startswith("FAIL")
            assert await _reach(nxt, *route) == "OK model"
        finally:
            await nxt.close()
    await docker_provider.aclose()
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []
