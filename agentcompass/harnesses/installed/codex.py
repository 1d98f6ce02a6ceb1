"""The ``codex`` harness: the real Codex CLI (``codex exec``), run inside the task's environment.

The program is the static ``codex`` binary of the ``openai-codex-cli-bin`` wheel (``codex_cli_bin/bin/codex``;
its ``codex-path/`` directory, holding ``rg``, goes first on its ``PATH``); ``InstalledAgent`` finds or installs
it on the host and mounts (docker) or uses (local) the package directory in the environment. It runs
non-interactively in the task's workdir::

    codex exec --json --color never --skip-git-repo-check --ephemeral --sandbox danger-full-access
               -c approval_policy="never" -m <model> [-c model_reasoning_effort="..."] [extra_args...] - < prompt

with ``CODEX_HOME`` a fresh per-attempt directory whose ``config.toml`` (written by the command line itself, just
before codex starts) defines the model provider ``agentcompass``: ``base_url`` the sandbox's ``OPENAI_BASE_URL``
(the AgentCompass gateway), ``env_key = "OPENAI_API_KEY"`` (an envelope or route token there, never the real key),
``wire_api = "responses"``; web search, the update check, analytics, history and ChatGPT's plugins and apps
(synced from github.com and chatgpt.com at start, which delays the first model call where that is unreachable)
are off. The gateway sets the
upstream model on every call, so ``model`` only picks Codex's own model family (its prompt and tools: e.g.
``gpt-5.5`` gets the freeform ``apply_patch`` tool); it defaults to the request's model id.

Why ``danger-full-access``: Codex's own sandbox on Linux (bubblewrap, seccomp, landlock) needs user namespaces,
which an unprivileged container does not grant, so every command would fail inside docker; the environment is
the sandbox. Other ``sandbox_mode`` values are passed through for environments where they work. The commands codex
runs do not see ``*KEY*``/``*TOKEN*``/``*SECRET*`` variables (``shell_environment_policy.exclude``), so not the
envelope either.

Params (``CodexParams``): ``model``, ``reasoning_effort`` (``model_reasoning_effort``), ``sandbox_mode``,
``extra_args`` (added to the command line, e.g. ``["-c", "web_search=\\"live\\""]``), plus the installed-agent
params ``version``, ``binary``, ``timeout`` and ``poll_interval_s``.

The ``--json`` event stream becomes steps (``CodexTranscript``): reasoning and agent messages fill a step; each
tool item (``command_execution`` as ``shell`` with its command as the action, its output and exit code as the
observation; ``file_change`` as ``apply_patch``; ``mcp_tool_call`` as ``mcp:<server>/<tool>``; ``web_search``;
``todo_list`` as ``update_plan``; ``collab_tool_call`` as ``collab:<tool>``) closes it, one tool item per step
(the stream does not say which items one model reply made). The last agent message is the final answer;
``turn.completed`` gives the token usage (of the whole run: the stream has no per-call usage, nor latencies),
``turn.failed`` the error. Codex's warnings (``error`` items and events, e.g. reconnects) go to
``artifacts["agent"]["warnings"]``.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import Any, ClassVar, Literal

import msgspec

from ...interfaces import PreparedTask, RunContext
from ...records import Step, ToolCall, Usage
from .agent import AgentProgram, AgentRun, InstalledAgent, InstalledAgentParams, JsonLinesTranscript

#: the openai-codex-cli-bin version the tests pin (``codex`` extra); any recent version works.
TESTED_VERSION = "0.163.0"
#: the model provider id in the generated config.toml
PROVIDER_ID = "agentcompass"

SandboxMode = Literal["danger-full-access", "workspace-write", "read-only"]
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]

_EVENT_TYPES = frozenset({"thread.started", "turn.started", "turn.completed", "turn.failed", "item.started",
                          "item.updated", "item.completed", "error"})
_OBSERVATION_CHARS = 100_000
_MAX_WARNINGS = 20
# the gateway's route token, which the URL in codex's connection errors carries
_ROUTE_TOKEN = re.compile(r"/r/[A-Za-z0-9_-]+")

#: config.toml lines before the provider's ``base_url`` (which the command line appends from the environment)
CONFIG_LINES: tuple[str, ...] = (
    f'model_provider = "{PROVIDER_ID}"',
    'web_search = "disabled"',
    "check_for_update_on_startup = false",
    "[analytics]",
    "enabled = false",
    "[history]",
    'persistence = "none"',
    # ChatGPT's plugin marketplace and apps: at start Codex syncs them from github.com and chatgpt.com, and the
    # first model call waits for that (5 s per try where the sandbox has no such network)
    "[features]",
    "plugins = false",
    "remote_plugin = false",
    "apps = false",
    # the commands the model runs do not get the gateway's envelope (nor any other key-like variable)
    "[shell_environment_policy]",
    'exclude = ["*KEY*", "*SECRET*", "*TOKEN*"]',
    f"[model_providers.{PROVIDER_ID}]",
    'name = "AgentCompass gateway"',
    'env_key = "OPENAI_API_KEY"',
    'wire_api = "responses"',
)


class CodexParams(InstalledAgentParams, frozen=True):
    """``codex`` params (see the module doc)."""

    #: Codex's model (its family picks the prompt and tools); None: the request's model id
    model: str | None = None
    #: ``model_reasoning_effort``; None: Codex's default for the model
    reasoning_effort: ReasoningEffort | None = None
    #: Codex's own sandbox for the commands it runs (see the module doc for why the default)
    sandbox_mode: SandboxMode = "danger-full-access"
    #: more ``codex exec`` arguments, appended before the prompt
    extra_args: list[str] = []


def _clip(text: str) -> str:
    return text if len(text) <= _OBSERVATION_CHARS else text[:_OBSERVATION_CHARS] + "\n[... truncated]"


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _mcp_text(result: Any) -> str:
    if not isinstance(result, dict):
        return ""
    parts = [str(b.get("text", "")) for b in result.get("content") or [] if isinstance(b, dict) and "text" in b]
    if not parts and result.get("structured_content") is not None:
        return _json(result["structured_content"])
    return "\n".join(parts)


class CodexTranscript(JsonLinesTranscript):
    """``codex exec --json`` lines as steps (see the module doc)."""

    def __init__(self) -> None:
        super().__init__()
        self._open: Step | None = None  # the step agent messages and reasoning go to until a tool closes it
        self._tools: dict[str, Step] = {}  # tool item id -> its step
        self.warnings: list[str] = []
        self.turns = 0

    def handle(self, event: dict[str, Any]) -> list[Step] | None:
        kind = event.get("type")
        if not isinstance(kind, str) or kind not in _EVENT_TYPES:
            return None
        if kind == "thread.started":
            self.info["thread_id"] = event.get("thread_id")
        elif kind == "turn.started":
            self.turns += 1
            self.info["turns"] = self.turns
        elif kind == "turn.completed":
            self._usage(event.get("usage"))
            self.stop_reason = "completed"
            self.error = None  # what went wrong before (a reconnect) was overcome
        elif kind == "turn.failed":
            err = event.get("error")
            message = err.get("message") if isinstance(err, dict) else None
            self.stop_reason = "turn_failed"
            self.error = f"codex turn failed: {_ROUTE_TOKEN.sub('/r/***', str(message or 'no message'))}"[:2000]
        elif kind == "error":
            self._warn(event.get("message"))
            if self.stop_reason is None:
                self.error = f"codex: {self.warnings[-1]}" if self.warnings else None
        else:
            item = event.get("item")
            if isinstance(item, dict):
                return self._item(item, done=kind == "item.completed")
        return []

    def _warn(self, message: Any) -> None:
        if len(self.warnings) < _MAX_WARNINGS:
            self.warnings.append(_ROUTE_TOKEN.sub("/r/***", str(message))[:1000])
        self.info["warnings"] = list(self.warnings)

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        prompt = int(usage.get("input_tokens") or 0)
        completion = int(usage.get("output_tokens") or 0)
        turn = Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
                     cached_tokens=int(usage.get("cached_input_tokens") or 0))
        self.usage.add(turn)
        self.info["reasoning_output_tokens"] = (self.info.get("reasoning_output_tokens", 0)
                                                + int(usage.get("reasoning_output_tokens") or 0))

    # ------------------------------------------------------------------ items

    def _text_step(self) -> tuple[Step, bool]:
        if self._open is None or self._open.tool_calls:
            self._open = self.new_step(finish_reason="stop")
            return self._open, True
        return self._open, False

    def _item(self, item: dict[str, Any], *, done: bool) -> list[Step]:
        itype = item.get("type")
        iid = str(item.get("id", ""))
        if itype in ("agent_message", "reasoning"):
            text = item.get("text")
            if not done or not isinstance(text, str) or not text:
                return []
            step, new = self._text_step()
            if itype == "agent_message":
                step.content = f"{step.content}\n{text}" if step.content else text
                self.final_answer = text
            else:
                step.reasoning = f"{step.reasoning}\n{text}" if step.reasoning else text
            return [step] if new else []
        if itype == "error":
            if done:
                self._warn(item.get("message"))
            return []
        call = self._call(item)
        if call is None:
            return []  # an item type this version does not know: nothing to show
        known = self._tools.get(iid)
        new = False
        if known is not None:
            step = known
        elif self._open is not None and not self._open.tool_calls:
            step = self._tools[iid] = self._open
        else:
            step = self._tools[iid] = self._open = self.new_step()
            new = True
        name, arguments, action = call
        step.tool_calls = [ToolCall(id=iid, name=name, arguments=arguments)]
        step.action = action
        step.finish_reason = "tool_calls"
        if done:
            self._observe(step, item)
        return [step] if new else []

    @staticmethod
    def _call(item: dict[str, Any]) -> tuple[str, str, str] | None:
        """(tool name, arguments JSON, action text) of a tool item; None for other items."""
        itype = item.get("type")
        if itype == "command_execution":
            command = str(item.get("command", ""))
            return "shell", _json({"command": command}), command
        if itype == "file_change":
            changes = [c for c in item.get("changes") or [] if isinstance(c, dict)]
            text = "\n".join(f"{c.get('kind', '?')} {c.get('path', '?')}" for c in changes)
            return "apply_patch", _json({"changes": changes}), f"apply_patch\n{text}" if text else "apply_patch"
        if itype == "mcp_tool_call":
            name = f"mcp:{item.get('server', '?')}/{item.get('tool', '?')}"
            args = _json(item.get("arguments"))
            return name, args, f"{name} {args}"
        if itype == "web_search":
            query = str(item.get("query", ""))
            return "web_search", _json({"query": query}), f"web_search {query}"
        if itype == "todo_list":
            items = item.get("items") or []
            return "update_plan", _json({"items": items}), "update_plan"
        if itype == "collab_tool_call":
            name = f"collab:{item.get('tool', '?')}"
            args = _json({k: item[k] for k in ("prompt", "receiver_thread_ids") if k in item})
            return name, args, name
        return None

    @staticmethod
    def _observe(step: Step, item: dict[str, Any]) -> None:
        itype = item.get("type")
        status = str(item.get("status") or "")
        if itype == "command_execution":
            output = str(item.get("aggregated_output") or "")
            step.observation = _clip(output if status != "declined" else f"[declined] {output}")
            code = item.get("exit_code")
            step.exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
        elif itype == "file_change":
            step.observation = status or None
        elif itype == "mcp_tool_call":
            err = item.get("error")
            if isinstance(err, dict) and err.get("message"):
                step.observation = _clip(f"[error] {err['message']}")
            else:
                step.observation = _clip(_mcp_text(item.get("result")))
        elif itype == "collab_tool_call":
            step.observation = status or None


class Codex(InstalledAgent):
    """The real Codex CLI inside the environment (see the module doc)."""

    name: ClassVar[str] = "codex"
    program: ClassVar[AgentProgram] = AgentProgram(program="codex", distribution="openai-codex-cli-bin",
                                                   import_name="codex_cli_bin", relative_path="bin/codex")
    Params: ClassVar[type[CodexParams]] = CodexParams
    params: CodexParams

    @staticmethod
    def codex_home(run: AgentRun) -> str:
        """The run's ``CODEX_HOME`` (its config, and whatever codex keeps; removed with the run)."""
        return posixpath.join(run.home, ".codex")

    def command(self, task: PreparedTask, program_path: str, run: AgentRun) -> str:
        p = self.params
        q = shlex.quote
        config = posixpath.join(self.codex_home(run), "config.toml")
        # the gateway URL is only known inside the environment (it may carry a route token): the line is
        # written there, as a TOML literal string (so no quote may be in it)
        url_line = "\"base_url = '$OPENAI_BASE_URL'\""
        check_url = ('u=; case "$OPENAI_BASE_URL" in *"\'"*|*" "*) ;; http://*|https://*) u=ok ;; esac; '
                     '[ "$u" = ok ] || { echo "codex harness: OPENAI_BASE_URL (the model gateway) is missing or '
                     'not a plain http(s) URL" >&2; exit 2; }')
        write_config = (f"mkdir -p {q(self.codex_home(run))} && printf '%s\\n' "
                        f"{' '.join(q(line) for line in CONFIG_LINES)} {url_line} >{q(config)}")
        path_dir = posixpath.join(posixpath.dirname(posixpath.dirname(program_path)), "codex-path")
        path = f'if [ -d {q(path_dir)} ]; then PATH={q(path_dir)}:"$PATH"; export PATH; fi'
        model = q(p.model) if p.model else '"$AGENTCOMPASS_MODEL"'
        args = ["exec", "--json", "--color", "never", "--skip-git-repo-check", "--ephemeral",
                "--sandbox", p.sandbox_mode, "-c", 'approval_policy="never"']
        if p.reasoning_effort is not None:
            args += ["-c", f'model_reasoning_effort="{p.reasoning_effort}"']
        args += p.extra_args
        # a subshell: its ``exit`` (and codex's end) leave the run script alive to record the exit code
        return (f"( {check_url}; {write_config} && {path} && "
                f"{q(program_path)} {shlex.join(args[:1])} -m {model} {shlex.join(args[1:])} - "
                f"<{q(run.prompt_file)} )")

    def new_transcript(self) -> CodexTranscript:
        return CodexTranscript()

    def agent_env(self, task: PreparedTask, ctx: RunContext, run: AgentRun) -> dict[str, str]:
        return {**super().agent_env(task, ctx, run), "CODEX_HOME": self.codex_home(run), "NO_COLOR": "1"}

    def resolved_settings(self) -> dict[str, Any]:
        p = self.params
        return {**super().resolved_settings(), "model": p.model, "reasoning_effort": p.reasoning_effort,
                "sandbox_mode": p.sandbox_mode, "wire_api": "responses"}


__all__ = ["CONFIG_LINES", "Codex", "CodexParams", "CodexTranscript"]
