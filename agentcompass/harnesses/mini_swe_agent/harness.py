"""The ``mini_swe_agent`` harness: the real mini-swe-agent package (``DefaultAgent``, its configs and its
parsing/observation code) driven from the host, with its commands run in our environment and its model
calls made through our ModelClient.

Its agent loop is synchronous, so it runs in a worker thread; each model call and each command is handed to
the engine's event loop and awaited from the thread (see ``bridge``). Cancelling ``run()`` stops
the thread promptly: what is in flight is cancelled (a running command is killed by the environment) and
every later call raises inside the agent.

Params:
- ``config``: a bundled mini-swe-agent config name (``mini_textbased``, ``swebench``, ``swebench_backticks``...)
  or a path to a yaml file. Default: with a SWE-bench benchmark the config mini-swe-agent's own SWE-bench
  runner uses (``swebench``, tool calls; ``swebench_backticks`` with ``mode: text``), else ``mini_textbased``
  (``mini`` in tool mode); see ``config``. Its ``agent`` templates are used as they are; from
  ``environment`` we take ``env`` (variables for every command), ``interpreter`` and ``timeout``; from
  ``model`` the ``observation_template``, ``format_error_template`` and ``action_regex``. Its ``cwd`` is
  replaced by the environment's workdir and its litellm ``model_kwargs`` / ``model_name`` are not used.
- ``mode``: ``text`` (one ```mswea_bash_command block per reply, its textbased models) or ``tool`` (``bash``
  tool calls, its default models). Default: inferred from the config (text when it sets ``action_regex``
  or its templates ask for ``mswea_bash_command`` blocks).
- ``step_limit`` (the config's when > 0, else 250); ``cost_limit`` (the config's, else 3.0; 0 = none) in the
  currency of the model's ``price_per_million``, which prices each call: without prices cost is not counted,
  so the config's limit is off (a warning, and params.json says so) and an explicit one is a ConfigError;
  ``command_timeout`` seconds per command (the config's ``environment.timeout``, else 60); ``timeout``:
  seconds for the whole agent (optional; the run stops with what it has, ``error_kind="agent_timeout"``);
  ``model_params``: merged into every model call.

The config used (file, sha256, why chosen), the package version and the effective templates and limits are
``resolved_settings()``, which the engine writes to params.json (``component_settings.harness``).

Result: ``final_answer`` is the submission (the output after the ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``
line), ``patch`` the same when it is a diff. Stop reason: mini-swe-agent's exit status (``Submitted``,
``LimitsExceeded``, ``RepeatedFormatError``, ``TimeExceeded``). Error kinds: ``step_limit``, ``cost_limit``,
``format_error_limit``, ``agent_timeout``, ``command_timeout`` (a command was killed; still graded).
Model and environment failures propagate for the engine to classify and retry.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import platform
import re
import threading
import time
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from ..._errors import ConfigError, EnvironmentError_
from ..._validate import Count, Seconds
from ...common.error_kinds import ErrorKind
from ...dependencies import Requirement
from ...interfaces import ComponentContext, Environment, HarnessResult, ModelClient, PreparedTask, RunContext
from ...models.pricing import PRICE_PARAM
from ...records import Trajectory
from ..base import Harness
from .bridge import (
    PACKAGE_MODULE,
    REQUIREMENT,
    AgentStopped,
    EnvAdapter,
    LoopBridge,
    ModelAdapter,
    StepRecorder,
    load_minisweagent,
)
from .config import LoadedConfig, choose_config

_WHERE = "harness mini_swe_agent"
_log = logging.getLogger("agentcompass.harnesses.mini_swe_agent.harness")
Mode = Literal["text", "tool"]
#: the largest cost limit (in the price table's currency): anything above is a typo, not a budget.
MAX_COST_LIMIT = 1e9
DEFAULT_CONFIG = {"text": "mini_textbased", "tool": "mini"}
DEFAULT_STEP_LIMIT = 250
DEFAULT_COST_LIMIT = 3.0
DEFAULT_COMMAND_TIMEOUT = 60.0
#: how long a stopped agent thread may take to unwind before run() gives up waiting for it.
STOP_GRACE_S = 15.0
DEFAULT_ACTION_REGEX = r"```mswea_bash_command\s*\n(.*?)\n```"
DEFAULT_OBSERVATION_TEMPLATE = (
    "{% if output.exception_info %}<exception>{{ output.exception_info }}</exception>\n{% endif %}"
    "<returncode>{{ output.returncode }}</returncode>\n<output>\n{{ output.output }}</output>")
DEFAULT_FORMAT_ERROR_TEMPLATE = "Format error: {{ error }}"
_DIFF = re.compile(r"^diff --git |^--- \S.*\n\+\+\+ \S", re.MULTILINE)


def _pick(given: float | None, from_config: Any, default: float, *, zero_ok: bool) -> float:
    """The param when given, else the config's value when usable, else our default."""
    if given is not None:
        return float(given)
    usable = isinstance(from_config, int | float) and not isinstance(from_config, bool) and (
        from_config >= 0 if zero_ok else from_config > 0)
    return float(from_config) if usable else default


def looks_like_diff(text: str | None) -> bool:
    """Whether ``text`` holds a unified diff (what the swebench configs submit)."""
    return bool(text) and _DIFF.search(text or "") is not None


def infer_mode(config: dict[str, Any]) -> str:
    """``text`` when the config parses actions from text, else ``tool``."""
    model = config.get("model") or {}
    agent = config.get("agent") or {}
    templates = f"{agent.get('system_template', '')}{agent.get('instance_template', '')}"
    return "text" if "action_regex" in model or "mswea_bash_command" in templates else "tool"


def bundled_configs(builtin_dir: Path) -> list[str]:
    """Names of the configs that ship with mini-swe-agent."""
    return sorted({p.stem for d in (builtin_dir, builtin_dir / "benchmarks") for p in d.glob("*.yaml")})


def _field(key: str) -> str:
    return f"harness.params.{key}"


class MiniSweAgentParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``mini_swe_agent`` params (see the module docstring); unset numbers come from the config."""

    config: str | None = None
    mode: Mode | None = None
    step_limit: Count | None = None
    #: 0 = no limit
    cost_limit: Annotated[float, msgspec.Meta(ge=0, le=MAX_COST_LIMIT)] | None = None
    command_timeout: Seconds | None = None
    timeout: Seconds | None = None
    model_params: dict[str, Any] | None = None


class MiniSweAgent(Harness):
    """mini-swe-agent's ``DefaultAgent`` over our environment and model client (see the module docstring)."""

    name: ClassVar[str] = "mini_swe_agent"
    evaluates: ClassVar[bool] = True
    needs_environment: ClassVar[bool] = True
    #: the package's import name; tests point it at a missing module to exercise the missing-package error.
    package_module: ClassVar[str] = PACKAGE_MODULE
    #: installed by the engine before construction with ``auto_install_dependencies=True``.
    requirements: ClassVar[tuple[Requirement, ...]] = (Requirement(REQUIREMENT, PACKAGE_MODULE),)
    Params: ClassVar[type[MiniSweAgentParams]] = MiniSweAgentParams
    params: MiniSweAgentParams

    def __init__(self, params: MiniSweAgentParams | dict[str, Any], ctx: ComponentContext) -> None:
        # the params are checked before the (possibly slow) package check; unset ones come from the config
        super().__init__(params, ctx)
        p = self.params
        mode, config_spec = p.mode, p.config
        self.model_params = dict(p.model_params or {})
        self.timeout = p.timeout
        steps, command_timeout, cost = p.step_limit, p.command_timeout, p.cost_limit

        self.mini = load_minisweagent(ctx.auto_install_dependencies, self.package_module)
        self.loaded = self._load_config(config_spec, ctx.benchmark, mode)
        # a default picked for the benchmark is named by its file (``swebench``), as a bundled name would be
        self.config_name = (Path(self.loaded.path).stem if self.loaded.source == "benchmark" and self.loaded.path
                            else self.loaded.spec)
        self.config: dict[str, Any] = self.loaded.data
        self.mode: str = mode or infer_mode(self.config)
        agent_cfg: dict[str, Any] = dict(self.config["agent"])
        env_cfg: dict[str, Any] = dict(self.config.get("environment") or {})
        model_cfg: dict[str, Any] = dict(self.config.get("model") or {})

        self.step_limit = int(_pick(steps, agent_cfg.get("step_limit"), DEFAULT_STEP_LIMIT, zero_ok=False))
        self.price = ctx.price
        self.cost_limit, self.cost_note = self._cost_limit(cost, agent_cfg.get("cost_limit"))
        self.command_timeout = _pick(command_timeout, env_cfg.get("timeout"), DEFAULT_COMMAND_TIMEOUT, zero_ok=False)

        # only what its AgentConfig takes (configs also carry CLI keys such as `mode: confirm`), and never an
        # output_path: it must not write trajectories itself
        self.agent_kwargs = {k: v for k, v in agent_cfg.items()
                             if k in self.mini.agent_fields and k != "output_path"}
        self.agent_kwargs.update(step_limit=self.step_limit, cost_limit=self.cost_limit)
        env_vars = env_cfg.get("env") or {}
        interpreter = env_cfg.get("interpreter")
        if not isinstance(env_vars, dict) or not (interpreter is None or (
                isinstance(interpreter, list) and interpreter and all(isinstance(a, str) for a in interpreter))):
            raise ConfigError(f"mini-swe-agent config {self.config_name!r}: `environment.env` must be a mapping "
                              "and `environment.interpreter` a list of strings.", field=_field("config"))
        self.env_vars = {str(k): str(v) for k, v in env_vars.items()}
        self.interpreter: list[str] | None = list(interpreter) if interpreter else None
        self.model_config = {
            "observation_template": model_cfg.get("observation_template", DEFAULT_OBSERVATION_TEMPLATE),
            "format_error_template": model_cfg.get("format_error_template", DEFAULT_FORMAT_ERROR_TEMPLATE),
            "action_regex": model_cfg.get("action_regex", DEFAULT_ACTION_REGEX),
        }

    def _cost_limit(self, given: float | None, from_config: Any) -> tuple[float, str | None]:
        """The limit and, when one was asked for but cannot be counted (no price), why it is off."""
        limit = _pick(given, from_config, DEFAULT_COST_LIMIT, zero_ok=True)
        if self.price is not None or limit == 0:
            return limit, None
        if given is not None:
            raise ConfigError(f"Parameter 'cost_limit' of {_WHERE} needs the model's prices to count cost: set "
                              f"model_params.{PRICE_PARAM} ({{input, output}} per million tokens), or pass "
                              "cost_limit=0.", field=_field("cost_limit"))
        note = (f"the config's cost_limit of {limit:g} is off: the model has no model_params.{PRICE_PARAM}, so "
                "its cost is unknown")
        _log.warning("mini_swe_agent: %s", note)
        return 0.0, note

    def _load_config(self, spec: str | None, benchmark: str, mode: str | None) -> LoadedConfig:
        field = _field("config")
        asked = spec or "(default)"
        try:
            loaded = choose_config(spec, benchmark, mode, DEFAULT_CONFIG[mode or "text"], self.package_module,
                                   Path(self.mini.builtin_config_dir))
        except FileNotFoundError:
            names = ", ".join(bundled_configs(Path(self.mini.builtin_config_dir)))
            raise ConfigError(f"Parameter 'config' of {_WHERE}: no mini-swe-agent config {asked!r}. Give a yaml "
                              f"path or a bundled name: {names}.", field=field) from None
        except Exception as exc:
            raise ConfigError(f"Parameter 'config' of {_WHERE}: cannot read mini-swe-agent config {asked!r}: "
                              f"{exc}", field=field) from None
        config = loaded.data
        agent = config.get("agent") if isinstance(config, dict) else None
        if not isinstance(agent, dict) or not all(isinstance(agent.get(k), str)
                                                  for k in ("system_template", "instance_template")):
            raise ConfigError(f"mini-swe-agent config {loaded.spec!r} needs `agent.system_template` and "
                              "`agent.instance_template`.", field=field)
        return loaded

    def resolved_settings(self) -> dict[str, Any]:
        """The config this request runs with (file, sha256, why it was chosen), the package version and the
        effective templates and limits, for params.json. Variable names only from ``environment.env``."""
        loaded = self.loaded
        return {
            "package": {"name": "mini-swe-agent", "version": self.mini.version},
            "config": {"spec": loaded.spec, "source": loaded.source, "path": loaded.path, "sha256": loaded.sha256},
            "mode": self.mode, "step_limit": self.step_limit, "cost_limit": self.cost_limit,
            "cost_limit_note": self.cost_note, "command_timeout": self.command_timeout,
            "agent": {k: v for k, v in self.agent_kwargs.items() if isinstance(v, str | int | float | bool)},
            "model": dict(self.model_config), "interpreter": self.interpreter, "env_names": sorted(self.env_vars),
        }

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient,
                  ctx: RunContext, log: logging.Logger) -> HarnessResult:
        if env is None:
            raise EnvironmentError_("mini_swe_agent needs an environment but got none")
        loop = asyncio.get_running_loop()
        bridge = LoopBridge(loop)
        recorder = StepRecorder()
        model_adapter = ModelAdapter(self.mini, model, bridge, recorder, mode=self.mode,
                                     model_config=self.model_config, model_params=self.model_params, log=log,
                                     price=self.price)
        env_adapter = EnvAdapter(self.mini, env, bridge, recorder, timeout=self.command_timeout,
                                 env_vars=self.env_vars, interpreter=self.interpreter,
                                 template_vars=await system_vars(env), log=log)
        agent = self.mini.DefaultAgent(model_adapter, env_adapter, **self.agent_kwargs)
        trajectory = Trajectory(started_at=time.time())
        outcome: dict[str, Any] = {}
        done: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not done.done():
                done.set_result(None)

        def work() -> None:
            try:
                outcome["info"] = agent.run(task.prompt)
            except BaseException as exc:  # handed to run() on the loop
                outcome["error"] = exc
            finally:
                try:
                    loop.call_soon_threadsafe(settle)
                except RuntimeError:  # the loop is gone; nobody is waiting
                    pass

        # a copy of our context, so log records and model retries made for the thread keep the task's identity
        thread = threading.Thread(target=contextvars.copy_context().run, args=(work,), daemon=True,
                                  name=f"mini-swe-agent:{ctx.task_id}:{ctx.attempt}")
        thread.start()
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(done), self.timeout)
        except TimeoutError:
            timed_out = True
            log.warning("mini-swe-agent stopped at its %gs timeout", self.timeout)
            await self._halt(bridge, done, log)
        except BaseException:
            await self._halt(bridge, done, log)
            raise
        finally:
            if done.done():
                thread.join(1.0)  # it only has to return from work() now
        trajectory.finished_at = time.time()
        trajectory.steps = list(recorder.steps)
        if timed_out and "info" in outcome:  # it finished on its own while being stopped
            timed_out = False
        error = outcome.get("error")
        if error is not None and not (timed_out and isinstance(error, AgentStopped)):
            raise error
        info: dict[str, Any] = outcome.get("info") or {}
        exit_status = "TimeExceeded" if timed_out else str(info.get("exit_status") or "")
        trajectory.stop_reason = exit_status or None
        submitted = exit_status == "Submitted"
        submission = str(info.get("submission") or "") if submitted else None
        result = HarnessResult(final_answer=submission, patch=submission if looks_like_diff(submission) else None,
                               trajectory=trajectory, usage=recorder.usage,
                               artifacts={"mini_swe_agent": {"version": self.mini.version, "config": self.config_name,
                                                             "mode": self.mode, "cost": agent.cost}})
        result.error_kind, result.error = self._error(exit_status, timed_out, agent.n_calls, recorder.timeouts)
        log.info("mini-swe-agent exited %s after %d model calls", exit_status, agent.n_calls)
        return result

    def _error(self, exit_status: str, timed_out: bool, n_calls: int,
               timeouts: list[str]) -> tuple[ErrorKind | None, str | None]:
        if timed_out:
            return ErrorKind.AGENT_TIMEOUT, f"mini-swe-agent stopped at its {self.timeout:g}s timeout"
        if exit_status == "LimitsExceeded":
            if 0 < self.step_limit <= n_calls:
                return ErrorKind.STEP_LIMIT, f"mini-swe-agent reached its step_limit of {self.step_limit} model calls"
            return ErrorKind.COST_LIMIT, f"mini-swe-agent reached its cost_limit of ${self.cost_limit:g}"
        if exit_status == "TimeExceeded":
            return ErrorKind.AGENT_TIMEOUT, "mini-swe-agent reached its wall_time_limit_seconds"
        if exit_status == "RepeatedFormatError":
            return ErrorKind.FORMAT_ERROR_LIMIT, "mini-swe-agent stopped after repeated format errors"
        if exit_status != "Submitted":
            return ErrorKind.AGENT_EXIT, f"mini-swe-agent exited with status {exit_status!r}"
        if timeouts:  # recorded (the attempt is still graded): the agent ran something that never ended
            return ErrorKind.COMMAND_TIMEOUT, (f"{len(timeouts)} command(s) killed at the {self.command_timeout:g}s "
                                       f"command_timeout, first: {timeouts[0]}")
        return None, None

    @staticmethod
    async def _halt(bridge: LoopBridge, done: asyncio.Future[None], log: logging.Logger) -> None:
        """Stop the agent thread: cancel its in-flight call, refuse new ones, wait for it to unwind."""
        await bridge.stop(STOP_GRACE_S)
        await asyncio.wait([done], timeout=STOP_GRACE_S)
        if not done.done():
            log.warning("mini-swe-agent thread did not stop within %gs; it ends at its next call", STOP_GRACE_S)


async def system_vars(env: Environment) -> dict[str, str]:
    """``system``/``release``/``version``/``machine`` of the environment (its templates show them), as
    ``uname`` reports them inside it; the host's when that fails."""
    host = platform.uname()
    out = {"system": host.system, "release": host.release, "version": host.version, "machine": host.machine}
    res = await env.exec("uname -s; uname -r; uname -v; uname -m", timeout=30, cwd=env.workdir)
    lines = res.stdout.splitlines()
    if res.exit_code == 0 and len(lines) == 4:
        out.update(zip(("system", "release", "version", "machine"), (line.strip() for line in lines), strict=True))
    return out
