"""Plumbing for the ``mini_swe_agent`` harness: loading the package, and running its synchronous agent loop
in a worker thread whose model calls and commands go to our async ModelClient and Environment.

- ``load_minisweagent`` finds and imports the package quietly (the engine installs the harness's declared
  requirement first when allowed, see ``agentcompass.dependencies``): no banner, and its global
  config dir (which it creates and loads a ``.env`` from at import) points at a throwaway directory unless
  the user set ``MSWEA_GLOBAL_CONFIG_DIR``.
- ``LoopBridge`` runs a coroutine on the engine's loop for the worker thread and waits for it; ``stop()``
  cancels what is in flight and makes every later call raise ``AgentStopped``, so the thread ends promptly.
- ``ModelAdapter`` / ``EnvAdapter`` implement mini-swe-agent's Model / Environment protocols on top of the
  bridge and record each step into a ``StepRecorder`` as it happens (so a stopped run keeps its steps).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import importlib.util
import json
import logging
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine, Iterator
from types import SimpleNamespace
from typing import Any, TypeVar

from ..._errors import ConfigError, EnvironmentError_
from ...common.environ import environ_set
from ...interfaces import Environment, ModelClient, ModelResponse
from ...models.pricing import PriceTable
from ...records import Step, ToolCall, Usage

T = TypeVar("T")

PACKAGE_MODULE = "minisweagent"
REQUIREMENT = "mini-swe-agent>=2.4,<3"
EXTRA_INSTALL_COMMAND = "pip install 'agentcompass[mini-swe-agent]'"
#: the first output line by which a command submits (what mini-swe-agent's own environments look for).
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
#: extra time the bridge gives an environment to report a command it was told to stop at its timeout.
EXEC_GRACE_S = 60.0

_log = logging.getLogger("agentcompass.harnesses.mini_swe_agent.harness")
_import_lock = threading.Lock()


class AgentStopped(Exception):
    """Raised inside the agent thread once the harness has stopped the agent (cancelled or out of time)."""


class BridgeTimeout(Exception):
    """A coroutine run for the agent thread did not finish within the bridge's own bound."""


# ----------------------------------------------------------------------------- loading the package


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def ensure_package(auto_install: bool, module: str = PACKAGE_MODULE) -> None:
    """A ConfigError naming the command when ``module`` cannot be imported. Installing is the engine's: it
    installs the harness's declared ``requirements`` (awaited, off the loop) before constructing it."""
    if importlib.util.find_spec(module) is not None:
        return
    hint = ("the engine installs it before constructing the harness when the request sets "
            "auto_install_dependencies=True" if auto_install else "or pass auto_install_dependencies=True")
    raise ConfigError(f"Harness mini_swe_agent needs the mini-swe-agent package (module {module!r} is not "
                      f"installed). Install it with: {EXTRA_INSTALL_COMMAND} ({hint}).", field="harness")


@contextlib.contextmanager
def _quiet_first_import() -> Iterator[None]:
    """Its ``__init__`` prints a banner and creates + loads a global config dir: silence and sandbox both."""
    with tempfile.TemporaryDirectory(prefix="agentcompass-mswea-") as tmp, environ_set({
            "MSWEA_SILENT_STARTUP": os.environ.get("MSWEA_SILENT_STARTUP") or "1",
            "MSWEA_GLOBAL_CONFIG_DIR": os.environ.get("MSWEA_GLOBAL_CONFIG_DIR") or tmp}):
        yield


def load_minisweagent(auto_install: bool, module: str = PACKAGE_MODULE) -> SimpleNamespace:
    """The parts of mini-swe-agent the harness uses (checked to be a 2.4+ 2.x release)."""
    ensure_package(auto_install, module)
    with _import_lock:
        if module not in sys.modules:
            with _quiet_first_import():
                importlib.import_module(module)
        root = sys.modules[module]
        version = str(getattr(root, "__version__", "0"))
        if not (2, 4) <= _version_tuple(version) < (3,):
            raise ConfigError(f"Harness mini_swe_agent needs {REQUIREMENT!r}, found version {version}. "
                              f"Upgrade with: {EXTRA_INSTALL_COMMAND}", field="harness")
        default = importlib.import_module(f"{module}.agents.default")
        exceptions = importlib.import_module(f"{module}.exceptions")
        config = importlib.import_module(f"{module}.config")
        text = importlib.import_module(f"{module}.models.utils.actions_text")
        toolcall = importlib.import_module(f"{module}.models.utils.actions_toolcall")
    return SimpleNamespace(
        version=version, DefaultAgent=default.DefaultAgent, agent_fields=frozenset(default.AgentConfig.model_fields),
        Submitted=exceptions.Submitted,
        FormatError=exceptions.FormatError, get_config_from_spec=config.get_config_from_spec,
        builtin_config_dir=config.builtin_config_dir, parse_regex_actions=text.parse_regex_actions,
        format_text_observations=text.format_observation_messages,
        parse_toolcall_actions=toolcall.parse_toolcall_actions,
        format_toolcall_observations=toolcall.format_toolcall_observation_messages, BASH_TOOL=toolcall.BASH_TOOL)


# ----------------------------------------------------------------------------- thread <-> loop


class LoopBridge:
    """Runs coroutines on the engine's event loop on behalf of the agent's worker thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.stopped = threading.Event()
        self._tasks: set[asyncio.Task[Any]] = set()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for it (from the worker thread only)."""
        if self.stopped.is_set():
            coro.close()
            raise AgentStopped("the agent was stopped")
        fut = asyncio.run_coroutine_threadsafe(self._tracked(coro), self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.CancelledError:
            raise AgentStopped("the agent was stopped") from None
        except TimeoutError:
            if fut.done():  # the coroutine itself raised TimeoutError
                raise
            fut.cancel()
            raise BridgeTimeout(f"no result within {timeout:g}s") from None

    async def _tracked(self, coro: Coroutine[Any, Any, T]) -> T:
        if self.stopped.is_set():  # stop() ran between the thread's check and this task starting
            coro.close()
            raise asyncio.CancelledError
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            return await coro
        finally:
            self._tasks.discard(task)

    async def stop(self, grace: float) -> None:
        """Refuse further calls and cancel the ones in flight (waiting up to ``grace`` for them to unwind)."""
        self.stopped.set()
        tasks = [t for t in self._tasks if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace)


# ----------------------------------------------------------------------------- adapters


class StepRecorder:
    """Our trajectory steps and usage, filled in by the adapters as the agent runs."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.usage = Usage()
        self.timeouts: list[str] = []

    def begin(self, resp: ModelResponse, started: float, tool_calls: list[ToolCall]) -> Step:
        self.usage.add(resp.usage)
        if resp.usage.calls == 0:  # a client that does not count its calls
            self.usage.calls += 1
        step = Step(index=len(self.steps), content=resp.content or "", reasoning=resp.reasoning,
                    tool_calls=tool_calls, prompt_tokens=resp.usage.prompt_tokens,
                    completion_tokens=resp.usage.completion_tokens, model_latency_s=resp.latency_s,
                    finish_reason=resp.finish_reason, started_at=started)
        self.steps.append(step)
        return step

    def executing(self, command: str) -> None:
        """A command of the current step starts (recorded first, so a stopped run still shows it)."""
        if self.steps:
            step = self.steps[-1]
            step.action = command if step.action is None else f"{step.action}\n{command}"

    def executed(self, returncode: int, elapsed: float) -> None:
        if self.steps:
            step = self.steps[-1]
            step.exit_code = returncode
            step.exec_latency_s = (step.exec_latency_s or 0.0) + elapsed

    def observed(self, messages: list[dict[str, Any]]) -> None:
        if self.steps:
            texts = [m["content"] for m in messages if isinstance(m.get("content"), str)]
            self.steps[-1].observation = "\n\n".join(texts)


def _tool_call(tc: Any, i: int) -> ToolCall:
    """Our ToolCall from what a client returned (a ToolCall, or an OpenAI-shaped / flat dict)."""
    if isinstance(tc, ToolCall):
        return tc
    if isinstance(tc, dict):
        fn: dict[str, Any] = tc["function"] if isinstance(tc.get("function"), dict) else tc
        args = fn.get("arguments", "")
        return ToolCall(id=str(tc.get("id") or f"call_{i}"), name=str(fn.get("name", "")),
                        arguments=args if isinstance(args, str) else json.dumps(args))
    return ToolCall(id=str(getattr(tc, "id", None) or f"call_{i}"), name=str(getattr(tc, "name", "")),
                    arguments=str(getattr(tc, "arguments", "")))


def _cost(resp: ModelResponse, price: PriceTable | None) -> float:
    """Cost of a response from the model's price table (0 when there is none: cost is not counted)."""
    return price.cost(resp.usage) if price is not None else 0.0


class ModelAdapter:
    """mini-swe-agent's ``Model`` protocol over our async ``ModelClient``.

    ``mode="text"``: the action is the one block ``model.action_regex`` finds in the reply (its textbased
    models); ``mode="tool"``: the reply's ``bash`` tool calls (its default tool-call models).
    """

    def __init__(self, mini: SimpleNamespace, client: ModelClient, bridge: LoopBridge, recorder: StepRecorder, *,
                 mode: str, model_config: dict[str, Any], model_params: dict[str, Any],
                 log: logging.Logger, price: PriceTable | None = None) -> None:
        self.mini = mini
        self.price = price
        self.client = client
        self.bridge = bridge
        self.recorder = recorder
        self.mode = mode
        self.config = dict(model_config)
        self.model_params = model_params
        self.log = log

    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        api_messages = [{k: v for k, v in m.items() if k != "extra"} for m in messages]
        tools = [self.mini.BASH_TOOL] if self.mode == "tool" else None
        started = time.time()
        resp = self.bridge.call(self.client.complete(api_messages, tools=tools, **{**self.model_params, **kwargs}))
        calls = [_tool_call(tc, i) for i, tc in enumerate(resp.tool_calls)]
        cost = resp.usage.cost = _cost(resp, self.price)
        step = self.recorder.begin(resp, started, calls)
        content = resp.content or ""
        template_kwargs = {"finish_reason": resp.finish_reason}
        try:
            if self.mode == "tool":
                shaped = [SimpleNamespace(id=c.id, function=SimpleNamespace(name=c.name, arguments=c.arguments))
                          for c in calls]
                actions = self.mini.parse_toolcall_actions(
                    shaped, format_error_template=self.config["format_error_template"],
                    template_kwargs=template_kwargs)
            else:
                actions = self.mini.parse_regex_actions(
                    content, action_regex=self.config["action_regex"],
                    format_error_template=self.config["format_error_template"], template_kwargs=template_kwargs)
        except self.mini.FormatError as exc:
            # the agent adds only these messages (not the reply) and bills the call from their extra
            exc.messages[0].setdefault("extra", {})["cost"] = cost
            step.observation = str(exc.messages[0].get("content", ""))
            self.log.info("step %d: format error", step.index)
            raise
        message: dict[str, Any] = {"role": "assistant", "content": content,
                                   "extra": {"actions": actions, "cost": cost, "timestamp": time.time()}}
        if self.mode == "tool" and calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
        return message

    def format_message(self, **kwargs: Any) -> dict[str, Any]:
        return dict(kwargs)

    def format_observation_messages(self, message: dict[str, Any], outputs: list[dict[str, Any]],
                                    template_vars: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        template = self.config["observation_template"]
        if self.mode == "tool":
            msgs: list[dict[str, Any]] = self.mini.format_toolcall_observations(
                actions=message.get("extra", {}).get("actions", []), outputs=outputs,
                observation_template=template, template_vars=template_vars)
        else:
            msgs = self.mini.format_text_observations(outputs, observation_template=template,
                                                      template_vars=template_vars)
        self.recorder.observed(msgs)
        return msgs

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {**self.config, "model_name": self.client.model_id}

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {"model": {"model_name": self.client.model_id, "mode": self.mode},
                                    "model_type": "agentcompass.ModelClient"}}}


class EnvAdapter:
    """mini-swe-agent's ``Environment`` protocol over our async ``Environment``.

    A command runs as ``[*interpreter, cmd]`` when the config names an interpreter, else through the
    environment's shell; its stderr is merged into stdout (``exec 2>&1``) as mini-swe-agent's environments do.
    A command past its timeout gets returncode -1 and an ``exception_info`` saying it timed out.
    """

    def __init__(self, mini: SimpleNamespace, env: Environment, bridge: LoopBridge, recorder: StepRecorder, *,
                 timeout: float, env_vars: dict[str, str], interpreter: list[str] | None,
                 template_vars: dict[str, Any], log: logging.Logger) -> None:
        self.mini = mini
        self.env = env
        self.bridge = bridge
        self.recorder = recorder
        self.timeout = timeout
        self.env_vars = env_vars
        self.interpreter = interpreter
        self.config = {"cwd": env.workdir, "timeout": timeout, "env": env_vars, "interpreter": interpreter}
        self.template_vars = template_vars
        self.log = log

    def execute(self, action: dict[str, Any], cwd: str = "", *, timeout: float | None = None) -> dict[str, Any]:
        command = str(action.get("command", ""))
        limit = float(timeout or self.timeout)
        script = f"exec 2>&1; {command}"
        cmd: str | list[str] = [*self.interpreter, script] if self.interpreter else script
        self.recorder.executing(command)
        t0 = time.monotonic()
        try:
            res = self.bridge.call(self.env.exec(cmd, timeout=limit, cwd=cwd or self.env.workdir,
                                                 env=self.env_vars or None), timeout=limit + EXEC_GRACE_S)
        except BridgeTimeout:
            raise EnvironmentError_(f"environment {self.env.id} did not finish a command within "
                                    f"{limit + EXEC_GRACE_S:g}s of its {limit:g}s timeout") from None
        elapsed = time.monotonic() - t0
        output: dict[str, Any]
        if res.timed_out:
            self.recorder.timeouts.append(command[:200])
            output = {"output": res.output, "returncode": -1,
                      "exception_info": "An error occurred while executing the command: "
                                        f"Command {command!r} timed out after {limit:g} seconds",
                      "extra": {"exception_type": "TimeoutExpired", "timed_out": True}}
        else:
            output = {"output": res.output, "returncode": res.exit_code, "exception_info": ""}
        self.recorder.executed(output["returncode"], elapsed)
        step = self.recorder.steps[-1].index if self.recorder.steps else -1
        self.log.info("step %d: exit %s after %.2fs: %s", step, output["returncode"], elapsed, command[:200])
        lines = output["output"].lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT_MARKER and output["returncode"] == 0:
            submission = "".join(lines[1:])
            raise self.mini.Submitted({"role": "exit", "content": submission,
                                       "extra": {"exit_status": "Submitted", "submission": submission}})
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {**self.config, **self.template_vars, **kwargs}

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {"environment": {"id": self.env.id, **self.config},
                                    "environment_type": "agentcompass.Environment"}}}
