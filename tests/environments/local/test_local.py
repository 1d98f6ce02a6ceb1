"""The local environment provider, with real processes and real files."""


from __future__ import annotations

import asyncio
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError, EnvironmentError_
from agentcompass.environments._output import CappedBuffer
from agentcompass.environments._tar import extract_tar, make_tar, tar_from_files
from agentcompass.environments.local.provider import MARKER_VAR, TIMEOUT_EXIT_CODE, LocalEnvironment, LocalProvider
from agentcompass.interfaces import ComponentContext, Environment, EnvOpenSpec, ExecResult, NetworkPolicy

pytestmark = pytest.mark.timeout(60)


def _spec(**kw: object) -> EnvOpenSpec:
    return EnvOpenSpec(run_id="r1", task_id=str(kw.pop("task_id", "t1")), **kw)  # type: ignore[arg-type]


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone, or exiting while read (ESRCH)
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def _wait_dead(pids: list[int], within: float = 30.0) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        await asyncio.sleep(0.02)
    return [p for p in pids if _alive(p)]


async def _read_pids(env: LocalEnvironment, *names: str, within: float = 30.0) -> list[int]:
    deadline = time.monotonic() + within
    while True:
        try:
            texts = [(await env.read_file(n)).decode().strip() for n in names]
            if all(texts):
                return [int(t) for t in texts]
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"pid files {names} never appeared")
        await asyncio.sleep(0.02)


async def _ended_by_close(task: asyncio.Task[ExecResult]) -> None:
    """A command running when its environment closes is killed; one whose spawn was still reporting back when
    close() ran (a loaded machine: the shell already wrote its pid file) is refused as closed instead."""
    try:
        res = await asyncio.wait_for(task, 30)
    except EnvironmentError_ as exc:
        assert "was closed while starting a command" in str(exc)
    else:
        assert res.exit_code < 0 and not res.timed_out, res


@pytest.fixture
async def provider(tmp_path: Path) -> AsyncIterator[LocalProvider]:
    prov = LocalProvider({"base_dir": str(tmp_path)}, ComponentContext(run_id="r1"))
    try:
        yield prov
    finally:
        await prov.aclose()


@pytest.fixture
async def env(provider: LocalProvider) -> AsyncIterator[LocalEnvironment]:
    handle = await provider.open(_spec())
    try:
        yield handle
    finally:
        await handle.close()


# ----------------------------------------------------------------------------- commands


async def test_environment_satisfies_protocol_and_lives_in_a_role_prefixed_temp_dir(
        env: LocalEnvironment, tmp_path: Path) -> None:
    assert isinstance(env, Environment)
    assert Path(env.workdir).parent == tmp_path.resolve()
    assert Path(env.workdir).name.startswith("agentcompass-agent-")


async def test_shell_command_returns_stdout_stderr_and_exit_code(env: LocalEnvironment) -> None:
    res = await env.exec("echo out; echo err >&2; exit 3")
    assert (res.exit_code, res.stdout, res.stderr) == (3, "out\n", "err\n")
    assert not res.timed_out and not res.truncated
    assert res.output_bytes == 8
    assert res.duration_s > 0


async def test_list_command_runs_without_a_shell(env: LocalEnvironment) -> None:
    res = await env.exec(["printf", "%s", "a b; echo $HOME"])
    assert res.exit_code == 0
    assert res.stdout == "a b; echo $HOME"


async def test_missing_program_reports_127(env: LocalEnvironment) -> None:
    res = await env.exec(["definitely-not-a-program-xyz"])
    assert res.exit_code == 127
    assert "definitely-not-a-program-xyz" in res.stderr


async def test_invalid_utf8_output_is_replaced_not_fatal(env: LocalEnvironment) -> None:
    res = await env.exec(r"printf 'ok\377\n'")
    assert res.stdout == "ok\ufffd\n"


async def test_cwd_is_relative_to_workdir_and_env_is_minimal_plus_overrides(
        provider: LocalProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCOMPASS_TEST_SECRET", "leak")
    handle = await provider.open(_spec(env={"FROM_SPEC": "spec", "BOTH": "spec"}))
    try:
        await handle.exec("mkdir -p sub/dir")
        res = await handle.exec(
            'pwd; echo "$HOME|$FROM_SPEC|$BOTH|$FROM_CALL|${AGENTCOMPASS_TEST_SECRET-unset}"',
            cwd="sub/dir", env={"BOTH": "call", "FROM_CALL": "call"})
        lines = res.stdout.splitlines()
        assert lines[0] == os.path.join(handle.workdir, "sub", "dir")
        assert lines[1] == f"{handle.workdir}|spec|call|call|unset"
        with pytest.raises(EnvironmentError_, match="not a directory"):
            await handle.exec("true", cwd="nope")
    finally:
        await handle.close()


async def test_the_engines_model_keys_never_reach_a_command(provider: LocalProvider,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("MODEL_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTCOMPASS_MODEL_API_KEY"):
        monkeypatch.setenv(var, "sk-engine-only-1234")
    handle = await provider.open(_spec(env={"OPENAI_API_KEY": "acw1.envelope"}))  # what a grant puts there
    try:
        res = await handle.exec("env; tr '\\0' '\\n' < /proc/self/environ")
        assert "sk-engine-only" not in res.output
        assert "OPENAI_API_KEY=acw1.envelope" in res.stdout and "ANTHROPIC_API_KEY" not in res.stdout
    finally:
        await handle.close()


async def test_workdir_subdirectory_and_files_are_created(provider: LocalProvider) -> None:
    handle = await provider.open(_spec(workdir="/testbed", files={"a.txt": "A", "pkg/b.py": "B"}))
    try:
        assert Path(handle.workdir).name == "testbed"
        res = await handle.exec("pwd; cat a.txt pkg/b.py")
        assert res.stdout == f"{handle.workdir}\nAB"
    finally:
        await handle.close()


async def test_timeout_kills_whole_group_even_sigterm_ignoring_grandchildren(env: LocalEnvironment) -> None:
    cmd = ("trap '' TERM; echo $$ > shell.pid; "
           "(trap '' TERM; sleep 60; echo never) & echo $! > child.pid; "
           "bash -c 'trap \"\" TERM; sleep 60' & echo $! > child2.pid; "
           "echo started; wait")
    t0 = time.monotonic()
    res = await env.exec(cmd, timeout=5.0)  # wide: the shell writes its pids and "started" first, however loaded
    elapsed = time.monotonic() - t0
    assert res.timed_out
    assert res.exit_code == TIMEOUT_EXIT_CODE == 124
    assert res.stdout == "started\n"
    assert 5.0 <= elapsed < 55  # never early; hang guard: the group would sleep 60 s
    pids = await _read_pids(env, "shell.pid", "child.pid", "child2.pid")
    assert await _wait_dead(pids) == []


async def test_background_child_holding_stdout_does_not_hang_exec(env: LocalEnvironment) -> None:
    res = await env.exec("sleep 30 & echo $! > bg.pid; echo done", timeout=20)  # waiting for it would time out
    assert (res.exit_code, res.stdout, res.timed_out) == (0, "done\n", False)
    # The background process is left running (agents start servers that way) until the env closes.
    [bg] = await _read_pids(env, "bg.pid")
    assert _alive(bg)
    await env.close()
    assert await _wait_dead([bg]) == []


async def test_output_is_capped_keeping_head_and_tail(tmp_path: Path) -> None:
    prov = LocalProvider({"base_dir": str(tmp_path), "output_limit_bytes": 1000}, ComponentContext())
    try:
        handle = await prov.open(_spec())
        res = await handle.exec("printf HEAD; head -c 1000000 /dev/zero | tr '\\0' x; printf TAIL; "
                                "echo small >&2")
        assert res.exit_code == 0
        assert res.truncated
        assert res.output_bytes == 1_000_008 + 6
        assert res.stdout.startswith("HEADxxx") and res.stdout.endswith("xxxTAIL")
        assert "bytes omitted, 1000008 bytes in total" in res.stdout
        assert len(res.stdout) < 1100
        assert res.stderr == "small\n"
    finally:
        await prov.aclose()


def test_capped_buffer_matches_head_and_tail_of_the_whole_stream() -> None:
    data = bytes(range(256)) * 40
    buf = CappedBuffer(101)
    for i in range(0, len(data), 7):
        buf.feed(data[i:i + 7])
    assert buf.total == len(data) and buf.truncated
    value = buf.getvalue()
    assert value.startswith(data[:50]) and value.endswith(data[-51:])
    small = CappedBuffer(101)
    small.feed(data[:101])
    assert small.getvalue() == data[:101] and not small.truncated


async def test_200_parallel_commands_across_50_environments_are_all_correct(provider: LocalProvider) -> None:
    envs = await asyncio.gather(*(provider.open(_spec(task_id=f"t{i}", env={"IDX": str(i)}))
                                  for i in range(50)))
    try:
        results = await asyncio.gather(*(envs[i % 50].exec(f'echo "$IDX-{i}"; echo e{i} >&2', timeout=60)
                                         for i in range(200)))
        for i, res in enumerate(results):
            assert (res.exit_code, res.stdout, res.stderr) == (0, f"{i % 50}-{i}\n", f"e{i}\n")
        assert len({e.workdir for e in envs}) == 50 and len({e.id for e in envs}) == 50
    finally:
        await asyncio.gather(*(e.close() for e in envs))
    assert provider.open_environments == 0


# ----------------------------------------------------------------------------- files and archives


async def test_archive_round_trip_between_two_environments(provider: LocalProvider) -> None:
    src = await provider.open(_spec(files={"a.txt": "alpha", "sub/deep/b.bin": "beta"}))
    dst = await provider.open(_spec(task_id="t2"))
    try:
        await src.exec("chmod +x a.txt && ln -s deep/b.bin sub/link")
        tar_bytes = await src.get_archive(".")
        with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tf:
            assert "a.txt" in tf.getnames() and all(not n.startswith(("/", ".")) for n in tf.getnames())
        await dst.put_archive("copy", tar_bytes)
        res = await dst.exec("cat copy/a.txt copy/sub/deep/b.bin copy/sub/link; test -x copy/a.txt; "
                             "readlink copy/sub/link")
        assert res.stdout == "alphabetabetadeep/b.bin\n" and res.exit_code == 0
        single = await src.get_archive("sub/deep/b.bin")
        await dst.put_archive(".", single)
        assert await dst.read_file("b.bin") == b"beta"
    finally:
        await src.close()
        await dst.close()


async def test_write_and_read_file_inside_workspace(env: LocalEnvironment) -> None:
    await env.write_file("new/dir/f.txt", "héllo")
    assert await env.read_file(os.path.join(env.workdir, "new/dir/f.txt")) == "héllo".encode()
    with pytest.raises(FileNotFoundError):
        await env.read_file("missing.txt")


async def test_paths_outside_the_workspace_are_refused(env: LocalEnvironment, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    await env.exec(f"ln -s {outside} out")
    for bad in ("../x", "/etc/passwd", "out/secret", str(outside / "secret")):
        with pytest.raises(ConfigError, match="outside the workspace"):
            await env.read_file(bad)
    with pytest.raises(ConfigError):
        await env.write_file("out/planted", "x")
    with pytest.raises(ConfigError):
        await env.put_archive("out", tar_from_files({"planted": "x"}))
    with pytest.raises(ConfigError):
        await env.get_archive("..")
    assert sorted(os.listdir(outside)) == ["secret"]


async def test_escaping_spec_files_are_refused_and_leave_no_directory(
        provider: LocalProvider, tmp_path: Path) -> None:
    for files in ({"../evil": "x"}, {"/abs": "x"}, {"a/../../evil": "x"}):
        with pytest.raises(ConfigError, match="files"):
            await provider.open(_spec(files=files))
    with pytest.raises(ConfigError, match="workdir"):
        await provider.open(_spec(workdir="../up"))
    assert os.listdir(tmp_path) == []


def _raw_tar(*members: tuple[str, bytes | None, str | None]) -> bytes:
    """(name, file content or None, link target or None) -> tar bytes, no safety checks.

    A link target starting with ``hard:`` makes a hard link."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, content, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                hard = link.startswith("hard:")
                info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
                info.linkname = link.removeprefix("hard:")
                tf.addfile(info)
            else:
                info.size = len(content or b"")
                tf.addfile(info, io.BytesIO(content or b""))
    return buf.getvalue()


@pytest.mark.parametrize("members", [
    [("../evil", b"x", None)],
    [("/abs/evil", b"x", None)],
    [("ok/../../evil", b"x", None)],
    [("up", None, "../..")],
    [("abs", None, "/etc")],
    [("inside", None, "."), ("inside/../../evil", b"x", None)],
    [("hl", None, "hard:../../evil")],
], ids=["dotdot", "absolute", "nested-dotdot", "symlink-up", "symlink-absolute", "dotdot-via-link",
        "hardlink-up"])
def test_extract_refuses_escaping_members(tmp_path: Path, members: list[tuple[str, bytes | None, str | None]]
                                          ) -> None:
    dest = tmp_path / "dest" / "inner"
    dest.mkdir(parents=True)
    with pytest.raises(ConfigError):
        extract_tar(_raw_tar(*members), dest)
    assert not (tmp_path / "evil").exists() and not (tmp_path / "dest" / "evil").exists()


def test_extract_refuses_writing_through_a_symlink_planted_by_an_earlier_member(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    # "sub" is a harmless-looking link inside dest, then "hop" points through it back out.
    tar_bytes = _raw_tar(("sub", None, "."), ("sub/hop", None, "../outside"), ("sub/hop/evil", b"x", None))
    with pytest.raises(ConfigError):
        extract_tar(tar_bytes, dest)
    assert os.listdir(outside) == []


def test_make_tar_of_missing_path_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        make_tar(tmp_path / "missing")


# ----------------------------------------------------------------------------- lifecycle


async def test_close_is_idempotent_removes_dir_and_refuses_further_use(provider: LocalProvider) -> None:
    handle = await provider.open(_spec(files={"x": "1"}))
    await handle.exec("mkdir -p locked/in && chmod 000 locked")
    root = handle.workdir
    await asyncio.gather(handle.close(), handle.close())
    await handle.close()
    assert not os.path.exists(root)
    with pytest.raises(EnvironmentError_, match="closed"):
        await handle.exec("true")
    with pytest.raises(EnvironmentError_, match="closed"):
        await handle.read_file("x")


class _GatedArchive(io.BytesIO):
    """A tar whose reads stop at ``block_at`` until ``release`` is set: an extraction caught half-way."""

    def __init__(self, data: bytes, block_at: int) -> None:
        super().__init__(data)
        self.block_at = block_at
        self.blocked = threading.Event()
        self.release = threading.Event()

    def read(self, size: int | None = -1) -> bytes:
        if self.tell() >= self.block_at and not self.release.is_set():
            self.blocked.set()
            self.release.wait(30)
        return super().read(size)


async def test_an_extraction_running_at_close_is_waited_for_and_cannot_bring_the_workspace_back(
        provider: LocalProvider) -> None:
    # Its caller cancelled (a deadline, a stall), the extraction's thread runs on: close() must neither
    # remove the workspace under it nor let it recreate the directories close() removed.
    handle = await provider.open(_spec())
    archive = _GatedArchive(tar_from_files({"a.txt": "one", "sub/b.txt": "two"}), block_at=1024)
    put = asyncio.create_task(handle.put_archive(handle.workdir, archive))
    assert await asyncio.to_thread(archive.blocked.wait, 10), "the extraction never reached its second member"
    assert Path(handle.workdir, "a.txt").read_text() == "one"
    put.cancel()
    with pytest.raises(asyncio.CancelledError):
        await put
    closing = asyncio.create_task(handle.close())
    await asyncio.sleep(0.3)
    assert not closing.done() and os.path.isdir(handle.root)  # waiting for the extraction
    archive.release.set()
    await asyncio.wait_for(closing, 30)
    assert not os.path.lexists(handle.root)


def test_close_started_just_before_the_loop_shuts_down_still_cleans_up(tmp_path: Path) -> None:
    pids: list[int] = []

    async def main() -> None:
        prov = LocalProvider({"base_dir": str(tmp_path)}, ComponentContext())
        handle = await prov.open(_spec())
        await handle.exec("setsid sleep 60 & echo $! > d.pid")
        pids.extend(await _read_pids(handle, "d.pid"))
        asyncio.get_running_loop().create_task(handle.close())  # fire and forget, then the loop ends
        await asyncio.sleep(0)

    asyncio.run(main())
    assert os.listdir(tmp_path) == []
    # SIGKILL was sent before asyncio.run returned; the kernel may take a moment to finish the process off.
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(_alive(p) for p in pids)


async def test_keep_true_keeps_the_directory(provider: LocalProvider) -> None:
    handle = await provider.open(_spec(keep=True, files={"x": "kept"}))
    await handle.close()
    assert Path(handle.workdir, "x").read_text() == "kept"


async def test_close_kills_running_commands_and_escaped_daemons(provider: LocalProvider) -> None:
    handle = await provider.open(_spec())
    running = asyncio.create_task(handle.exec("echo $$ > sh.pid; setsid sleep 60 & echo $! > daemon.pid; "
                                              "sleep 60", timeout=120))
    pids = await _read_pids(handle, "sh.pid", "daemon.pid")
    t0 = time.monotonic()
    await handle.close()
    assert time.monotonic() - t0 < 30  # hang guard: the commands would sleep 60 s
    await _ended_by_close(running)
    assert await _wait_dead(pids) == []


def _cgroup_or_skip(*, pids: bool = False) -> None:
    from agentcompass.environments.local import cgroup as _cgroup

    sup = _cgroup.support()
    if sup is None or (pids and sup.pids is None):
        pytest.skip("no writable cgroup hierarchy (with the pids controller) here: the escapee/pids tests need "
                    "one (see docs/environments.md)")


async def test_close_kills_an_escapee_that_left_the_group_and_dropped_the_marker(provider: LocalProvider) -> None:
    _cgroup_or_skip()
    handle = await provider.open(_spec())
    # env -i drops AGENTCOMPASS_LOCAL_ENV, setsid leaves the process group and session; the command returns.
    res = await handle.exec("env -i setsid sleep 1000 & echo $! > d.pid")
    assert res.exit_code == 0
    [pid] = await _read_pids(handle, "d.pid")
    assert _alive(pid) and MARKER_VAR.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
    await handle.close()
    assert await _wait_dead([pid]) == []


async def test_a_bounded_fork_storm_gets_at_most_pids_limit_processes_all_killed_at_close(
        tmp_path: Path) -> None:
    _cgroup_or_skip(pids=True)
    prov = LocalProvider({"base_dir": str(tmp_path), "pids_limit": 50}, ComponentContext())
    try:
        handle = await prov.open(_spec())
        # Bounded on purpose (500 tries, never an open-ended fork bomb on a shared machine).
        storm = ("import subprocess\n"
                 "ok = []\n"
                 "for _ in range(500):\n"
                 "    try:\n"
                 "        ok.append(subprocess.Popen(['sleep', '60']).pid)\n"
                 "    except OSError:\n"
                 "        pass\n"
                 "open('storm.pids', 'w').write(' '.join(map(str, ok)))\n"
                 "print(len(ok))\n")
        await handle.write_file("storm.py", storm)
        res = await handle.exec([sys.executable, "storm.py"], timeout=60)
        assert res.exit_code == 0, res.stderr
        started = int(res.stdout)
        pids = [int(p) for p in (await handle.read_file("storm.pids")).split()]
        assert 0 < started == len(pids) < 50  # the python process itself holds one of the 50
        assert any(_alive(p) for p in pids)  # the sleeps outlive the command: close must find them
        await handle.close()
        assert await _wait_dead(pids) == []
    finally:
        await prov.aclose()


# Run in a pids cgroup of its own (the "host"): opens a local environment and runs a command that forks eight
# sleeps, with the host's pids.max set to what is running now plus ``headroom`` (0: no host limit).
_FORKS_CHILD = """
import json, sys
import uvloop
from agentcompass._errors import EnvironmentError_
from agentcompass.environments.local.provider import LocalProvider
from agentcompass.interfaces import ComponentContext, EnvOpenSpec

async def main(base, host, own_limit, headroom):
    prov = LocalProvider({"base_dir": base, "pids_limit": own_limit}, ComponentContext())
    try:
        env = await prov.open(EnvOpenSpec(run_id="r", task_id="t"))
        if headroom:
            with open(host + "/pids.max", "w") as f:
                f.write(str(int(open(host + "/pids.current").read()) + headroom))
        try:
            res = await env.exec(["/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sleep 3 & done; wait"], timeout=30)
            print(json.dumps({"exit_code": res.exit_code, "stderr": res.stderr}))
        except EnvironmentError_ as exc:
            print(json.dumps({"error": str(exc)}))
    finally:
        with open(host + "/pids.max", "w") as f:
            f.write("max")
        await prov.aclose()

# uvloop (the engine's loop) reaps children without a thread per child: only the command's processes count
uvloop.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


def _forks_in_a_host_cgroup(tmp_path: Path, own_limit: int, headroom: int) -> dict[str, object]:
    import json
    import uuid

    pids_root = Path("/sys/fs/cgroup/pids")
    if os.geteuid() != 0 or not os.access(pids_root, os.W_OK):
        pytest.skip("needs a writable cgroup v1 pids hierarchy")
    host = pids_root / f"agentcompass-test-{uuid.uuid4().hex[:8]}"
    host.mkdir()
    try:
        proc = subprocess.run(["sh", "-c", f'echo $$ > {host}/cgroup.procs && exec "$@"', "sh", sys.executable,
                               "-c", _FORKS_CHILD, str(tmp_path), str(host), str(own_limit), str(headroom)],
                              cwd=Path(__file__).resolve().parents[3], capture_output=True, text=True, timeout=50)
    finally:
        for pid in (host / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)
        for nested in sorted(host.rglob("*/"), key=lambda d: len(d.parts), reverse=True):
            if nested.is_dir():
                nested.rmdir()
        host.rmdir()
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.splitlines()[-1]))


def test_a_command_whose_forks_the_host_refused_is_a_lost_environment_not_its_own_failure(tmp_path: Path) -> None:
    # the environment stayed far below its own pids_limit: the limit that refused the forks is the host's
    out = _forks_in_a_host_cgroup(tmp_path, own_limit=512, headroom=4)
    assert "host refused" in str(out.get("error")), out
    assert not list(tmp_path.iterdir())


def test_a_command_refused_forks_by_its_own_pids_limit_gets_its_own_result(tmp_path: Path) -> None:
    # an agent's fork storm hitting the environment's own pids_limit is the agent's doing: an ordinary result
    out = _forks_in_a_host_cgroup(tmp_path, own_limit=3, headroom=0)
    assert out.get("exit_code") not in (None, 0) and "fork" in str(out.get("stderr")).lower(), out


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_command_that_cannot_join_the_cgroup_never_runs(tmp_path: Path, loop: str) -> None:
    _cgroup_or_skip()

    async def scenario() -> None:
        prov = LocalProvider({"base_dir": str(tmp_path)}, ComponentContext())
        try:
            handle = await prov.open(_spec())
            assert handle._cgroup is not None
            assert handle._cgroup.close()  # gone under the environment (as when close() races an exec)
            with pytest.raises(EnvironmentError_, match="cgroup"):
                await handle.exec("touch ran")
            assert not Path(handle.workdir, "ran").exists()
        finally:
            await prov.aclose()

    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        uvloop.run(scenario())
    else:
        asyncio.run(scenario())


def test_a_command_exiting_125_itself_is_its_own_result_not_a_lost_environment(tmp_path: Path) -> None:
    _cgroup_or_skip()

    async def scenario() -> None:
        prov = LocalProvider({"base_dir": str(tmp_path)}, ComponentContext())
        try:
            handle = await prov.open(_spec())
            res = await handle.exec("echo no such thing >&2; exit 125")
            assert res.exit_code == 125 and "no such thing" in res.stderr
        finally:
            await prov.aclose()

    asyncio.run(scenario())


def test_a_crashed_runs_cgroup_is_swept_at_provider_start(tmp_path: Path) -> None:
    _cgroup_or_skip()
    from agentcompass.environments.local import cgroup as _cgroup
    from agentcompass.environments.local.provider import owner_tag

    dead = subprocess.Popen(["true"])
    tag = owner_tag(dead.pid)  # names a process that is gone below (or already was)
    dead.wait()
    group = _cgroup.EnvCgroup.create(f"{tag}.local-agent-{tag}-0123456789ab", pids_limit=10)
    assert group is not None
    orphan = subprocess.Popen(group.wrap("/bin/sh", ["sleep", "1000"]), start_new_session=True)
    try:
        # in its cgroup before the sweep: a sweep that ran first would find it empty (and the orphan's prelude
        # would then exit 125, unable to join a removed cgroup) -- a crashed run's orphans have all joined
        deadline = time.monotonic() + 10
        while orphan.pid not in group.pids():
            assert time.monotonic() < deadline and orphan.poll() is None, "the orphan never joined its cgroup"
            time.sleep(0.01)
        live = LocalProvider({"base_dir": str(tmp_path)}, ComponentContext())
        ours = asyncio.run(live.open(_spec()))._cgroup  # a live engine's cgroup (this process) is left alone
        assert ours is not None
        asyncio.run(LocalProvider({"base_dir": str(tmp_path)}, ComponentContext()).start())
        assert orphan.wait(timeout=10) == -9
        assert not any(os.path.exists(d) for d in group.dirs)
        assert all(os.path.isdir(d) for d in ours.dirs)
        assert ours.close()
    finally:
        orphan.kill()
        orphan.wait()
        group.close()


@pytest.mark.parametrize("mounts", ["v2", "v1"])
def test_each_hierarchy_alone_kills_escapees(mounts: str) -> None:
    """The pure-v2 path (cgroup.kill) and the v1 path (pids + freezer) each work without the other."""
    from agentcompass.environments.local import cgroup as _cgroup

    full = _cgroup.support()
    if full is None or full.v2 is None or full.pids is None or full.pids == full.v2:
        pytest.skip("needs a hybrid host (cgroup2 and v1 pids both writable) to test each path alone")
    table = Path("/proc/self/mounts").read_text().splitlines()
    keep = [ln for ln in table if (" cgroup2 " in ln) == (mounts == "v2") and " cgroup" in ln]
    sup = _cgroup.detect("\n".join(keep))
    assert sup is not None and (sup.v2 is not None) == (mounts == "v2") and (sup.pids is not None) == (mounts == "v1")
    group = _cgroup.EnvCgroup.create(f"p0s0.test-{mounts}-{os.getpid()}", pids_limit=20, sup=sup)
    assert group is not None
    try:
        with tempfile.TemporaryDirectory() as d:
            subprocess.run(group.wrap("/bin/sh", ["sh", "-c", "env -i setsid sleep 1000 & echo $! > d.pid"]),
                           cwd=d, check=True, timeout=30)
            pid = int(Path(d, "d.pid").read_text())
        assert _alive(pid) and pid in group.pids()
        assert group.close()
        assert asyncio.run(_wait_dead([pid])) == []
    finally:
        group.close()


async def test_cancelling_an_exec_kills_its_process_group(env: LocalEnvironment) -> None:
    task = asyncio.create_task(env.exec("echo $$ > sh.pid; (trap '' TERM; sleep 60) & echo $! > gc.pid; "
                                        "sleep 60", timeout=120))
    pids = await _read_pids(env, "sh.pid", "gc.pid")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _wait_dead(pids) == []
    assert (await env.exec("echo still usable")).stdout == "still usable\n"


async def test_provider_aclose_closes_environments_left_open(tmp_path: Path) -> None:
    prov = LocalProvider({"base_dir": str(tmp_path)}, ComponentContext())
    envs = [await prov.open(_spec(task_id=f"t{i}")) for i in range(3)]
    await envs[0].close()
    assert prov.open_environments == 2
    sleeper = asyncio.create_task(envs[1].exec("echo $$ > p.pid; sleep 60", timeout=120))
    [pid] = await _read_pids(envs[1], "p.pid")
    await prov.aclose()
    assert prov.open_environments == 0
    assert os.listdir(tmp_path) == []
    assert await _wait_dead([pid]) == []
    await _ended_by_close(sleeper)
    with pytest.raises(EnvironmentError_, match="closed"):
        await prov.open(_spec())


# ----------------------------------------------------------------------------- configuration


@pytest.mark.parametrize("mode", ["none", "model", "allowlist"])
async def test_network_policies_other_than_public_are_refused_naming_the_mode(
        provider: LocalProvider, env: LocalEnvironment, mode: str) -> None:
    policy = NetworkPolicy(mode=mode, hosts=["example.org"] if mode == "allowlist" else [])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=f'network_policy "{mode}".*docker'):
        provider.check_network_policy(policy)
    with pytest.raises(ConfigError, match=f'"{mode}"'):
        await env.set_network_policy(policy)
    with pytest.raises(ConfigError, match=f'"{mode}"'):
        await provider.open(_spec(network=policy))
    provider.check_network_policy(NetworkPolicy(mode="public"))
    await env.set_network_policy(NetworkPolicy())


@pytest.mark.parametrize(("params", "field"), [
    ({"bogus": 1}, "bogus"),
    ({"default_timeout": 0}, "default_timeout"),
    ({"default_timeout": "5"}, "default_timeout"),
    ({"output_limit_bytes": 10.5}, "output_limit_bytes"),
    ({"shell": "/no/such/shell"}, "shell"),
    ({"base_dir": "/no/such/dir"}, "base_dir"),
    ({"pids_limit": 0}, "pids_limit"),
    ({"pids_limit": "512"}, "pids_limit"),
    ({"pids_limit": True}, "pids_limit"),
    ({"pids_limit": 10**12}, "pids_limit"),
])
def test_bad_params_raise_config_error_naming_the_key(params: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field) as info:
        LocalProvider(params, ComponentContext())
    assert info.value.field == f"environment.params.{field}"
    if field == "bogus":
        assert "base_dir, output_limit_bytes, default_timeout, shell" in str(info.value)


async def test_default_timeout_applies_and_bad_timeouts_are_refused(tmp_path: Path) -> None:
    prov = LocalProvider({"base_dir": str(tmp_path), "default_timeout": 0.3}, ComponentContext())
    try:
        handle = await prov.open(_spec())
        res = await handle.exec("sleep 5")
        assert res.timed_out and res.exit_code == TIMEOUT_EXIT_CODE
        with pytest.raises(ConfigError, match="timeout"):
            await handle.exec("true", timeout=0)
        with pytest.raises(ConfigError, match="cmd"):
            await handle.exec([])
    finally:
        await prov.aclose()


def test_works_under_uvloop(tmp_path: Path) -> None:
    uvloop = pytest.importorskip("uvloop")

    async def scenario() -> None:
        prov = LocalProvider({"base_dir": str(tmp_path)}, ComponentContext())
        try:
            handle = await prov.open(_spec())
            assert (await handle.exec("echo hi")).stdout == "hi\n"
            # the timeout covers the spawn too: one that a loaded machine meets (0.3 s did not, under stress)
            assert (await handle.exec("sleep 60", timeout=4)).timed_out
            bg = await handle.exec("sleep 30 & echo bg", timeout=20)  # waiting for the child would time out
            assert (bg.stdout, bg.timed_out) == ("bg\n", False)
        finally:
            await prov.aclose()

    uvloop.run(scenario())
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------------------- descriptor ownership


def _open_fds() -> dict[int, str]:
    out: dict[int, str] = {}
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own directory fd is gone by now
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
    return out


def _marked_pids(env_ids: set[str]) -> list[int]:
    """Processes still running with one of these environments' marker variable."""
    wanted = {f"{MARKER_VAR}={i}".encode() for i in env_ids}
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if wanted & set(Path(f"/proc/{name}/environ").read_bytes().split(b"\0")) and _alive(int(name)):
                    found.append(int(name))
    return found


def _hold_own_descriptors(path: str, stop: threading.Event, problems: list[str]) -> None:
    """Like a log handler or a worker thread: open a file, check the fd still is that file, close it."""
    ref = os.stat(path)
    while not stop.is_set():
        fd = os.open(path, os.O_RDONLY)
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (ref.st_dev, ref.st_ino):
                problems.append(f"fd {fd} was closed and reused behind its owner's back")
        except OSError as exc:
            problems.append(f"fstat({fd}): {exc!r}")
        try:
            os.close(fd)
        except OSError as exc:
            problems.append(f"close({fd}): {exc!r}")
        time.sleep(0.0001)  # let the event loop have the GIL most of the time


_NO_DOUBLE_CLOSE_SCRIPT = """
import asyncio, contextlib, sys
import uvloop
from agentcompass.environments.local.provider import LocalProvider
from agentcompass.interfaces import ComponentContext, EnvOpenSpec

async def main():
    prov = LocalProvider({"base_dir": sys.argv[1]}, ComponentContext())
    try:
        env = await prov.open(EnvOpenSpec(run_id="r", task_id="t"))
        for i in range(5):
            assert (await env.exec(f"echo {i}; echo e >&2")).stdout == f"{i}\\n"
        assert (await env.exec("sleep 30 & echo bg")).stdout == "bg\\n"
        assert (await env.exec("sleep 30", timeout=0.2)).timed_out
        assert (await env.exec(["no-such-program-xyz"])).exit_code == 127
        task = asyncio.create_task(env.exec("sleep 30"))
        await asyncio.sleep(0.1)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    finally:
        await prov.aclose()

uvloop.run(main())
"""


def test_exec_on_uvloop_never_closes_a_descriptor_twice(tmp_path: Path) -> None:
    """The old double close (libuv closed each pipe read end, then uvloop closed it again through the file
    object it was given) showed as ``close(N) = -1 EBADF`` on every command; it only did damage when another
    thread reused N in between, so the reliable check is to trace the loop thread's close() calls."""
    pytest.importorskip("uvloop")
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed")
    trace = tmp_path / "trace.txt"
    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
    # Without -f strace follows only the main thread, which runs the event loop.
    proc = subprocess.run([strace, "-qq", "-e", "trace=close", "-o", str(trace), sys.executable, "-c",
                           _NO_DOUBLE_CLOSE_SCRIPT, str(tmp_path)],
                          capture_output=True, text=True, timeout=60, env=env, check=False)
    if not trace.exists() or "ptrace" in proc.stderr.lower():
        pytest.skip(f"strace cannot trace here: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 0, proc.stderr
    closes = trace.read_text().splitlines()
    assert len(closes) > 20  # the trace did capture the loop thread's closes
    assert [line for line in closes if "EBADF" in line] == []


# a loaded 2-core CI machine took over 60 s, and a timeout raised inside logging's lock left the worker's later
# `import ray` deadlocked on it: a deadline that only catches a hang
@pytest.mark.timeout(300)
def test_hundreds_of_concurrent_execs_and_env_lifecycles_on_uvloop_close_only_their_own_fds(
        tmp_path: Path) -> None:
    """Regression: exec used to hand its own pipe ends to the loop, and uvloop closed each read end twice,
    closing descriptors other threads had just opened (EBADF in exec, crossed pipes, hung commands)."""
    uvloop = pytest.importorskip("uvloop")
    base = tmp_path / "envs"
    base.mkdir()
    probe = tmp_path / "probe"
    probe.write_text("mine")
    problems: list[str] = []
    env_ids: set[str] = set()

    async def lifecycle(prov: LocalProvider, i: int) -> None:
        handle = await prov.open(_spec(task_id=f"t{i}", files={"in.txt": f"line{i}\n"}))
        env_ids.add(handle.id)
        try:
            for j in range(4):
                res = await handle.exec(f"cat in.txt; echo {j} >&2; echo {i}-{j} > out{j}.txt", timeout=60)
                assert (res.exit_code, res.stdout, res.stderr) == (0, f"line{i}\n", f"{j}\n"), res
                assert await handle.read_file(f"out{j}.txt") == f"{i}-{j}\n".encode()
            with tarfile.open(fileobj=io.BytesIO(await handle.get_archive("."))) as tf:
                assert "out3.txt" in tf.getnames()
            if i % 10 == 0:  # a daemon holding stdout must neither hang exec nor keep an fd open
                assert (await handle.exec("sleep 30 & echo bg", timeout=60)).stdout == "bg\n"
            if i % 10 == 5:  # nor must a cancelled command
                task = asyncio.create_task(handle.exec("sleep 30", timeout=60))
                await asyncio.sleep(0.05)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        finally:
            await handle.close()  # /proc scan and rmtree in a worker thread, concurrently with execs

    async def scenario() -> None:
        prov = LocalProvider({"base_dir": str(base)}, ComponentContext())
        try:
            await lifecycle(prov, -1)  # warm up: the loop creates its own long-lived descriptors lazily
            await asyncio.sleep(0.1)
            baseline = _open_fds()
            stop = threading.Event()
            threads = [threading.Thread(target=_hold_own_descriptors, args=(str(probe), stop, problems))
                       for _ in range(2)]
            for t in threads:
                t.start()
            try:
                sem = asyncio.Semaphore(30)

                async def limited(i: int) -> None:
                    async with sem:
                        await lifecycle(prov, i)

                results = await asyncio.gather(*(limited(i) for i in range(60)), return_exceptions=True)
            finally:
                stop.set()
                for t in threads:
                    t.join()
            errors = [r for r in results if isinstance(r, BaseException)]
            assert errors == []
            assert prov.open_environments == 0
            for _ in range(300):  # descriptors of just-ended processes are closed by loop callbacks (bounded: 30 s)
                leaked = {fd: target for fd, target in _open_fds().items() if baseline.get(fd) != target}
                if not leaked:
                    break
                await asyncio.sleep(0.1)
            assert leaked == {}
        finally:
            await prov.aclose()

    uvloop.run(scenario())
    assert problems == []
    assert os.listdir(base) == []
    assert _marked_pids(env_ids) == []
