"""Runs this Python interpreter on some arguments in a sandbox that hides the host's files; stdlib only, Linux.

HumanEval's grading on the ``local`` provider runs the agent's code on the engine's host, where the installed
dataset (and so every canonical solution) is an ordinary file. This launcher runs the interpreter in new user,
mount and PID namespaces, in a root made of only what the interpreter needs: ``/usr``, ``/bin``, ``/lib*``,
``/etc`` and the interpreter's own prefixes and import paths (read-only), the given workdir (read-write), an
empty ``/tmp``, a ``/dev`` with ``null``, ``zero``, ``full``, ``random`` and ``urandom`` only, and a ``/proc`` of
its own PID namespace (no other process can be looked through). Within that view the ``--hide`` paths and the
``--hide-package`` packages on the import paths are covered by an empty read-only directory. The program runs
as a user without any capability (uid 1000 of the namespace; on the host the engine's own user), so it cannot
lift a cover nor mount anything; in a namespace it made itself the covers are locked.

Usage: ``python3 -I sandbox.py --workdir DIR [--mark TOKEN] [--hide PATH]... [--hide-package NAME]...
-- ARG...`` runs ``python3 ARG...`` (this interpreter) with ``DIR`` as its working directory and exits with its
status;
``python3 -I sandbox.py --probe`` prints ``ok`` when the sandbox can be had here, else why not and
exits 1. Where it cannot be set up it exits ``SETUP_FAILED_EXIT`` with ``TOKEN SETUP_FAILED_MARK reason`` on
stderr, before running anything (the program never sees ``TOKEN``, so it cannot pass its own failure off as
this one).
"""

from __future__ import annotations

import ctypes
import glob
import os
import platform
import signal
import subprocess
import sys
from collections.abc import Sequence

SETUP_FAILED_EXIT = 97
SETUP_FAILED_MARK = "agentcompass-sandbox: cannot set up the sandbox:"
#: the uid and gid the program has inside (not 0: it gets no capability when the interpreter starts)
INSIDE_ID = 1000
_TMP_BYTES = 256 << 20

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MNT_DETACH = 2
_PR_SET_NO_NEW_PRIVS = 38
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "arm64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
_DEVICES = ("null", "zero", "full", "random", "urandom")
# statvfs flags a read-only remount must keep (a namespace may not clear them on a mount it did not make)
_KEPT_FLAGS = ((os.ST_NOSUID, _MS_NOSUID), (os.ST_NODEV, _MS_NODEV), (os.ST_NOEXEC, _MS_NOEXEC))


class SetupError(Exception):
    """The sandbox cannot be set up here."""


_TOKEN: list[str] = []  # --mark's value


def _report_failure(reason: object) -> None:
    os.write(2, " ".join([*_TOKEN, SETUP_FAILED_MARK, str(reason)]).encode() + b"\n")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    _check(_libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source or fstype} on {target}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _inside(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def view(hide: Sequence[str], packages: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the directories the sandbox shows read-only, the directories it covers), as real paths."""
    wanted = [p for p in _SYSTEM if os.path.isdir(p) and not os.path.islink(p)]
    interpreter = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                   os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))]
    paths = [os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)]
    shown: list[str] = []
    for path in sorted({os.path.realpath(p) for p in wanted + interpreter + paths}, key=len):
        if path != "/" and os.path.isdir(path) and not _inside(path, shown):
            shown.append(path)
    covered = {os.path.realpath(p) for p in hide if os.path.isdir(p)}
    for name in packages:
        for base in [*paths, *shown]:
            for pattern in (name, f"lib/python3*/*-packages/{name}", f"local/lib/python3*/*-packages/{name}",
                            f"python3*/*-packages/{name}", f"python3/dist-packages/{name}"):
                covered.update(os.path.realpath(p) for p in glob.glob(os.path.join(glob.escape(base), pattern))
                               if os.path.isdir(p))
    return shown, sorted(p for p in covered if _inside(p, shown))


def _enter_namespaces() -> None:
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc().unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{INSIDE_ID} {uid} 1\n")
    _write("/proc/self/gid_map", f"{INSIDE_ID} {gid} 1\n")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing done here reaches the host's mounts


def _bind(source: str, target: str, *, read_only: bool, recursive: bool = True) -> None:
    _mount(source, target, None, _MS_BIND | (_MS_REC if recursive else 0))
    if read_only:
        kept = os.statvfs(target).f_flag
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
        for st, ms in _KEPT_FLAGS:
            flags |= ms if kept & st else 0
        _mount(None, target, None, flags)


def _build_root(root: str, workdir: str, shown: Sequence[str], covered: Sequence[str]) -> None:
    """Mount the sandbox's tree under ``root`` (a fresh tmpfs)."""
    _mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=1m")
    # /tmp first: an interpreter (a venv) living under the host's /tmp is bound over the empty one, not hidden
    os.makedirs(root + "/tmp", exist_ok=True)
    _mount("tmpfs", root + "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, f"mode=1777,size={_TMP_BYTES}")
    for path in shown:
        if path == "/tmp":
            continue
        os.makedirs(root + path, exist_ok=True)
        _bind(path, root + path, read_only=True)
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):  # the merged-/usr links
        link = "/" + name
        if os.path.islink(link) and not os.path.lexists(root + link):
            os.symlink(os.readlink(link), root + link)
    for path in covered:
        _mount("tmpfs", root + path, "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV, "mode=0555,size=4k")
    os.makedirs(root + workdir, exist_ok=True)
    _bind(workdir, root + workdir, read_only=False, recursive=False)
    os.makedirs(root + "/dev", exist_ok=True)
    _mount("tmpfs", root + "/dev", "tmpfs", _MS_NOSUID, "mode=0755,size=64k")
    for name in _DEVICES:
        if os.path.exists("/dev/" + name):
            open(f"{root}/dev/{name}", "w").close()
            _bind("/dev/" + name, f"{root}/dev/{name}", read_only=False, recursive=False)
    os.makedirs(root + "/proc", exist_ok=True)


def _pivot(root: str) -> None:
    number = _PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise SetupError(f"no pivot_root syscall number known for {platform.machine()}")
    os.chdir(root)
    _check(_libc().syscall(number, b".", b"."), "pivot_root")
    _check(_libc().umount2(b".", _MNT_DETACH), "detach the host's root")  # nothing of the host stays reachable
    os.chdir("/")


def _child(root: str, workdir: str, args: Sequence[str]) -> None:
    """PID 1 of the new namespace: its /proc, the new root, then the interpreter (never returns)."""
    try:
        try:
            _mount("proc", root + "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        except SetupError:  # a host whose own /proc is partly covered (a container): the sandbox has none
            pass
        _pivot(root)
        os.chdir(workdir)
        _check(_libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    except (SetupError, OSError) as exc:
        _report_failure(exc)
        os._exit(SETUP_FAILED_EXIT)
    try:
        os.execv(sys.executable, [sys.executable, *args])  # uid 1000 here: the exec drops every capability
    except OSError as exc:
        _report_failure(f"exec {sys.executable}: {exc}")
    os._exit(SETUP_FAILED_EXIT)


def run(workdir: str, hide: Sequence[str], packages: Sequence[str], args: Sequence[str]) -> int:
    """Run ``python ARGS`` in the sandbox; its exit status (128+N when signal N ended it)."""
    if not sys.platform.startswith("linux"):
        raise SetupError("the sandbox needs Linux's namespaces")
    workdir = os.path.realpath(workdir)
    shown, covered = view(hide, packages)
    _enter_namespaces()
    root = os.path.join(workdir, ".agentcompass-sandbox-root")
    os.makedirs(root, exist_ok=True)
    _build_root(root, workdir, shown, covered)
    pid = os.fork()
    if pid == 0:
        _child(root, workdir, args)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGKILL))  # the PID 1 takes the rest with it
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def unavailable() -> str | None:
    """None when the sandbox can be had on this host (with this interpreter), else why not."""
    try:
        done = subprocess.run([sys.executable, "-I", os.path.abspath(__file__), "--probe"], capture_output=True,
                              text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the probe did not run: {exc}"
    if done.returncode == 0 and done.stdout.strip() == "ok":
        return None
    return (done.stderr.strip().replace(SETUP_FAILED_MARK, "").strip() or f"the probe exited {done.returncode}")[
        -500:]


def _probe() -> int:
    """0 when a program in the sandbox sees neither a host file outside its workdir nor another process."""
    import tempfile

    with tempfile.TemporaryDirectory() as base:
        workdir, secret = os.path.join(base, "work"), os.path.join(base, "host-file")
        os.mkdir(workdir)
        open(secret, "w").close()
        check = (f"import os, sys; sys.exit(3 if os.path.exists({os.path.realpath(secret)!r}) "
                 "or [p for p in os.listdir('/proc') if p.isdigit() and p != '1'] else 0)")
        # in a process of its own: the sandbox's mounts live (and keep the workdir busy) until it exits
        done = subprocess.run([sys.executable, "-I", os.path.abspath(__file__), "--workdir", workdir, "--",
                               "-I", "-c", check], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              timeout=60, check=False)
    if done.returncode == 3:
        print(f"{SETUP_FAILED_MARK} a program in it still saw the host", file=sys.stderr)
    elif done.returncode:
        print(done.stderr.strip()[-1000:] or f"{SETUP_FAILED_MARK} it exited {done.returncode}", file=sys.stderr)
    return done.returncode


def main(argv: Sequence[str]) -> int:
    if list(argv) == ["--probe"]:
        status = _probe()
        if status == 0:
            print("ok")
        return status
    if "--" not in argv:
        print("usage: sandbox.py --workdir DIR [--mark TOKEN] [--hide PATH]... [--hide-package NAME]... "
              "-- ARG...", file=sys.stderr)
        return 2
    split = list(argv).index("--")
    options, args = list(argv[:split]), list(argv[split + 1:])
    workdir, hide, packages = "", [], []
    if len(options) % 2:
        print(f"option {options[-1]} has no value", file=sys.stderr)
        return 2
    for i in range(0, len(options), 2):
        flag, value = options[i], options[i + 1]
        if flag == "--workdir":
            workdir = value
        elif flag == "--mark":
            _TOKEN[:] = [value]
        elif flag == "--hide":
            hide.append(value)
        elif flag == "--hide-package":
            packages.append(value)
        else:
            print(f"unknown option {flag}", file=sys.stderr)
            return 2
    try:
        return run(workdir or os.getcwd(), hide, packages, args)
    except (SetupError, OSError) as exc:
        _report_failure(exc)
        return SETUP_FAILED_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
