"""Helpers shared by the tests of the installed-CLI harnesses (claude_code, codex): a launch against the scripted
model server through the gateway with ``wrap_api_key``, the shell_tasks request, the detail files, and the key
check the scripted agents run inside the sandbox."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest

import agentcompass
from agentcompass.records import Step, TaskDetail
from tests.benchmarks.swebench.conftest import needs_host_py311
from tests.fixtures_scripted import running_scripted_server

F = TypeVar("F", bound=Callable[..., Any])


def swebench_in_docker(test: F) -> F:
    """Marks a test that resolves a SWE-bench instance in docker: slow, 15 minutes, a host Python 3.11."""
    marked: F = pytest.mark.slow(pytest.mark.timeout(900)(needs_host_py311(test)))
    return marked


def details(run_dir: Path) -> list[TaskDetail]:
    """The run's detail files, in order."""
    return [msgspec.json.decode(p.read_bytes(), type=TaskDetail) for p in sorted((run_dir / "details").glob("*.json"))]


async def launch_scripted(server_params: dict[str, Any], request: dict[str, Any], *, harness: dict[str, Any],
                          api_key: str, api_protocol: str, **server_options: Any) -> tuple[Any, list[dict[str, Any]]]:
    """One request of ``harness`` against the scripted model server (which requires ``api_key``, unless
    ``server_options`` says otherwise) with the key wrapped; its outcome and the bodies the server received."""
    async with running_scripted_server(server_params, **{"require_api_key": api_key, **server_options}) as server:
        result = await agentcompass.async_launch({"requests": [{
            "harness": harness,
            "model": {"id": "scripted", "base_url": server.base_url, "api_key": api_key,
                      "api_protocol": api_protocol},
            "wrap_api_key": True, **request}], "progress": "none"})
        bodies = list(server.recent_requests)
    return result.outcomes[0], bodies


def shell_request(tmp_path: Path, environment: dict[str, Any], sample_id: str) -> dict[str, Any]:
    """The request part running the shell_tasks sample ``sample_id`` in ``environment``."""
    return {"benchmark": {"id": "shell_tasks", "params": {"sample_ids": [sample_id]}},
            "environment": environment, "results_dir": str(tmp_path)}


def key_check(steps: list[Step]) -> tuple[str, dict[str, str]]:
    """The last line of the one observation with the agent's KEYCHECK, and its ``name=value`` fields."""
    (obs,) = [s.observation for s in steps if s.observation and "KEYCHECK" in s.observation]
    line = obs.strip().splitlines()[-1]
    return line, dict(f.split("=", 1) for f in line.split()[1:])


def run_text(run_dir: Path) -> str:
    """Every file the run wrote, as text (to look for a key that must not be there)."""
    return "\n".join(p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file())


def swebench_local_request(tmp_path: Path, run_id: str, instance_id: str) -> dict[str, Any]:
    """The request part running the swebench_local instance ``instance_id`` in docker behind the model policy."""
    return {"benchmark": {"id": "swebench_local", "params": {"sample_ids": [instance_id]}},
            "environment": {"id": "docker", "params": {"network_policy": "model", "cache_level": "instance"}},
            "run_id": run_id, "results_dir": str(tmp_path), "data_dir": str(tmp_path / "data")}


def solved_attempt(out: Any) -> Any:
    """The one attempt of ``out``, checked to have solved its task without an error."""
    assert out.ok, out.error
    assert out.metrics["pass@1"] == 1.0, out.errors_by_kind
    (detail,) = details(out.run_dir)
    attempt = detail.attempts["1"]
    assert attempt.correct is True and attempt.error_kind is None, attempt.error
    return attempt


def resolved_attempt(out: Any) -> Any:
    """The one attempt of ``out``, checked to be resolved with a patch the harness collected with git diff."""
    assert out.ok, out.error
    (detail,) = details(out.run_dir)
    attempt = detail.attempts["1"]
    assert attempt.correct is True, (attempt.error_kind, attempt.error, attempt.extra)
    assert attempt.artifacts["patch"].startswith("diff --git")
    return attempt


def clean_key_scan(steps: list[Step]) -> tuple[str, dict[str, str]]:
    """The key check (see :func:`key_check`), checked to have found no key in the environment, the process list
    or the files, while its positive controls (planted canaries) were found."""
    check, fields = key_check(steps)
    assert fields["env"] == fields["ps"] == fields["files"] == "0", check
    assert int(fields["ps_canary"]) >= 1 and int(fields["files_canary"]) >= 1, check
    return check, fields
