"""A secret taken from the environment is gone from what ``/proc/<pid>/environ`` shows, and a non-dumpable
process's environment and memory are closed to other processes of its user (Linux)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SECRET = "sk-environ-4f1d9c2b7a"
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc/<pid>/environ is Linux's")

#: loads agentcompass/common/environ.py by path (stdlib only), so a system Python another user can run does it too
ENVIRON_PY = REPO / "agentcompass" / "common" / "environ.py"
LOAD = ("import importlib.util, subprocess, sys\n"
        f"spec = importlib.util.spec_from_file_location('envmod', {str(ENVIRON_PY)!r})\n"
        "envmod = importlib.util.module_from_spec(spec); spec.loader.exec_module(envmod)\n")
#: a child (as an agent would) reads its parent's environment block and a page of its memory
READ_PARENT = ["sh", "-c", "tr '\\0' '\\n' < /proc/$PPID/environ 2>&1; "
               "if dd if=/proc/$PPID/mem count=0 2>/dev/null; then echo mem-open; else echo mem-closed; fi"]


def test_a_taken_secret_is_not_in_the_environ_block_others_read() -> None:
    code = LOAD + ("value = envmod.take_secret('SECRET_FOR_TEST')\n"
                   f"print('value', value == {SECRET!r})\n"
                   "print(subprocess.run(['sh', '-c', 'tr \"\\\\0\" \"\\\\n\" < /proc/$PPID/environ'],\n"
                   "                     capture_output=True, text=True).stdout)\n")
    env = dict(os.environ, SECRET_FOR_TEST=SECRET, NEIGHBOUR="kept")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("value True")
    assert "NEIGHBOUR=kept" in res.stdout.splitlines()  # it did read the block; the other entries are intact
    assert SECRET not in res.stdout and "SECRET_FOR_TEST" not in res.stdout


def _as_another_user() -> tuple[list[str], Callable[[], None] | None]:
    """(python command, preexec_fn): as uid/gid 65534 with the system Python when we are root (the venv's may
    live under a private home), else as ourselves."""
    if os.geteuid() != 0:
        return [sys.executable], None
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK):
        pytest.skip("no system python3 to run as an unprivileged user")

    def drop() -> None:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    return [python], drop


@pytest.mark.parametrize("deny", [False, True])
def test_a_non_dumpable_process_is_closed_to_children_of_its_user(deny: bool) -> None:
    python, drop = _as_another_user()
    code = LOAD + ("print('denied', envmod.deny_process_inspection())\n" if deny else "") + (
        f"print(subprocess.run({READ_PARENT!r}, capture_output=True, text=True).stdout)\n")
    env = {"PATH": os.environ.get("PATH", os.defpath), "MARK_FOR_TEST": SECRET}
    res = subprocess.run([*python, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                         preexec_fn=drop, cwd="/")
    assert res.returncode == 0, res.stderr
    if deny:
        assert res.stdout.startswith("denied True")
        assert SECRET not in res.stdout and "mem-closed" in res.stdout.split()
    else:  # the control: the same child opens both when the parent is dumpable
        assert f"MARK_FOR_TEST={SECRET}" in res.stdout and "mem-open" in res.stdout.split()
