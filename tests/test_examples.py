"""The examples run as shipped, and the Python on the SDK page (docs/api.md) and the README is those files.

Each script runs verbatim in a fresh directory with only ``MODEL_BASE_URL`` (the scripted model server, which
answers any model id from its bundled scripts) and ``MODEL_API_KEY`` set, as a user would run it.
"""

from __future__ import annotations

import ast
import asyncio
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agentcompass.models.scripted.server import ScriptedServer
from tests.fixtures_scripted import running_scripted_server

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
API_KEY = "sk-example-test-key"
#: the SWE-bench example needs Docker and the dataset; its own end-to-end test runs it.
NOT_RUN_HERE = {"swebench_verified.py"}
#: the Python blocks of each page, in order, by example file.
DOC_BLOCKS = {
    "docs/api.md": ["sdk_launch.py", "swebench_verified.py", "run_evaluation.py", "launch.py", "async_launch.py",
                    "on_progress.py"],
    "README.md": ["run_evaluation.py", "sdk_launch.py"],
}


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


@pytest.mark.parametrize("page", sorted(DOC_BLOCKS))
def test_every_python_block_of_the_page_is_an_example_file_byte_for_byte(page: str) -> None:
    blocks = _python_blocks((REPO / page).read_text())
    assert len(blocks) == len(DOC_BLOCKS[page]), f"{page}: each python block must be an examples/ file"
    for block, name in zip(blocks, DOC_BLOCKS[page], strict=True):
        path = EXAMPLES / name
        assert block == path.read_text(), f"{page}: the block for examples/{name} differs from the file"


# ----------------------------------------------------------------------------- each example runs

def _outcome_lines(stdout: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """``name status {metrics}`` lines (the launch examples' output) by name."""
    out = {}
    for line in stdout.splitlines():
        name, status, metrics = line.split(" ", 2)
        out[name] = (status, ast.literal_eval(metrics))
    return out


def _check_sdk_launch(stdout: str, tmp: Path, server: ScriptedServer) -> None:
    lines = _outcome_lines(stdout)
    assert list(lines) == ["agent", "one-shot"]
    (agent_status, agent), (one_status, one) = lines["agent"], lines["one-shot"]
    assert agent_status == one_status == "completed"
    # the bundled script solves 26 of the 37 shell_tasks; the one-shot harness gets 9 `answer` tasks
    assert agent["tasks"] == 37 and agent["solved"] == 26
    assert one["tasks"] == 9 and 0 < one["pass@1"] <= 1
    assert server.completions_served > 37  # both requests talked to the endpoint, with the key
    runs = list((tmp / "results" / "shell_tasks").glob("*/gpt-5-mini/*/summary.json"))
    assert len(runs) == 2


def _check_run_evaluation(stdout: str, tmp: Path, server: ScriptedServer) -> None:
    status, pass_at_2, errors, run_dir = stdout.split()
    assert status == "completed" and 0 < float(pass_at_2) <= 1 and errors == "0"
    assert Path(run_dir).parts[0] == "results" and (tmp / run_dir / "summary.json").is_file()  # under the cwd


def _check_launch(stdout: str, tmp: Path, server: ScriptedServer) -> None:
    status, metrics = stdout.strip().split(" ", 1)
    assert status == "completed" and ast.literal_eval(metrics)["tasks"] == 9
    assert len(list((tmp / "results").glob("shell_tasks/*/scripted/*/summary.json"))) == 2


def _check_async_launch(stdout: str, tmp: Path, server: ScriptedServer) -> None:
    status, metrics = stdout.strip().split(" ", 1)
    assert status == "completed" and ast.literal_eval(metrics)["pass@1"] > 0


def _check_on_progress(stdout: str, tmp: Path, server: ScriptedServer) -> None:
    *events, last = stdout.strip().splitlines()
    status, metrics = last.split(" ", 1)
    tasks = ast.literal_eval(metrics)["tasks"]
    assert status == "completed" and len(events) == tasks > 0  # one TaskFinished line per task
    assert sum(not e.endswith(" not solved") for e in events) == ast.literal_eval(metrics)["solved"] > 0


CHECKS: dict[str, Callable[[str, Path, ScriptedServer], None]] = {
    "sdk_launch.py": _check_sdk_launch, "run_evaluation.py": _check_run_evaluation, "launch.py": _check_launch,
    "async_launch.py": _check_async_launch, "on_progress.py": _check_on_progress,
}


def test_every_example_script_is_run_here() -> None:
    assert {p.name for p in EXAMPLES.glob("*.py")} - NOT_RUN_HERE == set(CHECKS)


@pytest_asyncio.fixture
async def model_server() -> AsyncIterator[ScriptedServer]:
    async with running_scripted_server(require_api_key=API_KEY) as server:
        yield server


@pytest.mark.parametrize("script", sorted(CHECKS))
async def test_example_script_runs_verbatim(script: str, tmp_path: Path, model_server: ScriptedServer) -> None:
    assert model_server.base_url is not None
    env = {"MODEL_BASE_URL": model_server.base_url, "MODEL_API_KEY": API_KEY}
    proc = await asyncio.create_subprocess_exec(sys.executable, str(EXAMPLES / script), cwd=tmp_path, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(240):
            stdout, stderr = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, stderr.decode()
    CHECKS[script](stdout.decode(), tmp_path, model_server)


def test_example_spec_launches(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run([sys.executable, "-m", "agentcompass.cli", "launch", str(EXAMPLES / "spec.yaml"),
                          "--progress", "none"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    assert "launch completed" in res.stdout
