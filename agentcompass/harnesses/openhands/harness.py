"""The ``openhands`` harness: the OpenHands agent (the ``openhands-sdk`` ``Agent`` that ``openhands-ai`` 1.x is
built on, with the ``terminal`` and ``file_editor`` tools of ``openhands-tools``) driven from the host, its
tool calls executed in our environment.

Why host-driven: OpenHands needs Python >= 3.12 and ~500 MB of dependencies, which a task's image (any
distribution, any Python, often no network) cannot be assumed to hold; on the host it is installed once per
machine in its own venv (see ``_openhands_venv``) and works with every environment provider. The agent
process (``bridge``, run by that venv's Python) calls the model through the AgentCompass model
gateway (``needs_model_endpoint``: ``RunContext.model_env`` gives it ``OPENAI_BASE_URL``/``OPENAI_API_KEY``,
a route token or envelope, never the real key) and sends each ``terminal`` command and file edit back over
JSON lines on its stdin/stdout; this harness runs them with ``env.exec`` / ``env.read_file`` /
``env.write_file``. Each terminal command runs to completion in a fresh shell in the directory the previous
one ended in (OpenHands' own terminal is a persistent tmux session: exported variables do not carry over
here, and interactive input is refused). The file editor is OpenHands' own, on a host copy of each file
that is written back after a change.

Params: ``version`` (openhands-sdk/openhands-tools, default ``DEFAULT_VERSION``), ``python`` (a Python >= 3.12
for the venv; default python3.13/3.12 on PATH or pyenv's), ``max_iterations`` (OpenHands'
``max_iteration_per_run``, default 100), ``command_timeout`` (seconds per terminal command unless the agent
sets its own, default 120), ``command_timeout_max`` (the most the agent may set for one command, default
``command_timeout``; what it asks for is clamped to [1 s, this]), ``timeout`` (seconds for the whole agent;
it stops with what it has, ``error_kind="agent_timeout"``), ``llm_params`` (extra ``openhands.sdk.LLM``
fields, e.g. ``temperature``), ``install_timeout`` (seconds for the one-time venv install, default 900).

Result: ``final_answer`` is the ``finish`` tool's message (else the agent's last message); a benchmark that
grades a patch collects it from the environment (as SWE-bench does). Stop reason: OpenHands' execution status
(``finished``, ``stuck``, ``error``, or ``max_iterations`` when it ran out of iterations). Error kinds:
``agent_timeout``, ``step_limit`` (max_iterations), ``agent_stuck``, ``agent_error`` (the bridge failed;
its stderr tail is in ``artifacts``). A failed model call is raised as a ``ModelError`` for the engine.
Steps come as the agent acts (``RunContext.trajectory``), so an engine
``agent_timeout`` keeps them. Each model response's tokens (OpenHands' own count) are on the first step it
produced; ``HarnessResult.usage`` stays empty because every call went through the gateway, whose ledger the
engine adds to the try's usage (``meta["usage"]``/``meta["gateway"]``); OpenHands' totals are in
``artifacts["openhands"]["metrics"]``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import math
import os
import signal
import time
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from ..._errors import ConfigError, EnvironmentError_, ModelError
from ..._validate import Count, Seconds
from ...common.error_kinds import ErrorKind
from ...common.http_status import model_error_kind
from ...dependencies import reported_install
from ...interfaces import ComponentContext, Environment, HarnessResult, ModelClient, PreparedTask, RunContext
from ...records import Step, ToolCall, Trajectory
from ..base import Harness
from . import venv

BRIDGE = Path(__file__).resolve().parent / "bridge.py"
DEFAULT_MAX_ITERATIONS = 100
DEFAULT_COMMAND_TIMEOUT = 120.0
#: a reply line can carry a whole file.
_LINE_LIMIT = 64 * 1024 * 1024
#: the shortest per-command timeout the agent may ask for.
_MIN_COMMAND_TIMEOUT_S = 1.0
_KILL_WAIT_S = 10.0
#: how long a bridge that sent ``done`` may take to exit on its own before it is killed.
_EXIT_GRACE_S = 5.0
_STDERR_TAIL = 200
#: the host variables the bridge inherits (never the host's keys: the model ones come from the gateway).
#: OpenHands' LLM errors (and LiteLLM's beneath them) -> our ModelError kinds; other errors are the agent's.
_LLM_ERRORS = {
    "LLMRateLimitError": ErrorKind.MODEL_RATE_LIMIT, "RateLimitError": ErrorKind.MODEL_RATE_LIMIT,
    "LLMServiceUnavailableError": ErrorKind.MODEL_SERVER_ERROR, "ServiceUnavailableError": ErrorKind.MODEL_SERVER_ERROR,
    "InternalServerError": ErrorKind.MODEL_SERVER_ERROR, "LLMTimeoutError": ErrorKind.MODEL_CONNECTION_ERROR,
    "LLMAuthenticationError": ErrorKind.MODEL_AUTH, "AuthenticationError": ErrorKind.MODEL_AUTH,
    "APIConnectionError": ErrorKind.MODEL_CONNECTION_ERROR, "LLMNoResponseError": ErrorKind.MODEL_BAD_RESPONSE,
    "LLMBadRequestError": ErrorKind.MODEL_BAD_REQUEST, "BadRequestError": ErrorKind.MODEL_BAD_REQUEST,
}
_PASS_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR")


class OpenHandsParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``openhands`` params (see the module docstring)."""

    version: str = venv.DEFAULT_VERSION
    python: str | None = None
    max_iterations: Count = DEFAULT_MAX_ITERATIONS
    command_timeout: Seconds = DEFAULT_COMMAND_TIMEOUT
    command_timeout_max: Seconds | None = None
    timeout: Seconds | None = None
    llm_params: dict[str, Any] | None = None
    install_timeout: Seconds = venv.DEFAULT_INSTALL_TIMEOUT_S


class _Transcript:
    """Turns the bridge's events into steps, appended to the live trajectory as they come."""

    def __init__(self, trajectory: Trajectory) -> None:
        self.trajectory = trajectory
        self.by_call: dict[str, Step] = {}
        self.last_event = time.time()

    def _new(self, **fields: Any) -> Step:
        now = time.time()
        step = Step(index=len(self.trajectory.steps), started_at=self.last_event, **fields)
        step.model_latency_s = round(now - self.last_event, 6)
        self.trajectory.steps.append(step)
        return step

    def feed(self, event: dict[str, Any], exec_s: float) -> None:
        kind = event.get("kind")
        if kind == "action":
            call_id = str(event.get("tool_call_id") or "")
            step = self._new(content=_text(event.get("thought")), reasoning=_text(event.get("reasoning")),
                             tool_calls=[ToolCall(id=call_id, name=str(event.get("tool") or ""),
                                                  arguments=str(event.get("arguments") or ""))],
                             action=_text(event.get("command")))
            _set_tokens(step, event.get("tokens"))
            self.by_call[call_id] = step
        elif kind in ("observation", "error"):
            found = self.by_call.get(str(event.get("tool_call_id") or ""))
            if found is None:
                found = self._new()
                found.model_latency_s = None
            step = found
            step.observation = str(event.get("text") or "")
            code = event.get("exit_code")
            failed = kind == "error" or bool(event.get("is_error"))
            step.exit_code = code if isinstance(code, int) else (1 if failed else None)
            step.exec_latency_s = round(exec_s, 6) if exec_s else None
        elif kind == "message" and event.get("source") == "agent":
            step = self._new(content=_text(event.get("text")), reasoning=_text(event.get("reasoning")),
                             finish_reason="stop")
            _set_tokens(step, event.get("tokens"))
        self.last_event = time.time()


def _text(value: Any) -> str | None:
    """A text field of the bridge's event (anything else, or empty, is None)."""
    return value if isinstance(value, str) and value else None


def _set_tokens(step: Step, tokens: Any) -> None:
    """The tokens of the model response ``step`` came from (sent with its first event only)."""
    if isinstance(tokens, dict):
        for field in ("prompt_tokens", "completion_tokens"):
            value = tokens.get(field)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                setattr(step, field, value)


class OpenHands(Harness):
    """The OpenHands agent on the host, its tools run in our environment (see the module docstring)."""

    evaluates: ClassVar[bool] = True
    needs_environment: ClassVar[bool] = True
    name: ClassVar[str] = "openhands"
    needs_model_endpoint: ClassVar[bool] = True
    Params: ClassVar[type[OpenHandsParams]] = OpenHandsParams
    params: OpenHandsParams

    def __init__(self, params: OpenHandsParams | dict[str, Any], ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        self.python, self.py_version = venv.find_python(self.params.python)
        self.venv = venv.venv_dir(ctx.data_dir, self.params.version, self.py_version)
        if not ctx.auto_install_dependencies and not venv.is_ready(self.venv):
            raise venv.missing_error(self.python, self.venv, self.params.version)

    def resolved_settings(self) -> dict[str, Any]:
        """The OpenHands version, the venv and its Python, and the limits in force."""
        return {"package": {"name": "openhands-sdk", "version": self.params.version}, "venv": str(self.venv),
                "python": self.python, "python_version": self.py_version, "max_iterations": self.params.max_iterations,
                "command_timeout": self.params.command_timeout, "command_timeout_max": self._timeout_cap(),
                "tools": ["terminal", "file_editor", "finish"]}

    def _timeout_cap(self) -> float:
        p = self.params
        return p.command_timeout if p.command_timeout_max is None else p.command_timeout_max

    def _command_timeout(self, asked: Any) -> float:
        """The timeout one terminal command gets: what the agent asked for, clamped to
        [``_MIN_COMMAND_TIMEOUT_S``, the cap]; ``command_timeout`` when it asked for nothing usable."""
        cap = self._timeout_cap()
        if isinstance(asked, bool) or not isinstance(asked, (int, float)) or not math.isfinite(asked) or asked <= 0:
            return min(self.params.command_timeout, cap)
        return min(max(float(asked), _MIN_COMMAND_TIMEOUT_S), cap)

    async def _python(self) -> Path:
        if venv.is_ready(self.venv) or not self.ctx.auto_install_dependencies:
            return await self._ensure_venv()
        async with reported_install(self.ctx, "harness", f"openhands-ai=={self.params.version} (its venv)"):
            return await self._ensure_venv()

    async def _ensure_venv(self) -> Path:
        return await venv.ensure_venv(self.python, self.venv, self.params.version,
                                      auto_install=self.ctx.auto_install_dependencies,
                                      timeout_s=self.params.install_timeout)

    async def setup(self, task: PreparedTask, env: Environment, log: logging.Logger) -> None:
        """Install the venv (once per machine) before the agent's clock starts."""
        if not venv.is_ready(self.venv):
            log.info("installing OpenHands %s into %s", self.params.version, self.venv)
        await self._python()

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient,
                  ctx: RunContext, log: logging.Logger) -> HarnessResult:
        if env is None:
            raise EnvironmentError_("openhands needs an environment but got none")
        if not ctx.model_env:
            raise ConfigError("harness openhands runs its agent as a separate process that calls the model over "
                              "HTTP: the model needs a `model_base_url` (serve the scripted model with "
                              "`agentcompass serve-scripted`).", field="model_base_url")
        python = await self._python()
        trajectory = ctx.trajectory
        trajectory.started_at = trajectory.started_at or time.time()
        transcript = _Transcript(trajectory)
        child_env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
        child_env.update(ctx.model_env)
        child_env.update(OPENHANDS_SUPPRESS_BANNER="1", LITELLM_LOCAL_MODEL_COST_MAP="True",
                         PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", LOG_LEVEL="WARNING")
        config = {"prompt": task.prompt, "workdir": env.workdir, "model": ctx.model_env.get("AGENTCOMPASS_MODEL"),
                  "protocol": ctx.model_env.get("AGENTCOMPASS_MODEL_API_PROTOCOL", "openai-chat"),
                  "max_iterations": self.params.max_iterations, "command_timeout": self.params.command_timeout,
                  "llm_params": dict(self.params.llm_params or {})}
        proc = await asyncio.create_subprocess_exec(
            # -I: isolated, so the script's own directory (holding this module, `openhands.py`) does not shadow
            # the OpenHands package
            str(python), "-I", str(BRIDGE), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=child_env, cwd=str(self.venv), start_new_session=True,
            limit=_LINE_LIMIT)
        stderr_tail: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL)
        drain = asyncio.create_task(_drain(proc, stderr_tail))
        done: dict[str, Any] = {}
        faults: list[str] = []
        timed_out = False
        try:
            try:
                await asyncio.wait_for(self._serve(proc, env, config, transcript, done, faults, log),
                                       self.params.timeout)
            except TimeoutError:
                timed_out = True
                log.warning("openhands stopped at its %gs timeout", self.params.timeout)
        finally:
            try:
                await _stop(proc, grace_s=_EXIT_GRACE_S if done else 0.0)
            finally:
                drain.cancel()
                await asyncio.wait({drain}, timeout=_KILL_WAIT_S)
        trajectory.finished_at = time.time()
        failure = self._model_failure(done)
        if failure is not None and not timed_out:
            raise failure
        secrets = {v for k, v in ctx.model_env.items() if k.endswith("_API_KEY") and v}
        stderr = [_redact(line, secrets) for line in stderr_tail]
        return self._result(trajectory, done, timed_out, stderr, proc.returncode, faults, log)

    async def _serve(self, proc: asyncio.subprocess.Process, env: Environment, config: dict[str, Any],
                     transcript: _Transcript, done: dict[str, Any], faults: list[str], log: logging.Logger) -> None:
        """Send the config, then answer the bridge's requests until it says it is done or its stdout ends (or
        breaks: an over-long line, a closed stdin); what went wrong with the channel goes to ``faults``."""
        assert proc.stdout is not None and proc.stdin is not None
        exec_s = 0.0  # time spent on the bridge's requests since its last event
        bad_lines = 0
        try:
            if not await _send(proc, config, faults):
                return
            while True:
                try:
                    line = await proc.stdout.readline()
                except ValueError:  # asyncio's readline: a line over the limit
                    faults.append(f"it printed a line over {_LINE_LIMIT} bytes")
                    return
                if not line:
                    return
                try:
                    msg = json.loads(line)
                except ValueError:
                    msg = None
                op = msg.get("op") if isinstance(msg, dict) else None
                if not isinstance(op, str) or (op == "event" and not isinstance(msg.get("event"), dict)):
                    bad_lines += 1
                    log.warning("openhands bridge printed a non-protocol line: %.200r", line)
                    continue
                if op == "event":
                    transcript.feed(msg["event"], exec_s)
                    exec_s = 0.0
                    continue
                if op == "done":
                    done.update(msg)
                    return
                t0 = time.monotonic()
                reply = await self._answer(op, msg, env)
                exec_s += time.monotonic() - t0
                reply["id"] = msg.get("id")
                if not await _send(proc, reply, faults):
                    return
        finally:
            if bad_lines:
                faults.append(f"it printed {bad_lines} non-protocol line(s)")

    async def _answer(self, op: str, msg: dict[str, Any], env: Environment) -> dict[str, Any]:
        path = str(msg.get("path") or "")
        if op == "exec":
            timeout = self._command_timeout(msg.get("timeout"))
            try:
                res = await env.exec(str(msg.get("command") or ""), timeout=timeout,
                                     cwd=str(msg.get("cwd") or env.workdir))
            except ConfigError as exc:  # a working directory the environment refuses
                return {"output": str(exc), "exit_code": 1, "timed_out": False, "timeout": timeout}
            return {"output": res.output, "exit_code": res.exit_code, "timed_out": res.timed_out,
                    "timeout": timeout}
        if op == "stat":
            res = await env.exec(["sh", "-c", 'if [ -d "$1" ]; then echo dir; elif [ -e "$1" ]; then echo file; '
                                  'else echo missing; fi', "sh", path], timeout=30, cwd=env.workdir)
            return {"kind": res.stdout.strip() or "missing"}
        if op == "read":
            try:
                return {"content": (await env.read_file(path)).decode("utf-8")}
            except UnicodeDecodeError:
                return {"error": f"{path} is not a UTF-8 text file"}
            except (OSError, ValueError, EnvironmentError_) as exc:  # ValueError: ConfigError, a path it refuses
                return {"error": f"cannot read {path}: {exc}"}
        if op == "write":
            try:
                await env.write_file(path, str(msg.get("content") or ""))
                return {}
            except (OSError, ValueError, EnvironmentError_) as exc:
                return {"error": f"cannot write {path}: {exc}"}
        return {"error": f"unknown request {op!r}"}

    @staticmethod
    def _model_failure(done: dict[str, Any]) -> ModelError | None:
        """The model call that ended the agent, as the ModelError the engine classifies (and retries)."""
        raw = done.get("error_types")
        names = [str(n) for n in raw] if isinstance(raw, list) else []
        kinds = [_LLM_ERRORS[n] for n in names if n in _LLM_ERRORS]
        if not kinds:
            return None
        status = done.get("http_status")
        kind = model_error_kind(status) if isinstance(status, int) and status >= 400 else kinds[0]
        return ModelError(f"openhands: its model call failed: {done.get('error')}", kind=kind,
                          status=status if isinstance(status, int) else None)

    def _result(self, trajectory: Trajectory, done: dict[str, Any], timed_out: bool, stderr: list[str],
                returncode: int | None, faults: list[str], log: logging.Logger) -> HarnessResult:
        status = "agent_timeout" if timed_out else str(done.get("status") or "")
        steps = trajectory.steps
        ran_out = status != "finished" and not timed_out and not done.get("error") and \
            sum(1 for s in steps if s.tool_calls) >= self.params.max_iterations
        trajectory.stop_reason = "max_iterations" if ran_out else (status or None)
        final = done.get("final_answer")
        result = HarnessResult(final_answer=final if isinstance(final, str) else None, trajectory=trajectory,
                               artifacts={"openhands": {"version": self.params.version, "status": status or None,
                                                        "metrics": done.get("metrics") or {},
                                                        "exit_code": returncode}})
        if timed_out:
            result.error_kind = ErrorKind.AGENT_TIMEOUT
            result.error = f"openhands stopped at its {self.params.timeout:g}s timeout"
        elif not done:
            result.error_kind = ErrorKind.AGENT_ERROR
            result.error = f"the openhands bridge exited {returncode} without finishing"
            if faults:
                result.error += f" ({'; '.join(faults)})"
        elif done.get("error"):
            result.error_kind, result.error = ErrorKind.AGENT_ERROR, f"openhands failed: {done['error']}"
        elif ran_out:
            result.error_kind = ErrorKind.STEP_LIMIT
            result.error = f"openhands reached its max_iterations of {self.params.max_iterations}"
        elif status == "stuck":
            result.error_kind, result.error = ErrorKind.AGENT_STUCK, "openhands' stuck detector stopped the agent"
        elif status != "finished":
            result.error_kind, result.error = ErrorKind.AGENT_EXIT, f"openhands ended with status {status!r}"
        if result.error_kind == ErrorKind.AGENT_ERROR:
            result.artifacts["openhands"]["stderr_tail"] = "\n".join(stderr)[-8000:]
        log.info("openhands ended %s after %d steps", trajectory.stop_reason, len(steps))
        return result


def _redact(text: str, secrets: set[str]) -> str:
    """``text`` without the try's model key (a route token or envelope, still not for the run's records)."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


async def _drain(proc: asyncio.subprocess.Process, tail: collections.deque[str]) -> None:
    """Keep the bridge's stderr (OpenHands' logs) flowing; its last lines are kept for errors."""
    assert proc.stderr is not None
    while True:
        try:
            line = await proc.stderr.readline()
        except ValueError:  # a line over the limit: skip it
            continue
        if not line:
            return
        tail.append(line.decode(errors="replace").rstrip())


async def _send(proc: asyncio.subprocess.Process, message: dict[str, Any], faults: list[str]) -> bool:
    """Write one line to the bridge; False (noted in ``faults``) when it has closed its stdin (it died)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write((json.dumps(message) + "\n").encode())
        await proc.stdin.drain()
    except ConnectionError:
        faults.append("it closed its end of the channel")
        return False
    return True


async def _stop(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    """The bridge and anything it started, gone (its process group); one that said it is done gets
    ``grace_s`` to exit by itself. A cancel during that grace still kills it (the kill is synchronous)."""
    if proc.stdin is not None:
        with contextlib.suppress(Exception):
            proc.stdin.close()
    try:
        if grace_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), grace_s)
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError, ProcessLookupError):
        await asyncio.wait_for(proc.wait(), _KILL_WAIT_S)

