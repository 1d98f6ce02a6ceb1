"""The ``codex`` harness: the real Codex CLI (openai-codex-cli-bin's static binary) against the scripted model
server's Responses API, through the engine's gateway, in a local workspace and in docker (``network_policy=model``,
``wrap_api_key``); and its ``--json`` event stream as steps, on transcripts captured from the real binary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from agentcompass.harnesses.installed.agent import AgentRun
from agentcompass.harnesses.installed.codex import TESTED_VERSION, Codex, CodexTranscript
from agentcompass.interfaces import ComponentContext
from agentcompass.records import Step
from tests.environments.conftest import (  # noqa: F401 - fixtures used by name
    _sweep_session_leftovers,
    base_image,
    containers_of,
    docker_available,
    docker_run_id,
)
from tests.harnesses import installed_helpers as helpers

SCRIPTS = Path(__file__).parent.parent / "scripts"
TRANSCRIPTS = Path(__file__).parent.parent / "transcripts"
SHELL_SCRIPT = SCRIPTS / "codex_shell_tasks.json"
SWEBENCH_SCRIPT = SCRIPTS / "codex_swebench_local.json"
#: the key the scripted server requires: the sandbox must never see it (the script's check looks for it)
REAL_KEY = "sk-agentcompass-test-REALKEY-c0d3x915"
#: Codex's model family with the freeform apply_patch tool (the gateway sends the upstream's model id anyway)
FAMILY = "gpt-5.5"


async def _launch(script: Path, request: dict[str, Any], *, timeout: float = 240,
                  **server_options: Any) -> tuple[Any, list[dict[str, Any]]]:
    return await helpers.launch_scripted({"script_file": str(script), "bundled": False}, request, api_key=REAL_KEY,
                                 api_protocol="openai-responses",
                                 harness={"id": "codex", "params": {"model": FAMILY, "reasoning_effort": "low",
                                                                    "poll_interval_s": 0.5, "timeout": timeout}},
                                 **server_options)


def _shell_request(tmp_path: Path, environment: dict[str, Any]) -> dict[str, Any]:
    return helpers.shell_request(tmp_path, environment, "files/hello_world")


def _check_hello_attempt(out: Any, bodies: list[dict[str, Any]]) -> tuple[str, dict[str, str]]:
    """The attempt solved the task with the converted trajectory in its detail file; the key check's line and
    fields."""
    attempt = helpers.solved_attempt(out)
    steps = attempt.trajectory.steps
    assert [s.tool_calls[0].name if s.tool_calls else None for s in steps] == ["apply_patch", "shell", "shell", None]
    assert steps[0].reasoning == "Add the file with apply_patch, then check it."
    assert steps[0].content == "I will create hello.txt." and steps[0].observation == "completed"
    assert (steps[0].action or "").startswith("apply_patch\nadd ") and (steps[0].action or "").endswith("hello.txt")
    assert "cat hello.txt" in (steps[1].action or "") and steps[1].observation == "Hello, World!\n"
    assert steps[1].exit_code == 0
    assert steps[3].content == attempt.final_answer == "hello.txt now holds the line Hello, World!"
    assert attempt.trajectory.stop_reason == "completed"
    agent = attempt.artifacts["agent"]
    assert agent["exit_code"] == 0 and agent["program"] == "codex" and agent["version"] == TESTED_VERSION
    assert attempt.artifacts["agent_usage"]["prompt_tokens"] > 0
    # every model call went through the gateway, none booked as failed (Codex hangs up at response.completed)
    assert attempt.meta["gateway"]["calls"] == 4 and not attempt.meta["gateway"].get("failed")
    assert len(bodies) == 4 and all(b["stream"] is True and b["model"] == "scripted" for b in bodies)
    tools = {t.get("name"): t.get("type") for t in bodies[0]["tools"]}
    assert tools["apply_patch"] == "custom" and tools["exec_command"] == "function" and "web_search" not in tools
    assert bodies[0]["reasoning"]["effort"] == "low"
    assert REAL_KEY not in helpers.run_text(out.run_dir)
    return helpers.key_check(steps)


@pytest.mark.timeout(300)
async def test_codex_solves_a_shell_task_in_a_local_workspace(tmp_path: Path) -> None:
    out, bodies = await _launch(SHELL_SCRIPT, _shell_request(tmp_path, {"id": "local"}))
    check, fields = _check_hello_attempt(out, bodies)
    assert check.startswith("KEYCHECK env=0 ps=0 files=0 "), check
    assert fields["root"] == "." and fields["cmd_key"] == "0", check
    assert int(fields["ps_canary"]) >= 1 and int(fields["files_canary"]) >= 1, check  # the scans can see


@pytest.mark.timeout(600)
async def test_codex_solves_a_shell_task_in_docker_behind_the_model_policy_and_never_sees_the_key(
        tmp_path: Path, base_image: str, docker_run_id: str) -> None:  # noqa: F811
    out, bodies = await _launch(SHELL_SCRIPT, {
        **_shell_request(tmp_path, {"id": "docker", "params": {"image": base_image, "network_policy": "model"}}),
        "run_id": docker_run_id})
    # Codex's own command looked through every process's environment, the process list and the container's files
    # (the mounted program included) while Codex ran: no real key; the codex process carries its envelope, the
    # command itself does not
    check, fields = _check_hello_attempt(out, bodies)
    assert check.startswith("KEYCHECK env=0 ps=0 files=0 "), check
    assert fields["root"] == "/" and fields["cmd_key"] == "0" and int(fields["key_in_env"]) >= 1, check
    # positive controls: a planted canary in a file and in a process's arguments is found by the same scans
    assert int(fields["ps_canary"]) >= 1 and int(fields["files_canary"]) >= 1, check
    assert out.run_dir is not None
    (detail,) = helpers.details(out.run_dir)
    assert detail.attempts["1"].meta["environments"][0]["provider"] == "docker"
    assert containers_of(docker_run_id) == []


@helpers.swebench_in_docker
async def test_codex_resolves_a_swebench_local_instance_in_docker(tmp_path: Path, base_image: str,  # noqa: F811
                                                                 docker_run_id: str) -> None:  # noqa: F811
    instance = msgspec.json.decode(SWEBENCH_SCRIPT.read_bytes())[0]["instance_id"]
    out, _ = await _launch(SWEBENCH_SCRIPT, helpers.swebench_local_request(tmp_path, docker_run_id, instance))
    attempt = helpers.resolved_attempt(out)
    first = attempt.trajectory.steps[0]
    assert first.tool_calls[0].name == "shell" and "git apply" in (first.action or "") and first.exit_code == 0
    assert attempt.trajectory.stop_reason == "completed" and attempt.final_answer == "The fix is applied."
    check, fields = helpers.clean_key_scan(attempt.trajectory.steps)  # the key scan inside the SWE-bench image too
    assert fields["root"] == "/", check
    assert containers_of(docker_run_id) == []


@pytest.mark.timeout(300)
async def test_a_model_refusing_the_key_ends_as_agent_error_with_codex_s_own_account(tmp_path: Path) -> None:
    out, _ = await _launch(SHELL_SCRIPT, _shell_request(tmp_path, {"id": "local"}),
                           require_api_key="sk-some-other-key")
    (detail,) = helpers.details(out.run_dir)
    attempt = detail.attempts["1"]
    assert attempt.correct is False and attempt.error_kind == "agent_error"
    assert attempt.error is not None and attempt.error.startswith("codex exited 1: codex turn failed: ")
    assert "401" in attempt.error and "sk-some-other-key" not in attempt.error
    assert attempt.trajectory.stop_reason == "turn_failed" and attempt.artifacts["agent"]["exit_code"] == 1
    assert attempt.artifacts["agent"]["warnings"]  # its reconnects


@pytest.mark.timeout(300)
async def test_a_model_that_never_answers_ends_as_agent_timeout_with_the_transcript_so_far(tmp_path: Path) -> None:
    out, _ = await _launch(SHELL_SCRIPT, _shell_request(tmp_path, {"id": "local"}), timeout=4,
                           faults={"hang": 1.0})
    _check_timed_out(out)


@pytest.mark.timeout(300)
async def test_in_docker_a_model_that_never_answers_ends_as_agent_timeout_and_the_container_is_gone(
        tmp_path: Path, base_image: str, docker_run_id: str) -> None:  # noqa: F811
    out, _ = await _launch(SHELL_SCRIPT, {
        **_shell_request(tmp_path, {"id": "docker", "params": {"image": base_image, "network_policy": "model"}}),
        "run_id": docker_run_id}, timeout=4, faults={"hang": 1.0})
    _check_timed_out(out)
    assert containers_of(docker_run_id) == []


def _check_timed_out(out: Any) -> None:
    (detail,) = helpers.details(out.run_dir)
    attempt = detail.attempts["1"]
    assert attempt.correct is False and attempt.error_kind == "agent_timeout"
    assert attempt.trajectory.stop_reason == "agent_timeout"
    agent = attempt.artifacts["agent"]
    assert agent["exit_code"] == 137 and agent["thread_id"] and agent["turns"] == 1  # what it said before


# ---------------------------------------------------------------------- the event stream (captured transcripts)


def _parse(name: str, size: int = 1 << 20) -> tuple[CodexTranscript, list[Step]]:
    raw = (TRANSCRIPTS / name).read_bytes()
    t = CodexTranscript()
    steps: list[Step] = []
    for i in range(0, len(raw), size):
        steps += t.feed(raw[i:i + size])
    steps += t.finish()
    assert [s.index for s in steps] == list(range(len(steps))) and steps == t.steps
    return t, steps


@pytest.mark.parametrize("size", [1, 13, 1 << 20])
def test_apply_patch_and_commands_become_one_step_per_tool_item(size: int) -> None:
    t, steps = _parse("codex_apply_patch.jsonl", size)
    assert t.events == 13 and t.invalid_lines == 0 and t.valid
    assert [(s.tool_calls[0].name if s.tool_calls else None) for s in steps] == [
        "apply_patch", "shell", "shell", "apply_patch", None]
    patch, run, second, update, final = steps
    assert patch.reasoning == "Patch it in." and patch.content is None
    assert patch.action == "apply_patch\nadd /work/task/hello.py" and patch.observation == "completed"
    assert msgspec.json.decode(patch.tool_calls[0].arguments) == {
        "changes": [{"path": "/work/task/hello.py", "kind": "add"}]}
    assert run.action == "/bin/bash -lc 'python3 hello.py'" and run.observation == "hello\n" and run.exit_code == 0
    assert run.tool_calls[0].id == "item_2" and run.finish_reason == "tool_calls"
    assert second.observation == "second\n" and update.action == "apply_patch\nupdate /work/task/hello.py"
    assert final.content == t.final_answer == "hello.py prints hello world." and final.finish_reason == "stop"
    assert t.stop_reason == "completed" and t.error is None
    assert (t.usage.prompt_tokens, t.usage.completion_tokens, t.usage.total_tokens) == (33509, 96, 33605)
    assert t.info["thread_id"] and t.info["turns"] == 1 and t.info["reasoning_output_tokens"] == 3


def test_a_failed_command_keeps_its_exit_code_and_codex_warnings_are_kept_apart() -> None:
    t, steps = _parse("codex_command.jsonl")
    assert len(steps) == 2
    first, last = steps
    assert first.reasoning == "I will create the file." and first.content == "Creating it."
    assert first.exit_code == 2 and "No such file or directory" in (first.observation or "")
    assert last.content == "Done: out.txt holds hi."
    assert t.warnings == ["Model metadata for `scripted` not found. Defaulting to fallback metadata; this can "
                          "degrade performance and cause issues."]
    assert t.stop_reason == "completed" and t.error is None


def test_a_failed_turn_is_the_error_without_the_route_token() -> None:
    # captured against a server refusing the key; the URL was then edited to the gateway's route-token form
    t, steps = _parse("codex_turn_failed.jsonl")
    assert steps == [] and t.valid and t.stop_reason == "turn_failed"
    assert t.error is not None and t.error.startswith("codex turn failed: unexpected status 401")
    assert "acr1_" not in t.error and "/r/***" in t.error
    assert len(t.warnings) == 6 and not any("acr1_" in w for w in t.warnings)


def test_garbage_and_unknown_events_are_not_a_transcript() -> None:
    t = CodexTranscript()
    assert t.feed(b'panic: oops\n{"type": "something.else"}\n[1, 2]\n') == [] and t.finish() == []
    assert not t.valid and t.invalid_lines == 3
    t = CodexTranscript()
    assert t.feed(b'{"type":"item.completed","item":{"id":"x","type":"brand_new_item"}}\n') == []
    assert t.valid and t.steps == []


def test_the_command_line_writes_the_provider_config_from_the_environment_and_holds_no_key() -> None:
    harness = Codex({"binary": str(_fake_binary()), "sandbox_mode": "workspace-write", "extra_args": ["--foo"]},
                    ComponentContext(run_id="t"))
    run = AgentRun(dir="/tmp/r", home="/tmp/r/home", prompt_file="/tmp/r/prompt", workdir="/w",
                   program_path="/opt/a/codex-1/bin/codex")
    line = harness.command(None, run.program_path, run)  # type: ignore[arg-type]  # the task is not read
    assert line.startswith("( ") and line.endswith(" )")  # a subshell: the run script records the exit code
    assert "\"base_url = '$OPENAI_BASE_URL'\" >/tmp/r/home/.codex/config.toml" in line
    assert "'env_key = \"OPENAI_API_KEY\"'" in line and "'wire_api = \"responses\"'" in line
    assert "PATH=/opt/a/codex-1/codex-path:" in line
    assert '-m "$AGENTCOMPASS_MODEL"' in line
    assert "--sandbox workspace-write -c 'approval_policy=\"never\"' --foo - </tmp/r/prompt )" in line
    assert "API_KEY=" not in line and "sk-" not in line


def _fake_binary() -> Path:
    import codex_cli_bin

    return Path(codex_cli_bin.bundled_codex_path())
