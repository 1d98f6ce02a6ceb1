"""A two-node Ray cluster on this machine: the head on the host (its Docker daemon: the host's), a worker node
inside a ``SecondNode``'s network namespace (its Docker daemon: the node's, through DOCKER_HOST).

    cluster = RayCluster(node).start_head()      # ray start --head --node-ip-address <node.host_address>
    cluster.start_worker()                        # ray start --address ... inside the namespace
    cluster.kill_worker_raylet()                  # SIGKILL the worker node's raylet (node loss)
    cluster.stop()                                # every process started, by its pid

Every process is started with ``--block`` in a session of its own and stopped by its pid (its process group:
SIGTERM, then SIGKILL); Ray's own children that outlive it (found by the cluster's temp dir in their command
line) are killed by pid too. Every wait has a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.standins.second_node import SecondNode, process_start_time

RAY = str(Path(sys.executable).parent / "ray")
#: only catches a hang: on a loaded 2-core machine a node's raylet, agents and the node watcher each import Ray
START_TIMEOUT_S = 300.0
#: ``python -c _NODE_WATCHER ADDRESS N``: exits 0 once the cluster at ADDRESS has N live nodes (connecting again
#: while the head is not up yet)
_NODE_WATCHER = """
import sys, time, ray
address, n, at_most = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "at_most"
while True:
    try:
        ray.init(address=address, log_to_driver=False)
        break
    except Exception:
        time.sleep(1)
while (sum(1 for node in ray.nodes() if node["Alive"]) > n) if at_most else \
        (sum(1 for node in ray.nodes() if node["Alive"]) < n):
    time.sleep(0.5)
"""
STOP_GRACE_S = 10.0
OBJECT_STORE_BYTES = 100 * 1024 * 1024
def auth_env() -> dict[str, str]:
    """The cluster's token authentication (Ray 2.60 turns it on for ``ray start``): Ray's own default token file,
    ``~/.ray/auth_token``, created (0600, random) when a fresh machine has none, given to the head, the worker and the
    driver. Ray's default and not a file of our own: a local trial cluster started earlier in the same process
    (``ray.init()``) has already loaded that file's token and Ray keeps it for the whole process."""
    path = Path.home() / ".ray" / "auth_token"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another test process made it first: theirs is the token
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(path)}


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _pids_matching(text: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and text in _cmdline(int(entry)) and int(entry) != os.getpid():
            out.append(int(entry))
    return out


def _descendants(roots: list[int]) -> list[int]:
    """Every living process below ``roots`` (Ray's raylet, its workers, agents: some in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    starts = {p: process_start_time(p) for p in pids}
    until = time.monotonic() + timeout
    while True:
        alive = [p for p in pids if starts[p] is not None and process_start_time(p) == starts[p]
                 and not _zombie(p)]
        if not alive or time.monotonic() > until:
            return alive
        time.sleep(0.1)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


class RayCluster:
    """A Ray head on the host and a worker node in ``node``'s namespace."""

    def __init__(self, node: SecondNode, *, cpus: int = 2, head_resources: dict[str, float] | None = None,
                 worker_resources: dict[str, float] | None = None) -> None:
        self.node = node
        self.cpus = cpus
        #: custom resources of each node (``ray start --resources``), e.g. to pick nodes with ``node_resource``
        self.head_resources = head_resources or {}
        self.worker_resources = worker_resources or {}
        self.port = _free_port(node.host_address)
        self.temp_dir = tempfile.mkdtemp(prefix="acray")  # short: Ray's socket paths live under it
        self.head: subprocess.Popen[Any] | None = None
        self.worker: subprocess.Popen[Any] | None = None

    @property
    def address(self) -> str:
        return f"{self.node.host_address}:{self.port}"

    def _common(self, resources: dict[str, float]) -> list[str]:
        extra = ["--resources", json.dumps(resources)] if resources else []
        # the dashboard agent's HTTP port is fixed (52365) by default and is bound on the loopback too: a free one,
        # so no other Ray process of this machine (a driver's local cluster) can keep this node from starting
        return ["--num-cpus", str(self.cpus), "--object-store-memory", str(OBJECT_STORE_BYTES),
                "--dashboard-agent-listen-port", str(_free_port("127.0.0.1")),
                "--disable-usage-stats", "--block", *extra]

    def _log(self, name: str) -> int:
        """A file descriptor on ``<temp_dir>/<name>.log`` for a child's output (the caller closes its copy)."""
        return os.open(os.path.join(self.temp_dir, f"{name}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def start_head(self) -> RayCluster:
        env = {**{k: v for k, v in os.environ.items() if k not in ("DOCKER_HOST", "RAY_ADDRESS")}, **auth_env()}
        log = self._log("head")
        self.head = subprocess.Popen(
            [RAY, "start", "--head", "--node-ip-address", self.node.host_address, "--port", str(self.port),
             "--include-dashboard", "false", "--temp-dir", self.temp_dir, *self._common(self.head_resources)],
            env=env, start_new_session=True, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT)
        os.close(log)
        self._wait_nodes(1, self.head, "head")
        return self

    def start_worker(self) -> RayCluster:
        """Start (or start again) the worker node in the namespace; wait until the cluster has two live nodes."""
        env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, **auth_env()}
        if self.worker is not None:
            # started again: the cluster must first have seen the lost node die, else it still counts that one and
            # "two live nodes" holds before the new one has joined
            self._wait_nodes(1, None, "worker", at_most=True)
        log = self._log("worker")
        self.worker = self.node.exec(
            [RAY, "start", "--address", self.address, "--node-ip-address", self.node.address,
             *self._common(self.worker_resources)],
            env=env, stdout=log, stderr=subprocess.STDOUT)
        os.close(log)
        self._wait_nodes(2, self.worker, "worker")
        return self

    def _driver_env(self) -> dict[str, str]:
        return {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, **auth_env()}

    def _wait_nodes(self, n: int, proc: subprocess.Popen[Any] | None, name: str, *, at_most: bool = False) -> None:
        """Wait until the cluster has ``n`` live nodes (``at_most``: no more than ``n``); fail at once, naming it,
        when ``proc`` (``ray start``) exits first. One driver process connects (again, until it can) and polls: a
        driver per poll imported Ray every second, a few CPU-seconds each on a loaded machine."""
        def start_watcher() -> subprocess.Popen[bytes]:
            return subprocess.Popen([sys.executable, "-c", _NODE_WATCHER, self.address, str(n),
                                     "at_most" if at_most else "at_least"],
                                    env=self._driver_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)

        watcher = start_watcher()
        until = time.monotonic() + START_TIMEOUT_S
        try:
            while time.monotonic() < until:
                try:
                    if watcher.wait(1.0) == 0:
                        return
                    watcher = start_watcher()  # it crashed: again
                except subprocess.TimeoutExpired:
                    pass
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"`ray start` of the {name} exited with {proc.returncode} before the cluster "
                                       f"at {self.address} had {n} live nodes:\n{self._tail(name)}")
        finally:
            if watcher.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(watcher.pid, signal.SIGKILL)
                watcher.wait()
        raise RuntimeError(f"the Ray cluster at {self.address} did not reach {'at most ' if at_most else ''}{n} live "
                           f"nodes in {START_TIMEOUT_S}s:"
                           f"\n{self._tail(name)}")

    def _tail(self, name: str, lines: int = 40) -> str:
        """The end of ``ray start``'s output and of the session's raylet logs: why a node did not come up."""
        out = []
        logs = Path(self.temp_dir, "session_latest", "logs")
        for path in [Path(self.temp_dir, f"{name}.log"), *sorted(logs.glob("raylet*.err")),
                     *sorted(logs.glob("raylet*.out"))[-2:], *sorted(logs.glob("dashboard_agent*.log"))[-2:]]:
            try:
                text = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)

    def worker_raylet(self) -> int | None:
        """The pid of the worker node's raylet."""
        for pid in self.node.netns_pids():
            if "raylet" in _cmdline(pid).split(" ")[0]:
                return pid
        return None

    def kill_worker_raylet(self) -> int:
        """SIGKILL the worker node's raylet (the node is lost to the cluster); its pid."""
        pid = self.worker_raylet()
        if pid is None:
            raise RuntimeError("the worker node has no raylet")
        os.kill(pid, signal.SIGKILL)
        return pid

    def wait_worker_gone(self, timeout: float = 60.0) -> list[int]:
        """Wait until the worker node's Ray processes are gone (they exit when their raylet dies); those left."""
        ray_pids = [p for p in self.node.netns_pids() if self.temp_dir in _cmdline(p) or "ray" in _cmdline(p)]
        if self.worker is not None:
            ray_pids.append(self.worker.pid)
        return _wait_gone(ray_pids, timeout)

    def _stop(self, proc: subprocess.Popen[Any] | None) -> None:
        if proc is None or proc.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(STOP_GRACE_S)
                return
            except subprocess.TimeoutExpired:
                continue

    def _disconnect_this_process(self) -> None:
        """This process's Ray driver lets go of the cluster before its head stops: Ray terminates a driver whose GCS
        has been gone for 60 s, which took down an xdist worker mid-test a minute after an earlier test's cluster
        stopped (CI under stress-ng: 'Failed to connect to GCS within 60 seconds ... The program will terminate')."""
        ray = sys.modules.get("ray")
        if ray is None or not ray.is_initialized():
            return
        try:
            gcs = str(ray.get_runtime_context().gcs_address)
        except Exception:  # a half-made connection: let it go too
            gcs = self.address
        if gcs == self.address:
            ray.shutdown()

    def stop(self) -> list[int]:
        """Stop the worker and the head by their pids, then any Ray process of this cluster still running (by
        pid); the pids that had to be killed that way."""
        self._disconnect_this_process()
        below = {p: process_start_time(p) for p in _descendants(
            [p.pid for p in (self.head, self.worker) if p is not None and p.poll() is None])}
        if self.worker is not None:
            self.node.stop_process(self.worker)
            self._stop(self.worker)
        self._stop(self.head)
        # the same processes (start time unchanged), not pids reused since
        strays = [p for p, started in below.items() if started is not None and process_start_time(p) == started
                  and not _zombie(p)]
        strays += _pids_matching(self.temp_dir)
        strays += [p for p in self.node.netns_pids() if "ray" in _cmdline(p)]
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _wait_gone(strays, STOP_GRACE_S)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return strays
