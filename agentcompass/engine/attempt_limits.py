"""Per-attempt limits on model use, as Inspect's sample limits: ``harness_params.token_limit`` (tokens, prompt
plus completion, summed over the attempt's model calls) and ``harness_params.message_limit`` (model calls).

The engine enforces them for every harness: an in-process harness's calls are counted by the model client the
engine hands it, an agent process's calls by the gateway (the same numbers its ledger records). Once a count has
reached its limit the next model call is refused (the call that crosses the limit completes, as in Inspect) and
the attempt ends at once: its end reason is the limit (``token_limit`` / ``message_limit``), the steps streamed
so far are kept, and it is graded as an agent timeout is.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from .._errors import ConfigError
from ..common.error_kinds import ErrorKind
from ..records import Usage

__all__ = ["AttemptBudget", "AttemptLimits", "LimitReached", "parse_limits"]

#: the largest limit accepted (a bigger number is a typo, not a budget)
MAX_LIMIT = 10**12


class AttemptLimits(msgspec.Struct, frozen=True):
    """The limits of each attempt of a request (None: no limit)."""

    tokens: int | None = None
    messages: int | None = None

    def __bool__(self) -> bool:
        return self.tokens is not None or self.messages is not None


class LimitReached(Exception):
    """An attempt reached one of its limits: ``kind`` is ``token_limit`` or ``message_limit``."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _limit(params: dict[str, Any], key: str) -> int | None:
    value = params.pop(key, None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise ConfigError(f"Invalid `harness_params.{key}`: {value!r}; expected a whole number from 1 to "
                          f"{MAX_LIMIT} (or leave it out for no limit).", field=f"harness_params.{key}")
    return value


def parse_limits(harness_params: dict[str, Any]) -> AttemptLimits:
    """The engine's limit keys taken out of ``harness_params`` (they never reach the harness)."""
    return AttemptLimits(tokens=_limit(harness_params, "token_limit"),
                         messages=_limit(harness_params, "message_limit"))


class AttemptBudget:
    """One try's counts against its limits, charged after each model call, asked before the next."""

    __slots__ = ("_stopped", "limits", "messages", "reached", "tokens")

    def __init__(self, limits: AttemptLimits) -> None:
        self.limits = limits
        self.tokens = 0
        self.messages = 0
        #: the limit that ended the try (set by the first refused call)
        self.reached: LimitReached | None = None
        self._stopped = asyncio.Event()

    def charge(self, usage: Usage | None) -> None:
        """Count one answered model call and its tokens."""
        self.messages += 1
        if usage is not None:
            self.tokens += usage.total_tokens or usage.prompt_tokens + usage.completion_tokens

    def admit(self) -> str | None:
        """None when another model call may be made; else why not (and the try is told to stop)."""
        if self.reached is None:
            lim = self.limits
            if lim.tokens is not None and self.tokens >= lim.tokens:
                self.reached = LimitReached(ErrorKind.TOKEN_LIMIT, f"token limit reached: {self.tokens} tokens "
                                            f"used, harness_params.token_limit={lim.tokens}")
            elif lim.messages is not None and self.messages >= lim.messages:
                self.reached = LimitReached(ErrorKind.MESSAGE_LIMIT, f"message limit reached: {self.messages} "
                                            f"model calls made, harness_params.message_limit={lim.messages}")
            else:
                return None
            self._stopped.set()
        return str(self.reached)

    def check(self) -> None:
        """Raise ``LimitReached`` when no further model call may be made."""
        if self.admit() is not None:
            raise self.error()

    def error(self) -> LimitReached:
        """A fresh ``LimitReached`` for the limit that stopped the try (one per raise: tracebacks stay apart)."""
        assert self.reached is not None
        return LimitReached(self.reached.kind, str(self.reached))

    async def stopped(self) -> None:
        """Returns once a call has been refused."""
        await self._stopped.wait()
