"""The failure kinds: every failed try is booked as one ``ErrorKind`` (``engine/failures.py`` gives each a policy).

A ``StrEnum``, so a kind is its string in records, events and JSON on disk, and compares equal to it.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    """Why a try failed. Its value is what records store as ``error_kind``."""

    # the model endpoint
    MODEL_RATE_LIMIT = "model_rate_limit"
    MODEL_SERVER_ERROR = "model_server_error"
    MODEL_CONNECTION_ERROR = "model_connection_error"
    MODEL_BAD_RESPONSE = "model_bad_response"
    MODEL_AUTH = "model_auth"
    MODEL_BAD_REQUEST = "model_bad_request"
    MODEL_RESPONSE_TOO_LARGE = "model_response_too_large"
    MODEL_ERROR = "model_error"  # a ModelError that names no finer kind
    # the sandbox
    ENV_OPEN_FAILED = "env_open_failed"
    ENV_LOST = "env_lost"
    DISK_FULL = "disk_full"
    # the sandbox's image
    REGISTRY_UNREACHABLE = "registry_unreachable"
    IMAGE_PULL_STALLED = "image_pull_stalled"
    IMAGE_PULL_TIMEOUT = "image_pull_timeout"
    IMAGE_WAIT_TIMEOUT = "image_wait_timeout"
    IMAGE_NOT_FOUND = "image_not_found"
    REGISTRY_AUTH_REQUIRED = "registry_auth_required"
    IMAGE_PULL_FAILED = "image_pull_failed"
    # the agent
    COMMAND_TIMEOUT = "command_timeout"
    AGENT_TIMEOUT = "agent_timeout"
    STEP_LIMIT = "step_limit"
    COST_LIMIT = "cost_limit"
    TOKEN_LIMIT = "token_limit"  # harness_params.token_limit (engine/attempt_limits.py)
    MESSAGE_LIMIT = "message_limit"  # harness_params.message_limit
    WORKING_LIMIT = "working_limit"  # harness_params.working_limit
    FORMAT_ERROR_LIMIT = "format_error_limit"
    AGENT_ERROR = "agent_error"
    AGENT_TRANSCRIPT_INVALID = "agent_transcript_invalid"
    TRANSCRIPT_LIMIT = "transcript_limit"
    AGENT_UNAVAILABLE = "agent_unavailable"
    AGENT_STUCK = "agent_stuck"
    AGENT_EXIT = "agent_exit"
    HARNESS_CRASH = "harness_crash"
    PREPARE_ERROR = "prepare_error"
    SETUP_ERROR = "setup_error"
    SETUP_TIMEOUT = "setup_timeout"
    # grading
    EVAL_ERROR = "eval_error"
    EVAL_TIMEOUT = "eval_timeout"
    # an LLM judge
    JUDGE_UNPARSABLE = "judge_unparsable"
    JUDGE_TIMEOUT = "judge_timeout"
    JUDGE_AUTH = "judge_auth"
    JUDGE_UNAVAILABLE = "judge_unavailable"
    # the run
    STALLED = "stalled"
    CANCELLED = "cancelled"
    RUN_TIMEOUT = "run_timeout"
    ENGINE_ERROR = "engine_error"

    @classmethod
    def of(cls, value: str) -> ErrorKind:
        """``value`` as a kind; a ValueError naming it when no kind has that value (a typo fails here)."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown error kind {value!r}: not an ErrorKind "
                             "(agentcompass/common/error_kinds.py declares them)") from None


__all__ = ["ErrorKind"]
