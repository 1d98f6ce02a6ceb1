"""Per-attempt limits, as Inspect's sample limits: ``harness_params.token_limit`` (tokens, prompt plus completion,
summed over the attempt's model calls), ``message_limit`` (model calls), ``cost_limit`` (what those calls cost,
priced with ``model_params.price_per_million``) and ``working_limit`` (seconds of working time: the agent's time
on the clock less the time its model calls waited for a free slot at the endpoint or for a retry).

The engine enforces them for every harness: an in-process harness's calls are counted by the model client the
engine hands it, an agent process's calls by the gateway (the same numbers its ledger records). Once a count has
reached its limit the next model call is refused (the call that crosses the limit completes, as in Inspect) and
the attempt ends at once; working time is watched by the engine's watchdog and ends the attempt when it runs out,
between calls or during one. Its end reason is the limit (``token_limit`` / ``message_limit`` / ``cost_limit`` /
``working_limit``), the steps streamed so far are kept, and it is graded as an agent timeout is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection
from typing import Any

import msgspec

from .._errors import ConfigError
from ..common.error_kinds import ErrorKind
from ..models.pricing import PriceTable
from ..models.waiting import WaitClock
from ..records import Usage

__all__ = ["AttemptBudget", "AttemptLimits", "LimitReached", "parse_limits"]

#: the largest count accepted (a bigger number is a typo, not a budget)
MAX_LIMIT = 10**12
#: the largest cost and working time accepted
MAX_COST = 1e9
MAX_WORKING_S = 30 * 86400.0


class AttemptLimits(msgspec.Struct, frozen=True):
    """The limits of each attempt of a request (None: no limit)."""

    tokens: int | None = None
    messages: int | None = None
    cost: float | None = None
    working_s: float | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.tokens, self.messages, self.cost, self.working_s))


class LimitReached(Exception):
    """An attempt reached one of its limits: ``kind`` is ``token_limit``, ``message_limit``, ``cost_limit`` or
    ``working_limit``."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _limit(params: dict[str, Any], key: str, keep: bool) -> int | None:
    value = params.get(key) if keep else params.pop(key, None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise ConfigError(f"Invalid `harness_params.{key}`: {value!r}; expected a whole number from 1 to "
                          f"{MAX_LIMIT} (or leave it out for no limit).", field=f"harness_params.{key}")
    return value


def _amount(params: dict[str, Any], key: str, keep: bool, most: float, unit: str) -> float | None:
    value = params.get(key) if keep else params.pop(key, None)
    if value is None or (keep and value == 0):  # 0: "none" to a harness that has the key too (mini-swe-agent)
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= most:
        raise ConfigError(f"Invalid `harness_params.{key}`: {value!r}; expected {unit} above 0 and at most "
                          f"{most:g} (or leave it out for no limit).", field=f"harness_params.{key}")
    return float(value)


def parse_limits(harness_params: dict[str, Any], *, price: PriceTable | None = None,
                 harness_keys: Collection[str] = ()) -> AttemptLimits:
    """The engine's limit keys taken out of ``harness_params``; a key the harness declares as a param of its own
    (``harness_keys``, e.g. mini-swe-agent's ``cost_limit``) stays for it too, and both apply. ``cost_limit``
    needs the model's prices."""
    def keep(key: str) -> bool:
        return key in harness_keys

    limits = AttemptLimits(
        tokens=_limit(harness_params, "token_limit", keep("token_limit")),
        messages=_limit(harness_params, "message_limit", keep("message_limit")),
        cost=_amount(harness_params, "cost_limit", keep("cost_limit"), MAX_COST, "an amount"),
        working_s=_amount(harness_params, "working_limit", keep("working_limit"), MAX_WORKING_S, "seconds"))
    if limits.cost is not None and price is None:
        raise ConfigError("`harness_params.cost_limit` needs the model's prices to count cost: set "
                          "model_params.price_per_million (e.g. {\"input\": 3, \"output\": 15}).",
                          field="harness_params.cost_limit")
    return limits


class AttemptBudget:
    """One try's counts against its limits, charged after each model call, asked before the next; its working
    time is read by the watchdog (``working_left``)."""

    __slots__ = ("_started", "_stopped", "cost", "limits", "messages", "price", "reached", "tokens", "wait_clock")

    def __init__(self, limits: AttemptLimits, price: PriceTable | None = None) -> None:
        self.limits = limits
        self.price = price
        self.tokens = 0
        self.messages = 0
        self.cost = 0.0
        #: the try's model calls report their waits for a slot or a retry here (``models/waiting.py``)
        self.wait_clock = WaitClock()
        self._started: float | None = None
        #: the limit that ended the try (set by the first refused call, or by the watchdog)
        self.reached: LimitReached | None = None
        self._stopped = asyncio.Event()

    def start(self) -> None:
        """The agent starts: its working time counts from now."""
        self._started = time.monotonic()

    def working_s(self) -> float:
        """Working time so far: time on the clock since ``start`` less the time model calls waited."""
        if self._started is None:
            return 0.0
        return max(0.0, time.monotonic() - self._started - self.wait_clock.seconds())

    def working_left(self) -> float | None:
        """Seconds of working time left (None: no working limit); once none is left the try is stopped."""
        limit = self.limits.working_s
        if limit is None:
            return None
        left = limit - self.working_s()
        if left <= 0 and self.reached is None:
            self._reach(ErrorKind.WORKING_LIMIT, f"working time limit reached: {self.working_s():.1f}s of work "
                        f"({self.wait_clock.seconds():.1f}s more waiting for the model endpoint), "
                        f"harness_params.working_limit={limit:g}")
        return left

    def charge(self, usage: Usage | None) -> None:
        """Count one answered model call, its tokens and its cost."""
        self.messages += 1
        if usage is not None:
            self.tokens += usage.total_tokens or usage.prompt_tokens + usage.completion_tokens
            if self.price is not None:
                self.cost = round(self.cost + self.price.cost(usage), 9)

    def admit(self) -> str | None:
        """None when another model call may be made; else why not (and the try is told to stop)."""
        if self.reached is None:
            lim = self.limits
            if lim.tokens is not None and self.tokens >= lim.tokens:
                self._reach(ErrorKind.TOKEN_LIMIT, f"token limit reached: {self.tokens} tokens used, "
                            f"harness_params.token_limit={lim.tokens}")
            elif lim.messages is not None and self.messages >= lim.messages:
                self._reach(ErrorKind.MESSAGE_LIMIT, f"message limit reached: {self.messages} model calls made, "
                            f"harness_params.message_limit={lim.messages}")
            elif lim.cost is not None and self.cost >= lim.cost:
                self._reach(ErrorKind.COST_LIMIT, f"cost limit reached: {self.cost:.6g} spent, "
                            f"harness_params.cost_limit={lim.cost:g}")
            else:
                self.working_left()  # stops the try when its working time is used up
                if self.reached is None:
                    return None
        return str(self.reached)

    def _reach(self, kind: ErrorKind, message: str) -> None:
        self.reached = LimitReached(kind, message)
        self._stopped.set()

    def check(self) -> None:
        """Raise ``LimitReached`` when no further model call may be made."""
        if self.admit() is not None:
            raise self.error()

    def error(self) -> LimitReached:
        """A fresh ``LimitReached`` for the limit that stopped the try (one per raise: tracebacks stay apart)."""
        assert self.reached is not None
        return LimitReached(self.reached.kind, str(self.reached))

    def counts(self) -> dict[str, Any]:
        """What the try used, for its record."""
        out: dict[str, Any] = {"tokens": self.tokens, "messages": self.messages}
        if self.limits.cost is not None:
            out["cost"] = self.cost
        if self._started is not None:
            out["working_s"] = round(self.working_s(), 3)
            out["model_wait_s"] = round(self.wait_clock.seconds(), 3)
        return out

    async def stopped(self) -> None:
        """Returns once a call has been refused."""
        await self._stopped.wait()
