"""The second Docker node stand-in: its own daemon, containers, address, reachability both ways, and a stop that
leaves nothing behind (tests/standins/second_node.py)."""

from __future__ import annotations

import asyncio
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


def busybox_image() -> str:
    """The busybox base image on the host daemon (built before the session by tests/conftest.py)."""
    from agentcompass.environments.docker_images import build_base_image, content_tag
    from tests.conftest import PREBUILT, image_spec

    tag, method = image_spec("busybox")
    built = PREBUILT.get("busybox")
    if isinstance(built, BaseException):
        pytest.fail(f"building {tag} before the session failed: {built}")
    if built is None:
        asyncio.run(asyncio.wait_for(build_base_image(tag, method=method), 600))  # type: ignore[arg-type]
    return content_tag(tag, method)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def node_image(second_docker_node: SecondNode) -> str:
    image = busybox_image()
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
        assert proc.pid in node.netns_pids()
        deadline = time.monotonic() + 30
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
def test_stop_leaves_no_process_namespace_veth_mount_cgroup_or_rule_even_after_the_daemon_was_killed(
        second_docker_node: SecondNode, node_image: str) -> None:
    """A node of its own (the session's stays up): a container and a process in the namespace running, the
    daemon SIGKILLed (so containerd dies, its shim, the container and fuse-overlayfs live on), then stop()."""
    with claimed_node() as node:
        assert node_traces(node) and not any("iptables" in t for t in node_traces(node))
        # the daemon's rules live in the namespace's own tables
        assert "DOCKER" in node.run(["iptables-save"]).stdout
        assert node.load_images([node_image]) == [node_image]
        cid = node.docker("run", "-d", node_image, "sleep", "600").strip()
        container_pid = int(node.docker("inspect", "-f", "{{.State.Pid}}", cid).strip())
        sleeper = node.exec(["sleep", "600"])
        dockerd = next(p for p in json.loads(node.state_path.read_text())["procs"] if p["what"] == "dockerd")
        os.kill(dockerd["pid"], 9)
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
