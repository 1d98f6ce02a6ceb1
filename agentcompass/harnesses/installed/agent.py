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
callers share it; the directory appears atomically, so other processes see it whole or not at all); else a
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
"""

from __future__ import annotations

import abc
import asyncio
import atexit
import base64
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import posixpath
import re
import shlex
import shutil
import signal
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

import msgspec

from ..._errors import ConfigError, EnvironmentError_
from ..._validate import Seconds
from ...common.data_dir import default_data_dir
from ...common.process_once import ProcessOnce
from ...dependencies import DEFAULT_PIP_TIMEOUT_S, TIMEOUT_ENV, mask_credentials
from ...interfaces import ComponentContext, Environment, HarnessResult, ModelClient, Mount, PreparedTask, RunContext
from ...records import Step, Usage
from ..base import Harness

__all__ = ["MOUNT_ROOT", "AgentProgram", "AgentRun", "InstalledAgent", "InstalledAgentParams", "JsonLinesTranscript",
           "ProgramLocation", "Transcript", "install_program", "pip_install_command"]

_log = logging.getLogger("agentcompass.harnesses.installed.agent")

#: where program directories are mounted (or copied) inside an environment.
MOUNT_ROOT = "/opt/agentcompass/agents"
#: new transcript bytes read per poll command at most (kept well under every provider's output cap).
READ_CHUNK = 48 * 1024
#: raw transcript / stderr bytes kept for ``artifacts`` when a run goes wrong.
TAIL_BYTES = 8 * 1024
#: a transcript line longer than this is dropped (counted invalid) instead of buffered.
MAX_LINE_BYTES = 16 * 1024 * 1024
#: bound of each small command the run loop sends (launch, poll, kill, patch).
COMMAND_TIMEOUT_S = 60.0
#: how long a killed program gets to be gone, and the cancel path's cleanup at most.
KILL_TIMEOUT_S = 8.0
#: the environment variable marking every process of one run (the kill finds them by it).
MARKER_VAR = "AGENTCOMPASS_AGENT_RUN"
#: a prompt is written in pieces of at most this many bytes (one environment variable each).
_PROMPT_PIECE = 64 * 1024


class AgentProgram(msgspec.Struct, frozen=True):
    """Where an agent's program comes from: a file inside a pip distribution's package (a wheel)."""

    #: the name it runs as (``claude``, ``codex``)
    program: str
    #: the pip distribution shipping it (``claude-agent-sdk``)
    distribution: str
    #: the distribution's package (``claude_agent_sdk``)
    import_name: str
    #: the program inside the package directory (``_bundled/claude``)
    relative_path: str


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


@dataclass(frozen=True)
class ProgramLocation:
    """The program on the host: the directory to mount (``root``), the program's path and its version."""

    root: str
    path: str
    version: str
    #: ``binary`` (params), ``python`` (installed in this interpreter), ``cache`` (the agents cache)
    source: str

    @property
    def relative_path(self) -> str:
        return os.path.relpath(self.path, self.root)


@dataclass(frozen=True)
class AgentRun:
    """One run's paths inside the environment."""

    #: the per-attempt directory
    dir: str
    #: ``HOME`` of the agent (writable, empty at start)
    home: str
    #: the task prompt, as a file (UTF-8)
    prompt_file: str
    #: the task's working directory (the program's cwd)
    workdir: str
    #: the program's path in the environment
    program_path: str

    @property
    def transcript(self) -> str:
        return posixpath.join(self.dir, "transcript.jsonl")

    @property
    def stderr(self) -> str:
        return posixpath.join(self.dir, "stderr.log")

    @property
    def exit_file(self) -> str:
        return posixpath.join(self.dir, "exit_code")


# ----------------------------------------------------------------------------- transcripts


class Transcript(abc.ABC):
    """An incremental transcript parser: ``feed`` gets the next bytes, returns the steps they completed or
    started (a step may still be filled in later, e.g. by its tool's result: it is the same object)."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        #: events the parser recognised / lines it could not read
        self.events = 0
        self.invalid_lines = 0
        #: what the agent reported it used (for artifacts; the gateway counts the engine's usage)
        self.usage = Usage()
        self.stop_reason: str | None = None
        self.final_answer: str | None = None
        #: an error the agent itself reported (e.g. a result event marked as an error)
        self.error: str | None = None
        #: the engine's kind for how the agent itself says it stopped (e.g. ``step_limit`` for a turn limit),
        #: used instead of ``agent_error`` when the program exits non-zero; None: nothing to say
        self.error_kind: str | None = None
        #: facts from the transcript worth keeping (version, session, turns...): ``artifacts["agent"]``
        self.info: dict[str, Any] = {}

    @abc.abstractmethod
    def feed(self, data: bytes) -> list[Step]:
        """Take the next transcript bytes; the steps that are new."""

    def finish(self) -> list[Step]:
        """The transcript ended (a last line without newline is read now); the steps that are new."""
        return []

    @property
    def valid(self) -> bool:
        """Whether the transcript held anything the parser recognised."""
        return self.events > 0

    def new_step(self, **fields: Any) -> Step:
        """A step at the next index, kept in ``steps``."""
        step = Step(index=len(self.steps), started_at=time.time(), **fields)
        self.steps.append(step)
        return step


class JsonLinesTranscript(Transcript):
    """A transcript of one JSON object per line: ``handle`` turns each into steps."""

    def __init__(self) -> None:
        super().__init__()
        self._buf = bytearray()
        self._skipping = False  # inside a line longer than MAX_LINE_BYTES

    @abc.abstractmethod
    def handle(self, event: dict[str, Any]) -> list[Step] | None:
        """The steps one event makes (``[]``: none); None when the event is not one the parser knows."""

    def feed(self, data: bytes) -> list[Step]:
        self._buf += data
        out: list[Step] = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                if len(self._buf) > MAX_LINE_BYTES:
                    self._buf.clear()
                    if not self._skipping:
                        self.invalid_lines += 1
                    self._skipping = True
                return out
            line = bytes(self._buf[:nl])
            del self._buf[:nl + 1]
            if self._skipping:
                self._skipping = False
                continue
            out += self._line(line)

    def finish(self) -> list[Step]:
        line, self._buf = bytes(self._buf), bytearray()
        if self._skipping:
            self._skipping = False
            return []
        return self._line(line)

    def _line(self, line: bytes) -> list[Step]:
        if not line.strip():
            return []
        try:
            event = msgspec.json.decode(line)
        except msgspec.DecodeError:
            self.invalid_lines += 1
            return []
        steps = self.handle(event) if isinstance(event, dict) else None
        if steps is None:
            self.invalid_lines += 1
            return []
        self.events += 1
        return steps


# ----------------------------------------------------------------------------- the program on the host


def cache_root(data_dir: str | None) -> Path:
    """Where installed agents' programs are cached: ``<data_dir>/agents``."""
    return default_data_dir(data_dir) / "agents"


def pip_install_command(program: AgentProgram, version: str | None) -> str:
    """The command a user runs to make ``program`` available (into the running interpreter)."""
    spec = f"{program.distribution}=={version}" if version else program.distribution
    return shlex.join([sys.executable, "-m", "pip", "install", spec])


def _in_python(program: AgentProgram, version: str | None) -> ProgramLocation | None:
    try:
        spec = importlib.util.find_spec(program.import_name)
        have = importlib.metadata.version(program.distribution)
    except (ImportError, ValueError, importlib.metadata.PackageNotFoundError):
        return None
    if spec is None or not spec.submodule_search_locations or (version is not None and have != version):
        return None
    root = next(iter(spec.submodule_search_locations))
    path = os.path.join(root, program.relative_path)
    return ProgramLocation(root, path, have, "python") if os.access(path, os.X_OK) else None


def _version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[.+-]", version))


def _in_cache(program: AgentProgram, version: str | None, root: Path) -> ProgramLocation | None:
    prefix = f"{program.distribution}-"
    if version is not None:
        candidates = [root / f"{prefix}{version}"]
    else:
        try:
            names = [p.name for p in root.iterdir() if p.name.startswith(prefix) and ".tmp-" not in p.name]
        except OSError:
            return None
        candidates = [root / n for n in sorted(names, key=lambda n: _version_key(n[len(prefix):]), reverse=True)]
    for cand in candidates:
        pkg = cand / program.import_name
        path = pkg / program.relative_path
        if os.access(path, os.X_OK):
            return ProgramLocation(str(pkg), str(path), cand.name[len(prefix):], "cache")
    return None


def locate_program(program: AgentProgram, version: str | None, data_dir: str | None) -> ProgramLocation | None:
    """The program in this Python, else in the agents cache (at ``version`` when given); None when neither has it."""
    return _in_python(program, version) or _in_cache(program, version, cache_root(data_dir))


def _private_copy(path: str, version: str, root: Path) -> ProgramLocation:
    """An explicit ``binary``, copied once into a directory of its own under the agents cache (keyed by its path,
    size and mtime): that directory is what gets mounted, never the binary's own directory (e.g. ``$HOME``)."""
    st = os.stat(path)
    real = os.path.realpath(path)
    key = hashlib.sha256(f"{real}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:20]
    final = root / f"custom-{key}"
    target = final / os.path.basename(path)
    if not os.access(target, os.X_OK):
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f"custom-{key}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            tmp.mkdir()
            shutil.copy2(real, tmp / target.name)
            os.chmod(tmp, 0o755)
            os.chmod(tmp / target.name, 0o755)
            os.rename(tmp, final)
        except OSError:  # another process got there first (or a copy failed: checked below)
            pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if not os.access(target, os.X_OK):
        raise ConfigError(f"cannot copy the binary {path!r} into {final}.", field="harness_params.binary")
    return ProgramLocation(str(final), str(target), version, "binary")


def _safe_root(name: str, root: str) -> str:
    """``root``, refused when mounting or copying it would expose ``/`` or the user's home directory."""
    real = os.path.realpath(root)
    home = os.path.realpath(os.path.expanduser("~"))
    if real == os.sep or real == home or home.startswith(real.rstrip(os.sep) + os.sep):
        raise ConfigError(f"harness {name}: its program files are {root!r}, which is / or holds the home directory: "
                          "give the program a directory of its own.", field="harness")
    return root


_install_lock = threading.Lock()
#: (distribution, version, cache root) -> its install, once per process
_installs: ProcessOnce[tuple[str, str, str], ProgramLocation] = ProcessOnce()
_install_runs: dict[str, int] = {}


def install_runs() -> dict[str, int]:
    """How many times pip ran per ``distribution==version`` in this process (for tests)."""
    with _install_lock:
        return dict(_install_runs)


def _installed_version(target: Path, program: AgentProgram) -> str | None:
    norm = re.sub(r"[-_.]+", "_", program.distribution).lower()
    for entry in target.glob("*.dist-info"):
        name, _, ver = entry.name[:-len(".dist-info")].rpartition("-")
        if re.sub(r"[-_.]+", "_", name).lower() == norm:
            return ver
    return None


async def _run_pip(program: AgentProgram, version: str | None, root: Path, timeout_s: float,
                   cancelled: threading.Event | None) -> ProgramLocation:
    spec = f"{program.distribution}=={version}" if version else program.distribution
    await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
    tmp = root / f"{program.distribution}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    argv = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-input", "--disable-pip-version-check",
            "--target", str(tmp), spec]
    with _install_lock:
        _install_runs[spec] = _install_runs.get(spec, 0) + 1
    _log.info("installing %s into %s", spec, root)
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                                                start_new_session=True)

    out = bytearray()

    async def pump() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            out.extend(chunk)
            del out[:-16384]
        await proc.wait()

    pumping = asyncio.ensure_future(pump())
    loop = asyncio.get_running_loop()
    until = loop.time() + timeout_s
    try:
        while not pumping.done():
            # the constructor's thread cannot be cancelled: the engine sets ``cancelled`` instead
            await asyncio.wait({pumping}, timeout=max(0.0, min(0.5, until - loop.time())))
            stop = "the request was cancelled" if cancelled is not None and cancelled.is_set() else \
                f"it timed out after {timeout_s:g}s (set {TIMEOUT_ENV} for a slow mirror)" \
                if loop.time() >= until and not pumping.done() else None
            if stop is not None:
                raise ConfigError(f"Installing {spec} stopped: {stop}. Install it yourself: "
                                  f"{pip_install_command(program, version)}", field="harness")
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(proc.wait()), 10.0)
        pumping.cancel()
        if proc.returncode != 0:
            await asyncio.to_thread(shutil.rmtree, tmp, True)
    text = mask_credentials(out.decode(errors="replace"))
    if proc.returncode != 0:
        raise ConfigError(f"Installing {spec} failed (pip exit {proc.returncode}): {text[-1500:]}\nInstall it "
                          f"yourself: {pip_install_command(program, version)}", field="harness")
    got = _installed_version(tmp, program) or version or "unknown"
    final = root / f"{program.distribution}-{got}"
    try:
        await asyncio.to_thread(os.rename, tmp, final)
    except OSError:  # another process got there first: use its copy
        await asyncio.to_thread(shutil.rmtree, tmp, True)
    found = _in_cache(program, got, root)
    if found is None:
        raise ConfigError(f"Installed {spec} but {program.import_name}/{program.relative_path} is not an executable "
                          f"in {final}.", field="harness")
    return found


async def install_program(program: AgentProgram, version: str | None, data_dir: str | None, *,
                          timeout_s: float | None = None,
                          cancelled: threading.Event | None = None) -> ProgramLocation:
    """Install ``program`` (``pip install --no-deps --target``) into the agents cache, once per process per
    version (concurrent callers, in any thread or event loop, await the same install); its location."""
    root = cache_root(data_dir)
    key = (program.distribution, version or "", str(root))
    if timeout_s is None:
        raw = os.environ.get(TIMEOUT_ENV, "").strip()
        timeout_s = float(raw) if raw.replace(".", "", 1).isdigit() and float(raw) > 0 else DEFAULT_PIP_TIMEOUT_S
    pip_timeout_s: float = timeout_s  # the closure below does not see the narrowing above

    async def find_or_install() -> ProgramLocation:
        return _in_cache(program, version, root) or await _run_pip(program, version, root, pip_timeout_s, cancelled)

    found, _ = await _installs.run(key, find_or_install)
    return found


# ----------------------------------------------------------------------------- the harness


def _q(text: str) -> str:
    return shlex.quote(text)


_POLL_HEADER = re.compile(r"^(\S+) (\d+) ([01])\s*$")
#: the smallest read per poll when the provider's output cap is tiny
_MIN_CHUNK = 12
#: what a shell or the loader prints when a program cannot run at all in the image
_CANNOT_RUN = re.compile(r"exec format error|not found|no such file or directory|GLIBC_|ld-linux|"
                         r"error while loading shared libraries|cannot execute", re.IGNORECASE)


@dataclass
class _RunState:
    offset: int = 0
    raw_tail: bytearray = field(default_factory=bytearray)
    exit_code: int | None = None
    #: None: running / exited; ``timeout``, ``limit``, ``vanished``: how the harness ended it
    ending: str | None = None
    stderr_tail: str = ""
    chunk: int = READ_CHUNK


def _cannot_run(exit_code: int | None, stderr: str) -> bool:
    """Whether a run that wrote no transcript failed because the program could not start in the image."""
    return exit_code in (126, 127) or bool(_CANNOT_RUN.search(stderr[-2000:]))


_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|_BASE_URL)$", re.IGNORECASE)


def _secrets(model_env: Mapping[str, str]) -> list[str]:
    """The gateway's envelope / route token values of this try (live credentials for the attempt)."""
    out: set[str] = set()
    for name, value in model_env.items():
        if not _SECRET_NAME.search(name) or len(value) < 8:
            continue
        out.add(value)
        m = re.search(r"/r/([A-Za-z0-9_-]{8,})", value)  # a route token inside a URL
        if m:
            out.add(m.group(1))
    return sorted(out, key=len, reverse=True)


def _scrub(text: str, secrets: list[str]) -> str:
    """``text`` without this try's gateway credentials (and without anything that looks like a key)."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return mask_credentials(text)


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
            return asyncio.run(install_program(self.program, p.version, self.ctx.data_dir,
                                               cancelled=self.ctx.cancelled))
        return None  # constructed on an event loop: ``setup`` installs it

    async def ensure_program(self) -> ProgramLocation:
        """The program's host location, installing it first when the constructor could not."""
        if self.location is None:
            self.location = await install_program(self.program, self.params.version, self.ctx.data_dir,
                                                  cancelled=self.ctx.cancelled)
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
        if env is None:
            raise EnvironmentError_(f"{self.name} needs an environment but got none")
        if self.requires_gateway and not ctx.model_env:
            self._placed.pop(env.id, None)
            raise ConfigError(f"harness {self.name} runs its own program, which reaches the model only through the "
                              "AgentCompass gateway: give the model an endpoint (`model_base_url`; for the scripted "
                              "model, serve it with `agentcompass serve-scripted`).", field="model_base_url")
        program_path = self._placed.pop(env.id, None) or await self._place(env, log)
        workdir = env.workdir
        marker = uuid.uuid4().hex
        trajectory = ctx.trajectory
        trajectory.started_at = time.time()
        parser = self.new_transcript()
        secrets = _secrets(ctx.model_env)
        run = await self._make_run_dir(env, workdir, program_path)
        st = _RunState()
        started = time.monotonic()
        p = self.params

        def take(data: bytes) -> None:
            st.offset += len(data)
            st.raw_tail += data
            del st.raw_tail[:-TAIL_BYTES]
            trajectory.steps.extend(parser.feed(data))
            self._live_artifacts(ctx, parser, st, program_path, started, secrets)

        try:
            pid = await self._launch(env, task, ctx, run, marker)
            log.info("%s started in %s (transcript %s)", self.program.program, env.id, run.transcript)
            deadline = started + p.timeout if p.timeout is not None else None
            while True:
                code, size, alive, data = await self._poll(env, run, st, pid)
                take(data)
                if deadline is not None and time.monotonic() >= deadline:
                    st.ending = "timeout"
                elif st.offset > p.max_transcript_bytes or len(trajectory.steps) > p.max_steps:
                    st.ending = "limit"
                if st.ending is not None:
                    log.warning("%s: %s: killing it", self.name,
                                f"ran past its timeout of {p.timeout:g}s" if st.ending == "timeout" else
                                f"its transcript passed {p.max_transcript_bytes} bytes or {p.max_steps} steps")
                    await self._kill(env, run, marker)
                    for _ in range(64):  # what it wrote before it died (bounded)
                        if st.ending == "limit":
                            break
                        code, size, alive, data = await self._poll(env, run, st, pid)
                        take(data)
                        if st.offset >= size or st.offset > p.max_transcript_bytes:
                            break
                    st.exit_code = code
                    break
                if len(data) >= st.chunk or (code is not None and st.offset < size):
                    continue  # more is waiting: read it now
                if code is not None:
                    st.exit_code = code
                    break
                if not alive:  # gone without an exit code (its run directory vanished, or /tmp filled up)
                    code, size, alive, data = await self._poll(env, run, st, pid)
                    take(data)
                    if code is None:
                        st.ending = "vanished"
                        break
                    continue
                await asyncio.sleep(p.poll_interval_s)
            # whatever the program left running (background jobs) must not change the workdir from now on
            await self._kill(env, run, marker)
            trajectory.steps.extend(parser.finish())
            st.stderr_tail = _scrub(await self._stderr_tail(env, run), secrets)
            patch = await self._patch(env, task, workdir, log)
        except BaseException:
            # Cancelled (the engine's agent_timeout) or failed: the program must not outlive the run; what it
            # wrote so far stays on ``ctx.artifacts`` for the engine's partial result.
            async def cleanup() -> None:
                with contextlib.suppress(Exception):
                    st.stderr_tail = _scrub(await self._stderr_tail(env, run), secrets)
                await self._kill(env, run, marker, remove=True)

            with contextlib.suppress(BaseException):
                await asyncio.shield(asyncio.wait_for(cleanup(), KILL_TIMEOUT_S))
            trajectory.steps.extend(parser.finish())
            self._live_artifacts(ctx, parser, st, program_path, started, secrets)
            raise
        with contextlib.suppress(EnvironmentError_, TimeoutError, OSError):
            await env.exec(f"rm -rf {_q(run.dir)}", timeout=COMMAND_TIMEOUT_S)
        elapsed = time.monotonic() - started
        trajectory.finished_at = time.time()
        result = HarnessResult(final_answer=parser.final_answer, patch=patch, trajectory=trajectory)
        self._live_artifacts(ctx, parser, st, program_path, started, secrets)
        result.artifacts["agent"] = dict(ctx.artifacts["agent"])
        result.artifacts["agent_usage"] = msgspec.to_builtins(parser.usage)
        tail = _scrub(st.raw_tail.decode(errors="replace"), secrets)
        stderr_tail = st.stderr_tail
        exit_code = st.exit_code
        parser_error = _scrub(parser.error, secrets) if parser.error else None
        if st.ending == "timeout":
            trajectory.stop_reason = "agent_timeout"
            result.error_kind = "agent_timeout"
            result.error = f"{self.name} ran past its timeout of {p.timeout:g}s and was killed"
            result.artifacts["transcript_tail"] = tail
            result.artifacts["stderr_tail"] = stderr_tail
        elif st.ending == "limit":
            trajectory.stop_reason = "transcript_limit"
            result.error_kind = "transcript_limit"
            result.error = (f"{self.name}: the transcript passed its cap ({st.offset} bytes read, "
                            f"max_transcript_bytes={p.max_transcript_bytes}; {len(trajectory.steps)} steps, "
                            f"max_steps={p.max_steps}): the program was killed")
            result.artifacts["transcript_tail"] = tail
            result.artifacts["stderr_tail"] = stderr_tail
        elif st.ending == "vanished":
            trajectory.stop_reason = "agent_error"
            result.error_kind = "agent_error"
            result.error = (f"{self.program.program} is gone without an exit code (the run directory vanished)"
                            + (f"; stderr: {stderr_tail[-500:]}" if stderr_tail.strip() else ""))
            result.artifacts["transcript_tail"] = tail
        elif exit_code != 0 and not parser.valid and _cannot_run(exit_code, stderr_tail):
            trajectory.stop_reason = "agent_unavailable"
            result.error_kind = "agent_unavailable"
            result.error = (f"{self.program.program} cannot run in this environment (image "
                            f"{getattr(env, 'image', None) or 'unknown'}): exit {exit_code}"
                            + (f": {stderr_tail.strip()[-500:]}" if stderr_tail.strip() else "")
                            + " (a binary for another CPU, or an image without the loader/C library it needs "
                              "such as glibc?)")
            result.artifacts["stderr_tail"] = stderr_tail
            result.artifacts["transcript_tail"] = tail
        elif exit_code != 0:
            trajectory.stop_reason = parser.stop_reason or "agent_error"
            result.error_kind = parser.error_kind or "agent_error"
            result.error = (f"{self.program.program} exited {exit_code}"
                            + (f": {parser_error}" if parser_error else "")
                            + (f"; stderr: {stderr_tail[-500:]}" if stderr_tail.strip() else ""))
            result.artifacts["stderr_tail"] = stderr_tail
            if not parser.valid:
                result.artifacts["transcript_tail"] = tail
        elif not parser.valid:
            trajectory.stop_reason = "agent_transcript_invalid"
            result.error_kind = "agent_transcript_invalid"
            result.error = (f"{self.program.program} exited 0 but its transcript ({st.offset} bytes, "
                            f"{parser.invalid_lines} unreadable lines) held no event {self.name} knows")
            result.artifacts["transcript_tail"] = tail
            result.artifacts["stderr_tail"] = stderr_tail
        else:
            trajectory.stop_reason = parser.stop_reason or "completed"
            if parser_error or parser.error_kind:
                # the transcript's own verdict stands even when the CLI exits 0 (e.g. Claude's turn limit)
                result.error = parser_error or parser.error_kind
                result.error_kind = parser.error_kind or "agent_error"
                result.artifacts["stderr_tail"] = stderr_tail
        log.info("%s finished: exit %s, %d steps, stop %s, %.1fs", self.program.program, exit_code,
                 len(trajectory.steps), trajectory.stop_reason, elapsed)
        return result

    def _live_artifacts(self, ctx: RunContext, parser: Transcript, st: _RunState, program_path: str,
                        started: float, secrets: list[str]) -> None:
        """What the run has shown so far, on ``ctx.artifacts`` (the engine keeps it when it stops the run)."""
        ctx.artifacts["agent"] = {
            "program": self.program.program, "version": self.location.version if self.location else None,
            "program_path": program_path, "exit_code": st.exit_code, "transcript_bytes": st.offset,
            "events": parser.events, "invalid_lines": parser.invalid_lines,
            "seconds": round(time.monotonic() - started, 3), **parser.info}
        ctx.artifacts["agent_usage"] = msgspec.to_builtins(parser.usage)
        ctx.artifacts["transcript_tail"] = _scrub(st.raw_tail.decode(errors="replace"), secrets)
        if st.stderr_tail:
            ctx.artifacts["stderr_tail"] = st.stderr_tail

    async def _sh(self, env: Environment, script: str, *, env_vars: dict[str, str] | None = None,
                  what: str) -> str:
        res = await env.exec(["/bin/sh", "-c", script], timeout=COMMAND_TIMEOUT_S, env=env_vars)
        if res.exit_code != 0:
            raise EnvironmentError_(f"{self.name}: {what} failed (exit {res.exit_code}): {res.output[-1000:]}")
        return res.stdout

    async def _write(self, env: Environment, path: str, text: str, *, what: str) -> None:
        """Write ``text`` to ``path`` in ``env`` through commands (any path, any provider), in pieces of at most
        ``_PROMPT_PIECE`` characters (each one environment variable of a command)."""
        text = text.replace("\0", "")
        pieces = [text[i:i + _PROMPT_PIECE // 4] for i in range(0, len(text), _PROMPT_PIECE // 4)] or [""]
        for n, piece in enumerate(pieces):
            op = ">" if n == 0 else ">>"
            await self._sh(env, f'printf "%s" "$AGENTCOMPASS_PIECE" {op} {_q(path)}',
                           env_vars={"AGENTCOMPASS_PIECE": piece}, what=what)

    async def _make_run_dir(self, env: Environment, workdir: str, program_path: str) -> AgentRun:
        out = await self._sh(env, 'd=$(mktemp -d "${TMPDIR:-/tmp}/agentcompass-agent.XXXXXX") && chmod 700 "$d" '
                                  '&& mkdir "$d/home" && echo "$d"', what="making the run directory")
        d = out.strip().splitlines()[-1] if out.strip() else ""
        if not d.startswith("/"):
            raise EnvironmentError_(f"{self.name}: mktemp gave {out!r}")
        return AgentRun(dir=d, home=posixpath.join(d, "home"), prompt_file=posixpath.join(d, "prompt"),
                        workdir=workdir, program_path=program_path)

    async def _launch(self, env: Environment, task: PreparedTask, ctx: RunContext, run: AgentRun,
                      marker: str) -> int | None:
        """Start the program detached; the pid of its run script (its process group's leader)."""
        await self._write(env, run.prompt_file, task.prompt, what="writing the prompt")
        command = self.command(task, run.program_path, run)
        d = _q(run.dir)
        script = "\n".join([
            "trap '' HUP",
            # a subshell: a command that ``exec``s replaces it, not the script that records the exit code
            f"( cd {_q(run.workdir)} && {command}\n) >{d}/transcript.jsonl 2>{d}/stderr.log </dev/null",
            f"echo $? >{d}/exit_code.tmp && mv {d}/exit_code.tmp {d}/exit_code", ""])
        await self._write(env, posixpath.join(run.dir, "run.sh"), script, what="writing the run script")
        variables = {**self.agent_env(task, ctx, run), MARKER_VAR: marker}
        out = await self._sh(env, f'touch {d}/transcript.jsonl {d}/stderr.log; '
                                  f'if command -v setsid >/dev/null 2>&1; then s=setsid; else s=; fi; '
                                  f'$s /bin/sh {d}/run.sh >/dev/null 2>&1 </dev/null & echo $! >{d}/pid; echo $!',
                             env_vars=variables, what="starting the agent")
        last = out.strip().splitlines()[-1] if out.strip() else ""
        return int(last) if last.isdigit() else None

    async def _poll(self, env: Environment, run: AgentRun, st: _RunState,
                    pid: int | None) -> tuple[int | None, int, bool, bytes]:
        """(exit code or None while running, transcript size, whether the run script is alive, the next bytes
        from ``st.offset``). A read the provider capped is read again smaller (``st.chunk`` shrinks)."""
        d = _q(run.dir)
        # alive: the run script (pid) exists and is not a zombie; without /proc, ``kill -0`` says it
        live = (f'a=1; if [ -r /proc/{pid}/stat ]; then case "$(sed "s/.*) //" /proc/{pid}/stat 2>/dev/null)" in '
                f'Z*|X*|"") a=0;; esac; elif [ -d /proc/self ] || ! kill -0 {pid} 2>/dev/null; then a=0; fi; '
                if pid is not None else 'a=1; ')
        while True:
            script = (f'{live}e=$(cat {d}/exit_code 2>/dev/null); s=$(wc -c <{d}/transcript.jsonl 2>/dev/null); '
                      f'echo "${{e:--}} $(echo ${{s:-0}}) $a"; '
                      f'tail -c +{st.offset + 1} {d}/transcript.jsonl 2>/dev/null | head -c {st.chunk} | base64')
            res = await env.exec(["/bin/sh", "-c", script], timeout=COMMAND_TIMEOUT_S)
            if res.exit_code != 0:
                raise EnvironmentError_(f"{self.name}: reading the transcript failed (exit {res.exit_code}): "
                                        f"{res.output[-1000:]}")
            if not res.truncated:
                break
            if st.chunk <= _MIN_CHUNK:
                raise EnvironmentError_(f"{self.name}: the environment's output cap is too small to read the "
                                        "transcript (raise the provider's output_limit_bytes)")
            st.chunk = max(_MIN_CHUNK, st.chunk // 4)
        header, _, body = res.stdout.partition("\n")
        m = _POLL_HEADER.match(header)
        if m is None:
            raise EnvironmentError_(f"{self.name}: unexpected poll output {header[:200]!r}")
        code = None if m.group(1) == "-" else int(m.group(1)) if m.group(1).lstrip("-").isdigit() else -1
        return code, int(m.group(2)), m.group(3) == "1", base64.b64decode("".join(body.split()))

    async def _kill(self, env: Environment, run: AgentRun, marker: str, *, remove: bool = False) -> None:
        """Kill the program's process group and everything carrying the run's marker."""
        d = _q(run.dir)
        script = (f'p=$(cat {d}/pid 2>/dev/null); if [ -n "$p" ]; then kill -KILL -"$p" 2>/dev/null; '
                  'kill -KILL "$p" 2>/dev/null; fi; '
                  f'for f in $(grep -l "{MARKER_VAR}={marker}" /proc/[0-9]*/environ 2>/dev/null); do '
                  'q=${f#/proc/}; kill -KILL "${q%/environ}" 2>/dev/null; done; '
                  f'[ -f {d}/exit_code ] || echo 137 >{d}/exit_code; '
                  + (f'rm -rf {d}; ' if remove else '') + 'true')
        try:
            await env.exec(["/bin/sh", "-c", script], timeout=KILL_TIMEOUT_S)
        except (EnvironmentError_, TimeoutError, OSError) as exc:
            _log.warning("%s: killing the agent in %s failed: %s", self.name, env.id, exc)

    async def _stderr_tail(self, env: Environment, run: AgentRun) -> str:
        res = await env.exec(["/bin/sh", "-c", f"tail -c {TAIL_BYTES} {_q(run.stderr)} 2>/dev/null"],
                             timeout=COMMAND_TIMEOUT_S)
        return res.stdout

    async def _patch(self, env: Environment, task: PreparedTask, workdir: str, log: logging.Logger) -> str | None:
        """The workdir's change as a git diff (against the task's base commit, else HEAD); None when it is not a
        git repository (or the diff could not be read whole)."""
        base = str(task.metadata.get("base_commit") or "HEAD")
        # only the workdir's own repository: ``git add -A`` in an enclosing one would stage (and return) its changes
        script = (f"cd {_q(workdir)} && git rev-parse --is-inside-work-tree >/dev/null 2>&1 || exit 3; "
                  '[ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ] || exit 3; '
                  f"git add -A >/dev/null 2>&1 && git -c core.quotepath=off diff --cached --text --no-color "
                  f"--no-ext-diff {_q(base)}")
        res = await env.exec(["/bin/sh", "-c", script], timeout=COMMAND_TIMEOUT_S * 5)
        if res.exit_code == 3:
            return None
        if res.exit_code != 0 or res.truncated:
            log.warning("%s: git diff in %s gave exit %s%s", self.name, workdir, res.exit_code,
                        " (truncated)" if res.truncated else "")
            return None
        return res.stdout


_spool_lock = threading.Lock()
_spools: dict[tuple[str, str], str] = {}


def _tree_signature(root: str) -> str:
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(d, f))
                h.update(f"{os.path.relpath(os.path.join(d, f), root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _remove_spools() -> None:
    for path in _spools.values():
        with contextlib.suppress(OSError):
            os.unlink(path)


atexit.register(_remove_spools)


def _tar_dir(root: str) -> IO[bytes]:
    """A tar of ``root``'s contents (read from its start), packed once per process while ``root`` is unchanged:
    an environment without mounts gets the copy sent per task, not re-packed per task."""
    key = (os.path.realpath(root), _tree_signature(root))
    with _spool_lock:
        path = _spools.get(key)
        if path is None or not os.path.exists(path):
            fd, path = tempfile.mkstemp(prefix="agentcompass-agent-", suffix=".tar")
            try:
                with os.fdopen(fd, "wb") as out, tarfile.open(fileobj=out, mode="w") as tar:
                    tar.add(root, arcname=".")
            except BaseException:
                os.unlink(path)
                raise
            _spools[key] = path
        return open(path, "rb")  # the caller closes it
