"""openhands on docker: the agent runs on the host, its commands in a container with no network at all (the
model is reached by the host-side agent through the gateway, with an envelope for the key); the file editor's
host copies never leave their folder."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass.interfaces import EnvOpenSpec, NetworkPolicy
from agentcompass.records import TaskDetail
from tests.fixtures_scripted import running_scripted_server
from tests.harnesses.openhands.test_openhands import bridges, call, climbing, run_direct

SCRIPT = Path(__file__).resolve().parents[2] / "harnesses" / "scripts" / "openhands_shell_tasks.json"
REAL_KEY = "sk-real-openhands-test-key"
# installs OpenHands on first use (about a minute, more on a busy machine), then cached
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


async def test_openhands_solves_a_shell_task_in_a_container_without_network(base_image: str, docker_run_id: str,
                                                                          tmp_path: Path) -> None:
    async with running_scripted_server({"bundled": False, "script_file": str(SCRIPT)},
                                        require_api_key=REAL_KEY) as server:
        out = await asyncio.to_thread(
            agentcompass.run_evaluation, "shell_tasks", "openhands", "scripted", "docker",
            model_base_url=server.base_url, model_api_key=REAL_KEY, wrap_api_key=True,
            harness_params={"max_iterations": 10}, benchmark_params={"sample_ids": ["files/hello_world"]},
            environment_params={"image": base_image, "network_policy": "none"}, auto_install_dependencies=True,
            run_id=docker_run_id, results_dir=str(tmp_path), progress="none")
    assert out.ok, out.error
    assert out.metrics["pass@1"] == 1.0 and out.run_dir is not None
    detail = msgspec.json.decode(next((out.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    attempt = detail.attempts["1"]
    assert attempt.correct is True and attempt.trajectory is not None
    first = attempt.trajectory.steps[0].observation or ""
    assert first.startswith(f"{attempt.meta['environments'][0]['workdir']}/sub\n")
    assert attempt.meta["gateway"]["calls"] == 4
    # the real key stayed with the gateway: nothing the run wrote holds it
    assert not [p for p in out.run_dir.rglob("*") if p.is_file() and REAL_KEY.encode() in p.read_bytes()]


async def test_file_editor_paths_that_climb_out_stay_in_the_container(docker_provider: Any, docker_run_id: str,
                                                                      tmp_path: Path) -> None:
    # the editor works on host copies in a temporary folder: `/../../x` is /x in the container and must never
    # become a host path outside that folder, whether the agent creates, views (copies in) or views a missing file
    precious = tmp_path / "precious.txt"
    precious.write_text("precious\n")
    copied = tmp_path / "copied.txt"
    created = tmp_path / "created.txt"
    env = await docker_provider.open(EnvOpenSpec(run_id=docker_run_id, task_id="t1",
                                                 network=NetworkPolicy(mode="none")))
    try:
        turns = [
            call("terminal", command=f"mkdir -p {tmp_path} && echo agent-made > {copied}"),
            call("file_editor", command="view", path=climbing(copied)),
            call("file_editor", command="create", path=climbing(created), file_text="pwned\n"),
            call("file_editor", command="view", path=climbing(precious)),
            call("finish", message="done"),
        ]
        result, _ = await run_direct(env, turns)

        assert precious.read_text() == "precious\n"  # a file missing in the container is not deleted on the host
        assert not copied.exists() and not created.exists()
        assert await env.read_file(str(created)) == b"pwned\n"  # it went where the agent meant: the container
        steps = result.trajectory.steps
        assert "agent-made" in (steps[1].observation or "")
        assert f"File created successfully at: {created}" in (steps[2].observation or "")
        assert steps[3].exit_code == 1 and result.error_kind is None
        assert bridges() == []
    finally:
        await env.close()
