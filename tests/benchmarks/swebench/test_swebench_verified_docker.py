"""examples/swebench_verified.py as shipped, against stand-ins of the outside world: the Hub (a parquet with
the official layout on 127.0.0.1, via HF_ENDPOINT) and the model (the scripted HTTP server). The dataset row
``astropy__astropy-12907`` is a bundled ``swebench_local`` instance under that id, and its official image
name is the local instance's image built here; the real mini-swe-agent applies the gold patch and submits."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agentcompass.benchmarks.swebench.images import official_image
from agentcompass.benchmarks.swebench.local_instances import load_local_instances, recipe

from ...environments.conftest import containers_of, docker_cli
from ...standins.hf_hub import HubStandIn, swebench_parquet
from .conftest import needs_host_py311

REPO = Path(__file__).resolve().parents[3]
IID = "astropy__astropy-12907"


def _turn(thought: str, command: str) -> dict[str, Any]:
    # Text for a text-based config and the same command as a bash tool call for a tool-calling one.
    return {"content": f"THOUGHT: {thought}\n\n```mswea_bash_command\n{command}\n```",
            "tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


async def _run_example(cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(REPO / "examples" / "swebench_verified.py"), cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 1200)
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.mark.slow
@pytest.mark.timeout(2400)
@needs_host_py311
async def test_swebench_verified_example_downloads_caches_and_resolves(base_image: str, docker_run_id: str,
                                                                       tmp_path: Path) -> None:
    from ...fixtures_scripted import start_scripted_server

    inst = {**load_local_instances()[0], "instance_id": IID}
    image = official_image(IID)
    if docker_cli("images", "-q", image).strip():
        pytest.skip(f"{image} already exists on this daemon; the test builds its own under that name")
    _, context = recipe(load_local_instances()[0], tmp_path / "contexts")
    docker_cli("build", "-q", "-t", image, "--label", f"agentcompass.run_id={docker_run_id}",
               "--label", "agentcompass.test=swebench_verified_example", context, timeout=900)
    b64 = base64.b64encode(inst["patch"].encode()).decode()
    turns = [_turn("Apply the fix.", f"cd /testbed && echo {b64} | base64 -d | git apply"),
             _turn("Write the patch.", "cd /testbed && git diff > /tmp/patch.txt && cat /tmp/patch.txt"),
             _turn("Submit.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat /tmp/patch.txt")]
    script = [{"match": inst["problem_statement"][:200], "turns": turns}]
    try:
        with HubStandIn() as hub:
            commit = hub.add_dataset("SWE-bench/SWE-bench_Verified",
                                     {"data/test-00000-of-00001.parquet": swebench_parquet([inst])})
            async with start_scripted_server({"script": script, "bundled": False}) as base_url:
                env = {"HF_ENDPOINT": hub.url, "AGENTCOMPASS_DATA_DIR": str(tmp_path / "data"),
                       "MODEL_BASE_URL": base_url, "MODEL_API_KEY": "sk-test-123456",
                       # process basics, not configuration: where executables and the home folder are
                       "PATH": os.environ["PATH"], "HOME": str(tmp_path)}
                before = dict(os.environ)
                runs: list[Path] = []
                for attempt in (1, 2):
                    served = len(hub.requests)
                    code, out, err = await _run_example(tmp_path, env)
                    assert code == 0, err[-4000:]
                    status, pass1, run_dir = out.split()[-3:]
                    assert (status, pass1) == ("completed", "1.0"), (out, err[-4000:])
                    runs.append(Path(tmp_path, run_dir) if not Path(run_dir).is_absolute() else Path(run_dir))
                    if attempt == 1:
                        # the download is shown (plain progress lines: stderr is not a terminal here)
                        assert "downloaded swebench_verified dataset (test)" in err, err[-4000:]
                        assert hub.downloads() == [f"/datasets/SWE-bench/SWE-bench_Verified/resolve/{commit}/"
                                                   "data/test-00000-of-00001.parquet"]
                    else:
                        assert hub.requests[served:] == []  # the cache under AGENTCOMPASS_DATA_DIR, no network
                assert dict(os.environ) == before
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            docker_cli("rmi", image, timeout=120)
    cached = tmp_path / "data" / "hf" / "SWE-bench" / "SWE-bench_Verified" / "main" / "test"
    assert (cached / "agentcompass-manifest.json").is_file()
    for run_dir in runs:
        params = msgspec.json.decode((run_dir / "params.json").read_bytes())
        assert params["resolved"]["benchmark_source"] == {
            "kind": "hub", "path": str(cached), "repo": "SWE-bench/SWE-bench_Verified", "revision": "main",
            "commit": commit, "files": ["data/test-00000-of-00001.parquet"]}
        assert "sk-test-123456" not in "".join(p.read_text(errors="replace") for p in run_dir.rglob("*")
                                                if p.is_file())
        assert containers_of(run_dir.name) == []
