"""A tmux session inside an environment, driven through ``env.exec``: start, type, read the screen, kill.

Each session runs on its own tmux server (``tmux -L <socket>``), so it never touches a user's tmux on the host
(local environment) and killing it kills nothing else. New output is found by line position: the absolute line
of the cursor (``history_size + cursor_y``) is remembered at each read, and the next read captures from that
line to the cursor. When that position no longer exists (the history was cleared or trimmed, a full-screen
program switched to the alternate screen) the read falls back to the visible screen.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import time
import uuid

from ..._errors import ConfigError
from ...interfaces import Environment

#: seconds for one tmux command (start, type, read): tmux answers in milliseconds unless the sandbox is wedged
TMUX_COMMAND_TIMEOUT_S = 30.0
#: seconds the kill at the end may take (it runs on every path, also after a cancel)
KILL_TIMEOUT_S = 15.0
#: seconds to wait for the shell's first prompt (a slow start is waited out, a shell without a prompt is not)
PROMPT_WAIT_S = 10.0
#: literal text per ``send-keys`` call: tmux refuses commands much over 16 KB, and a character may take 4 bytes
SEND_CHUNK_CHARS = 2048

_KEY_NAME = re.compile(
    r"(?:[CMS]-)+\S|(?:[CMS]-)*(?:Enter|Escape|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End|"
    r"PageUp|PageDown|PgUp|PgDn|PPage|NPage|IC|DC|F[1-9]|F1[0-2])")

#: seconds an install of tmux with the environment's package manager may take (within the engine's setup_timeout)
INSTALL_TIMEOUT_S = 600.0
#: installs tmux with whichever package manager the environment has (auto_install_dependencies=True)
INSTALL_SCRIPT = """\
if command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  install="apt-get install -y -q --no-install-recommends tmux"
  $install || { apt-get update -q && $install; }
elif command -v apk >/dev/null; then apk add --no-cache tmux
elif command -v dnf >/dev/null; then dnf install -y tmux
elif command -v yum >/dev/null; then yum install -y tmux
else echo "no package manager (apt-get, apk, dnf, yum) in this environment" >&2; exit 127
fi"""
_INSTALL_HINT = ("install it in the environment (Debian/Ubuntu image: `apt-get install -y tmux`; Alpine: "
                 "`apk add tmux`; the local environment uses the host's tmux), or point harness param "
                 "`tmux_path` at it")


def is_key_names(keystrokes: str) -> bool:
    """Whether ``keystrokes`` is one or more tmux key names (``C-c``, ``Enter``, ``Escape Up``...) rather than
    text to type."""
    words = keystrokes.split()
    return bool(words) and all(_KEY_NAME.fullmatch(w) for w in words)


class TmuxSession:
    """One tmux session in ``env`` (a private server, one window of ``cols`` x ``rows``)."""

    def __init__(self, env: Environment, *, tmux: str = "tmux", cols: int = 160, rows: int = 40,
                 history_limit: int = 10000, workdir: str | None = None) -> None:
        self.env = env
        self.tmux = tmux
        self.cols = cols
        self.rows = rows
        self.history_limit = history_limit
        self.workdir = workdir or env.workdir
        self.socket = f"agentcompass-{uuid.uuid4().hex[:12]}"
        self.name = "terminus"
        self._mark: int | None = None  # absolute line of the cursor at the last read
        self.started = False

    def _argv(self, *args: str) -> list[str]:
        return [self.tmux, "-L", self.socket, *args]

    async def installed(self) -> bool:
        """Whether the environment has the tmux program."""
        res = await self.env.exec(f"command -v {shlex.quote(self.tmux)}", timeout=TMUX_COMMAND_TIMEOUT_S)
        return res.exit_code == 0 and bool(res.stdout.strip())

    async def check_installed(self, *, auto_install: bool = False) -> None:
        """ConfigError naming what to install when the environment has no tmux; with ``auto_install``, install it
        first with the environment's package manager (needs root and a route to its package mirror)."""
        if await self.installed():
            return
        missing = f"the terminus harness needs tmux, and `{self.tmux}` is not installed in environment {self.env.id}"
        if not auto_install:
            raise ConfigError(f"{missing}: {_INSTALL_HINT}, or pass auto_install_dependencies=True to let the "
                              "harness install it with the environment's package manager",
                              field="harness.params.tmux_path")
        res = await self.env.exec(INSTALL_SCRIPT, timeout=INSTALL_TIMEOUT_S)
        if res.exit_code != 0 or not await self.installed():
            tail = "\n".join(res.output.strip().splitlines()[-10:])
            raise ConfigError(f"{missing}, and installing it failed (exit {res.exit_code}):\n{tail}\n{_INSTALL_HINT}",
                              field="harness.params.tmux_path")

    async def start(self) -> None:
        """Start the server and the session in the workdir, with a shell (bash when there is one)."""
        await self.check_installed()
        probe = await self.env.exec("command -v bash || command -v sh", timeout=TMUX_COMMAND_TIMEOUT_S)
        shell = (probe.stdout.strip().splitlines() or ["/bin/sh"])[0]
        # -f /dev/null: no tmux.conf of the host or the image changes the terminal the model sees;
        # HISTFILE: the shell leaves no history file in the workdir (HOME is the workdir locally)
        args = self._argv("-f", "/dev/null", "start-server", ";",
                          "set-option", "-g", "history-limit", str(self.history_limit), ";",
                          "new-session", "-d", "-s", self.name, "-x", str(self.cols), "-y", str(self.rows),
                          "-c", self.workdir, "env", "HISTFILE=/dev/null", shell)
        # before the exec: a start that fails, or is cancelled while tmux starts, may leave a server behind, and
        # kill() must then run (kill-server on a socket with no server is harmless)
        self.started = True
        res = await self.env.exec(args, timeout=TMUX_COMMAND_TIMEOUT_S, cwd=self.workdir)
        if res.exit_code != 0:
            raise ConfigError(f"starting tmux in environment {self.env.id} failed (exit {res.exit_code}): "
                              f"{res.output.strip()[:500]}", field="harness.params.tmux_path")
        # the model's first screen shows the prompt, and its first keystrokes meet a shell that is reading
        deadline = time.monotonic() + PROMPT_WAIT_S
        while time.monotonic() < deadline:  # polls the sandbox's terminal: nothing here could signal an event
            if (await self.screen()).strip():
                break
            await asyncio.sleep(0.05)

    async def send(self, keystrokes: str) -> None:
        """Type ``keystrokes`` (literal text, ``\\n`` is Enter), or press the named keys (``C-c``)."""
        if is_key_names(keystrokes):
            await self._tmux("send-keys", "-t", self.name, *keystrokes.split())
            return
        for i in range(0, len(keystrokes), SEND_CHUNK_CHARS):
            await self._tmux("send-keys", "-t", self.name, "-l", "--", keystrokes[i:i + SEND_CHUNK_CHARS])

    async def screen(self) -> str:
        """The visible screen (trailing blank lines dropped)."""
        return (await self._tmux("capture-pane", "-p", "-t", self.name)).rstrip("\n")

    async def read(self) -> tuple[str, bool]:
        """(text, incremental): the lines from the cursor line of the last read to the cursor now, or the visible
        screen (incremental False) on the first read or when that line is gone."""
        info = (await self._tmux("display-message", "-p", "-t", self.name,
                                 "#{history_size} #{cursor_y} #{alternate_on}")).split()
        try:
            history, cursor, alternate = int(info[0]), int(info[1]), info[2] == "1"
        except (IndexError, ValueError):
            raise ConfigError(f"tmux in environment {self.env.id} answered {info!r} to display-message; "
                              "tmux 2.x or later is needed", field="harness.params.tmux_path") from None
        mark, self._mark = self._mark, history + cursor
        if mark is None or alternate or not 0 <= mark <= history + cursor or history >= self.history_limit:
            return await self.screen(), False
        text = await self._tmux("capture-pane", "-p", "-t", self.name, "-S", str(mark - history),
                                "-E", str(cursor))
        return text.rstrip("\n"), True

    async def kill(self) -> None:
        """Kill the session's server (and so its shell and everything it runs); bounded, survives a cancel."""
        if not self.started:
            return
        self.started = False
        try:
            await asyncio.wait_for(asyncio.shield(self.env.exec(self._argv("kill-server"), timeout=KILL_TIMEOUT_S)),
                                   KILL_TIMEOUT_S + 5)
        except Exception:  # the environment is closed next anyway, and that kills the server too
            pass

    async def _tmux(self, *args: str) -> str:
        res = await self.env.exec(self._argv(*args), timeout=TMUX_COMMAND_TIMEOUT_S)
        if res.exit_code != 0:
            raise SessionGone(f"tmux {args[0]} failed in environment {self.env.id} (exit {res.exit_code}): "
                              f"{res.output.strip()[:300]}")
        return res.stdout


class SessionGone(Exception):
    """A tmux command failed: the session (or its server) is gone, e.g. the shell exited."""


__all__ = ["SessionGone", "TmuxSession", "is_key_names"]
