"""launch() on the stdlib event loop: where uvloop is not installed (Windows, a minimal install) and when
``AGENTCOMPASS_EVENT_LOOP=asyncio`` asks for it. The engine's default executor must be one the stdlib loop
accepts, and a run there must reach the same results as on uvloop."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass import ConfigError

REPO = Path(__file__).resolve().parents[1]
#: a Python prelude that makes ``import uvloop`` fail as it does where it is not installed
NO_UVLOOP = "import sys; sys.modules['uvloop'] = None\n"


def _python(code: str, *args: str, cwd: Path | None = None, block_uvloop: bool = True,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AGENTCOMPASS_EVENT_LOOP"}
    env["PYTHONPATH"] = str(REPO)
    prelude = NO_UVLOOP if block_uvloop else ""
    return subprocess.run([sys.executable, "-c", prelude + code, *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd or REPO)


def test_launch_runs_where_uvloop_is_not_installed(tmp_path: Path) -> None:
    res = _python(
        "import agentcompass, asyncio, json, sys\n"
        "seen = set()\n"
        "out = agentcompass.run_evaluation('shell_tasks', 'shell_agent', 'scripted', 'local',\n"
        "    benchmark_params={'categories': ['answer']}, results_dir=sys.argv[1], progress='none',\n"
        "    on_progress=lambda e: seen.add(type(asyncio.get_running_loop()).__module__))\n"
        "print(json.dumps({'status': out.status, 'done': out.counts.done, 'loops': sorted(seen)}))\n",
        str(tmp_path))
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert report["status"] == "completed" and report["done"] > 0
    assert report["loops"] == ["asyncio.unix_events"]


def test_the_component_bases_tests_pass_on_the_stdlib_loop() -> None:
    res = _python("import pytest\n"
                  "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/test_component_bases.py']))\n",
                  timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert " passed" in res.stdout and "failed" not in res.stdout


def _loop_module(monkeypatch: pytest.MonkeyPatch, value: str, tmp_path: Path) -> set[str]:
    monkeypatch.setenv("AGENTCOMPASS_EVENT_LOOP", value)
    seen: set[str] = set()
    out = agentcompass.run_evaluation(
        "shell_tasks", "openai_chat", "scripted", benchmark_params={"categories": ["answer"], "limit": 1},
        results_dir=str(tmp_path), progress="none",
        on_progress=lambda e: seen.add(type(asyncio.get_running_loop()).__module__))
    assert out.status == "completed", out.error
    return seen


def test_the_event_loop_setting_picks_the_stdlib_loop(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert _loop_module(monkeypatch, "asyncio", tmp_path / "a") == {"asyncio.unix_events"}
    pytest.importorskip("uvloop")
    assert _loop_module(monkeypatch, "uvloop", tmp_path / "b") == {"uvloop"}
    assert _loop_module(monkeypatch, "auto", tmp_path / "c") == {"uvloop"}


def test_an_unknown_event_loop_setting_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    monkeypatch.setenv("AGENTCOMPASS_EVENT_LOOP", "trio")
    with pytest.raises(ConfigError, match="AGENTCOMPASS_EVENT_LOOP.*auto, asyncio, uvloop") as info:
        agentcompass.run_evaluation("shell_tasks", "none", "scripted", results_dir=str(tmp_path), progress="none")
    assert info.value.field == "AGENTCOMPASS_EVENT_LOOP"
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_asking_for_uvloop_where_it_is_missing_is_a_config_error(tmp_path: Path) -> None:
    res = _python("import os, agentcompass\n"
                  "os.environ['AGENTCOMPASS_EVENT_LOOP'] = 'uvloop'\n"
                  "try:\n"
                  "    agentcompass.run_evaluation('shell_tasks', 'none', 'scripted', results_dir=sys.argv[1],\n"
                  "                                progress='none')\n"
                  "except agentcompass.ConfigError as exc:\n"
                  "    print('ConfigError', exc.field, exc)\n", str(tmp_path))
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.startswith("ConfigError AGENTCOMPASS_EVENT_LOOP") and "not installed" in res.stdout


def _default_job_metrics(tmp_path: Path, *, block_uvloop: bool) -> dict[str, Any]:
    """The README's default job (``agentcompass run shell_tasks shell_agent scripted --env local``): its
    summary's metrics and counts."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    res = _python("import sys\nfrom agentcompass.cli import main\nsys.exit(main())\n", "run", "shell_tasks",
                  "shell_agent", "scripted", "--env", "local", "--progress", "none", "--results-dir", str(tmp_path),
                  "--run-id", "default", block_uvloop=block_uvloop, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads((tmp_path / "shell_tasks" / "shell_agent" / "scripted" / "default" / "summary.json")
                         .read_text())
    assert summary["status"] == "completed"
    return {"metrics": summary["metrics"], "counts": summary["counts"]}


def test_the_default_job_gives_the_same_metrics_on_the_stdlib_loop(tmp_path: Path) -> None:
    on_uvloop = _default_job_metrics(tmp_path / "uvloop", block_uvloop=False)
    on_stdlib = _default_job_metrics(tmp_path / "stdlib", block_uvloop=True)
    assert on_uvloop["counts"]["total"] > 0 and on_uvloop["counts"]["done"] == on_uvloop["counts"]["total"]
    assert on_stdlib == on_uvloop


def test_a_stuck_worker_does_not_hold_the_process_on_the_stdlib_loop() -> None:
    # the pool is the loop's default executor; a call that never returns must not keep the process alive
    res = _python(
        "import asyncio, concurrent.futures, threading\n"
        "from agentcompass.engine.workers import DaemonThreadPool\n"
        "async def main():\n"
        "    pool = DaemonThreadPool(grace_s=0.2)\n"
        "    assert isinstance(pool, concurrent.futures.ThreadPoolExecutor)\n"
        "    asyncio.get_running_loop().set_default_executor(pool)\n"
        "    started = threading.Event()\n"
        "    def stuck():\n"
        "        started.set()\n"
        "        threading.Event().wait()\n"
        "    asyncio.get_running_loop().run_in_executor(None, stuck)\n"
        "    assert await asyncio.to_thread(lambda: 41) + 1 == 42\n"
        "    await asyncio.to_thread(started.wait)\n"
        "    print('daemon workers:', all(t.daemon for t in threading.enumerate()\n"
        "                                 if t.name.startswith('agentcompass-worker')))\n"
        "asyncio.run(main())\n"
        "print('exited')\n", timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["daemon", "workers:", "True", "exited"]
