"""The one runtime pip installer (``common.pip_install``) with a real pip: a local PEP 503 index serving wheels
written in the test (a gated one holds pip mid-download) or ``--no-index``. Concurrent installs of one target run
pip once, a cancelled or timed-out install leaves no pip running and the lock free, a failure names the package
and quotes pip's output."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentcompass.common.pip_install import (
    OUTPUT_HEAD_BYTES,
    OUTPUT_TAIL_BYTES,
    PipInstallError,
    PipRun,
    default_lock,
    locked,
    pip_install,
)
from tests.pypi_index import SimpleIndex, build_wheel

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def index() -> Iterator[SimpleIndex]:
    with SimpleIndex(gate_deadline_s=120) as idx:
        yield idx


def pip_env(index: SimpleIndex) -> dict[str, str]:
    return {"PIP_INDEX_URL": index.url, "PIP_NO_CACHE_DIR": "1"}


def pips_for(marker: Path) -> list[int]:
    """Live processes whose command line names ``marker`` (a target directory only one test uses)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if str(marker).encode() in cmdline and b"pip" in cmdline:
            found.append(int(pid))
    return found


def installed(target: Path, module: str) -> bool:
    return (target / module / "__init__.py").is_file()


async def test_concurrent_installs_of_one_target_run_pip_once(index: SimpleIndex, tmp_path: Path) -> None:
    """Callers on this loop, on another loop (a thread) and in another process: the first holds the target's lock
    while pip runs, the others wait for it and then find the package there."""
    index.add_wheel("acpip-once", "1.0", {"acpip_once/__init__.py": "ANSWER = 42\n"}, gated=True)
    target = tmp_path / "target"
    runs: list[list[str]] = []

    def install() -> asyncio.Future[PipRun]:
        return asyncio.ensure_future(pip_install(["acpip-once==1.0"], target=target, timeout_s=120,
                                                 done=lambda: installed(target, "acpip_once"), env=pip_env(index),
                                                 on_run=runs.append))

    first = install()
    assert await asyncio.to_thread(index.requested.wait, 120), "pip never asked for the wheel"
    second = install()
    other_loop = asyncio.ensure_future(asyncio.to_thread(lambda: asyncio.run(pip_install(
        ["acpip-once==1.0"], target=target, timeout_s=120, done=lambda: installed(target, "acpip_once"),
        env=pip_env(index), on_run=runs.append))))
    script = textwrap.dedent(f"""
        import asyncio, pathlib
        from agentcompass.common.pip_install import pip_install
        target = pathlib.Path({str(target)!r})
        run = asyncio.run(pip_install(["acpip-once==1.0"], target=target, timeout_s=120,
                                      done=lambda: (target / "acpip_once" / "__init__.py").is_file()))
        print("ran" if run.ran else "found")
        """)
    other_process = await asyncio.create_subprocess_exec(sys.executable, "-c", script, env={**os.environ,
                                                         **pip_env(index)}, stdout=asyncio.subprocess.PIPE)
    await asyncio.sleep(1.5)  # they are all waiting for the lock
    assert not (second.done() or other_loop.done()) and other_process.returncode is None
    index.release()
    results = [await asyncio.wait_for(f, 120) for f in (first, second, other_loop)]
    out, _ = await asyncio.wait_for(other_process.communicate(), 120)
    assert other_process.returncode == 0 and out.decode().split() == ["found"]
    assert [r.ran for r in results] == [True, False, False]
    assert len(runs) == 1 and index.downloads == {"acpip-once": 1}
    assert "Successfully installed acpip-once-1.0" in results[0].output
    assert installed(target, "acpip_once")


@pytest.mark.parametrize("how", ["task", "event"])
async def test_a_cancelled_install_kills_pip_and_a_later_install_succeeds(index: SimpleIndex, tmp_path: Path,
                                                                          how: str) -> None:
    """Cancelled as an asyncio task (a request cancelled) or through the engine's ``threading.Event`` (a
    constructor in a worker thread): pip's process is gone and the lock is free for the next install."""
    index.add_wheel("acpip-cancel", "1.0", {"acpip_cancel/__init__.py": ""}, gated=True)
    target = tmp_path / "target"
    cancelled = threading.Event()
    running = asyncio.ensure_future(pip_install(["acpip-cancel==1.0"], target=target, timeout_s=120,
                                                env=pip_env(index), cancelled=cancelled))
    assert await asyncio.to_thread(index.requested.wait, 120)
    pids = pips_for(target)
    assert pids, "pip is not running"
    if how == "task":
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
    else:
        cancelled.set()
        with pytest.raises(PipInstallError) as err:
            await asyncio.wait_for(running, 60)
        assert err.value.reason == "cancelled" and "acpip-cancel==1.0" in str(err.value)
    assert pips_for(target) == [] and not any(Path(f"/proc/{p}").exists() for p in pids)
    assert index.released_by is None  # pip was stopped mid-download, not let finish
    assert not installed(target, "acpip_cancel")
    index.release()
    later = await asyncio.wait_for(pip_install(["acpip-cancel==1.0"], target=target, timeout_s=60,
                                               env=pip_env(index)), 90)
    assert later.ran and installed(target, "acpip_cancel")


async def test_a_failed_install_names_the_package_and_quotes_pips_tail(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    name, data = build_wheel("acpip-other", "1.0", {"acpip_other/__init__.py": ""})
    (wheels / name).write_bytes(data)
    with pytest.raises(PipInstallError) as err:
        await pip_install(["acpip-absent==1.0"], target=tmp_path / "t", timeout_s=120,
                          options=("--no-index", "--find-links", str(wheels)))
    message = str(err.value)
    assert err.value.reason == "failed" and err.value.returncode == 1 and err.value.packages == ("acpip-absent==1.0",)
    assert message.startswith("Installing acpip-absent==1.0 failed (pip exit 1): ")
    assert "No matching distribution found for acpip-absent==1.0" in message
    # the same local directory serves what it has
    run = await pip_install([str(wheels / name)], target=tmp_path / "t", timeout_s=120, options=("--no-index",))
    assert run.ran and installed(tmp_path / "t", "acpip_other")


async def test_a_steps_output_is_capped_and_its_end_quoted(tmp_path: Path) -> None:
    step = [sys.executable, "-c", "import sys; print('x' * 500000); print('THE END'); sys.exit(3)"]
    with pytest.raises(PipInstallError) as err:
        async with locked("acpip-loud", lock=tmp_path / "loud.lock", timeout_s=60) as install:
            await install.run(step)
    assert err.value.returncode == 3 and "exit 3" in str(err.value) and str(err.value).rstrip().endswith("THE END")
    assert len(str(err.value)) < 2000
    assert len(err.value.output) < OUTPUT_HEAD_BYTES + OUTPUT_TAIL_BYTES + 100
    assert "bytes of output left out" in err.value.output


async def test_an_install_past_its_deadline_is_killed_and_named(index: SimpleIndex, tmp_path: Path) -> None:
    index.add_wheel("acpip-stuck", "1.0", {"acpip_stuck/__init__.py": ""}, gated=True)
    target = tmp_path / "target"
    with pytest.raises(PipInstallError) as err:
        await asyncio.wait_for(pip_install(["acpip-stuck==1.0"], target=target, timeout_s=3, env=pip_env(index)), 60)
    assert err.value.reason == "timeout" and "Installing acpip-stuck==1.0 timed out after 3s" in str(err.value)
    assert index.released_by is None and pips_for(target) == []
    # the lock was released: the next install gets it at once
    again = await asyncio.wait_for(pip_install(["acpip-stuck==1.0"], target=target, timeout_s=1,
                                               done=lambda: True), 30)
    assert not again.ran


async def test_a_lock_held_by_another_process_is_waited_for_until_the_deadline(tmp_path: Path) -> None:
    target = tmp_path / "target"
    lock = default_lock(target=target)
    assert lock == tmp_path / ".target.lock"
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX); "
        "print('held', flush=True); time.sleep(120)", str(lock), stdout=asyncio.subprocess.PIPE)
    runs: list[list[str]] = []
    try:
        assert holder.stdout is not None and await asyncio.wait_for(holder.stdout.readline(), 30) == b"held\n"
        with pytest.raises(PipInstallError) as err:
            await pip_install(["acpip-locked==1.0"], target=target, timeout_s=1, on_run=runs.append)
        assert err.value.reason == "lock_timeout" and str(lock) in str(err.value) and "acpip-locked" in str(err.value)
        cancelled = threading.Event()
        waiting = asyncio.ensure_future(pip_install(["acpip-locked==1.0"], target=target, timeout_s=60,
                                                    cancelled=cancelled, on_run=runs.append))
        await asyncio.sleep(0.3)
        cancelled.set()
        with pytest.raises(PipInstallError) as err:
            await asyncio.wait_for(waiting, 10)
        assert err.value.reason == "cancelled" and "waiting for the install lock" in str(err.value)
    finally:
        holder.kill()
        await holder.wait()
    assert runs == []


async def test_an_unusable_lock_or_python_is_the_installs_error(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(PipInstallError, match="cannot create the install lock") as err:
        await pip_install(["acpip-x==1.0"], lock=tmp_path / "a-file" / "x.lock", timeout_s=10)
    assert err.value.reason == "failed"
    with pytest.raises(PipInstallError, match="Installing acpip-x==1.0 failed: cannot start ") as err:
        await pip_install(["acpip-x==1.0"], python=tmp_path / "no-python", lock=tmp_path / "x.lock", timeout_s=10)
    assert err.value.reason == "failed"
