"""The ``claude_code`` harness: the real Claude Code CLI, run inside the task's environment.

The program is the ``claude`` binary bundled in the ``claude-agent-sdk`` wheel (``claude_agent_sdk/_bundled/
claude``); ``InstalledAgent`` finds or installs it on the host and mounts (docker) or uses (local) it in the
environment. It runs non-interactively::

    claude -p --output-format stream-json --verbose --dangerously-skip-permissions --no-session-persistence
           --model <model> [--max-turns N] [--allowedTools ...] [--tools ...] [extra_args...] < prompt

in the task's workdir, with ``HOME`` a fresh per-attempt directory, ``IS_SANDBOX=1`` (Claude Code refuses
``--dangerously-skip-permissions`` as root without it) and its telemetry, error reporting, auto-updater and other
non-essential traffic off. It reaches the model only through the AgentCompass gateway: ``ANTHROPIC_BASE_URL`` /
``ANTHROPIC_API_KEY`` in the environment are the gateway's URL and an envelope or route token, never the real
key.

Params (``ClaudeCodeParams``): ``model`` (default: the request's model id), ``max_turns`` (a turn limit; reaching
it is ``error_kind="step_limit"``, graded), ``allowed_tools`` (``--allowedTools``), ``tools`` (``--tools``: the
built-in tools it may use at all), ``permission_mode`` (``bypassPermissions``, i.e.
``--dangerously-skip-permissions``; any other value is passed as ``--permission-mode``), ``command_timeout``
(seconds: its Bash tool's default and longest command timeout), ``extra_args`` and ``extra_env`` (added to the
command line / the process's variables), plus the installed-agent params ``version``, ``binary``, ``timeout`` and
``poll_interval_s``.

The stream-json transcript becomes steps (``ClaudeCodeTranscript``): one step per assistant message (its text,
thinking as reasoning, each ``tool_use`` as a ``ToolCall``, a Bash command as the step's ``action``), each
``tool_result`` the observation of the step that called it (with its latency), token usage per message; the
``result`` event gives the final answer, the stop reason (``terminal_reason``), turns and duration (its cost is
ignored: the engine prices calls itself).
"""

from __future__ import annotations

import calendar
import re
import shlex
import time
from typing import Annotated, Any, ClassVar

import msgspec

from ..._errors import ConfigError
from ..._validate import Count, Seconds
from ...common.error_kinds import ErrorKind
from ...interfaces import ComponentContext, PreparedTask, RunContext
from ...records import Step, ToolCall, Usage
from .agent import AgentProgram, AgentRun, InstalledAgent, InstalledAgentParams, JsonLinesTranscript

#: the claude-agent-sdk version the tests pin (``claude-code`` extra); any version works.
TESTED_VERSION = "0.2.189"

#: variables that keep Claude Code quiet and self-contained in a sandbox
QUIET_ENV = {
    "IS_SANDBOX": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    "NO_COLOR": "1",
}
_EVENT_TYPES = frozenset({"system", "assistant", "user", "result", "stream_event", "rate_limit_event",
                          "tool_progress", "auth_status", "control_request", "control_response", "keep_alive"})
_OBSERVATION_CHARS = 100_000
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)


class ClaudeCodeParams(InstalledAgentParams, frozen=True):
    """``claude_code`` params (see the module doc)."""

    model: str | None = None
    max_turns: Count | None = None
    allowed_tools: list[str] | None = None
    tools: list[str] | None = None
    permission_mode: str = "bypassPermissions"
    command_timeout: Seconds | None = None
    extra_args: list[str] = []
    extra_env: dict[str, Annotated[str, msgspec.Meta(max_length=65536)]] = {}


def _epoch(ts: Any) -> float | None:
    """An ISO-8601 UTC timestamp (``2026-12-04T03:39:51.543Z``) as epoch seconds."""
    if not isinstance(ts, str) or len(ts) < 19:
        return None
    try:
        base = calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None
    frac = ts[19:].rstrip("Z")
    return base + (float(frac) if frac.startswith(".") and frac[1:].isdigit() else 0.0)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


class ClaudeCodeTranscript(JsonLinesTranscript):
    """Claude Code's ``--output-format stream-json --verbose`` lines as steps (see the module doc)."""

    def __init__(self) -> None:
        super().__init__()
        self._by_message: dict[str, Step] = {}
        self._by_tool: dict[str, Step] = {}
        self._tool_started: dict[str, float] = {}
        self._usage: dict[str, Usage] = {}
        self._last_ts: float | None = None

    def handle(self, event: dict[str, Any]) -> list[Step] | None:
        kind = event.get("type")
        if not isinstance(kind, str) or kind not in _EVENT_TYPES:
            return None
        ts = _epoch(event.get("timestamp"))
        out: list[Step] = []
        if kind == "system" and event.get("subtype") == "init":
            self.info.update({k: event[k] for k in ("claude_code_version", "model", "session_id", "permissionMode")
                              if k in event})
        elif kind == "assistant":
            out = self._assistant(event.get("message") or {}, ts)
        elif kind == "user":
            self._user(event.get("message") or {}, ts)
        elif kind == "result":
            self._result(event)
        if ts is not None:
            self._last_ts = ts
        return out

    def _assistant(self, message: dict[str, Any], ts: float | None) -> list[Step]:
        mid = str(message.get("id") or f"anon-{len(self.steps)}")
        step = self._by_message.get(mid)
        new = step is None
        if step is None:
            latency = ts - self._last_ts if ts is not None and self._last_ts is not None else None
            step = self.new_step(model_latency_s=round(latency, 3) if latency is not None and latency >= 0 else None)
            if ts is not None:
                step.started_at = ts
            self._by_message[mid] = step
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" and block.get("text"):
                step.content = f"{step.content}\n{block['text']}" if step.content else block["text"]
            elif btype == "thinking" and block.get("thinking"):
                step.reasoning = f"{step.reasoning}\n{block['thinking']}" if step.reasoning else block["thinking"]
            elif btype == "tool_use":
                tid = str(block.get("id", ""))
                name = str(block.get("name", ""))
                args = block.get("input") or {}
                step.tool_calls = [*step.tool_calls, ToolCall(id=tid, name=name,
                                                              arguments=msgspec.json.encode(args).decode())]
                action = args.get("command") if name == "Bash" and isinstance(args, dict) else None
                action = action if isinstance(action, str) else f"{name} {msgspec.json.encode(args).decode()}"
                step.action = f"{step.action}\n{action}" if step.action else action
                step.finish_reason = "tool_use"
                self._by_tool[tid] = step
                if ts is not None:
                    self._tool_started[tid] = ts
        usage = message.get("usage")
        if isinstance(usage, dict):
            cached = int(usage.get("cache_read_input_tokens") or 0)
            prompt = int(usage.get("input_tokens") or 0) + cached + int(usage.get("cache_creation_input_tokens") or 0)
            completion = int(usage.get("output_tokens") or 0)
            step.prompt_tokens, step.completion_tokens = prompt, completion
            self._usage[mid] = Usage(prompt_tokens=prompt, completion_tokens=completion,
                                     total_tokens=prompt + completion, calls=1, cached_tokens=cached)
            total = Usage()
            for u in self._usage.values():
                total.add(u)
            self.usage = total
        if message.get("stop_reason") and not step.tool_calls:
            step.finish_reason = str(message["stop_reason"])
        return [step] if new else []

    def _user(self, message: dict[str, Any], ts: float | None) -> None:
        content = message.get("content")
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            tid = str(block.get("tool_use_id", ""))
            step = self._by_tool.get(tid)
            if step is None:
                continue
            text = _text_of(block.get("content"))[:_OBSERVATION_CHARS]
            if block.get("is_error"):
                text = f"[error] {text}"
            step.observation = f"{step.observation}\n{text}" if step.observation else text
            started = self._tool_started.pop(tid, None)
            if ts is not None and started is not None:
                step.exec_latency_s = round((step.exec_latency_s or 0.0) + max(0.0, ts - started), 3)

    def _result(self, event: dict[str, Any]) -> None:
        result = event.get("result")
        if isinstance(result, str):
            self.final_answer = result
        subtype = str(event.get("subtype") or "")
        self.stop_reason = str(event.get("terminal_reason") or subtype or "completed")
        self.info.update({k: event[k] for k in ("num_turns", "duration_ms", "duration_api_ms", "subtype")
                          if k in event})
        usage = event.get("usage")
        if isinstance(usage, dict):  # the run's totals: the per-message ones are counted at the message's start
            cached = int(usage.get("cache_read_input_tokens") or 0)
            prompt = int(usage.get("input_tokens") or 0) + cached + int(usage.get("cache_creation_input_tokens") or 0)
            completion = int(usage.get("output_tokens") or 0)
            self.usage = Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
                               calls=len(self._usage), cached_tokens=cached)
        if subtype == "error_max_turns" or event.get("terminal_reason") == "max_turns":
            self.error_kind = ErrorKind.STEP_LIMIT
        if event.get("is_error"):
            errors = event.get("errors")
            detail = "; ".join(str(e) for e in errors) if isinstance(errors, list) and errors else str(result or "")
            self.error = f"claude code: {subtype or 'error'}" + (f": {detail[:1000]}" if detail else "")


class ClaudeCode(InstalledAgent):
    """The real Claude Code CLI inside the environment (see the module doc)."""

    name: ClassVar[str] = "claude_code"
    program: ClassVar[AgentProgram] = AgentProgram(program="claude", distribution="claude-agent-sdk",
                                                   import_name="claude_agent_sdk", relative_path="_bundled/claude")
    Params: ClassVar[type[ClaudeCodeParams]] = ClaudeCodeParams
    params: ClaudeCodeParams

    def __init__(self, params: ClaudeCodeParams | dict[str, Any] | None, ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        secret = [k for k in self.params.extra_env if _SECRET_NAME.search(k)]
        if secret:
            raise ConfigError(f"harness claude_code: extra_env may not set {', '.join(secret)}: keys never enter the "
                              "sandbox (the gateway's envelope or route token is already there).",
                              field="harness_params.extra_env")

    def command(self, task: PreparedTask, program_path: str, run: AgentRun) -> str:
        p = self.params
        model = shlex.quote(p.model) if p.model else '"$AGENTCOMPASS_MODEL"'
        args = ["-p", "--output-format", "stream-json", "--verbose", "--no-session-persistence"]
        if p.permission_mode == "bypassPermissions":
            args.append("--dangerously-skip-permissions")
        else:
            args += ["--permission-mode", p.permission_mode]
        if p.max_turns is not None:
            args += ["--max-turns", str(p.max_turns)]
        if p.allowed_tools is not None:
            args += ["--allowedTools", ",".join(p.allowed_tools)]
        if p.tools is not None:
            args += ["--tools", ",".join(p.tools)]
        args += p.extra_args
        return (f"exec {shlex.quote(program_path)} --model {model} {shlex.join(args)} "
                f"<{shlex.quote(run.prompt_file)}")

    def new_transcript(self) -> ClaudeCodeTranscript:
        return ClaudeCodeTranscript()

    def agent_env(self, task: PreparedTask, ctx: RunContext, run: AgentRun) -> dict[str, str]:
        env = {**super().agent_env(task, ctx, run), **QUIET_ENV}
        if self.params.command_timeout is not None:
            ms = str(int(self.params.command_timeout * 1000))
            env["BASH_DEFAULT_TIMEOUT_MS"] = ms
            env["BASH_MAX_TIMEOUT_MS"] = ms
        return {**env, **self.params.extra_env}

    def resolved_settings(self) -> dict[str, Any]:
        return {**super().resolved_settings(), "env": dict(QUIET_ENV)}


__all__ = ["ClaudeCode", "ClaudeCodeParams", "ClaudeCodeTranscript"]
