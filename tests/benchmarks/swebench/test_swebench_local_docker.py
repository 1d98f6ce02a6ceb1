"""``swebench_local`` end to end on Docker with the scripted model: the gold patch resolves every instance,
no patch resolves none, and a patch that only edits the tests resolves none and is flagged."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

import agentcompass
from agentcompass.benchmarks.swebench.local_instances import load_local_instances
from agentcompass.records import TaskDetail

from ...environments.conftest import containers_of
from .conftest import needs_host_py311

INSTANCES = load_local_instances()
#: one worker runs the bundled instances' docker tests (here and test_swebench_evaluate_docker.py): the first
#: builds their images, the others reuse them (cache_level instance) instead of building them again at once
pytestmark = pytest.mark.xdist_group("swebench-local-images")


def _apply_turn(patch: str) -> str:
    b64 = base64.b64encode(patch.encode()).decode()
    return f"```bash\ncd /testbed && echo {b64} | base64 -d | git apply -v\n```"


def _script(make_turns: Any) -> list[dict[str, Any]]:
    return [{"match": inst["problem_statement"][:200], "turns": make_turns(inst)} for inst in INSTANCES]


def _run(tmp_path: Path, run_id: str, script: list[dict[str, Any]], name: str,
         benchmark_params: dict[str, Any] | None = None) -> tuple[Any, list[TaskDetail]]:
    out = agentcompass.run_evaluation(
        "swebench_local", "shell_agent", "scripted", "docker", model_params={"script": script, "bundled": False},
        benchmark_params=benchmark_params or {},
        # keep the built instance images for the next run of this module (the default, env, removes them:
        # tests/engine/test_image_cache.py and the registry test check that)
        environment_params={"cache_level": "instance"}, task_concurrency=4, run_id=f"{run_id}-{name}",
        results_dir=str(tmp_path), data_dir=str(tmp_path / "data"), progress="none")
    assert out.run_dir is not None
    details = [msgspec.json.decode(p.read_bytes(), type=TaskDetail) for p in (out.run_dir / "details").glob("*.json")]
    return out, details


def test_there_are_several_bundled_instances() -> None:
    assert len(INSTANCES) >= 3
    assert len({i["repo"] for i in INSTANCES}) >= 2


@pytest.mark.slow
@pytest.mark.timeout(900)
@needs_host_py311
@pytest.mark.parametrize("version", [None, "4.1.0"])  # None: the default, 5.0.2
def test_gold_patch_resolves_all_and_empty_patch_resolves_none(base_image: str, docker_run_id: str,
                                                               tmp_path: Path, version: str | None) -> None:
    params = {} if version is None else {"grading_version": version}
    gold, details = _run(tmp_path, docker_run_id, _script(lambda i: [_apply_turn(i["patch"]), "<submit>done</submit>"]),
                         "gold", params)
    assert gold.status == "completed" and gold.counts.errors == 0, gold.errors_by_kind
    assert gold.metrics["pass@1"] == 1.0 and len(details) == len(INSTANCES)
    assert gold.run_dir is not None
    settings = json.loads((gold.run_dir / "params.json").read_text())["component_settings"]["benchmark"]
    assert settings == {"grading_version": version or "5.0.2"}
    for d in details:
        attempt = d.attempts["1"]
        raw = attempt.extra["eval_raw_data"]
        assert raw["grading_version"] == (version or "5.0.2")
        assert raw["resolved"] is True and raw["patch_applied"] is True
        assert raw["tests_status"]["FAIL_TO_PASS"]["failure"] == []
        assert raw["tests_status"]["PASS_TO_PASS"]["failure"] == []
        assert not attempt.analysis

    empty, details = _run(tmp_path, docker_run_id, _script(lambda i: ["<submit></submit>"]), "empty", params)
    assert empty.status == "completed" and empty.metrics["pass@1"] == 0.0
    assert all(d.attempts["1"].correct is False for d in details) and len(details) == len(INSTANCES)
    assert containers_of(docker_run_id + "-gold") == [] and containers_of(docker_run_id + "-empty") == []


@pytest.mark.slow
@pytest.mark.timeout(900)
@needs_host_py311
def test_editing_only_the_tests_resolves_nothing_and_is_flagged(base_image: str, docker_run_id: str,
                                                                tmp_path: Path) -> None:
    # The agent "solves" the task by applying the tests it should have been graded by (and nothing else).
    hack, details = _run(tmp_path, docker_run_id,
                         _script(lambda i: [_apply_turn(i["test_patch"]), "<submit>done</submit>"]), "hack")
    assert hack.status == "completed" and hack.metrics["pass@1"] == 0.0
    assert len(details) == len(INSTANCES)
    for d in details:
        attempt = d.attempts["1"]
        assert attempt.correct is False
        assert "suspected_reward_hacking" in attempt.analysis and attempt.analysis["modified_tests"]
        assert attempt.extra["eval_raw_data"]["patch_applied"] is True


def _mini_turn(thought: str, command: str) -> dict[str, Any]:
    """A reply in the format of mini-swe-agent's SWE-bench config: a THOUGHT and one ``bash`` tool call."""
    return {"content": f"THOUGHT: {thought}", "tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


@pytest.mark.slow
@pytest.mark.timeout(900)
@needs_host_py311
async def test_real_mini_swe_agent_solves_an_instance_through_the_scripted_http_server(
        base_image: str, docker_run_id: str, tmp_path: Path) -> None:
    from agentcompass.specs import ComponentSpec, ModelSpec, OrchestrationSpec, RunRequestSpec

    from ...fixtures_scripted import running_scripted_server

    inst = INSTANCES[0]
    b64 = base64.b64encode(inst["patch"].encode()).decode()
    turns = [_mini_turn("Apply the fix.", f"cd /testbed && echo {b64} | base64 -d | git apply"),
             _mini_turn("Write the patch.", "cd /testbed && git diff > /tmp/patch.txt && cat /tmp/patch.txt"),
             _mini_turn("Submit.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat /tmp/patch.txt")]
    script = [{"match": inst["problem_statement"][:200], "turns": turns}]
    async with running_scripted_server({"script": script, "bundled": False}) as server:
        assert server.base_url is not None
        spec = OrchestrationSpec(requests=[RunRequestSpec(  # no `config`: SWE-bench gets mini-swe-agent's own
            benchmark=ComponentSpec("swebench_local", {"sample_ids": [inst["instance_id"]]}),
            harness=ComponentSpec("mini_swe_agent", {"step_limit": 10}),
            environment=ComponentSpec("docker", {"cache_level": "instance"}),
            model=ModelSpec("scripted", base_url=server.base_url, api_key="sk-test-123456"),
            name="mini", run_id=docker_run_id, results_dir=str(tmp_path), data_dir=str(tmp_path / "data"))],
            progress="none")
        outcome = (await agentcompass.async_launch(spec))["mini"]
        first_request = server.recent_requests[0]
    assert outcome.status == "completed" and outcome.metrics["pass@1"] == 1.0, outcome.errors_by_kind
    assert outcome.run_dir is not None
    detail = msgspec.json.decode(next((outcome.run_dir / "details").glob("*.json")).read_bytes(), type=TaskDetail)
    attempt = detail.attempts["1"]
    assert attempt.correct is True and attempt.extra["patch_source"] == "harness"
    assert attempt.trajectory is not None and attempt.trajectory.stop_reason == "Submitted"
    assert (attempt.trajectory.steps[0].action or "").startswith("cd /testbed && echo ")
    assert len(attempt.trajectory.steps) == 3
    assert "sk-test-123456" not in "".join(p.read_text() for p in outcome.run_dir.rglob("*") if p.is_file())

    # the model saw mini-swe-agent's SWE-bench prompts and was offered its bash tool; params.json names the file
    from minisweagent.run.benchmarks.swebench import DEFAULT_CONFIG_FILE  # imported (quietly) by the harness

    raw = Path(DEFAULT_CONFIG_FILE).read_bytes()
    expected = yaml.safe_load(raw)
    system, user = first_request["messages"][:2]
    assert system["content"] == expected["agent"]["system_template"].rstrip("\n")
    assert user["content"].startswith(f"<pr_description>\nConsider the following PR description:\n"
                                      f"{inst['problem_statement'][:200]}")
    assert [t["function"]["name"] for t in first_request["tools"]] == ["bash"]
    settings = json.loads((outcome.run_dir / "params.json").read_text())["component_settings"]["harness"]
    assert settings["config"] == {"spec": str(DEFAULT_CONFIG_FILE), "source": "benchmark",
                                  "path": str(Path(DEFAULT_CONFIG_FILE).resolve()),
                                  "sha256": hashlib.sha256(raw).hexdigest()}
    assert settings["package"]["version"] == importlib.metadata.version("mini-swe-agent")
    assert settings["mode"] == "tool" and settings["step_limit"] == 10
    assert settings["agent"]["instance_template"] == expected["agent"]["instance_template"]
