"""A second Docker "node" on this machine: Debian's ``dockerd`` in its own network namespace with its own address.

    node = SecondNode().start()          # the fixture ``second_docker_node`` gives one per session (a slot)
    node.docker_host                     # unix:///run/agentcompass-node2/docker.sock (fixture: .../slot<i>/...)
    node.address, node.host_address      # 10.214.0.2 (in the namespace), 10.214.0.1 (the host end)
    node.load_images([ref])              # docker save | docker -H <node> load, with every host tag of ref
    proc = node.exec([sys.executable, "-m", "ray", ...])     # inside the namespace, DOCKER_HOST = the node
    node.stop_process(proc)              # SIGTERM then SIGKILL to its process group, by its pid
    node.run(argv) / node.docker(*args)  # to completion, in the namespace / the CLI against the node
    node.share_host_port(port)           # 127.0.0.1:port in the namespace -> the host's 127.0.0.1:port
    node.kill_daemon(); node.restart_daemon()                # node loss and return (containers kept)
    node.stop()                          # idempotent: processes, mounts, cgroups, namespace, veth, rule, dirs

    python -m tests.standins.second_node start [--name N --index I --tcp-port P --load IMAGE ...] | stop | status

What this machine showed (Debian 12, docker.io 20.10.24, cgroup v1, fuse-overlayfs, no systemd):

* ``ip netns exec`` cannot run dockerd here: it unshares the mount namespace and remounts ``/sys`` for the
  network namespace, which detaches ``/sys/fs/cgroup`` (cgroup v1 mounts), so runc finds no cgroups. Every
  process is started with ``nsenter --net=/run/netns/<ns>`` instead: only the network namespace changes, the
  mounts (cgroups, ``/dev/fuse``, the daemon's fuse-overlayfs mounts) stay the host's. ``/sys/class/net`` then
  still lists the host's interfaces; netlink (``ip``, getifaddrs, psutil) shows the namespace's. nsenter
  execs the command, so ``Popen.pid`` is the process itself.
* The host's ``/etc/docker/daemon.json`` sets ``data-root``: passing ``--data-root`` next to it is a startup
  error ("specified both as a flag and in the configuration file"), so the node gets its own ``--config-file``
  holding every setting.
* containerd: each dockerd runs its own managed containerd, at ``<exec-root>/containerd/containerd.sock``
  (the host daemon's is under ``/var/run/docker/containerd``; there is no system ``/run/containerd/
  containerd.sock``, which dockerd would otherwise share). The node also gets its own containerd namespaces
  and its own cgroup parent, so nothing collides even with a shared containerd. Shims outlive containerd by
  design, and a SIGKILLed dockerd leaves its shims, containers and fuse-overlayfs processes running (its
  containerd dies with it: parent-death signal): stop() kills, by pid, what is left in the namespace, in the
  node's cgroup parent, or is one of the daemon's helper programs naming the node's directories.
* Restarting a killed daemon: its pidfile and its containerd's name pids that are zombies until pid 1 reaps
  them; dockerd takes them for live processes ("pid file found", or it waits on the dead containerd and
  fails with "timeout waiting for containerd to start"), so restart_daemon() removes both pidfiles first.
  The restarted daemon still lists the old containers (stopped: no live-restore).
* Identity: the engine ID in ``/info`` comes from ``/etc/docker/key.json`` unless ``deprecated-key-path``
  points elsewhere; without it the node has the host daemon's ID. The node also carries the daemon label
  ``agentcompass.node=<name>``. Its hostname (``/info`` Name) is the host's: same UTS namespace.
* ``tcp_port`` (the API on tcp://<address>:<port>, no TLS) makes dockerd 20.10 wait 15 s before starting.
* Storage: the same driver as the host daemon (asked from its ``/info``; fuse-overlayfs here, needs
  ``/dev/fuse``), data-root ``/var/lib/agentcompass-<name>``.
* iptables: the node's dockerd writes its rules (docker0 NAT, isolation chains, the ``model`` policy's
  internal networks) into the namespace's own netfilter tables, which vanish with the namespace. Host <-> node
  traffic is INPUT/OUTPUT on the host's veth end, never FORWARD, and node containers are MASQUERADEd to the
  node address by the node's dockerd, so the host needs no NAT or forwarding. No internet from the node: the
  host's ``FORWARD DROP`` policy would silently drop it (a DNS lookup in the namespace then waits 10 s, a
  pull 20 s), so the host gets one rule, ``FORWARD -i <host veth> -j REJECT`` (admin-prohibited: an
  immediate "no route to host"), commented with the namespace's name and removed by stop(). The host's
  iptables is nf_tables with stale legacy tables (``iptables -S`` warns); the namespace starts clean. The
  node's ``/etc/resolv.conf`` is the host's (nsenter keeps the mounts); its nameserver is unreachable.
* Addresses: the veth pair takes ``10.214.<index>.0/30``, the node's docker0 ``10.215.<index>.1/24``, its
  user networks ``10.216.0.0/16``: none collides with the host's docker0 (172.17/16), the host daemon's
  user networks (172.18+), or the docker provider's ``model`` networks (``10.213.0.0/16``, see
  agentcompass/environments/docker/network.py), and the node's bridge gateway differs from the host's, so
  the provider's "is the gateway an address of this machine" check answers truthfully in either namespace.
  The node's daemon treats ``10.214.<index>.0/30`` as an insecure registry (a registry listening on the host
  end answers plain HTTP).
* ``ip netns del`` destroys the veth pair asynchronously: stop() deletes the host end itself and waits for it.

Every process is recorded (pid and kernel start time) in ``/run/agentcompass-<name>/state.json`` and stopped
by that pid, so ``stop`` from another process (the CLI) works too; a pid whose start time differs is a reused
pid and is left alone. Every wait has a deadline.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import http.client
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HOST_DOCKER_SOCKET = "/var/run/docker.sock"
HOST_DOCKER_PIDFILE = "/var/run/docker.pid"
NETNS_DIR = Path("/run/netns")
#: the programs a node's dockerd starts outside its namespace's process list (matched by name prefix)
DAEMON_HELPERS = ("dockerd", "containerd", "fuse-overlayfs", "docker-proxy", "runc")
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
#: how long a stopped process gets between SIGTERM and SIGKILL
TERM_GRACE_S = 10.0
LOCK_TIMEOUT_S = 120.0
LOAD_TIMEOUT_S = 900.0


# ----------------------------------------------------------------------------- small helpers


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def unix_get(socket_path: str, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
    """GET ``path`` from the Docker API on ``socket_path``: (status, body)."""
    conn = _UnixHTTPConnection(socket_path, timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read(16 << 20)
    finally:
        conn.close()


def _run(argv: Sequence[str], *, timeout: float = 30.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=check,
                          stdin=subprocess.DEVNULL)


def process_start_time(pid: int) -> str | None:
    """The kernel start time of ``pid`` (field 22 of /proc/<pid>/stat), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _is_zombie_or_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def find_dockerd() -> str:
    """The binary of the running host daemon (``/proc/<pid>/exe`` from its pidfile), else ``dockerd`` on PATH."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(Path(HOST_DOCKER_PIDFILE).read_text().strip())
        exe = os.readlink(f"/proc/{pid}/exe")
        if os.access(exe, os.X_OK):
            return exe
    found = shutil.which("dockerd") or ("/usr/sbin/dockerd" if os.access("/usr/sbin/dockerd", os.X_OK) else None)
    if not found:
        raise RuntimeError("no dockerd binary (apt-get install docker.io)")
    return found


def host_storage_driver() -> str:
    """The storage driver of the host daemon, or ``vfs`` when it cannot be asked."""
    with contextlib.suppress(OSError, ValueError, http.client.HTTPException):
        status, body = unix_get(HOST_DOCKER_SOCKET, "/info")
        if status == 200:
            return str(json.loads(body)["Driver"])
    return "vfs"


def missing_requirements() -> str | None:
    """Why a second node cannot run here (not root, a missing tool), or None."""
    if os.geteuid() != 0:
        return "a second Docker node needs root (network namespaces, veth, dockerd)"
    for tool in ("ip", "nsenter", "docker"):
        if not shutil.which(tool):
            return f"{tool} is missing"
    try:
        find_dockerd()
    except RuntimeError as exc:
        return str(exc)
    return None


# ----------------------------------------------------------------------------- the node


@dataclass
class SecondNode:
    """A Docker daemon in network namespace ``agentcompass-<name>`` at ``10.214.<index>.2``."""

    name: str = "node2"
    index: int = 0
    #: also serve the Docker API on tcp://<address>:<tcp_port> (unauthenticated; reachable from this host only;
    #: dockerd 20.10 then deliberately delays its start by 15 s)
    tcp_port: int | None = None
    #: default: the host daemon's driver
    storage_driver: str | None = None
    start_timeout: float = START_TIMEOUT_S
    _procs: dict[int, subprocess.Popen[Any]] = field(default_factory=dict, init=False, repr=False)
    #: the state file is read-modified-written by exec() and stop_process(), possibly from several threads
    _state_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        if not (self.name.isascii() and self.name.isalnum() and self.name.islower() and 1 <= len(self.name) <= 10):
            raise ValueError(f"name: 1-10 lowercase letters/digits (it names interfaces), got {self.name!r}")
        if not 0 <= self.index <= 255:
            raise ValueError(f"index: 0..255 (the third octet of 10.214.<index>.0/30), got {self.index}")

    # -- names and addresses

    @property
    def ns(self) -> str:
        """The network namespace (``/run/netns/<ns>``)."""
        return f"agentcompass-{self.name}"

    @property
    def host_veth(self) -> str:
        return f"ac-{self.name}-h"

    @property
    def ns_veth(self) -> str:
        return f"ac-{self.name}-n"

    @property
    def host_address(self) -> str:
        """The host end of the veth pair: how the node reaches this host."""
        return f"10.214.{self.index}.1"

    @property
    def address(self) -> str:
        """The node's own address (in the namespace): how the host reaches the node."""
        return f"10.214.{self.index}.2"

    @property
    def subnet(self) -> str:
        return f"10.214.{self.index}.0/30"

    @property
    def bip(self) -> str:
        return f"10.215.{self.index}.1/24"

    @property
    def root(self) -> Path:
        """Socket, pidfile, exec-root, config, log and state of the node."""
        return Path(f"/run/agentcompass-{self.name}")

    @property
    def data_root(self) -> Path:
        return Path(f"/var/lib/agentcompass-{self.name}")

    @property
    def exec_root(self) -> Path:
        return self.root / "exec"

    @property
    def socket_path(self) -> Path:
        return self.root / "docker.sock"

    @property
    def docker_host(self) -> str:
        """DOCKER_HOST of the node's daemon (a unix socket: the docker provider treats it as a local daemon)."""
        return f"unix://{self.socket_path}"

    @property
    def docker_tcp(self) -> str | None:
        return f"tcp://{self.address}:{self.tcp_port}" if self.tcp_port else None

    @property
    def cgroup_parent(self) -> str:
        return f"/agentcompass-{self.name}"

    @property
    def log_path(self) -> Path:
        return self.root / "dockerd.log"

    @property
    def state_path(self) -> Path:
        return self.root / "state.json"

    @property
    def netns_path(self) -> Path:
        return NETNS_DIR / self.ns

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """os.environ with DOCKER_HOST pointing at the node's daemon; or ``base`` with that DOCKER_HOST unless
        ``base`` has its own."""
        if base is None:
            return dict(os.environ, DOCKER_HOST=self.docker_host)
        return {"DOCKER_HOST": self.docker_host, **base}

    # -- lifecycle

    def start(self, *, replace: bool = False) -> SecondNode:
        """Create the namespace and veth pair, start dockerd in it, wait until ``/_ping`` answers.

        A node of the same name already running is an error, or (``replace``) stopped first by its recorded
        pids. Leftovers of a dead one are always cleaned up first. Anything started is stopped on failure."""
        problem = missing_requirements()
        if problem:
            raise RuntimeError(problem)
        with self._lock():
            alive = [p for p in self._recorded() if self._same_process(p)]
            if alive and not replace:
                raise RuntimeError(f"node {self.name} is already running (pids {[p['pid'] for p in alive]}); "
                                   f"stop it: python -m tests.standins.second_node stop --name {self.name}")
            self._teardown()
            try:
                self._setup_network()
                self._start_dockerd()
            except BaseException:
                self._teardown()
                raise
        return self

    def stop(self) -> list[str]:
        """Stop everything the node started (by pid) and remove its namespace, veth, mounts, cgroups and
        directories. Idempotent; returns what it had to force (SIGKILLs, leftover processes or mounts)."""
        with self._lock():
            return self._teardown()

    def __enter__(self) -> SecondNode:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def is_running(self) -> bool:
        """Whether the daemon answers ``/_ping``."""
        try:
            status, body = unix_get(str(self.socket_path), "/_ping", timeout=5)
        except (OSError, http.client.HTTPException):
            return False
        return status == 200 and body == b"OK"

    # -- the daemon's own failures (node loss)

    def daemon_pid(self) -> int | None:
        """The pid of the node's running dockerd, or None."""
        entry = next((p for p in self._recorded() if p["what"] == "dockerd"), None)
        return int(entry["pid"]) if entry and self._same_process(entry) else None

    def kill_daemon(self) -> None:
        """SIGKILL the node's dockerd by its pid, as a crash would: its containerd dies with it (parent-death
        signal), container shims, containers and fuse-overlayfs mounts live on, the socket stops answering."""
        pid = self.daemon_pid()
        if pid is None:
            raise RuntimeError(f"the dockerd of node {self.name} is not running")
        self._stop_pid(pid, process_start_time(pid), group=False, timeout=0)
        self._forget(pid)

    def restart_daemon(self) -> None:
        """Stop the node's dockerd (by its pid, if it still runs) and start it again on the same namespace,
        data-root and exec-root; returns once ``/_ping`` answers. Its containers are still listed afterwards
        (running ones stopped by the restart: no live-restore)."""
        with self._lock():
            pid = self.daemon_pid()
            if pid is not None:
                self._stop_pid(pid, process_start_time(pid), group=False, timeout=STOP_TIMEOUT_S)
                self._forget(pid)
            self._start_dockerd()

    # -- processes in the namespace

    def exec(self, argv: Sequence[str], *, env: dict[str, str] | None = None, **popen: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` inside the node's network namespace, in a session of its own, with :meth:`env`
        (DOCKER_HOST = the node); recorded, and stopped by its pid in stop() if still running."""
        if not self.netns_path.exists():
            raise RuntimeError(f"node {self.name} is not started (no {self.netns_path})")
        popen.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(self._in_ns(argv), env=self.env(env), start_new_session=True, **popen)
        self._record(proc, what=" ".join(argv)[:200], group=True)
        return proc

    def run(self, argv: Sequence[str], *, timeout: float = 60.0,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` in the namespace to completion (killed after ``timeout`` s)."""
        return subprocess.run(self._in_ns(argv), capture_output=True, text=True, timeout=timeout, check=check,
                              env=self.env(), stdin=subprocess.DEVNULL)

    def docker(self, *args: str, timeout: float = 60.0) -> str:
        """The docker CLI against the node's daemon; its stdout (CalledProcessError on failure)."""
        return _run(["docker", "-H", self.docker_host, *args], timeout=timeout).stdout

    def stop_process(self, proc: subprocess.Popen[Any] | int, timeout: float = TERM_GRACE_S) -> bool:
        """SIGTERM ``proc``'s process group (its pid), SIGKILL after ``timeout``; True if it had to kill."""
        pid = proc if isinstance(proc, int) else proc.pid
        entry = next((p for p in self._recorded() if p["pid"] == pid), None)
        if entry is not None:
            group, start = bool(entry["group"]), entry["start"]
        else:
            start = process_start_time(pid)
            try:
                group = os.getpgid(pid) == pid
            except ProcessLookupError:
                group = False
        killed = self._stop_pid(pid, start, group=group, timeout=timeout)
        self._forget(pid)
        return killed

    def share_host_port(self, port: int, *, timeout: float = 20.0) -> list[subprocess.Popen[Any]]:
        """Make ``127.0.0.1:<port>`` in the namespace reach the host's ``127.0.0.1:<port>`` (a registry, a
        model server bound to loopback), so one address (an image ref ``127.0.0.1:<port>/...``, which every
        daemon trusts over plain HTTP) works on both daemons. A relay in the namespace forwards to the host
        end, where a host-side relay forwards to loopback (unless the service already listens there, e.g. on
        0.0.0.0). Returns the relays started; stop() stops them by pid."""
        relays = []
        try:
            with socket.create_connection((self.host_address, port), timeout=2):
                pass
        except OSError:
            relays.append(self._relay([self.host_address, str(port), "127.0.0.1", str(port)], in_ns=False,
                                      timeout=timeout))
        relays.append(self._relay(["127.0.0.1", str(port), self.host_address, str(port)], in_ns=True,
                                  timeout=timeout))
        return relays

    def _relay(self, args: list[str], *, in_ns: bool, timeout: float) -> subprocess.Popen[Any]:
        argv = [sys.executable, "-m", "tests.standins.tcp_relay", *args]
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        log = self.root / f"relay-{'ns' if in_ns else 'host'}-{args[1]}.log"
        with open(log, "ab") as err:
            popen: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": err, "cwd": REPO}
            if in_ns:
                proc = self.exec(argv, env=env, **popen)
            else:
                proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, start_new_session=True, **popen)
                self._record(proc, what=" ".join(argv)[:200], group=True)
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready or proc.stdout.readline().strip() != b"ready":
            self.stop_process(proc)
            raise RuntimeError(f"relay {' '.join(args)} did not start within {timeout:.0f}s: "
                               f"{log.read_text(errors='replace')[-2000:]}")
        return proc

    def netns_pids(self) -> list[int]:
        """Pids of every process whose network namespace is the node's (``ip netns pids``)."""
        if not self.netns_path.exists():
            return []
        out = _run(["ip", "netns", "pids", self.ns], check=False).stdout
        return [int(p) for p in out.split() if p.isdigit()]

    # -- images

    def has_image(self, ref: str) -> bool:
        status, _ = unix_get(str(self.socket_path), f"/images/{ref}/json")
        return status == 200

    def load_images(self, refs: Sequence[str], *, timeout: float = LOAD_TIMEOUT_S) -> list[str]:
        """Copy images from the host daemon into the node (``docker save | docker -H <node> load``) with every
        tag they have on the host, skipping those the node has; returns the refs it copied. No registry, no
        internet. (A registry on ``host_address`` works too: the node trusts plain HTTP there.)"""
        copied = []
        deadline = time.monotonic() + timeout
        host_env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
        for ref in refs:
            status, body = unix_get(HOST_DOCKER_SOCKET, f"/images/{ref}/json")
            if status != 200:
                raise RuntimeError(f"the host daemon has no image {ref}")
            # every tag of the image, so the node knows it by the same names (the docker provider's default
            # forwarder image is the base image's plain tag, tests use its content tag)
            tags = [ref, *(t for t in json.loads(body).get("RepoTags") or [] if t != ref)]
            if all(self.has_image(t) for t in tags):
                continue
            save = subprocess.Popen(["docker", "save", *tags], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL, env=host_env)
            assert save.stdout is not None
            load = subprocess.Popen(["docker", "-H", self.docker_host, "load", "-q"], stdin=save.stdout,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=host_env)
            save.stdout.close()  # the load process holds the pipe now
            try:
                load_out, load_err = load.communicate(timeout=max(1.0, deadline - time.monotonic()))
                _, save_err = save.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for p in (save, load):
                    p.kill()
                    p.wait(10)
                raise RuntimeError(f"copying {ref} to node {self.name} took over {timeout:.0f}s") from None
            if save.returncode or load.returncode or not self.has_image(ref):
                raise RuntimeError(f"copying {ref} to node {self.name} failed: save: {save_err.decode()[-500:]} "
                                   f"load: {load_err.decode()[-500:]} {load_out.decode()[-200:]}")
            copied.append(ref)
        return copied

    # -- internals

    def _in_ns(self, argv: Sequence[str]) -> list[str]:
        return ["nsenter", f"--net={self.netns_path}", "--", *argv]

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """A host file lock per node name around start/stop (two processes never set up one node at once)."""
        path = Path(f"/run/agentcompass-{self.name}.lock")  # left in place: removing it would race a waiter
        with open(path, "a") as fh:
            deadline = time.monotonic() + LOCK_TIMEOUT_S
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{path} stayed locked for {LOCK_TIMEOUT_S:.0f}s") from None
                    time.sleep(0.2)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _recorded(self) -> list[dict[str, Any]]:
        try:
            return list(json.loads(self.state_path.read_text())["procs"])
        except (OSError, ValueError, KeyError):
            return []

    def _save(self, procs: list[dict[str, Any]]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"procs": procs}, indent=1))
        tmp.replace(self.state_path)

    def _record(self, proc: subprocess.Popen[Any], *, what: str, group: bool) -> None:
        with self._state_lock:
            self._procs[proc.pid] = proc
            self._save([*self._recorded(), {"pid": proc.pid, "start": process_start_time(proc.pid), "what": what,
                                            "group": group}])

    def _forget(self, pid: int) -> None:
        with self._state_lock:
            self._procs.pop(pid, None)
            if self.state_path.exists():
                self._save([p for p in self._recorded() if p["pid"] != pid])

    @staticmethod
    def _same_process(entry: dict[str, Any]) -> bool:
        start = process_start_time(int(entry["pid"]))
        return start is not None and start == entry["start"] and not _is_zombie_or_gone(int(entry["pid"]))

    def _gone(self, pid: int, start: str | None) -> bool:
        child = self._procs.get(pid)
        if child is not None:
            return child.poll() is not None  # reaps our own child
        now = process_start_time(pid)
        return now is None or now != start or _is_zombie_or_gone(pid)

    def _stop_pid(self, pid: int, start: str | None, *, group: bool, timeout: float) -> bool:
        """SIGTERM, then SIGKILL after ``timeout``, the process ``pid`` (its group if ``group``) if it is still
        the process that was recorded; True if SIGKILL was needed."""
        if self._gone(pid, start):
            return False

        def signal_it(sig: int) -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if group:
                    os.killpg(pid, sig)
                else:
                    os.kill(pid, sig)

        signal_it(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._gone(pid, start):
                return False
            time.sleep(0.1)
        signal_it(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not self._gone(pid, start):
            if time.monotonic() > deadline:
                raise RuntimeError(f"pid {pid} survived SIGKILL for 10s")
            time.sleep(0.05)
        return True

    def _setup_network(self) -> None:
        _run(["ip", "netns", "add", self.ns])
        _run(["ip", "link", "add", self.host_veth, "type", "veth", "peer", "name", self.ns_veth,
              "netns", self.ns])
        _run(["ip", "addr", "add", f"{self.host_address}/30", "dev", self.host_veth])
        _run(["ip", "link", "set", self.host_veth, "up"])
        _run(["ip", "-n", self.ns, "addr", "add", f"{self.address}/30", "dev", self.ns_veth])
        _run(["ip", "-n", self.ns, "link", "set", self.ns_veth, "up"])
        _run(["ip", "-n", self.ns, "link", "set", "lo", "up"])
        _run(["ip", "-n", self.ns, "route", "add", "default", "via", self.host_address])
        if shutil.which("iptables"):
            _run(["iptables", "-w", "10", "-I", *self._reject_rule()])

    def _reject_rule(self) -> list[str]:
        """The host's one rule for the node: anything the node sends beyond this host is refused at once
        (otherwise the host's FORWARD DROP policy swallows it, and every DNS lookup or pull waits for its
        timeout: 20 s for a pull from docker.io instead of 5)."""
        return ["FORWARD", "-i", self.host_veth, "-m", "comment", "--comment", self.ns, "-j", "REJECT",
                "--reject-with", "icmp-admin-prohibited"]

    def _config(self) -> dict[str, Any]:
        hosts = [self.docker_host] + ([self.docker_tcp] if self.docker_tcp else [])
        return {
            "hosts": hosts,
            "data-root": str(self.data_root),
            "exec-root": str(self.exec_root),
            "pidfile": str(self.root / "dockerd.pid"),
            "storage-driver": self.storage_driver or host_storage_driver(),
            "bip": self.bip,
            "default-address-pools": [{"base": "10.216.0.0/16", "size": 24}],
            "insecure-registries": [self.subnet],
            "cgroup-parent": self.cgroup_parent,
            # the engine ID (/info "ID") comes from this key: the host's /etc/docker/key.json would give the
            # node the host daemon's ID
            "deprecated-key-path": str(self.root / "key.json"),
            "labels": [f"agentcompass.node={self.name}"],
            "shutdown-timeout": 5,
            "live-restore": False,
            "log-level": "warn",
        }

    def _start_dockerd(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.data_root.mkdir(parents=True, exist_ok=True)
        config = self.root / "daemon.json"
        config.write_text(json.dumps(self._config(), indent=1))
        self._clear_stale_pidfiles()
        with open(self.log_path, "ab") as log:
            proc = subprocess.Popen(self._in_ns([
                find_dockerd(), "--config-file", str(config),
                # flags, not config keys: 20.10's config file does not know the plugins one
                "--containerd-namespace", f"agentcompass-{self.name}",
                "--containerd-plugins-namespace", f"agentcompass-{self.name}-plugins"]), stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        # dockerd's containerd runs in its own session: the daemon is signalled alone, and stops it itself
        self._record(proc, what="dockerd", group=False)
        deadline = time.monotonic() + self.start_timeout
        while not self.is_running():
            if proc.poll() is not None:
                raise RuntimeError(f"dockerd of node {self.name} exited with {proc.returncode}: {self._log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"dockerd of node {self.name} did not answer /_ping within "
                                   f"{self.start_timeout:.0f}s: {self._log_tail()}")
            time.sleep(0.2)

    def _clear_stale_pidfiles(self) -> None:
        """Remove the pidfiles of a killed daemon and of its containerd (only called when the recorded daemon
        is gone). Their pids may still be unreaped zombies (orphans wait for pid 1), which dockerd takes for
        running processes: "pid file found", or worse, it waits on the dead containerd and gives up with
        "timeout waiting for containerd to start"."""
        (self.root / "dockerd.pid").unlink(missing_ok=True)
        pidfile = self.exec_root / "containerd" / "containerd.pid"
        with contextlib.suppress(OSError, ValueError):
            pid = int(pidfile.read_text().strip())
            if _cmdline(pid).startswith("containerd ") and str(self.exec_root) in _cmdline(pid):
                # it dies with its daemon (parent-death signal); a live one would be an orphan of ours
                self._stop_pid(pid, process_start_time(pid), group=False, timeout=TERM_GRACE_S)
        pidfile.unlink(missing_ok=True)

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return "(no log)"

    def _strays(self) -> list[int]:
        """What the node started and left running: processes in its namespace, in its cgroup (its containers,
        in namespaces of their own), and the daemon's helpers naming its directories (containerd shims outlive
        containerd, fuse-overlayfs outlives a killed daemon). Only those helper programs: a shell that merely
        names the directory is not the node's."""
        marks = (str(self.root) + "/", str(self.data_root) + "/")
        me = os.getpid()
        pids = set(self.netns_pids())
        for top in self._cgroup_tops():
            for procs in top.rglob("cgroup.procs"):
                with contextlib.suppress(OSError):
                    pids.update(int(p) for p in procs.read_text().split())
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            cmdline = _cmdline(int(entry))
            program = os.path.basename(cmdline.split(" ", 1)[0])
            if program.startswith(DAEMON_HELPERS) and any(m in cmdline for m in marks):
                pids.add(int(entry))
        return sorted(p for p in pids if not _is_zombie_or_gone(p))

    def _mounts(self) -> list[str]:
        marks = (str(self.root), str(self.data_root))
        found = []
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                point = line.split()[4].replace("\\040", " ")
                if any(point == m or point.startswith(m + "/") for m in marks):
                    found.append(point)
        return sorted(found, key=len, reverse=True)  # the deepest first

    def _teardown(self) -> list[str]:
        forced: list[str] = []
        recorded = self._recorded()
        # what exec() started first (it may talk to the daemon), the daemon last
        for entry in sorted(recorded, key=lambda p: p["what"] == "dockerd"):
            if self._stop_pid(int(entry["pid"]), entry["start"], group=bool(entry["group"]),
                              timeout=STOP_TIMEOUT_S if entry["what"] == "dockerd" else TERM_GRACE_S):
                forced.append(f"SIGKILL {entry['pid']} ({entry['what']})")
            self._procs.pop(int(entry["pid"]), None)
        deadline = time.monotonic() + 15
        while strays := self._strays():
            if time.monotonic() > deadline:
                raise RuntimeError(f"processes of node {self.name} survived SIGKILL: {strays}")
            for pid in strays:
                forced.append(f"SIGKILL stray {pid} ({_cmdline(pid)[:120]})")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        for point in self._mounts():
            forced.append(f"umount {point}")
            _run(["umount", "-l", point], check=False)
        if shutil.which("iptables"):
            for _ in range(10):  # each -D removes one copy; a start that failed half-way may have left none
                if _run(["iptables", "-w", "10", "-D", *self._reject_rule()], check=False).returncode:
                    break
        if self.netns_path.exists():
            _run(["ip", "netns", "del", self.ns])
        if Path(f"/sys/class/net/{self.host_veth}").exists():
            _run(["ip", "link", "del", self.host_veth], check=False)  # may already be going with the namespace
        deadline = time.monotonic() + 15
        while Path(f"/sys/class/net/{self.host_veth}").exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"interface {self.host_veth} still exists 15s after its removal")
            time.sleep(0.1)
        self._remove_cgroups()
        if self._mounts():
            raise RuntimeError(f"mounts of node {self.name} remain: {self._mounts()}")
        for path in (self.data_root, self.root):
            shutil.rmtree(path, ignore_errors=True)
            if path.exists():
                raise RuntimeError(f"could not remove {path}")
        self._procs.clear()
        return forced

    def _cgroup_tops(self) -> list[Path]:
        """The node's cgroup parent in every hierarchy (cgroup v1) or the unified one (v2)."""
        base = Path("/sys/fs/cgroup")
        name = self.cgroup_parent.lstrip("/")
        candidates = [base / name]
        with contextlib.suppress(OSError):
            candidates += [h / name for h in base.iterdir() if h.is_dir()]
        return [c for c in candidates if c.is_dir()]

    def _remove_cgroups(self) -> None:
        for top in self._cgroup_tops():
            for sub in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
                with contextlib.suppress(OSError):
                    sub.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()


# ----------------------------------------------------------------------------- pytest fixture


def _skip_or_fail(reason: str) -> None:
    import pytest

    if os.environ.get("CI"):  # CI must run these for real
        pytest.fail(f"second Docker node unavailable: {reason}")
    pytest.skip(f"second Docker node unavailable: {reason}")


#: concurrent sessions (xdist workers, several checkouts on one machine) each claim a slot of their own
FIXTURE_SLOTS = 16
#: slot ``i`` is node ``slot<i>`` at 10.214.<FIRST_SLOT_INDEX + i>.0/30 (the CLI's default node uses index 0)
FIRST_SLOT_INDEX = 100


@contextlib.contextmanager
def claimed_node(**params: Any) -> Iterator[SecondNode]:
    """A started node on the first free slot, stopped on exit. The slot is a host file lock held while the
    node lives, so two processes never share one and a crashed holder frees its slot; the next claimant first
    removes what the dead one left (``start(replace=True)``)."""
    for i in range(FIXTURE_SLOTS):
        claim = open(f"/run/agentcompass-slot{i}.claim", "a")  # held while the node lives
        try:
            try:
                fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            node = SecondNode(name=f"slot{i}", index=FIRST_SLOT_INDEX + i, **params)
            try:
                yield node.start(replace=True)
            finally:
                node.stop()
            return
        finally:
            claim.close()
    raise RuntimeError(f"all {FIXTURE_SLOTS} second-node slots are taken (/run/agentcompass-slot*.claim)")


def second_docker_node_fixture() -> Iterator[SecondNode]:
    """Body of the ``second_docker_node`` fixture (registered in tests/conftest.py): a node of this session's
    own for the whole session, stopped (by its pids, everything removed) afterwards."""
    problem = missing_requirements() or (None if os.path.exists(HOST_DOCKER_SOCKET) else "no host Docker daemon")
    if problem:
        _skip_or_fail(problem)
    with claimed_node() as node:
        yield node


# ----------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.standins.second_node", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("--name", default="node2")
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--tcp-port", type=int, default=None)
    parser.add_argument("--load", nargs="*", default=[], metavar="IMAGE", help="images to copy from the host daemon")
    args = parser.parse_args(argv)
    node = SecondNode(name=args.name, index=args.index, tcp_port=args.tcp_port)
    if args.action == "start":
        try:
            node.start()
            node.load_images(args.load)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"DOCKER_HOST={node.docker_host}\nNODE_NS={node.ns}\nNODE_ADDRESS={node.address}\n"
              f"NODE_HOST_ADDRESS={node.host_address}" + (f"\nNODE_DOCKER_TCP={node.docker_tcp}" if node.docker_tcp
                                                          else ""))
    elif args.action == "stop":
        try:
            forced = node.stop()
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        for line in forced:
            print(line)
    else:
        running = node.is_running()
        print(f"{node.ns}: {'running' if running else 'not running'} {node.docker_host}")
        return 0 if running else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
