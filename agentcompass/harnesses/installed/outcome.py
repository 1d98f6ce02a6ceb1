"""How an installed-agent run ended, as a ``HarnessResult``: its error kind and message, and what it keeps.

``classify`` turns the run's ending (the harness's own: timeout, transcript limit, vanished; else the program's
exit code and what its transcript said) into ``stop_reason``, ``error_kind``, ``error`` and the tails kept in
``artifacts``; ``live_artifacts`` is what a run has shown so far (kept on ``RunContext.artifacts`` as it goes).
Everything written there has this try's gateway credentials masked (``_secrets``, ``_scrub``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from ...common.error_kinds import ErrorKind
from ...common.pip_install import mask_credentials
from ...interfaces import HarnessResult
from ...records import Trajectory
from .commands import _RunState
from .transcript import Transcript

#: what a shell or the loader prints when a program cannot run at all in the image
_CANNOT_RUN = re.compile(r"exec format error|not found|no such file or directory|GLIBC_|ld-linux|"
                         r"error while loading shared libraries|cannot execute", re.IGNORECASE)


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


@dataclass(frozen=True)
class RunFacts:
    """What the artifacts of one run name: the harness, its program and where it ran."""

    #: the harness's name (``claude_code``)
    name: str
    #: the program's name (``claude``)
    program: str
    version: str | None
    program_path: str
    #: ``time.monotonic()`` at the start
    started: float
    secrets: list[str]
    #: the environment's image (named when the program cannot run there)
    image: str | None


def live_artifacts(artifacts: dict[str, Any], facts: RunFacts, parser: Transcript, st: _RunState) -> None:
    """What the run has shown so far, on ``artifacts`` (the engine keeps them when it stops the run)."""
    artifacts["agent"] = {
        "program": facts.program, "version": facts.version,
        "program_path": facts.program_path, "exit_code": st.exit_code, "transcript_bytes": st.offset,
        "events": parser.events, "invalid_lines": parser.invalid_lines,
        "seconds": round(time.monotonic() - facts.started, 3), **parser.info}
    artifacts["agent_usage"] = msgspec.to_builtins(parser.usage)
    artifacts["transcript_tail"] = _scrub(st.raw_tail.decode(errors="replace"), facts.secrets)
    if st.stderr_tail:
        artifacts["stderr_tail"] = st.stderr_tail


def classify(result: HarnessResult, trajectory: Trajectory, parser: Transcript, st: _RunState, facts: RunFacts,
             *, timeout: float | None, max_transcript_bytes: int, max_steps: int) -> None:
    """Set the run's ``stop_reason``, ``error_kind``, ``error`` and kept tails from how it ended."""
    tail = _scrub(st.raw_tail.decode(errors="replace"), facts.secrets)
    stderr_tail = st.stderr_tail
    if st.ending == "timeout":
        trajectory.stop_reason = "agent_timeout"
        result.error_kind = ErrorKind.AGENT_TIMEOUT
        result.error = f"{facts.name} ran past its timeout of {timeout:g}s and was killed"
        result.artifacts["transcript_tail"] = tail
        result.artifacts["stderr_tail"] = stderr_tail
    elif st.ending == "limit":
        trajectory.stop_reason = "transcript_limit"
        result.error_kind = ErrorKind.TRANSCRIPT_LIMIT
        result.error = (f"{facts.name}: the transcript passed its cap ({st.offset} bytes read, "
                        f"max_transcript_bytes={max_transcript_bytes}; {len(trajectory.steps)} steps, "
                        f"max_steps={max_steps}): the program was killed")
        result.artifacts["transcript_tail"] = tail
        result.artifacts["stderr_tail"] = stderr_tail
    elif st.ending == "vanished":
        trajectory.stop_reason = "agent_error"
        result.error_kind = ErrorKind.AGENT_ERROR
        result.error = (f"{facts.program} is gone without an exit code (the run directory vanished)"
                        + (f"; stderr: {stderr_tail[-500:]}" if stderr_tail.strip() else ""))
        result.artifacts["transcript_tail"] = tail
    else:
        _classify_exit(result, trajectory, parser, st, facts, tail)


def _classify_exit(result: HarnessResult, trajectory: Trajectory, parser: Transcript, st: _RunState,
                   facts: RunFacts, tail: str) -> None:
    """``classify`` for a program that ended by itself: its exit code and what its transcript said."""
    stderr_tail = st.stderr_tail
    exit_code = st.exit_code
    parser_error = _scrub(parser.error, facts.secrets) if parser.error else None
    if exit_code != 0 and not parser.valid and _cannot_run(exit_code, stderr_tail):
        trajectory.stop_reason = "agent_unavailable"
        result.error_kind = ErrorKind.AGENT_UNAVAILABLE
        result.error = (f"{facts.program} cannot run in this environment (image "
                        f"{facts.image or 'unknown'}): exit {exit_code}"
                        + (f": {stderr_tail.strip()[-500:]}" if stderr_tail.strip() else "")
                        + " (a binary for another CPU, or an image without the loader/C library it needs "
                          "such as glibc?)")
        result.artifacts["stderr_tail"] = stderr_tail
        result.artifacts["transcript_tail"] = tail
    elif exit_code != 0:
        trajectory.stop_reason = parser.stop_reason or "agent_error"
        result.error_kind = parser.error_kind or ErrorKind.AGENT_ERROR
        result.error = (f"{facts.program} exited {exit_code}"
                        + (f": {parser_error}" if parser_error else "")
                        + (f"; stderr: {stderr_tail[-500:]}" if stderr_tail.strip() else ""))
        result.artifacts["stderr_tail"] = stderr_tail
        if not parser.valid:
            result.artifacts["transcript_tail"] = tail
    elif not parser.valid:
        trajectory.stop_reason = "agent_transcript_invalid"
        result.error_kind = ErrorKind.AGENT_TRANSCRIPT_INVALID
        result.error = (f"{facts.program} exited 0 but its transcript ({st.offset} bytes, "
                        f"{parser.invalid_lines} unreadable lines) held no event {facts.name} knows")
        result.artifacts["transcript_tail"] = tail
        result.artifacts["stderr_tail"] = stderr_tail
    else:
        trajectory.stop_reason = parser.stop_reason or "completed"
        if parser_error or parser.error_kind:
            # the transcript's own verdict stands even when the CLI exits 0 (e.g. Claude's turn limit)
            result.error = parser_error or parser.error_kind
            result.error_kind = parser.error_kind or ErrorKind.AGENT_ERROR
            result.artifacts["stderr_tail"] = stderr_tail
