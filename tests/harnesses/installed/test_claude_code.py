"""The ``claude_code`` harness: the real Claude Code CLI (claude-agent-sdk's bundled binary) against the scripted
model server, through the engine's gateway, in a local workspace and in docker (``network_policy=model``,
``wrap_api_key``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentcompass._errors import ConfigError
from agentcompass.harnesses.installed.claude_code import ClaudeCode, ClaudeCodeTranscript
from agentcompass.interfaces import ComponentContext
from tests.environments.conftest import (  # noqa: F401 - fixtures used by name
    _sweep_session_leftovers,
    base_image,
    busybox_image,
    containers_of,
    docker_available,
    docker_run_id,
)
from tests.harnesses import installed_helpers as helpers

SCRIPTS = Path(__file__).parent.parent / "scripts"
SHELL_SCRIPT = SCRIPTS / "claude_code_shell_tasks.json"
SWEBENCH_SCRIPT = SCRIPTS / "claude_code_swebench_local.json"
#: the key the scripted server requires: the one the sandbox must never see (the shell script's check looks for it)
REAL_KEY = "sk-ant-agentcompass-test-REALKEY-7f3a9c51"


async def _launch(server_params: dict[str, Any], request: dict[str, Any],
                  harness_params: dict[str, Any] | None = None) -> tuple[Any, list[dict[str, Any]]]:
    return await helpers.launch_scripted(server_params, request, api_key=REAL_KEY, api_protocol="anthropic-messages",
                                 harness={"id": "claude_code",
                                          "params": {"poll_interval_s": 0.5, **(harness_params or {})}})


def _shell_request(tmp_path: Path, environment: dict[str, Any]) -> dict[str, Any]:
    return helpers.shell_request(tmp_path, environment, "python/fib")


def _check_fib_attempt(out: Any) -> Any:
    attempt = helpers.solved_attempt(out)
    steps = attempt.trajectory.steps
    assert steps[0].tool_calls[0].name == "Bash" and "cat > fib.py" in (steps[0].action or "")
    assert steps[0].observation == "55" and steps[0].prompt_tokens > 0
    assert attempt.trajectory.stop_reason == "completed"
    assert attempt.final_answer == "fib.py is written: fib(10) = 55."
    agent = attempt.artifacts["agent"]
    assert agent["exit_code"] == 0 and agent["program"] == "claude" and agent["num_turns"] >= 3
    assert attempt.meta["gateway"]["calls"] == 3  # every model call went through the gateway
    assert REAL_KEY not in helpers.run_text(out.run_dir)
    return attempt


@pytest.mark.timeout(300)
async def test_claude_code_solves_a_shell_task_in_a_local_workspace(tmp_path: Path) -> None:
    out, bodies = await _launch({"script_file": str(SHELL_SCRIPT), "bundled": False},
                                _shell_request(tmp_path, {"id": "local"}),
                                # the check's file search: the workspace only (not the host's whole disk)
                                {"extra_env": {"SCAN_ROOT": "."}})
    attempt = _check_fib_attempt(out)
    check, fields = helpers.key_check(attempt.trajectory.steps)
    assert check.startswith("KEYCHECK env=0 ps=0"), check
    assert int(fields["ps_canary"]) >= 1 and int(fields["files_canary"]) >= 1, check  # the scans can see
    assert bodies and all(b["stream"] is True and b["model"] == "scripted" for b in bodies)
    assert any(t.get("name") == "Bash" for t in bodies[0]["tools"])


@pytest.mark.timeout(600)
async def test_claude_code_solves_a_shell_task_in_docker_behind_the_model_policy_and_never_sees_the_key(
        tmp_path: Path, base_image: str, docker_run_id: str) -> None:  # noqa: F811
    out, _ = await _launch({"script_file": str(SHELL_SCRIPT), "bundled": False}, {
        **_shell_request(tmp_path, {"id": "docker", "params": {"image": base_image, "network_policy": "model"}}),
        "run_id": docker_run_id})
    attempt = _check_fib_attempt(out)
    # the agent's own Bash tool looked through every process's environment, the process list and the files of
    # the container (the mounted program included) while Claude Code ran: no real key; its envelope is there
    check, fields = helpers.key_check(attempt.trajectory.steps)
    assert check.startswith("KEYCHECK env=0 ps=0 files=0 "), check
    assert int(fields["envelope_in_env"]) >= 1, check
    # positive controls: a planted canary in a file and in a process's arguments is found by the same scans
    assert int(fields["ps_canary"]) >= 1 and int(fields["files_canary"]) >= 1, check
    env_entry = attempt.meta["environments"][0]
    assert env_entry["provider"] == "docker"
    assert containers_of(docker_run_id) == []


@pytest.mark.timeout(600)
async def test_claude_code_in_an_image_without_glibc_is_unavailable_not_a_graded_zero(
        tmp_path: Path, busybox_image: str, docker_run_id: str) -> None:  # noqa: F811
    out, bodies = await _launch({"script_file": str(SHELL_SCRIPT), "bundled": False}, {
        **_shell_request(tmp_path, {"id": "docker", "params": {"image": busybox_image, "network_policy": "model"}}),
        "run_id": docker_run_id})
    assert not out.ok and bodies == []
    (detail,) = helpers.details(out.run_dir)
    attempt = detail.attempts["1"]
    assert attempt.error_kind == "agent_unavailable" and attempt.correct is None, (attempt.error_kind, attempt.error)
    assert "cannot run in this environment" in (attempt.error or "")
    assert containers_of(docker_run_id) == []


@helpers.swebench_in_docker
async def test_claude_code_resolves_a_swebench_local_instance_in_docker(tmp_path: Path, base_image: str,  # noqa: F811
                                                                       docker_run_id: str) -> None:  # noqa: F811
    out, _ = await _launch({"script_file": str(SWEBENCH_SCRIPT), "bundled": False},
                           helpers.swebench_local_request(tmp_path, docker_run_id, "r1chardj0n3s__parse-178"))
    attempt = helpers.resolved_attempt(out)
    assert attempt.trajectory.steps[0].tool_calls[0].name == "Bash"
    assert "git apply" in (attempt.trajectory.steps[0].action or "")
    helpers.clean_key_scan(attempt.trajectory.steps)  # the key scan inside the SWE-bench image too
    assert containers_of(docker_run_id) == []


def test_stream_json_fed_in_odd_pieces_gives_the_same_steps() -> None:
    lines = [
        {"type": "system", "subtype": "init", "claude_code_version": "2.1.0", "model": "m", "session_id": "s"},
        {"type": "assistant", "timestamp": "2026-01-01T00:00:01.000Z", "message": {
            "id": "msg_1",
            "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Let me look."}],
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1}}},
        {"type": "assistant", "timestamp": "2026-01-01T00:00:01.100Z", "message": {
            "id": "msg_1", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                                       {"type": "tool_use", "id": "t2", "name": "Read",
                                        "input": {"file_path": "/a"}}],
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1}}},
        {"type": "user", "timestamp": "2026-01-01T00:00:02.600Z", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "a\nb"},
            {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "nope"}],
             "is_error": True}]}},
        {"type": "assistant", "timestamp": "2026-01-01T00:00:03.100Z", "message": {
            "id": "msg_2", "content": [{"type": "text", "text": "Done — ünïcode."}],
            "usage": {"input_tokens": 20, "output_tokens": 3}}},
        {"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 2,
         "terminal_reason": "max_turns", "errors": ["Reached maximum number of turns (2)"],
         "usage": {"input_tokens": 30, "cache_read_input_tokens": 5, "output_tokens": 9}},
    ]
    raw = b"".join(json.dumps(e, ensure_ascii=False).encode() + b"\n" for e in lines) + b"not json\n"
    for size in (1, 7, 4096):
        t = ClaudeCodeTranscript()
        steps = []
        for i in range(0, len(raw), size):
            steps += t.feed(raw[i:i + size])
        steps += t.finish()
        assert [s.index for s in steps] == [0, 1] and t.events == 6 and t.invalid_lines == 1
        first, second = steps
        assert first.content == "Let me look." and first.reasoning == "hmm"
        assert [c.name for c in first.tool_calls] == ["Bash", "Read"]
        assert first.action == 'ls\nRead {"file_path":"/a"}'
        assert first.observation == "a\nb\n[error] nope" and first.exec_latency_s == 3.0
        assert first.prompt_tokens == 15 and first.completion_tokens == 1
        assert second.content == "Done — ünïcode." and second.model_latency_s == 0.5
        assert t.usage.prompt_tokens == 35 and t.usage.completion_tokens == 9 and t.usage.calls == 2
        assert t.error_kind == "step_limit" and t.stop_reason == "max_turns"
        assert t.error is not None and "Reached maximum number of turns" in t.error
        assert t.info["claude_code_version"] == "2.1.0" and t.info["num_turns"] == 2


def test_extra_env_may_not_carry_a_key() -> None:
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        ClaudeCode({"extra_env": {"ANTHROPIC_API_KEY": "sk-x"}}, ComponentContext())


def test_the_command_line_is_non_interactive_with_the_params() -> None:
    from agentcompass.harnesses.installed.agent import AgentRun
    from agentcompass.interfaces import PreparedTask

    h = ClaudeCode({"model": "claude-x", "max_turns": 5, "allowed_tools": ["Bash", "Edit"],
                    "extra_args": ["--effort", "low"], "command_timeout": 30}, ComponentContext())
    run = AgentRun(dir="/d", home="/d/home", prompt_file="/d/prompt", workdir="/w", program_path="/p/claude")
    cmd = h.command(PreparedTask(task_id="t", prompt="p"), "/p/claude", run)
    assert cmd == ("exec /p/claude --model claude-x -p --output-format stream-json --verbose "
                   "--no-session-persistence --dangerously-skip-permissions --max-turns 5 --allowedTools Bash,Edit "
                   "--effort low </d/prompt")
    env = h.agent_env(PreparedTask(task_id="t", prompt="p"), None, run)  # type: ignore[arg-type]
    assert env["HOME"] == "/d/home" and env["IS_SANDBOX"] == "1" and env["BASH_MAX_TIMEOUT_MS"] == "30000"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and env["DISABLE_TELEMETRY"] == "1"
