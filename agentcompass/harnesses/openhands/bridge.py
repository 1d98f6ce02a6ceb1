"""The OpenHands side of the ``openhands`` harness: a standalone script run by the venv's Python (>= 3.12).

It imports only the standard library and the OpenHands SDK (never ``agentcompass``: that package is not in
the venv). It runs OpenHands' ``Agent`` with its ``terminal`` and ``file_editor`` tools (their OpenHands
schemas and descriptions) plus its built-in ``finish``, the LLM pointed at the model gateway by the
environment (``OPENAI_BASE_URL``/``OPENAI_API_KEY`` or the Anthropic pair); each tool call is sent to the
harness, which runs it in the task's environment.

Protocol, JSON lines on the process's original stdout (ours) and stdin (theirs); OpenHands' own output goes
to stderr:
- harness -> bridge, first line: ``{"prompt", "workdir", "model", "protocol", "max_iterations",
  "command_timeout", "system_prompt_suffix"}``.
- bridge -> harness: ``{"op": "exec", "id", "command", "cwd", "timeout"}``, ``{"op": "stat", "id", "path"}``,
  ``{"op": "read", "id", "path"}``, ``{"op": "write", "id", "path", "content"}``; the harness answers
  ``{"id", ...}`` on stdin (an ``exec`` answer carries the ``timeout`` the harness allowed, which caps the
  agent's). ``{"op": "event", "event": {...}}`` (no answer) for each agent event (the first event of a model
  response carries that response's ``tokens``), and a
  last ``{"op": "done", "status", "final_answer", "error", "metrics"}``.
"""

from __future__ import annotations

import json
import os
import posixpath
import shlex
import shutil
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any

MARKER = "__AGENTCOMPASS_CWD__"


class Channel:
    """Requests to the harness over the private stdout / stdin pair, one in flight at a time."""

    def __init__(self, out: Any, inp: Any) -> None:
        self.out = out
        self.inp = inp
        self.lock = threading.Lock()
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            self.out.write(json.dumps(message) + "\n")
            self.out.flush()

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        with self.lock:
            self.next_id += 1
            message = {"op": op, "id": self.next_id, **fields}
            self.out.write(json.dumps(message) + "\n")
            self.out.flush()
            line = self.inp.readline()
        if not line:
            raise SystemExit("harness closed the channel")
        reply: dict[str, Any] = json.loads(line)
        if reply.get("id") != message["id"]:
            raise SystemExit(f"out-of-order reply {reply.get('id')} to request {message['id']}")
        return reply


def _text(contents: Any) -> str:
    return "".join(getattr(c, "text", "") for c in contents or ())


def event_summary(event: Any) -> dict[str, Any] | None:
    """What the harness turns into steps: messages, actions, observations and errors."""
    from openhands.sdk.event import ActionEvent, AgentErrorEvent, MessageEvent, ObservationEvent

    if isinstance(event, ActionEvent):
        call = event.tool_call
        return {"kind": "action", "tool": event.tool_name, "tool_call_id": event.tool_call_id,
                "arguments": call.arguments if call is not None else "", "thought": _text(event.thought),
                "reasoning": event.reasoning_content, "response_id": event.llm_response_id,
                "command": getattr(event.action, "command", None) if event.tool_name == "terminal" else None}
    if isinstance(event, ObservationEvent):
        obs = event.observation
        return {"kind": "observation", "tool": event.tool_name, "tool_call_id": event.tool_call_id,
                "text": _text(obs.to_llm_content), "exit_code": getattr(obs, "exit_code", None),
                "is_error": bool(obs.is_error)}
    if isinstance(event, AgentErrorEvent):
        return {"kind": "error", "tool": event.tool_name, "tool_call_id": event.tool_call_id, "text": event.error}
    if isinstance(event, MessageEvent):
        return {"kind": "message", "source": event.source, "text": _text(event.llm_message.content),
                "reasoning": event.llm_message.reasoning_content, "response_id": event.llm_response_id}
    return None


def build_tools(channel: Channel, workdir: str, command_timeout: float, shadow: Path) -> None:
    """Register ``terminal`` and ``file_editor`` with executors that run in the harness's environment."""
    from openhands.sdk.tool import ToolAnnotations, ToolExecutor, register_tool
    from openhands.tools.file_editor import FileEditorTool
    from openhands.tools.file_editor.definition import (
        TOOL_DESCRIPTION,
        FileEditorAction,
        FileEditorObservation,
    )
    from openhands.tools.file_editor.editor import FileEditor
    from openhands.tools.terminal import TerminalAction, TerminalObservation, TerminalTool
    from openhands.tools.terminal.descriptions import UNIX_TOOL_DESCRIPTION
    from openhands.tools.terminal.metadata import CmdOutputMetadata

    class RemoteTerminal(ToolExecutor[TerminalAction, TerminalObservation]):
        """One command per call, run to completion in the environment; the working directory carries over."""

        def __init__(self) -> None:
            self.cwd = workdir

        def __call__(self, action: TerminalAction, conversation: Any = None) -> TerminalObservation:
            if action.reset:
                self.cwd = workdir
                if not action.command.strip():
                    return TerminalObservation.from_text("Terminal reset.", command="", exit_code=0)
            if action.is_input:
                return TerminalObservation.from_text(
                    "This terminal runs each command to completion: there is no running process to send "
                    "input to.", is_error=True, command=action.command, exit_code=1)
            if not action.command.strip():
                return TerminalObservation.from_text("No command given.", is_error=True, command="", exit_code=1)
            timeout = float(action.timeout) if action.timeout else command_timeout
            # stderr joins stdout, as on a terminal; the marker line carries the working directory over
            script = (f"exec 2>&1\n{action.command}\n__ac_rc=$?; printf '\\n{MARKER}%s\\n' \"$(pwd)\"; "
                      "exit $__ac_rc")
            reply = channel.call("exec", command=script, cwd=self.cwd, timeout=timeout)
            timeout = float(reply.get("timeout") or timeout)  # what the harness allowed (it caps the ask)
            output: str = reply.get("output", "")
            head, sep, tail = output.rpartition(f"\n{MARKER}")
            if sep:
                self.cwd = tail.strip() or self.cwd
                output = head.removesuffix("\n")
            exit_code = int(reply.get("exit_code", -1))
            text = output
            if reply.get("timed_out"):
                text += f"\n[The command was killed after {timeout:g} seconds.]"
                exit_code = -1 if exit_code == 0 else exit_code
            meta = CmdOutputMetadata(exit_code=exit_code, working_dir=self.cwd)
            return TerminalObservation.from_text(text, command=action.command, exit_code=exit_code,
                                                 timeout=bool(reply.get("timed_out")), metadata=meta)

    class RemoteFileEditor(ToolExecutor[FileEditorAction, FileEditorObservation]):
        """OpenHands' own ``FileEditor`` on a host copy of the file, which is fetched before and written back
        after each change; directories are listed in the environment."""

        def __init__(self) -> None:
            self.editor = FileEditor(workspace_root=str(shadow))

        def _local(self, rel: str) -> Path | None:
            """The host copy of the environment's ``/<rel>``, or None when it would not lie inside the shadow
            folder (the check that keeps a hostile path from reaching the host's files)."""
            if not rel or rel == ".." or rel.startswith("../"):
                return None
            local = shadow / rel
            root = shadow.resolve()
            try:
                resolved = local.resolve()
            except (OSError, RuntimeError):  # a symlink loop
                return None
            if resolved == root or not resolved.is_relative_to(root):
                return None
            # the environment is the truth: a file left in the shadow where a directory is now needed goes
            for parent in reversed(local.relative_to(shadow).parents):
                held = shadow / parent
                if parent != Path(".") and (held.is_symlink() or (held.exists() and not held.is_dir())):
                    held.unlink()
            return local

        def _unshadow(self, text: str) -> str:
            return text.replace(str(shadow), "")

        def __call__(self, action: FileEditorAction, conversation: Any = None) -> FileEditorObservation:
            if not action.path.startswith("/"):
                return FileEditorObservation.from_text(
                    f"Invalid `path` parameter: {action.path}. The path should be an absolute path, starting "
                    "with `/`.", is_error=True, command=action.command)
            # `/a/../b` is `/b` in the environment too (and `/..` is `/`); the host copy must be that file's
            rel = posixpath.normpath(action.path).lstrip("/")
            path = "/" + rel
            kind = channel.call("stat", path=path).get("kind", "missing")
            if kind == "dir":
                if action.command != "view":
                    return FileEditorObservation.from_text(
                        f"The path {path} is a directory; only `view` works on a directory.",
                        is_error=True, command=action.command, path=path)
                listing = channel.call("exec", cwd=workdir, timeout=command_timeout, command=(
                    f"find {shlex.quote(path)} -maxdepth 2 -not -path '*/.*' | sort"))
                text = (f"Here's the files and directories up to 2 levels deep in {path}, excluding hidden "
                        f"items:\n{reply_output(listing)}")
                return FileEditorObservation.from_text(text, command="view", path=path)
            local = self._local(rel)
            if local is None:
                return FileEditorObservation.from_text(
                    f"Invalid `path` parameter: {action.path}. It does not name a file.", is_error=True,
                    command=action.command)
            local.parent.mkdir(parents=True, exist_ok=True)
            if local.is_dir() and not local.is_symlink():
                shutil.rmtree(local)  # a directory earlier, a file in the environment now
            before: str | None = None
            if kind == "file":
                reply = channel.call("read", path=path)
                if "error" in reply:
                    return FileEditorObservation.from_text(reply["error"], is_error=True, command=action.command)
                before = reply.get("content", "")
                local.write_text(before, encoding="utf-8")
            elif local.exists():
                local.unlink()
            try:
                obs = self.editor(command=action.command, path=str(local), file_text=action.file_text,
                                  view_range=action.view_range, old_str=action.old_str, new_str=action.new_str,
                                  insert_line=action.insert_line)
            except Exception as exc:  # the editor's ToolErrors: shown to the model, as OpenHands does
                return FileEditorObservation.from_text(self._unshadow(str(exc)), is_error=True,
                                                       command=action.command)
            if local.is_file():
                after = local.read_text(encoding="utf-8")
                if after != before:
                    reply = channel.call("write", path=path, content=after)
                    if "error" in reply:
                        return FileEditorObservation.from_text(reply["error"], is_error=True,
                                                               command=action.command)
            text = self._unshadow(obs.text)
            return FileEditorObservation.from_text(text, is_error=obs.is_error, command=action.command, path=path,
                                                   old_content=obs.old_content, new_content=obs.new_content)

    terminal = TerminalTool(
        action_type=TerminalAction, observation_type=TerminalObservation, description=UNIX_TOOL_DESCRIPTION,
        annotations=ToolAnnotations(title="terminal", readOnlyHint=False, destructiveHint=True,
                                    idempotentHint=False, openWorldHint=True),
        executor=RemoteTerminal())
    editor = FileEditorTool(
        action_type=FileEditorAction, observation_type=FileEditorObservation,
        description=(f"{TOOL_DESCRIPTION}\n\nYour current working directory is: {workdir}\nWhen exploring "
                     "project structure, start with this directory instead of the root filesystem."),
        annotations=ToolAnnotations(title="file_editor", readOnlyHint=False, destructiveHint=True,
                                    idempotentHint=False, openWorldHint=False),
        executor=RemoteFileEditor())
    register_tool("terminal", terminal)
    register_tool("file_editor", editor)


def reply_output(reply: dict[str, Any]) -> str:
    return str(reply.get("output", ""))


def main() -> int:
    # our protocol keeps the real stdout; everything OpenHands prints goes to stderr
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    channel = Channel(out, sys.stdin)
    config = json.loads(sys.stdin.readline())
    status, final_answer, error = "error", None, None
    error_types: list[str] = []
    http_status: int | None = None
    metrics: dict[str, Any] = {}
    try:
        from openhands.sdk import LLM, Agent, Conversation
        from openhands.sdk.tool import Tool
        from pydantic import SecretStr

        anthropic = config.get("protocol") == "anthropic-messages"
        prefix = "anthropic" if anthropic else "openai"
        base_url = os.environ["ANTHROPIC_BASE_URL" if anthropic else "OPENAI_BASE_URL"]
        api_key = os.environ["ANTHROPIC_API_KEY" if anthropic else "OPENAI_API_KEY"]
        if anthropic:
            base_url = base_url.removesuffix("/v1")  # LiteLLM adds /v1/messages itself
        llm_kwargs: dict[str, Any] = {"model": f"{prefix}/{config['model']}", "base_url": base_url,
                                      "api_key": SecretStr(api_key), "usage_id": "agent",
                                      "num_retries": 0, "timeout": int(config.get("llm_timeout", 600)),
                                      "native_tool_calling": True, "drop_params": True}
        llm_kwargs.update(config.get("llm_params") or {})
        llm = LLM(**llm_kwargs)
        with tempfile.TemporaryDirectory(prefix="agentcompass-openhands-") as scratch:
            shadow = Path(scratch) / "files"
            shadow.mkdir()
            build_tools(channel, config["workdir"], float(config["command_timeout"]), shadow)
            agent = Agent(llm=llm, tools=[Tool(name="terminal"), Tool(name="file_editor")],
                          system_prompt_kwargs={"cli_mode": True})

            counted: set[str] = set()

            def on_event(event: Any) -> None:
                summary = event_summary(event)
                if summary is None:
                    return
                response_id = summary.get("response_id")
                if response_id and response_id not in counted:  # a response's tokens go with its first event
                    counted.add(response_id)
                    summary["tokens"] = response_tokens(conversation, response_id)
                channel.send({"op": "event", "event": summary})

            conversation = Conversation(agent=agent, workspace=str(Path(scratch) / "workspace"),
                                        persistence_dir=None, callbacks=[on_event], visualizer=None,
                                        max_iteration_per_run=int(config["max_iterations"]),
                                        stuck_detection=True)
            conversation.send_message(config["prompt"])
            conversation.run()
            state = conversation.state
            status = str(getattr(state.execution_status, "value", state.execution_status))
            final_answer = finish_message(state.events)
            stats = conversation.conversation_stats.get_combined_metrics()
            usage = stats.accumulated_token_usage
            metrics = {"cost": stats.accumulated_cost,
                       "prompt_tokens": getattr(usage, "prompt_tokens", 0) if usage else 0,
                       "completion_tokens": getattr(usage, "completion_tokens", 0) if usage else 0}
            conversation.close()
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        error_types, http_status = error_chain(exc)
        traceback.print_exc(file=sys.stderr)
    channel.send({"op": "done", "status": status, "final_answer": final_answer, "error": error,
                  "error_types": error_types, "http_status": http_status, "metrics": metrics})
    return 0


def response_tokens(conversation: Any, response_id: str) -> dict[str, int] | None:
    """The tokens OpenHands counted for the model response ``response_id`` (None if it did not)."""
    for metrics in conversation.conversation_stats.usage_to_metrics.values():
        for usage in metrics.token_usages:
            if usage.response_id == response_id:
                return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                        "cache_read_tokens": usage.cache_read_tokens}
    return None


def error_chain(exc: BaseException) -> tuple[list[str], int | None]:
    """The class names along the exception's causes (so the harness can tell a model failure) and the HTTP
    status one of them carries."""
    names: list[str] = []
    status: int | None = None
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        names.append(type(cur).__name__)
        code = getattr(cur, "status_code", None)
        if status is None and isinstance(code, int):
            status = code
        cur = cur.__cause__ or cur.__context__
    return names, status


def finish_message(events: Any) -> str | None:
    """The ``finish`` tool's message, else the agent's last message."""
    from openhands.sdk.event import ActionEvent, MessageEvent

    for event in reversed(list(events)):
        if isinstance(event, ActionEvent) and event.tool_name == "finish" and event.action is not None:
            return str(getattr(event.action, "message", ""))
        if isinstance(event, MessageEvent) and event.source == "agent":
            return _text(event.llm_message.content)
    return None


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    # not sys.exit: interpreter shutdown waits for OpenHands' and LiteLLM's worker threads, which can take
    # seconds; everything the harness needs was sent
    os._exit(code)
