"""Per-environment cgroups for the ``local`` provider: every process a command starts, found and killed.

A process group or a marker variable can be left (``setsid``, ``env -i``); a cgroup cannot: a child is born
in its parent's cgroup and only a privileged write moves it out. Each environment gets
``<hierarchy>/agentcompass/<name>`` in every usable hierarchy:

- cgroup v2 (``/sys/fs/cgroup`` or, on hybrid hosts, ``/sys/fs/cgroup/unified``): membership, and
  ``cgroup.kill`` (Linux 5.14+) to kill everything at once; ``pids.max`` when the ``pids`` controller can
  be enabled there;
- cgroup v1 ``pids`` (``pids.max``) and ``freezer`` (stop everything before the SIGKILL sweep, so nothing
  forks meanwhile) on hybrid/v1 hosts.

A command runs through a tiny shell prelude (``EnvCgroup.wrap``) that writes its own pid into the cgroup and
then ``exec``s the command, so the command is inside before it can fork. (A ``preexec_fn`` would do the same
but forces a full ``fork()`` of the engine, tens of ms per command for a large heap, on the event loop; the
prelude keeps ``vfork``.) In v1 hierarchies the ``agentcompass`` parent is made inside the engine's own
cgroup, so limits put on the engine (a container's, a service manager's, a test's) hold for its agents too.
Names start with the engine's owner tag so a later run can sweep the cgroups of a
crashed one.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: the directory, in each hierarchy, under which the environments' cgroups are made.
PARENT = "agentcompass"
_KILL_ROUNDS_S = 10.0  # bound on one kill: a pids-limited cgroup empties in well under a second
_FREEZE_WAIT_S = 1.0
_RMDIR_WAIT_S = 2.0
_OWNER = re.compile(r"^p(?P<pid>\d+)s(?P<ticks>\d+)\.")
#: exit code of the prelude when the process could not join (the command did not run).
JOIN_FAILED_EXIT = 125
#: what the prelude prints on stderr when it could not join (tells it from a command that exits 125 itself).
JOIN_FAILED_MARK = "agentcompass: cannot join the environment's cgroup"
# $1: how many cgroup.procs paths follow; then the paths; then the command. "0": the writing process itself.
_PRELUDE = ('n=$1; shift; while [ "$n" -gt 0 ]; do { echo 0 > "$1"; } 2>/dev/null || '
            f'{{ echo "{JOIN_FAILED_MARK}" >&2; exit {JOIN_FAILED_EXIT}; }}; shift; n=$((n - 1)); done; exec "$@"')


@dataclass(frozen=True)
class Support:
    """The usable hierarchies (each the directory holding our ``agentcompass`` parent), None if absent."""

    v2: str | None
    pids: str | None       # the hierarchy whose cgroups have ``pids.max`` (v1 pids, or v2 itself)
    freezer: str | None    # v1 freezer

    def hierarchies(self) -> list[str]:
        """Every hierarchy a process must join, without duplicates."""
        out: list[str] = []
        for h in (self.v2, self.pids, self.freezer):
            if h is not None and h not in out:
                out.append(h)
        return out


def _write(path: str, data: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _mounts(text: str) -> tuple[str | None, str | None, str | None]:
    """(cgroup2 mount, v1 pids mount, v1 freezer mount) from ``/proc/self/mounts`` text."""
    v2 = pids = freezer = None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        path, fstype, opts = parts[1], parts[2], parts[3].split(",")
        if fstype == "cgroup2" and v2 is None:
            v2 = path
        elif fstype == "cgroup":
            if "pids" in opts and pids is None:
                pids = path
            if "freezer" in opts and freezer is None:
                freezer = path
    return v2, pids, freezer


def _own_v1_dir(mount: str, controller: str, proc_cgroup: str) -> str:
    """The engine's own cgroup directory in the v1 hierarchy of ``controller`` (the mount itself if unknown)."""
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and controller in parts[1].split(","):
            own = os.path.join(mount, parts[2].lstrip("/"))
            return own if os.path.isdir(own) else mount
    return mount


def _usable(hierarchy: str) -> bool:
    """True if we can make (or already have) a writable ``agentcompass`` parent in ``hierarchy``."""
    parent = os.path.join(hierarchy, PARENT)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError:
        return False
    return os.access(os.path.join(parent, "cgroup.procs"), os.W_OK)


def _enable_v2_pids(root: str) -> bool:
    """Enable the pids controller for our parent's children (pure v2); False if the host does not allow it."""
    parent = os.path.join(root, PARENT)
    for where in (root, parent):
        try:
            if "pids" in _read(os.path.join(where, "cgroup.subtree_control")).split():
                continue
            if "pids" not in _read(os.path.join(where, "cgroup.controllers")).split():
                return False
            _write(os.path.join(where, "cgroup.subtree_control"), "+pids")
        except OSError:
            return False
    return True


def detect(mounts_text: str, proc_cgroup: str = "") -> Support | None:
    """The hierarchies usable by this process, given the mount table (and ``/proc/self/cgroup``, to nest the
    v1 ones inside the engine's own cgroup); None when there is none."""
    v2, pids, freezer = _mounts(mounts_text)
    pids = _own_v1_dir(pids, "pids", proc_cgroup) if pids is not None else None
    freezer = _own_v1_dir(freezer, "freezer", proc_cgroup) if freezer is not None else None
    v2 = v2 if v2 is not None and _usable(v2) else None
    pids = pids if pids is not None and _usable(pids) else None
    freezer = freezer if freezer is not None and _usable(freezer) else None
    if pids is None and v2 is not None and _enable_v2_pids(v2):
        pids = v2
    if v2 is None and pids is None and freezer is None:
        return None
    return Support(v2=v2, pids=pids, freezer=freezer)


_SUPPORT: list[Support | None] = []  # detected once per process


def support() -> Support | None:
    """This machine's usable cgroup hierarchies (detected on first call, then cached)."""
    if not _SUPPORT:
        try:
            text = _read("/proc/self/mounts")
        except OSError:
            text = ""
        try:
            own = _read("/proc/self/cgroup")
        except OSError:
            own = ""
        _SUPPORT.append(detect(text, own))
    return _SUPPORT[0]


class EnvCgroup:
    """One environment's cgroup, in every usable hierarchy."""

    def __init__(self, name: str, dirs: list[str], sup: Support, pids_limit: int | None = None) -> None:
        self.name = name
        self.pids_limit = pids_limit if sup.pids is not None else None
        self.dirs = dirs
        self._support = sup
        self._procs = [os.path.join(d, "cgroup.procs") for d in dirs]

    @classmethod
    def create(cls, name: str, *, pids_limit: int | None, sup: Support | None = None) -> EnvCgroup | None:
        """Make the cgroup (and set ``pids.max``); None when cgroups are not usable here."""
        sup = sup if sup is not None else support()
        if sup is None:
            return None
        dirs: list[str] = []
        try:
            for h in sup.hierarchies():
                d = os.path.join(h, PARENT, name)
                os.mkdir(d)
                dirs.append(d)
            if pids_limit is not None and sup.pids is not None:
                _write(os.path.join(sup.pids, PARENT, name, "pids.max"), str(pids_limit))
        except OSError:
            for d in reversed(dirs):
                with contextlib.suppress(OSError):
                    os.rmdir(d)
            raise
        return cls(name, dirs, sup, pids_limit)

    def wrap(self, shell: str, argv: list[str]) -> list[str]:
        """``argv`` run through ``shell`` so that it joins this cgroup first (exit ``JOIN_FAILED_EXIT`` if
        it cannot, without running the command)."""
        return [shell, "-c", _PRELUDE, "agentcompass", str(len(self._procs)), *self._procs, *argv]

    def host_refusals(self) -> int | None:
        """How many forks in this cgroup the kernel refused so far while the cgroup itself stayed below its
        own ``pids.max`` (so the limit hit was an ancestor's: the host's, not this environment's); None when the
        kernel does not tell (no pids hierarchy, no ``pids.peak``, or the cgroup reached its own limit)."""
        d = self._dir_in(self._support.pids)
        limit = self.pids_limit
        if d is None or limit is None:
            return None
        try:
            events = _read(os.path.join(d, "pids.events"))
            peak = int(_read(os.path.join(d, "pids.peak")))
        except (OSError, ValueError):
            return None
        if peak >= limit:  # its own limit may be what refused them (an agent's fork bomb)
            return None
        for line in events.splitlines():
            key, _, value = line.partition(" ")
            if key == "max" and value.strip().isdigit():
                return int(value)
        return None

    def exists(self) -> bool:
        """True while the cgroup's directories are all there."""
        return all(os.path.isdir(d) for d in self.dirs)

    def pids(self) -> set[int]:
        """Processes currently in the cgroup (any hierarchy)."""
        found: set[int] = set()
        for path in self._procs:
            with contextlib.suppress(OSError):
                found.update(int(p) for p in _read(path).split())
        return found

    def kill(self, within: float = _KILL_ROUNDS_S) -> bool:
        """SIGKILL everything in the cgroup, repeating until it is empty; True if it emptied within ``within``
        seconds. Freezes first (v2 ``cgroup.kill`` needs no freeze), so nothing forks while we sweep."""
        deadline = time.monotonic() + within
        v2_dir = self._dir_in(self._support.v2)
        if v2_dir is not None:
            with contextlib.suppress(OSError):
                _write(os.path.join(v2_dir, "cgroup.kill"), "1")
        frozen = bool(self.pids()) and self._freeze(deadline)  # most closes find it empty: no freeze needed
        try:
            pause = 0.001
            while True:
                left = self.pids()
                if not left:
                    return True
                for pid in left:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                if frozen:  # v1: a frozen task dies of its SIGKILL only once thawed
                    self._thaw()
                    frozen = self._freeze(deadline)
                if time.monotonic() > deadline:
                    return not self.pids()
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        finally:
            if frozen:
                self._thaw()

    def _dir_in(self, hierarchy: str | None) -> str | None:
        return None if hierarchy is None else os.path.join(hierarchy, PARENT, self.name)

    def _freeze(self, deadline: float) -> bool:
        d = self._dir_in(self._support.freezer)
        if d is None:
            return False
        state = os.path.join(d, "freezer.state")
        try:
            _write(state, "FROZEN")
            until = min(deadline, time.monotonic() + _FREEZE_WAIT_S)
            while _read(state).strip() != "FROZEN" and time.monotonic() < until:
                time.sleep(0.005)
        except OSError:
            return False
        return True

    def _thaw(self) -> None:
        d = self._dir_in(self._support.freezer)
        if d is not None:
            with contextlib.suppress(OSError):
                _write(os.path.join(d, "freezer.state"), "THAWED")

    def remove(self, within: float = _RMDIR_WAIT_S) -> bool:
        """rmdir the cgroup in every hierarchy (retried while the kernel still counts exiting tasks)."""
        deadline = time.monotonic() + within
        left = list(self.dirs)
        while left:
            for d in list(left):
                try:
                    os.rmdir(d)
                    left.remove(d)
                except FileNotFoundError:
                    left.remove(d)
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        left.remove(d)
                        log.warning("cannot remove cgroup %s: %s", d, exc)
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if left:
            log.warning("cgroups %s still busy after %.0f s; a later run sweeps them", left, within)
        return not left

    def close(self) -> bool:
        """Kill everything in it and remove it (bounded); True if it is gone."""
        self.kill()
        return self.remove()


def sweep_stale(owner_alive: Callable[[int, str], bool]) -> list[str]:
    """Kill and remove the cgroups of engines that are gone (names ``p<pid>s<ticks>.*``); returns their names.

    ``owner_alive(pid, ticks)`` tells whether the process named by an owner tag still runs."""
    sup = support()
    if sup is None:
        return []
    names: set[str] = set()
    for h in sup.hierarchies():
        with contextlib.suppress(OSError):
            names.update(os.listdir(os.path.join(h, PARENT)))
    swept: list[str] = []
    for name in sorted(names):
        m = _OWNER.match(name)
        if m is None or owner_alive(int(m["pid"]), m["ticks"]):
            continue
        dirs = [os.path.join(h, PARENT, name) for h in sup.hierarchies()]
        EnvCgroup(name, [d for d in dirs if os.path.isdir(d)], sup).close()
        swept.append(name)
    return swept
