"""Errors AgentCompass raises on purpose. Each carries a message meant for a person."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from .common.error_kinds import ErrorKind


class AgentCompassError(Exception):
    """Base class of every error AgentCompass raises on purpose."""


class ConfigError(AgentCompassError, ValueError):
    """Bad input: names the field, what was given and what is allowed."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` Did you mean 'x'?`` for the closest of ``known`` to ``name``, or ``""`` when none is close."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""


class NotSupportedYet(AgentCompassError, NotImplementedError):
    """A feature that is accepted by the API but not built yet (names the area that will build it)."""


class EnvironmentError_(AgentCompassError):
    """An environment could not be opened, lost, or refused a request. ``kind``, when set, is the failure kind
    the engine books for it (e.g. an image pull's ``image_not_found``) instead of the phase's default."""

    kind: ErrorKind | None = None


class ModelError(AgentCompassError):
    """A model call failed. ``kind``, an ``ErrorKind``, classifies it (rate limit, server error, auth...);
    ``unresponsive``: the endpoint answered neither the call nor a probe (retried less, ``models/retry.py``)."""

    def __init__(self, message: str, *, kind: ErrorKind = ErrorKind.MODEL_ERROR, status: int | None = None,
                 retry_after: float | None = None, unresponsive: bool = False) -> None:
        super().__init__(message)
        self.kind = ErrorKind.of(kind)
        self.status = status
        self.retry_after = retry_after
        self.unresponsive = unresponsive


class EvalError(AgentCompassError):
    """The verifier could not grade an attempt. ``extra`` (e.g. a judge's raw reply) is kept in the attempt's
    ``extra`` when ``Benchmark.evaluate`` raises it (the attempt is an ``eval_error``); ``kind`` is its
    ``error_kind`` (``eval_error`` unless a finer ``ErrorKind``; another value raises ValueError)."""

    def __init__(self, message: str = "", *, extra: dict[str, Any] | None = None,
                 kind: ErrorKind = ErrorKind.EVAL_ERROR) -> None:
        super().__init__(message)
        self.extra: dict[str, Any] = dict(extra or {})
        self.kind = ErrorKind.of(kind)


class RunInsideLoopError(AgentCompassError, RuntimeError):
    """launch()/run_evaluation() were called from inside a running event loop."""
