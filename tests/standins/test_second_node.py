"""The second Docker node stand-in: its own daemon, containers, address, reachability both ways, and a stop that
leaves nothing behind (tests/standins/second_node.py)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.standins.second_node import (
    HOST_DOCKER_SOCKET,
    SecondNode,
    claimed_node,
    host_storage_driver,
    unix_get,
)

pytestmark = pytest.mark.docker_images("busybox")


def host_image(name: str) -> str:
    """Base image ``name`` on the host daemon (built before the session by tests/conftest.py)."""
    from agentcompass.environments.docker.images import build_base_image, content_tag
    from tests.conftest import PREBUILT, image_spec

    tag, method = image_spec(name)
    built = PREBUILT.get(name)
    if isinstance(built, BaseException):
        pytest.fail(f"building {tag} before the session failed: {built}")
    if built is None:
        asyncio.run(asyncio.wait_for(build_base_image(tag, method=method), 3600))  # type: ignore[arg-type]
    return content_tag(tag, method)  # type: ignore[arg-type]


@pytest.fixture
def base_image_on_host() -> str:
    return host_image("base")


@pytest.fixture(scope="module")
def node_image(second_docker_node: SecondNode) -> str:
    image = host_image("busybox")
    second_docker_node.load_images([image])
    return image


def host_cli(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60, check=True, env=env).stdout


def test_the_second_daemon_answers_with_its_own_identity_storage_and_containers(
        second_docker_node: SecondNode, node_image: str) -> None:
    node = second_docker_node
    assert node.is_running()
    info = json.loads(unix_get(str(node.socket_path), "/info")[1])
    host_info = json.loads(unix_get(HOST_DOCKER_SOCKET, "/info")[1])
    assert info["DockerRootDir"] == str(node.data_root) != host_info["DockerRootDir"]
    assert info["ID"] != host_info["ID"]
    assert f"agentcompass.node={node.name}" in info["Labels"]
    assert info["Driver"] == host_storage_driver()
    assert node.has_image(node_image)
    assert node.load_images([node_image]) == []  # already there: nothing copied

    name = f"second-node-test-{os.getpid()}"
    cid = node.docker("run", "-d", "--name", name, node_image, "sleep", "300").strip()
    try:
        assert cid in node.docker("ps", "-q", "--no-trunc").split()
        assert cid not in host_cli("ps", "-aq", "--no-trunc").split()
        assert name not in host_cli("ps", "-a", "--format", "{{.Names}}").split()
    finally:
        node.docker("rm", "-f", cid)


def test_a_container_on_the_node_reaches_a_server_on_the_host_end(second_docker_node: SecondNode,
                                                                  node_image: str) -> None:
    node = second_docker_node
    seen: dict[str, object] = {}
    with socket.socket() as server:
        server.bind((node.host_address, 0))
        server.listen(1)
        server.settimeout(60)
        port = server.getsockname()[1]

        def serve() -> None:
            try:
                conn, peer = server.accept()
            except OSError as exc:
                seen["error"] = exc
                return
            with conn:
                conn.settimeout(10)
                seen["peer"], seen["data"] = peer[0], conn.recv(100)
                conn.sendall(b"pong from host\n")

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        out = node.docker("run", "--rm", node_image, "sh", "-c",
                          f"echo ping from node | nc -w 10 {node.host_address} {port}", timeout=90)
        thread.join(30)
    assert "pong from host" in out
    assert seen.get("data") == b"ping from node\n"
    assert seen.get("peer") == node.address  # NATed to the node's address by the node's own daemon


def test_the_host_reaches_a_server_started_in_the_namespace(second_docker_node: SecondNode, tmp_path: Path) -> None:
    node = second_docker_node
    (tmp_path / "hello.txt").write_text("hello from the namespace")
    port = random.randint(20000, 40000)  # the namespace has nothing else listening
    proc = node.exec([sys.executable, "-m", "http.server", str(port), "--bind", node.address],
                     cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while proc.pid not in node.netns_pids():  # nsenter joins the namespace just after the fork, then execs
            assert proc.poll() is None, "the server exited before it was in the namespace"
            assert time.monotonic() < deadline, "the server never joined the namespace"
            time.sleep(0.05)
        while True:
            try:
                with urllib.request.urlopen(f"http://{node.address}:{port}/hello.txt", timeout=5) as resp:
                    body = resp.read().decode()
                break
            except OSError:
                assert proc.poll() is None, "the server in the namespace exited"
                assert time.monotonic() < deadline, "the server in the namespace never answered"
                time.sleep(0.2)
        assert body == "hello from the namespace"
        # the address exists only in the namespace: the same port on the host's loopback has no server
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    finally:
        node.stop_process(proc)
    assert proc.poll() is not None
    assert proc.pid not in node.netns_pids()


_CONNECT = """
import socket, sys, time
started = time.monotonic()
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=15) as s:
        print("OK", s.recv(64).decode().strip())
except OSError as e:
    print("FAIL", e.errno, round(time.monotonic() - started, 1))
"""


def test_the_node_reaches_every_host_address_and_is_refused_beyond_the_host(second_docker_node: SecondNode) -> None:
    node = second_docker_node
    addresses = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True,
                               text=True, timeout=10, check=True).stdout.split("\n")
    other = next(line.split()[3].split("/")[0] for line in addresses
                 if line.strip() and line.split()[1] != node.host_veth and "10.214." not in line)
    with socket.socket() as server:
        server.bind(("0.0.0.0", 0))
        server.listen(1)
        server.settimeout(30)
        port = server.getsockname()[1]

        def greet() -> None:
            with contextlib.suppress(OSError):
                conn, _ = server.accept()
                with conn:
                    conn.sendall(b"host\n")

        thread = threading.Thread(target=greet, daemon=True)
        thread.start()
        # another of the host's addresses (not the veth end) through the default route
        assert node.run([sys.executable, "-c", _CONNECT, other, str(port)]).stdout.strip() == "OK host"
        thread.join(10)
    # TEST-NET-3: beyond this host; refused at once (EHOSTUNREACH), not left to time out
    out = node.run([sys.executable, "-c", _CONNECT, "203.0.113.1", "80"]).stdout.split()
    assert out[:2] == ["FAIL", str(errno.EHOSTUNREACH)], out


def host_rules() -> str:
    """The host's iptables rules (nf_tables and, when present, legacy), without counters."""
    out = []
    for tool in ("iptables-save", "iptables-legacy-save"):
        if shutil.which(tool):
            out.append(subprocess.run([tool], capture_output=True, text=True, timeout=30).stdout)
    return "\n".join(line for line in "\n".join(out).splitlines() if line.startswith("-A "))


def node_traces(node: SecondNode) -> list[str]:
    """Anything of ``node`` that exists on this host."""
    traces = []
    if node.netns_path.exists():
        traces.append(f"netns {node.ns}")
    if Path(f"/sys/class/net/{node.host_veth}").exists():
        traces.append(f"veth {node.host_veth}")
    for path in (node.root, node.data_root):
        if path.exists():
            traces.append(f"dir {path}")
    with open("/proc/self/mountinfo") as fh:
        traces += [f"mount {line.split()[4]}" for line in fh if f"agentcompass-{node.name}" in line]
    for entry in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if f"agentcompass-{node.name}" in cmdline and state != "Z" and int(entry) != os.getpid():
            traces.append(f"process {entry}: {cmdline[:100]}")
    for top in node._cgroup_tops():
        traces.append(f"cgroup {top}")
    rules = host_rules()
    for mark in (node.host_veth, f"10.214.{node.index}.", f"10.215.{node.index}."):
        if mark in rules:
            traces.append(f"host iptables rule with {mark}")
    return traces


@pytest.mark.slow
def test_a_killed_daemon_restarts_with_its_containers_and_stop_then_leaves_nothing(
        second_docker_node: SecondNode, node_image: str) -> None:
    """A node of its own (the session's stays up): a container and a process in the namespace running, the
    daemon SIGKILLed (its containerd dies, its shim, the container and fuse-overlayfs live on), restarted (the
    container is still listed), SIGKILLed again, then stop() finds and kills what the crash left."""
    with claimed_node() as node:
        # the host's only rule for the node: refuse what it sends beyond this host
        [rule] = [r for r in host_rules().splitlines() if node.host_veth in r]
        assert "REJECT" in rule and node.ns in rule
        # the daemon's rules live in the namespace's own tables
        assert "DOCKER" in node.run(["iptables-save"]).stdout
        assert node.load_images([node_image]) == [node_image]
        cid = node.docker("run", "-d", node_image, "sleep", "600").strip()
        node.kill_daemon()
        assert not node.is_running() and node.daemon_pid() is None
        node.restart_daemon()
        assert node.is_running()
        assert cid in node.docker("ps", "-aq", "--no-trunc").split()
        node.docker("start", cid)
        container_pid = int(node.docker("inspect", "-f", "{{.State.Pid}}", cid).strip())
        sleeper = node.exec(["sleep", "600"])
        node.kill_daemon()
        forced = node.stop()
        assert any("stray" in f for f in forced), forced  # shim, container, fuse-overlayfs: found and killed
        assert sleeper.poll() is not None
        assert not Path(f"/proc/{container_pid}/cmdline").exists() or \
            Path(f"/proc/{container_pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        assert node_traces(node) == []
        assert node.stop() == []  # idempotent
    # the session's node was untouched
    assert second_docker_node.is_running()


def test_a_clean_stop_of_a_running_node_leaves_nothing(second_docker_node: SecondNode) -> None:
    with claimed_node() as node:
        assert node.is_running() and node.netns_pids()
        sleeper = node.exec(["sleep", "600"])
        assert node.stop() == []  # nothing needed forcing
        assert sleeper.poll() is not None
        assert node_traces(node) == []


_MODEL_MODE_ON_THE_NODE = """
import asyncio, json, socket, sys
from agentcompass.environments.docker.provider import DockerProvider
from agentcompass.interfaces import ComponentContext, EnvOpenSpec, NetworkPolicy

PROBE = '''
import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    print("OK", s.recv(64).decode().strip())
except Exception as e:
    print("FAIL", type(e).__name__)
'''

async def main(image, run_id, model_host, model_port):
    provider = DockerProvider({"image": image}, ComponentContext(run_id=run_id))
    out = {}
    try:
        out["host_address"] = await provider.host_address()
        route = await provider.ensure_model_route(model_host, model_port)
        env = await provider.open(EnvOpenSpec(run_id=run_id, task_id="t", network=NetworkPolicy(mode="model")))
        try:
            async def reach(host, port):
                res = await env.exec(["python3", "-c", PROBE, host, str(port), "3"], timeout=40)
                return res.stdout.strip()
            out["via_route"] = await reach(*route)
            out["direct"] = await reach(model_host, model_port)
        finally:
            await env.close()
    finally:
        await provider.aclose()
    print(json.dumps(out))

asyncio.run(asyncio.wait_for(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])), 240))
"""


@pytest.mark.slow
@pytest.mark.docker_images("base")
def test_the_docker_provider_in_the_namespace_enforces_the_model_policy_on_the_node(
        second_docker_node: SecondNode, base_image_on_host: str) -> None:
    """What a Ray node actor does: our docker provider run inside the namespace (DOCKER_HOST = the node) opens
    a ``model``-mode sandbox on the node's daemon, whose model route (a relay on the node's bridge gateway)
    reaches a model server on the host end, while the server's own address is unreachable from the sandbox."""
    node = second_docker_node
    node.load_images([base_image_on_host])
    run_id = f"pytest-second-node-{uuid.uuid4().hex[:8]}"
    with socket.socket() as model:
        model.bind((node.host_address, 0))
        model.listen(8)
        model.settimeout(1)
        port = model.getsockname()[1]
        stop = threading.Event()

        def greet() -> None:
            while not stop.is_set():
                try:
                    conn, _ = model.accept()
                except OSError:
                    continue
                with conn:
                    conn.sendall(b"model on the host\n")

        thread = threading.Thread(target=greet, daemon=True)
        thread.start()
        try:
            res = node.run([sys.executable, "-c", _MODEL_MODE_ON_THE_NODE, base_image_on_host, run_id,
                            node.host_address, str(port)], timeout=300, check=False)
        finally:
            stop.set()
            thread.join(10)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["host_address"] == node.bip.split("/")[0]  # the node's bridge gateway, not the host's docker0
    assert out["via_route"] == "OK model on the host"
    assert out["direct"].startswith("FAIL")
    label = f"label=agentcompass.run_id={run_id}"
    assert node.docker("ps", "-aq", "--filter", label).split() == []
    assert node.docker("network", "ls", "-q", "--filter", label).split() == []
    assert host_cli("ps", "-aq", "--filter", label).split() == []


def test_a_registry_on_host_loopback_serves_both_daemons_by_one_ref(second_docker_node: SecondNode,
                                                                     node_image: str, tmp_path: Path) -> None:
    """``share_host_port``: the node pulls ``127.0.0.1:<port>/<name>`` from a registry listening on the host's
    loopback (Debian's docker-registry), the same ref the host daemon pushed; each daemon trusts 127.0.0.0/8."""
    from tests.environments.registry import start_registry

    node = second_docker_node
    registry = start_registry(tmp_path)
    ref = f"{registry.host}/agentcompass-test/second-node:{uuid.uuid4().hex[:8]}"
    try:
        host_cli("tag", node_image, ref)
        host_cli("push", ref)
        relays = node.share_host_port(int(registry.host.rsplit(":", 1)[1]))
        assert relays and all(r.poll() is None for r in relays)
        node.docker("pull", ref, timeout=120)
        assert node.has_image(ref)
        node.docker("rmi", ref)
        for relay in relays:
            node.stop_process(relay)
        assert all(r.poll() is not None for r in relays)
    finally:
        subprocess.run(["docker", "rmi", ref], capture_output=True, timeout=60)
        registry.stop()
