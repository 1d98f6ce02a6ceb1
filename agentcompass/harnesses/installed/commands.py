"""The shell commands one installed-agent run sends into its environment.

Each is one bounded ``env.exec``: make the per-attempt run directory (``make_run_dir``), write a file in pieces
(``write``), start the program detached (``start``), poll its exit code, transcript size, liveness and the next
transcript bytes (``poll``; base64, at most ``_RunState.chunk`` bytes, smaller again when the provider capped the
output), kill its process group and everything carrying the run's marker (``kill``), read its stderr's tail
(``stderr_tail``) and collect the workdir's change as a git diff (``patch``). ``name`` (the harness's) only labels
errors and log lines.
"""

from __future__ import annotations

import base64
import logging
import posixpath
import re
import shlex
from dataclasses import dataclass, field

from ..._errors import EnvironmentError_
from ...interfaces import Environment, PreparedTask
from ...records import Step
from .transcript import Transcript

__all__ = ["COMMAND_TIMEOUT_S", "KILL_TIMEOUT_S", "MARKER_VAR", "READ_CHUNK", "TAIL_BYTES", "AgentRun"]

#: the installed agents' logger (one name for the whole harness, as before the split)
_log = logging.getLogger("agentcompass.harnesses.installed.agent")

#: new transcript bytes read per poll command at most (kept well under every provider's output cap).
READ_CHUNK = 48 * 1024
#: raw transcript / stderr bytes kept for ``artifacts`` when a run goes wrong.
TAIL_BYTES = 8 * 1024
#: bound of each small command the run loop sends (launch, poll, kill, patch).
COMMAND_TIMEOUT_S = 60.0
#: how long a killed program gets to be gone, and the cancel path's cleanup at most.
KILL_TIMEOUT_S = 8.0
#: the environment variable marking every process of one run (the kill finds them by it).
MARKER_VAR = "AGENTCOMPASS_AGENT_RUN"
#: a prompt is written in pieces of at most this many bytes (one environment variable each).
_PROMPT_PIECE = 64 * 1024

_POLL_HEADER = re.compile(r"^(\S+) (\d+) ([01])\s*$")
#: the smallest read per poll when the provider's output cap is tiny
_MIN_CHUNK = 12


def _q(text: str) -> str:
    return shlex.quote(text)


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


@dataclass
class _RunState:
    offset: int = 0
    raw_tail: bytearray = field(default_factory=bytearray)
    exit_code: int | None = None
    #: None: running / exited; ``timeout``, ``limit``, ``vanished``: how the harness ended it
    ending: str | None = None
    stderr_tail: str = ""
    chunk: int = READ_CHUNK

    def take(self, data: bytes, parser: Transcript) -> list[Step]:
        """Count ``data`` as read, keep its tail; the steps ``parser`` makes of it."""
        self.offset += len(data)
        self.raw_tail += data
        del self.raw_tail[:-TAIL_BYTES]
        return parser.feed(data)


async def sh(env: Environment, script: str, *, name: str, what: str, env_vars: dict[str, str] | None = None) -> str:
    res = await env.exec(["/bin/sh", "-c", script], timeout=COMMAND_TIMEOUT_S, env=env_vars)
    if res.exit_code != 0:
        raise EnvironmentError_(f"{name}: {what} failed (exit {res.exit_code}): {res.output[-1000:]}")
    return res.stdout


async def write(env: Environment, path: str, text: str, *, name: str, what: str) -> None:
    """Write ``text`` to ``path`` in ``env`` through commands (any path, any provider), in pieces of at most
    ``_PROMPT_PIECE`` characters (each one environment variable of a command)."""
    text = text.replace("\0", "")
    pieces = [text[i:i + _PROMPT_PIECE // 4] for i in range(0, len(text), _PROMPT_PIECE // 4)] or [""]
    for n, piece in enumerate(pieces):
        op = ">" if n == 0 else ">>"
        await sh(env, f'printf "%s" "$AGENTCOMPASS_PIECE" {op} {_q(path)}',
                 env_vars={"AGENTCOMPASS_PIECE": piece}, name=name, what=what)


async def make_run_dir(env: Environment, workdir: str, program_path: str, *, name: str) -> AgentRun:
    out = await sh(env, 'd=$(mktemp -d "${TMPDIR:-/tmp}/agentcompass-agent.XXXXXX") && chmod 700 "$d" '
                        '&& mkdir "$d/home" && echo "$d"', name=name, what="making the run directory")
    d = out.strip().splitlines()[-1] if out.strip() else ""
    if not d.startswith("/"):
        raise EnvironmentError_(f"{name}: mktemp gave {out!r}")
    return AgentRun(dir=d, home=posixpath.join(d, "home"), prompt_file=posixpath.join(d, "prompt"),
                    workdir=workdir, program_path=program_path)


async def start(env: Environment, run: AgentRun, command: str, variables: dict[str, str], *,
                name: str) -> int | None:
    """Write the run script around ``command`` and start it detached with ``variables``; the pid of the run
    script (its process group's leader)."""
    d = _q(run.dir)
    script = "\n".join([
        "trap '' HUP",
        # a subshell: a command that ``exec``s replaces it, not the script that records the exit code
        f"( cd {_q(run.workdir)} && {command}\n) >{d}/transcript.jsonl 2>{d}/stderr.log </dev/null",
        f"echo $? >{d}/exit_code.tmp && mv {d}/exit_code.tmp {d}/exit_code", ""])
    await write(env, posixpath.join(run.dir, "run.sh"), script, name=name, what="writing the run script")
    out = await sh(env, f'touch {d}/transcript.jsonl {d}/stderr.log; '
                        f'if command -v setsid >/dev/null 2>&1; then s=setsid; else s=; fi; '
                        f'$s /bin/sh {d}/run.sh >/dev/null 2>&1 </dev/null & echo $! >{d}/pid; echo $!',
                   env_vars=variables, name=name, what="starting the agent")
    last = out.strip().splitlines()[-1] if out.strip() else ""
    return int(last) if last.isdigit() else None


async def poll(env: Environment, run: AgentRun, st: _RunState, pid: int | None, *,
               name: str) -> tuple[int | None, int, bool, bytes]:
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
            raise EnvironmentError_(f"{name}: reading the transcript failed (exit {res.exit_code}): "
                                    f"{res.output[-1000:]}")
        if not res.truncated:
            break
        if st.chunk <= _MIN_CHUNK:
            raise EnvironmentError_(f"{name}: the environment's output cap is too small to read the "
                                    "transcript (raise the provider's output_limit_bytes)")
        st.chunk = max(_MIN_CHUNK, st.chunk // 4)
    header, _, body = res.stdout.partition("\n")
    m = _POLL_HEADER.match(header)
    if m is None:
        raise EnvironmentError_(f"{name}: unexpected poll output {header[:200]!r}")
    code = None if m.group(1) == "-" else int(m.group(1)) if m.group(1).lstrip("-").isdigit() else -1
    return code, int(m.group(2)), m.group(3) == "1", base64.b64decode("".join(body.split()))


async def kill(env: Environment, run: AgentRun, marker: str, *, name: str, remove: bool = False) -> None:
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
        _log.warning("%s: killing the agent in %s failed: %s", name, env.id, exc)


async def stderr_tail(env: Environment, run: AgentRun) -> str:
    res = await env.exec(["/bin/sh", "-c", f"tail -c {TAIL_BYTES} {_q(run.stderr)} 2>/dev/null"],
                         timeout=COMMAND_TIMEOUT_S)
    return res.stdout


async def patch(env: Environment, task: PreparedTask, workdir: str, log: logging.Logger, *, name: str) -> str | None:
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
        log.warning("%s: git diff in %s gave exit %s%s", name, workdir, res.exit_code,
                    " (truncated)" if res.truncated else "")
        return None
    return res.stdout
