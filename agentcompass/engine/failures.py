"""The failure taxonomy: every failed try gets a kind, and each kind a policy.

``retry``: worth another try of the same attempt (the world was flaky, not the agent);
``grade``: the attempt is still graded (its work may be enough);
``valid``: the attempt counts as a normal result (a later run may reuse it).
Every ``ErrorKind`` has a policy; a kind that is not one is an error (``policy`` raises), not a silent default.
A kind that is not retried is retried anyway when a ``retry_pattern_list`` regex matches the error text.

An exception of a programming-error type (``PROGRAMMING_ERRORS``) raised anywhere in an attempt (opening an
environment, prepare, setup, the harness, collect, evaluate) is an ``engine_error`` whatever the phase: the
code running the attempt is broken (a missing attribute on this Python, a wrong call), so the attempt says
nothing about the agent, and the run that had one is failed (``request_actor``).
"""

from __future__ import annotations

from typing import NamedTuple

from .._errors import AgentCompassError
from ..common.error_kinds import ErrorKind
from ..common.http_status import TRANSIENT_MODEL_KINDS


class FailurePolicy(NamedTuple):
    """What the engine does about one kind of failure."""

    retry: bool
    grade: bool
    valid: bool


_TRANSIENT = FailurePolicy(retry=True, grade=False, valid=False)
_FINAL = FailurePolicy(retry=False, grade=False, valid=False)
_GRADED = FailurePolicy(retry=False, grade=True, valid=True)

POLICIES: dict[ErrorKind, FailurePolicy] = {
    # the model endpoint; its transient kinds are common/http_status.py's, which the model retries read too
    **{kind: _TRANSIENT for kind in ErrorKind if kind in TRANSIENT_MODEL_KINDS},
    ErrorKind.MODEL_AUTH: _FINAL,
    ErrorKind.MODEL_BAD_REQUEST: _FINAL,
    ErrorKind.MODEL_RESPONSE_TOO_LARGE: _FINAL,  # an answer past max_response_bytes: asking again gets the same
    ErrorKind.MODEL_ERROR: _FINAL,  # a model call failed in a way no finer kind names
    # the sandbox
    ErrorKind.ENV_OPEN_FAILED: _TRANSIENT,
    ErrorKind.ENV_LOST: _TRANSIENT,
    ErrorKind.DISK_FULL: _FINAL,  # below min_free_disk after waiting disk_wait_timeout for this run's images to go
    # the sandbox's image (environments/docker/pull.py): a registry that is down or a stalled pull may recover;
    # a missing image or refused credentials will not
    ErrorKind.REGISTRY_UNREACHABLE: _TRANSIENT,
    ErrorKind.IMAGE_PULL_STALLED: _TRANSIENT,
    ErrorKind.IMAGE_PULL_TIMEOUT: _TRANSIENT,
    ErrorKind.IMAGE_WAIT_TIMEOUT: _TRANSIENT,  # the image cache's cap on one ensure (ENSURE_CAP_S): slot, disk, fetch
    ErrorKind.IMAGE_NOT_FOUND: _FINAL,
    ErrorKind.REGISTRY_AUTH_REQUIRED: _FINAL,
    ErrorKind.IMAGE_PULL_FAILED: _FINAL,
    # the agent
    ErrorKind.COMMAND_TIMEOUT: _GRADED,
    ErrorKind.AGENT_TIMEOUT: _GRADED,
    # the agent stopped at a budget it was given: what it did so far is its answer
    ErrorKind.STEP_LIMIT: _GRADED,
    ErrorKind.COST_LIMIT: _GRADED,
    ErrorKind.TOKEN_LIMIT: _GRADED,
    ErrorKind.MESSAGE_LIMIT: _GRADED,
    ErrorKind.WORKING_LIMIT: _GRADED,
    ErrorKind.FORMAT_ERROR_LIMIT: _GRADED,
    # an installed agent's program (harnesses/installed/agent.py) exited non-zero, or wrote no transcript we can read:
    # its work in the environment is still graded
    ErrorKind.AGENT_ERROR: _GRADED,
    ErrorKind.AGENT_TRANSCRIPT_INVALID: _GRADED,
    # its transcript passed max_transcript_bytes / max_steps and it was killed: its work so far is still graded
    ErrorKind.TRANSCRIPT_LIMIT: _GRADED,
    # its program cannot run in the image (exit 126/127, exec format error, no loader/glibc): not the model's doing,
    # and another try in the same image fails the same way
    ErrorKind.AGENT_UNAVAILABLE: _FINAL,
    # an agent that ended on its own in a way no kind above names (e.g. OpenHands' stuck detector, another
    # exit status): neither retried nor graded, as every undeclared kind was before kinds were declared
    ErrorKind.AGENT_STUCK: _FINAL,
    ErrorKind.AGENT_EXIT: _FINAL,
    ErrorKind.HARNESS_CRASH: _FINAL,
    ErrorKind.PREPARE_ERROR: _FINAL,
    ErrorKind.SETUP_ERROR: _FINAL,
    ErrorKind.SETUP_TIMEOUT: _TRANSIENT,  # a sandbox too slow to set up this time (e.g. a git command on a busy disk)
    # grading
    ErrorKind.EVAL_ERROR: _FINAL,
    ErrorKind.EVAL_TIMEOUT: _FINAL,
    # an LLM judge (benchmarks/qa/judge.py) gave no verdict: another try would re-run the agent to ask it again
    ErrorKind.JUDGE_UNPARSABLE: _FINAL,
    ErrorKind.JUDGE_TIMEOUT: _FINAL,
    ErrorKind.JUDGE_AUTH: _FINAL,
    ErrorKind.JUDGE_UNAVAILABLE: _FINAL,
    # the run
    ErrorKind.STALLED: _TRANSIENT,  # no progress for stall_timeout: a lost wakeup or a wedged sandbox, not the agent
    ErrorKind.CANCELLED: _FINAL,
    ErrorKind.RUN_TIMEOUT: _FINAL,
    ErrorKind.ENGINE_ERROR: _FINAL,
}

#: what a record read from disk whose kind this version does not declare gets: no retry, not graded, not valid.
STORED_UNKNOWN_POLICY = _FINAL


def policy(kind: str | None) -> FailurePolicy:
    """The policy of ``kind`` (None: no failure, a valid graded result); a ValueError for an undeclared kind."""
    if kind is None:
        return _GRADED
    return POLICIES[ErrorKind.of(kind)]


def stored_policy(kind: str | None) -> FailurePolicy:
    """``policy`` for a record read from an earlier run: a kind this version does not declare is not reused."""
    if kind is not None and kind not in POLICIES:
        return STORED_UNKNOWN_POLICY
    return policy(kind)


#: exception types that mean the code running an attempt is broken, not the agent, the sandbox or the model.
PROGRAMMING_ERRORS: tuple[type[BaseException], ...] = (
    AttributeError, NameError, TypeError, ImportError, AssertionError, NotImplementedError, SyntaxError)


def kind_of(exc: BaseException, default: ErrorKind) -> ErrorKind:
    """``engine_error`` for a programming error (``PROGRAMMING_ERRORS``, subclasses such as
    ``UnboundLocalError`` and ``ModuleNotFoundError`` included), else ``default``, the phase's own kind.
    Errors raised on purpose (``AgentCompassError``, e.g. ``NotSupportedYet``) keep the phase's kind."""
    if isinstance(exc, PROGRAMMING_ERRORS) and not isinstance(exc, AgentCompassError):
        return ErrorKind.ENGINE_ERROR
    return ErrorKind.of(default)
