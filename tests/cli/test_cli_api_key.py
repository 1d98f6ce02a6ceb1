"""The model API key reaches the engine without a command line, and a local agent never sees it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ..fixtures_scripted import start_scripted_server
from .test_cli import REPO, cli

SECRET = "sk-local-7c1e5a9b3d2f4e6a8b0c"
# The agent looks everywhere a local process can: its environment, its parent's (the engine's) command line
# and every process's command line; all written into the workspace and printed into its trajectory.
DUMP = ("env > env.txt; tr '\\0' ' ' < /proc/$PPID/cmdline > ppid.txt; "
        "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f 2>/dev/null; echo; done > all.txt; "
        "cat env.txt ppid.txt all.txt")


async def _run_cli(args: list[str], env: dict[str, str], script: list[dict[str, Any]]) -> tuple[bytes, bytes, int]:
    """``agentcompass`` with ``args`` against a scripted server that wants SECRET; (stdout, stderr, pid) of a
    run that must succeed."""
    async with start_scripted_server({"script": script}, require_api_key=SECRET) as url:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentcompass.cli", *args, "--model-base-url", url, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), 240)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode == 0, err.decode()
    return out, err, proc.pid


@pytest.mark.timeout(300)
@pytest.mark.parametrize("via", ["env", "file"])
async def test_a_local_agent_with_wrap_api_key_finds_the_key_nowhere(tmp_path: Path, via: str) -> None:
    script = [{"match": "Task: files/hello_world\n", "turns": [f"```bash\n{DUMP}\n```", "<submit></submit>"]}]
    workspaces, results, secret_dir = tmp_path / "ws", tmp_path / "results", tmp_path.parent / f"{tmp_path.name}-key"
    workspaces.mkdir()
    secret_dir.mkdir()
    key_file = secret_dir / "key"
    key_file.write_text(SECRET + "\n")
    env = {k: v for k, v in os.environ.items() if "API_KEY" not in k}
    env["PYTHONPATH"] = str(REPO)
    args = ["run", "shell_tasks", "shell_agent", "scripted", "--env", "local", "--wrap-api-key",
            "--benchmark-params", json.dumps({"sample_ids": ["files/hello_world"]}),
            "--env-params", json.dumps({"base_dir": str(workspaces)}), "--keep-environment",
            "--results-dir", str(results), "--progress", "none", "--log-level", "DEBUG",
            "--file-log-level", "DEBUG"]
    if via == "env":
        env["MODEL_API_KEY"] = SECRET
    else:
        args += ["--model-api-key-file", str(key_file)]
    out, err, _ = await _run_cli(args, env, script)
    assert b"visible to every process" not in err
    [summary] = results.rglob("summary.json")
    assert json.loads(summary.read_text())["counts"]["errors"] == 0  # the key reached the model via the gateway
    [dump_env] = workspaces.glob("agentcompass-agent-*/env.txt")  # (the verifier's workspace has a copy)
    dumped = dump_env.read_text()
    assert "OPENAI_API_KEY=acw1." in dumped and "MODEL_API_KEY=" + SECRET not in dumped  # an envelope only
    assert "agentcompass.cli" in (dump_env.parent / "ppid.txt").read_text()  # it did read the engine's argv
    assert len((dump_env.parent / "all.txt").read_text().splitlines()) > 3
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) > 8
    for p in files:
        assert SECRET not in p.read_text(errors="replace"), p
    assert SECRET not in out.decode() + err.decode()


def test_a_key_on_the_command_line_still_works_with_a_warning(tmp_path: Path) -> None:
    res = cli("run", "shell_tasks", "shell_agent", "scripted", "--model-api-key", "k-argv-1",
              "--benchmark-params", '{"sample_ids": ["answer/count_lines"]}', "--progress", "none",
              "--results-dir", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "--model-api-key on the command line is visible to every process" in res.stderr


@pytest.mark.parametrize(("content", "flag_args", "expect"), [
    (None, [], "cannot read"),
    ("", [], "empty"),
    ("a\nb\n", [], "several lines"),
    ("k\n", ["--model-api-key", "k2"], "not both"),
])
def test_a_bad_key_file_is_an_error_naming_the_flag(tmp_path: Path, content: str | None, flag_args: list[str],
                                                     expect: str) -> None:
    key = tmp_path / "key"
    if content is not None:
        key.write_text(content)
    res = cli("run", "shell_tasks", "shell_agent", "scripted", "--model-api-key-file", str(key), *flag_args,
              "--results-dir", str(tmp_path / "r"), "--progress", "none")
    assert res.returncode == 2, res.stderr
    assert "--model-api-key-file" in res.stderr and expect in res.stderr and "Traceback" not in res.stderr


# Every process's environment block, one file per pid (the engine's among them): what /proc shows anyone.
DUMP_ENVIRON = ("mkdir -p envs; for d in /proc/[0-9]*; do tr '\\0' '\\n' < $d/environ > envs/${d#/proc/} "
                "2>/dev/null; done; ls envs | wc -l")


@pytest.mark.timeout(300)
async def test_a_local_agent_cannot_read_the_key_from_the_engines_environ(tmp_path: Path) -> None:
    script = [{"match": "Task: files/hello_world\n", "turns": [f"```bash\n{DUMP_ENVIRON}\n```",
                                                             "<submit></submit>"]}]
    workspaces, results = tmp_path / "ws", tmp_path / "results"
    workspaces.mkdir()
    env = {k: v for k, v in os.environ.items() if "API_KEY" not in k}
    env["PYTHONPATH"] = str(REPO)
    env["MODEL_API_KEY"] = SECRET
    mark = f"AGENTCOMPASS_TEST_MARK={os.getpid()}-{tmp_path.name}"
    env[mark.split("=")[0]] = mark.split("=")[1]
    args = ["run", "shell_tasks", "shell_agent", "scripted", "--env", "local", "--wrap-api-key",
            "--benchmark-params", json.dumps({"sample_ids": ["files/hello_world"]}),
            "--env-params", json.dumps({"base_dir": str(workspaces)}), "--keep-environment",
            "--results-dir", str(results), "--progress", "none"]
    _, _, pid = await _run_cli(args, env, script)
    [summary] = results.rglob("summary.json")
    assert json.loads(summary.read_text())["counts"]["errors"] == 0  # the key reached the model via the gateway
    [engine] = workspaces.glob(f"agentcompass-agent-*/envs/{pid}")
    seen = engine.read_text(errors="replace")
    assert mark in seen.splitlines()  # the agent did read the engine's environment block
    assert SECRET not in seen
    for p in engine.parent.iterdir():
        assert SECRET not in p.read_text(errors="replace"), p
