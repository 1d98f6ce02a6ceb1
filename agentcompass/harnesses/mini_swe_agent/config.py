"""Which mini-swe-agent config a ``mini_swe_agent`` request runs with, read from the installed package.

With a SWE-bench benchmark and no ``config`` param it is the file mini-swe-agent's own SWE-bench batch runner
uses by default (``minisweagent.run.benchmarks.swebench.DEFAULT_CONFIG_FILE``, so it follows the installed
version), else the generic one of the mode. The file's path and sha256 go into params.json with the
package version, so a run says exactly which settings its scores came from.
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

#: benchmark ids whose tasks are SWE-bench instances (they get mini-swe-agent's SWE-bench config by default).
SWEBENCH_BENCHMARKS = frozenset({"swebench", "swebench_verified", "swebench_lite", "swebench_jsonl",
                                 "swebench_local", "swebench_multilingual"})
#: where the SWE-bench runner's default lives in 2.4.x, if its module cannot be imported to ask it.
_SWEBENCH_FALLBACK = Path("benchmarks") / "swebench.yaml"
#: its SWE-bench config for text replies (```mswea_bash_command blocks), for ``mode: text`` without a config.
_SWEBENCH_TEXT = Path("benchmarks") / "swebench_backticks.yaml"
#: a config file larger than this is refused (they are a few KB).
MAX_CONFIG_BYTES = 1 << 20

ConfigSource = Literal["param", "benchmark", "default"]


@dataclass(frozen=True)
class LoadedConfig:
    """A mini-swe-agent config as read: what named it, the file (None for a ``key=value`` spec), its hash."""

    spec: str
    source: ConfigSource
    path: str | None
    sha256: str
    data: Any


def swebench_config_path(module: str, builtin_dir: Path) -> Path:
    """The config file mini-swe-agent's SWE-bench runner uses when given none (asked from the runner module)."""
    try:
        runner = importlib.import_module(f"{module}.run.benchmarks.swebench")
        return Path(runner.DEFAULT_CONFIG_FILE)
    except Exception:  # the runner needs extras (typer, rich...) a trimmed install may lack
        return builtin_dir / _SWEBENCH_FALLBACK


def read_config(spec: str, source: ConfigSource, module: str) -> LoadedConfig:
    """Read config ``spec`` (a bundled name, a yaml path, or mini-swe-agent's ``key=value`` form).

    Raises FileNotFoundError when there is no such config, ValueError when it is too large."""
    config_mod = importlib.import_module(f"{module}.config")
    if "=" in spec:  # mini-swe-agent's own rule
        return LoadedConfig(spec, source, None, hashlib.sha256(spec.encode()).hexdigest(),
                            config_mod.get_config_from_spec(spec))
    path = Path(spec) if source == "benchmark" else Path(config_mod.get_config_path(spec))
    with path.open("rb") as f:
        raw = f.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise ValueError(f"{path} is larger than {MAX_CONFIG_BYTES} bytes")
    return LoadedConfig(spec, source, str(path.resolve()), hashlib.sha256(raw).hexdigest(),
                        yaml.safe_load(raw.decode("utf-8")))


def choose_config(param: str | None, benchmark: str, mode: str | None, generic: str, module: str,
                  builtin_dir: Path) -> LoadedConfig:
    """The ``config`` param when given; else for a SWE-bench benchmark the SWE-bench runner's config (its
    text-reply variant with ``mode: text``); else ``generic``."""
    if param:
        return read_config(param, "param", module)
    if benchmark in SWEBENCH_BENCHMARKS:
        path = builtin_dir / _SWEBENCH_TEXT if mode == "text" else swebench_config_path(module, builtin_dir)
        return read_config(str(path), "benchmark", module)
    return read_config(generic, "default", module)
