"""Retries of transient model-call failures, separate from the engine's task-level retries.

``RetryingModelClient`` wraps any ``ModelClient`` and retries a call that failed with a ``ModelError`` of
a transient kind (``common.http_status.TRANSIENT_MODEL_KINDS``):

- ``model_rate_limit`` (429), ``model_server_error`` (5xx), ``model_connection_error`` (refused, reset,
  closed without an answer, read timeout): up to ``retries`` extra tries;
- ``model_bad_response`` (a body that is not a chat completion): at most ``bad_response_retries`` (2) of
  them. A garbled or truncated body from an overloaded proxy is transient, but an endpoint that always
  answers in a shape we cannot read (an HTML page, the wrong protocol) is a configuration problem and
  should not cost six backoffs.

Auth, bad-request and other kinds are raised at once. Waits use exponential backoff with full jitter,
``uniform(0, min(max_wait, backoff * 2**(n-1)))`` after the n-th failure; when the server sent
``Retry-After`` the wait is that value plus ``uniform(0, min(backoff, max_wait))`` (so callers that got the
same header do not all come back at once). Every wait is capped at ``max_backoff`` (the request's
``max_backoff_s``; default ``specs.DEFAULT_MAX_BACKOFF_S``), so a ``Retry-After: 99999999`` or an HTTP date in
year 9999 cannot park a call for days. Each wait is a plain ``asyncio.sleep``, so cancelling the caller ends it
at once. When the tries are used up the last ``ModelError`` is re-raised (with a note saying how many tries were
made).

The reserved model params ``retries``, ``retry_backoff`` and ``retry_max_wait`` configure the policy
(see ``split_retry_params``); a per-call ``complete(..., retries=0)`` overrides the client's policy.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import sys
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import msgspec

from .._errors import ModelError
from .._validate import MAX_SECONDS
from ..common.backoff import FULL_JITTER, backoff_delay
from ..common.error_kinds import ErrorKind
from ..common.http_status import TRANSIENT_MODEL_KINDS
from ..interfaces import ModelClient, ModelResponse
from ..params import as_params
from ..specs import DEFAULT_MAX_BACKOFF_S
from .adaptive import AdaptiveLimiter, outcome_of
from .waiting import pause

#: ``on_retry(kind, backoff_s, try_no)``: called before each backoff sleep, in the caller's task (so
#: context variables of the caller are visible); ``try_no`` is the try that just failed (1 = first call).
OnRetry = Callable[[str, float, int], None]

RETRY_PARAMS = frozenset({"retries", "retry_backoff", "retry_max_wait"})
#: the most extra tries one model call may make.
MAX_MODEL_RETRIES = 100
#: the default cap on any one wait, Retry-After included (a Retry-After longer than ``max_wait`` is honoured
#: up to it): the request's default ``max_backoff_s``; a request's ``max_backoff_s`` sets it.
RETRY_AFTER_CEILING_S = DEFAULT_MAX_BACKOFF_S

_log = logging.getLogger("agentcompass.models")


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to retry: ``retries`` extra tries, backoff base and cap in seconds, and
    ``max_backoff``, the cap on any one wait (Retry-After included)."""

    retries: int = 6
    backoff: float = 0.5
    max_wait: float = 30.0
    bad_response_retries: int = 2
    #: retries of a call whose endpoint answered neither it nor a probe (``clients/liveness.py``): each try of
    #: a dead endpoint costs ``probe_after + probe_timeout``, so it fails within minutes, not six more times
    unresponsive_retries: int = 1
    max_backoff: float = DEFAULT_MAX_BACKOFF_S

    def wait_s(self, failures: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait after the ``failures``-th failed try."""
        if retry_after is not None:
            # the header's wait plus a first-failure jitter: callers told the same Retry-After do not return together
            spread = backoff_delay(1, self.backoff, self.max_wait, jitter=FULL_JITTER, rng=rng)
            return min(retry_after + spread, self.max_backoff)
        return backoff_delay(failures, self.backoff, min(self.max_wait, self.max_backoff), jitter=FULL_JITTER, rng=rng)

    def cap(self, retry_after: float | None) -> float | None:
        """A server's Retry-After as the endpoint's limiter may honour it: at most ``max_backoff``."""
        return None if retry_after is None else min(retry_after, self.max_backoff)

    def allows(self, kind: str, failures: int, bad_responses: int, unresponsive: int = 0) -> bool:
        """Whether a call that has failed ``failures`` times (the last with ``kind``; ``bad_responses`` and
        ``unresponsive`` of them of those sorts) may try again."""
        if kind not in TRANSIENT_MODEL_KINDS or failures > self.retries or unresponsive > self.unresponsive_retries:
            return False
        return kind != ErrorKind.MODEL_BAD_RESPONSE or bad_responses <= self.bad_response_retries


class RetryParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The reserved model params that set the retry policy (only the keys given change it)."""

    retries: Annotated[int, msgspec.Meta(ge=0, le=MAX_MODEL_RETRIES)] = 6
    retry_backoff: Annotated[float, msgspec.Meta(ge=0, le=MAX_SECONDS)] = 0.5
    retry_max_wait: Annotated[float, msgspec.Meta(ge=0, le=MAX_SECONDS)] = 30.0


#: each retry param -> the ``RetryPolicy`` field it sets.
_POLICY_FIELDS = {"retries": "retries", "retry_backoff": "backoff", "retry_max_wait": "max_wait"}


def split_retry_params(params: Mapping[str, Any], base: RetryPolicy | None = None, *,
                       model_id: str = "") -> tuple[RetryPolicy, dict[str, Any]]:
    """(the policy from the reserved keys over ``base``, the other params). Bad values: ``ConfigError`` naming
    ``model_params.<key>``; ``model_id`` names the model in its text."""
    policy = base or RetryPolicy()
    rest = {k: v for k, v in params.items() if k not in RETRY_PARAMS}
    own = {k: v for k, v in params.items() if k in RETRY_PARAMS}
    if not own:
        return policy, rest
    p = as_params(RetryParams, own, f"model {model_id}".rstrip(), field_prefix="model_params.")
    changes = {_POLICY_FIELDS[k]: getattr(p, k) for k in own}
    return dataclasses.replace(policy, **changes), rest


class RetryingModelClient:
    """A ``ModelClient`` that retries transient ``ModelError``s of ``inner`` (see the module doc).

    A response that needed retries reports them in ``usage.retries``.
    """

    def __init__(self, inner: ModelClient, policy: RetryPolicy | None = None, *,
                 on_retry: OnRetry | None = None, rng: random.Random | None = None,
                 limiter: AdaptiveLimiter | None = None) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.policy = policy or RetryPolicy()
        self.on_retry = on_retry
        self._rng = rng or random.Random()
        #: the endpoint's adaptive concurrency limit (shared with the gateway); each try holds a slot.
        self.limiter = limiter

    def __repr__(self) -> str:
        return f"RetryingModelClient({self.inner!r}, {self.policy!r})"

    async def __aenter__(self) -> RetryingModelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                       **params: Any) -> ModelResponse:
        """Call ``inner.complete``, retrying transient failures; re-raises the last ``ModelError``."""
        policy = self.policy
        if not RETRY_PARAMS.isdisjoint(params):
            policy, params = split_retry_params(params, policy, model_id=self.model_id)
        failures = bad_responses = unresponsive = 0
        while True:
            ticket = await self.limiter.acquire() if self.limiter is not None else None
            try:
                resp = await self.inner.complete(messages, tools=tools, **params)
            except ModelError as exc:
                if ticket is not None and self.limiter is not None:
                    self.limiter.release(ticket, outcome_of(exc.kind), policy.cap(exc.retry_after))
                    ticket = None
                failures += 1
                if exc.kind == ErrorKind.MODEL_BAD_RESPONSE:
                    bad_responses += 1
                unresponsive += exc.unresponsive
                if not policy.allows(exc.kind, failures, bad_responses, unresponsive):
                    if failures > 1:
                        exc.add_note(f"Gave up after {failures} tries of model {self.model_id!r}.")
                    raise
                wait = policy.wait_s(failures, exc.retry_after, self._rng)
                _log.debug("model %s: try %d failed (%s); retrying in %.2fs", self.model_id, failures,
                           exc.kind, wait)
                if self.on_retry is not None:
                    self.on_retry(exc.kind, wait, failures)
                await pause(wait)
                continue
            finally:
                if ticket is not None and self.limiter is not None:  # success, or cancelled / not a ModelError
                    self.limiter.release(ticket, "ok" if sys.exc_info()[0] is None else "error")
            if failures:
                resp.usage = msgspec.structs.replace(resp.usage, retries=resp.usage.retries + failures)
            return resp

    async def aclose(self) -> None:
        """Close the wrapped client."""
        await self.inner.aclose()
