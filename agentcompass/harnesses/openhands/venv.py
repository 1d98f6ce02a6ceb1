"""The ``openhands`` harness's own virtualenv: OpenHands needs Python >= 3.12, AgentCompass runs on 3.11 too.

The venv holds ``openhands-sdk`` (with its dependencies) and ``openhands-tools`` without its own (the
browser tool's ``browser-use`` stack is not used; the terminal and file editor need only the few packages
listed in ``TOOLS_DEPS``). It lives in a cache directory keyed by the SDK version and the Python version
(``<data_dir>/agents/openhands-<version>-py<X.Y>``, else ``$AGENTCOMPASS_OPENHANDS_CACHE`` or
``~/.cache/agentcompass/agents``), so every run and process on the machine shares one install. It is built
in a temporary directory and renamed into place once complete; a file lock makes concurrent processes
(and callers in this one) wait for a single install.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from ..._errors import ConfigError, EnvironmentError_
from ...common.pip_install import PipInstallError, locked, pip_argv

DEFAULT_VERSION = "1.58.2"
#: what the terminal and file editor of ``openhands-tools`` import beyond the SDK.
TOOLS_DEPS = ("binaryornot>=0.6.0", "cachetools", "libtmux>=0.53.0", "func-timeout>=4.3.5")
#: the Pythons tried, newest first, when no ``python`` param is given.
CANDIDATE_VERSIONS = ("3.13", "3.12")
DEFAULT_INSTALL_TIMEOUT_S = 900.0
_COMPLETE = ".agentcompass-complete"
_VERSION_PROBE_S = 10.0


def cache_root(data_dir: str | None) -> Path:
    """Where the venvs live."""
    if data_dir:
        return Path(data_dir) / "agents"
    env = os.environ.get("AGENTCOMPASS_OPENHANDS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "agentcompass" / "agents"


def find_python(explicit: str | None) -> tuple[str, str]:
    """A Python >= 3.12 (the ``python`` param, else python3.13/3.12 on PATH, else pyenv's) and its X.Y."""
    candidates: list[str] = []
    if explicit:
        candidates.append(explicit)
    else:
        for ver in CANDIDATE_VERSIONS:
            found = shutil.which(f"python{ver}")
            if found and "/shims/" not in found:  # a pyenv shim fails unless that version is selected
                candidates.append(found)
            root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
            if root.is_dir():
                candidates += [str(p / "bin" / "python3") for p in sorted(root.glob(f"{ver}*"), reverse=True)]
    for cand in candidates:
        found_ver = _version_of(cand)
        if found_ver is not None and found_ver >= (3, 12):
            return cand, f"{found_ver[0]}.{found_ver[1]}"
    if explicit:
        raise ConfigError(f"Parameter 'python' of harness openhands: {explicit!r} is not a Python >= 3.12 "
                          "(OpenHands needs one).", field="harness.params.python")
    raise ConfigError("harness openhands needs a Python >= 3.12 for OpenHands (AgentCompass's own may be older) "
                      "and found none (python3.13/python3.12 on PATH, pyenv's versions): pass its path as "
                      "harness param `python`.", field="harness.params.python")


def _version_of(python: str) -> tuple[int, int] | None:
    """(major, minor) of the interpreter at ``python``: from its name (``python3.13``) when it says, else by
    asking it (a short bounded run; the constructor that calls this is synchronous)."""
    path = Path(python)
    if not (path.is_file() and os.access(path, os.X_OK)):
        return None
    match = re.fullmatch(r"python(\d+)\.(\d+)", path.resolve().name)
    if match:
        return int(match[1]), int(match[2])
    try:
        out = subprocess.run([str(path), "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                             text=True, timeout=_VERSION_PROBE_S, stdin=subprocess.DEVNULL, check=False)
        major, minor = out.stdout.split()
        return int(major), int(minor)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def venv_dir(data_dir: str | None, version: str, py_version: str) -> Path:
    return cache_root(data_dir) / f"openhands-{version}-py{py_version}"


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def is_ready(venv: Path) -> bool:
    return (venv / _COMPLETE).is_file() and venv_python(venv).exists()


def _pip_steps(version: str) -> list[tuple[list[str], tuple[str, ...]]]:
    """The pip runs (packages, options) that fill the venv. ``--compile`` whatever the environment says
    (``PIP_COMPILE=0``, ``PIP_NO_COMPILE``): the bridge runs with ``PYTHONDONTWRITEBYTECODE``, so bytecode missing
    here would be compiled again at every agent start (~4 CPU-s of its ~9)."""
    return [([f"openhands-sdk=={version}", *TOOLS_DEPS], ("-q", "--compile")),
            ([f"openhands-tools=={version}"], ("-q", "--no-deps", "--compile"))]


def install_steps(python: str, venv: Path, version: str) -> list[list[str]]:
    """The commands that build the venv at ``venv``."""
    return [[python, "-m", "venv", str(venv)],
            *(pip_argv(packages, python=venv_python(venv), options=options)
              for packages, options in _pip_steps(version))]


def install_commands(python: str, venv: Path, version: str) -> str:
    """The install, as shell commands a person can run."""
    steps = install_steps(python, venv, version)
    return " && ".join(shlex.join(s) for s in steps) + f" && touch {shlex.quote(str(venv / _COMPLETE))}"


def missing_error(python: str, venv: Path, version: str) -> ConfigError:
    return ConfigError(
        f"harness openhands: OpenHands {version} is not installed in {venv}. Set auto_install_dependencies=True "
        f"to let AgentCompass install it, or run: {install_commands(python, venv, version)}",
        field="auto_install_dependencies")


async def ensure_venv(python: str, venv: Path, version: str, *, auto_install: bool,
                      timeout_s: float = DEFAULT_INSTALL_TIMEOUT_S) -> Path:
    """The venv's Python, installing the venv first when allowed (else the ConfigError naming the commands)."""
    if is_ready(venv):
        return venv_python(venv)
    if not auto_install:
        raise missing_error(python, venv, version)
    try:
        async with locked(f"openhands-sdk=={version}", lock=venv.parent / f"{venv.name}.lock",
                          timeout_s=timeout_s) as install:
            if is_ready(venv):  # another process (or caller) installed it while we waited
                return venv_python(venv)
            tmp = venv.parent / f"{venv.name}.tmp-{os.getpid()}"
            await asyncio.to_thread(shutil.rmtree, tmp, True)
            await asyncio.to_thread(shutil.rmtree, venv, True)
            try:
                await install.run([python, "-m", "venv", str(tmp)])
                for packages, options in _pip_steps(version):
                    await install.pip(packages, python=venv_python(tmp), options=options)
                (tmp / _COMPLETE).write_text(f"openhands-sdk=={version}\n{sys.platform}\n")
                os.replace(tmp, venv)  # bin/python finds its pyvenv.cfg relative to itself, so the move is safe
            finally:
                await asyncio.to_thread(shutil.rmtree, tmp, True)
    except PipInstallError as exc:
        raise EnvironmentError_(f"installing OpenHands failed: {exc}") from None
    return venv_python(venv)
