"""The failure taxonomy: every failed try gets a kind, and each kind a policy.

``retry``: worth another try of the same attempt (the world was flaky, not the agent);
``grade``: the attempt is still graded (its work may be enough);
``valid``: the attempt counts as a normal result (a later run may reuse it).
Unknown kinds get the conservative default (no retry, not graded, not valid) unless a
``retry_pattern_list`` regex matches the error text.

An exception of a programming-error type (``PROGRAMMING_ERRORS``) raised anywhere in an attempt (opening an
environment, prepare, setup, the harness, collect, evaluate) is an ``engine_error`` whatever the phase: the
code running the attempt is broken (a missing attribute on this Python, a wrong call), so the attempt says
nothing about the agent, and the run that had one is failed (``request_actor``).
"""

from __future__ import annotations

from typing import NamedTuple

from .._errors import AgentCompassError


class FailurePolicy(NamedTuple):
    """What the engine does about one kind of failure."""

    retry: bool
    grade: bool
    valid: bool


_TRANSIENT = FailurePolicy(retry=True, grade=False, valid=False)
_FINAL = FailurePolicy(retry=False, grade=False, valid=False)
_GRADED = FailurePolicy(retry=False, grade=True, valid=True)

POLICIES: dict[str, FailurePolicy] = {
    # the model endpoint
    "model_rate_limit": _TRANSIENT,
    "model_server_error": _TRANSIENT,
    "model_connection_error": _TRANSIENT,
    "model_bad_response": _TRANSIENT,
    "model_auth": _FINAL,
    "model_bad_request": _FINAL,
    "model_response_too_large": _FINAL,  # an answer past max_response_bytes: asking again gets the same
    # the sandbox
    "env_open_failed": _TRANSIENT,
    "env_lost": _TRANSIENT,
    "disk_full": _FINAL,  # below min_free_disk after waiting disk_wait_timeout for this run's images to go
    # the sandbox's image (environments/docker/pull.py): a registry that is down or a stalled pull may recover;
    # a missing image or refused credentials will not
    "registry_unreachable": _TRANSIENT,
    "image_pull_stalled": _TRANSIENT,
    "image_pull_timeout": _TRANSIENT,
    "image_wait_timeout": _TRANSIENT,  # the image cache's cap on one ensure (ENSURE_CAP_S): slot, disk, fetch
    "image_not_found": _FINAL,
    "registry_auth_required": _FINAL,
    "image_pull_failed": _FINAL,
    # the agent
    "command_timeout": _GRADED,
    "agent_timeout": _GRADED,
    # the agent stopped at a budget it was given: what it did so far is its answer
    "step_limit": _GRADED,
    "cost_limit": _GRADED,
    "format_error_limit": _GRADED,
    # an installed agent's program (harnesses/installed/agent.py) exited non-zero, or wrote no transcript we can read:
    # its work in the environment is still graded
    "agent_error": _GRADED,
    "agent_transcript_invalid": _GRADED,
    # its transcript passed max_transcript_bytes / max_steps and it was killed: its work so far is still graded
    "transcript_limit": _GRADED,
    # its program cannot run in the image (exit 126/127, exec format error, no loader/glibc): not the model's doing,
    # and another try in the same image fails the same way
    "agent_unavailable": _FINAL,
    "harness_crash": _FINAL,
    "prepare_error": _FINAL,
    "setup_error": _FINAL,
    "setup_timeout": _TRANSIENT,  # a sandbox too slow to set up this time (e.g. a git command on a busy disk)
    # grading
    "eval_error": _FINAL,
    "eval_timeout": _FINAL,
    # an LLM judge (benchmarks/qa/judge.py) gave no verdict: another try would re-run the agent to ask it again
    "judge_unparsable": _FINAL,
    "judge_timeout": _FINAL,
    "judge_auth": _FINAL,
    "judge_unavailable": _FINAL,
    # the run
    "stalled": _TRANSIENT,  # no progress for stall_timeout: a lost wakeup or a wedged sandbox, not the agent
    "cancelled": _FINAL,
    "run_timeout": _FINAL,
    "engine_error": _FINAL,
}

DEFAULT_POLICY = _FINAL


def policy(kind: str | None) -> FailurePolicy:
    """The policy of ``kind`` (None: no failure, a valid graded result)."""
    if kind is None:
        return _GRADED
    return POLICIES.get(kind, DEFAULT_POLICY)


#: exception types that mean the code running an attempt is broken, not the agent, the sandbox or the model.
PROGRAMMING_ERRORS: tuple[type[BaseException], ...] = (
    AttributeError, NameError, TypeError, ImportError, AssertionError, NotImplementedError, SyntaxError)


def kind_of(exc: BaseException, default: str) -> str:
    """``engine_error`` for a programming error (``PROGRAMMING_ERRORS``, subclasses such as
    ``UnboundLocalError`` and ``ModuleNotFoundError`` included), else ``default``, the phase's own kind.
    Errors raised on purpose (``AgentCompassError``, e.g. ``NotSupportedYet``) keep the phase's kind."""
    if isinstance(exc, PROGRAMMING_ERRORS) and not isinstance(exc, AgentCompassError):
        return "engine_error"
    return default
