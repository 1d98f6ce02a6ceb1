"""Signed API-key envelopes (``wrap_api_key``): what a harness or sandbox gets instead of the real key.

Format: ``acw1.<payload>.<signature>``, both parts base64url without padding. ``payload`` is compact
JSON ``{"run", "req", "task", "att", "try", "exp"}`` (run id, request name, task id, attempt, try,
expiry as Unix seconds); ``signature`` is HMAC-SHA256 over ``acw1.<payload>`` with a random secret made
per launch and never written anywhere. Only the gateway that holds the secret can mint or verify one, so
an envelope is worthless outside this launch, after its expiry, and (the gateway also checks) after its
attempt ended.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from typing import NamedTuple

import msgspec

PREFIX = "acw1"
_SECRET_BYTES = 32


class AttemptKey(NamedTuple):
    """Who a model call is billed to: one try of one attempt of one task of one request."""

    request: str
    task_id: str
    attempt: int
    try_no: int


class EnvelopeClaims(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What an envelope says (the JSON payload, short keys)."""

    run: str
    req: str
    task: str
    att: int
    try_: int = msgspec.field(name="try")
    exp: float = 0.0

    @property
    def key(self) -> AttemptKey:
        return AttemptKey(self.req, self.task, self.att, self.try_)


class EnvelopeError(Exception):
    """An envelope that does not verify; ``reason`` is ``malformed``, ``bad_signature`` or ``expired``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(EnvelopeClaims).decode


def is_envelope(token: str) -> bool:
    """Whether ``token`` looks like an envelope (it may still be forged)."""
    return token.startswith(PREFIX + ".")


class EnvelopeSigner:
    """Mints and verifies envelopes with one per-launch secret (random unless given, e.g. in tests)."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret is not None else secrets.token_bytes(_SECRET_BYTES)
        if len(self._secret) < 16:
            raise ValueError("the envelope secret must be at least 16 bytes")

    @property
    def secret_text(self) -> str:
        """The secret as text, only for the redaction layer (so it can never reach a file or log)."""
        return _b64(self._secret)

    def _sign(self, signed: bytes) -> str:
        return _b64(hmac.new(self._secret, signed, hashlib.sha256).digest())

    def issue(self, run_id: str, key: AttemptKey, ttl_s: float, *, now: float | None = None) -> str:
        """An envelope for ``key`` that expires ``ttl_s`` seconds from ``now``."""
        claims = EnvelopeClaims(run=run_id, req=key.request, task=key.task_id, att=key.attempt, try_=key.try_no,
                                exp=round((time.time() if now is None else now) + ttl_s, 3))
        head = f"{PREFIX}.{_b64(_encode(claims))}"
        return f"{head}.{self._sign(head.encode('ascii'))}"

    def verify(self, token: str, *, now: float | None = None) -> EnvelopeClaims:
        """The claims of a genuine, unexpired envelope; ``EnvelopeError`` otherwise."""
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != PREFIX or not parts[1] or not parts[2]:
            raise EnvelopeError("malformed", "The API key is not an agentcompass envelope.")
        head = f"{parts[0]}.{parts[1]}"
        try:
            expected = self._sign(head.encode("ascii"))
        except UnicodeEncodeError:
            raise EnvelopeError("malformed", "The API key is not an agentcompass envelope.") from None
        if not hmac.compare_digest(expected.encode("ascii"), parts[2].encode("ascii", "replace")):
            raise EnvelopeError("bad_signature", "The API key envelope has an invalid signature.")
        try:
            claims = _decode(_unb64(parts[1]))
        except (ValueError, msgspec.DecodeError, msgspec.ValidationError):
            raise EnvelopeError("malformed", "The API key envelope has an unreadable payload.") from None
        if claims.exp <= (time.time() if now is None else now):
            raise EnvelopeError("expired", "The API key envelope has expired.")
        return claims
