"""Sandboxed agents reach their model only through the gateway: envelopes in the container, never the real key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

import agentcompass
from agentcompass.models.scripted.server import stop_process
from agentcompass.records import TaskDetail
from tests.conftest import start_server_process

from ..conftest import containers_of, networks_of

REAL_KEY = "sk-docker-real-key-9876"
HARNESS = "tests.engine.gateway_components:GatewayCallHarness"


@pytest.fixture(scope="module")
def keyed_server() -> Iterator[str]:
    """A scripted server on the host (127.0.0.1) that requires ``REAL_KEY``."""
    proc, url = start_server_process("--api-key", REAL_KEY)
    try:
        yield url
    finally:
        stop_process(proc)


def _run(url: str, run_id: str, results: Path, **kw: object) -> tuple[agentcompass.EvaluationResult, TaskDetail]:
    out = agentcompass.run_evaluation(
        "shell_tasks", HARNESS, "scripted", "docker", model_base_url=url, model_api_key=REAL_KEY,
        harness_params={"prompt": "Task: files/hello_world\n"}, benchmark_params={"sample_ids": ["files/hello_world"]},
        run_id=run_id, results_dir=str(results), progress="none", **kw)  # type: ignore[arg-type]
    assert out.ok, out.error
    assert out.run_dir is not None
    detail = msgspec.json.decode(next((out.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    return out, detail


def test_wrap_api_key_in_docker_the_container_holds_an_envelope_and_its_call_is_billed_to_the_attempt(
        base_image: str, docker_run_id: str, tmp_path: Path, keyed_server: str) -> None:
    out, detail = _run(keyed_server, docker_run_id, tmp_path, wrap_api_key=True)
    a = detail.attempts["1"]
    env = a.artifacts["env"]
    assert REAL_KEY not in env and "127.0.0.1" not in env  # no real key, no host-only endpoint
    assert "OPENAI_API_KEY=acw1." in env and "ANTHROPIC_API_KEY=acw1." in env
    assert (a.final_answer or "").startswith("STATUS 200 "), a.final_answer
    assert a.meta["gateway"]["calls"] == 1 and a.meta["usage"]["calls"] == 1
    assert a.meta["usage"]["prompt_tokens"] > 0
    assert out.run_dir is not None
    assert REAL_KEY not in "\n".join(p.read_text(errors="replace") for p in out.run_dir.rglob("*") if p.is_file())
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []


def test_model_network_policy_routes_the_container_to_the_gateway_with_a_route_token(
        base_image: str, docker_run_id: str, tmp_path: Path, keyed_server: str) -> None:
    _, detail = _run(keyed_server, docker_run_id, tmp_path, environment_params={"network_policy": "model"})
    a = detail.attempts["1"]
    env = a.artifacts["env"]
    assert REAL_KEY not in env and "OPENAI_API_KEY=acr1_" in env and "/r/acr1_" in env
    assert (a.final_answer or "").startswith("STATUS 200 "), a.final_answer
    assert a.meta["gateway"]["calls"] == 1
    assert containers_of(docker_run_id) == [] and networks_of(docker_run_id) == []
