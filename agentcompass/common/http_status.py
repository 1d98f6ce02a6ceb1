"""One HTTP-status classification for every model-call path, and the one list of transient model errors.

``model_error_kind`` maps a model endpoint's HTTP status (the model clients, the gateway, the judge and user
simulator through them, an installed agent's reported status) to an ``ErrorKind``. ``TRANSIENT_MODEL_KINDS``
are the model kinds worth another try: the retry policy (``models/retry.py``), the gateway, the adaptive
limiter (``models/adaptive.py``) and the engine's failure policies (``engine/failures.py``) all read it.
"""

from __future__ import annotations

from .error_kinds import ErrorKind

#: model failures another try may cure: the endpoint was busy, down, unreachable or sent a garbled body.
TRANSIENT_MODEL_KINDS: frozenset[ErrorKind] = frozenset({
    ErrorKind.MODEL_RATE_LIMIT, ErrorKind.MODEL_SERVER_ERROR, ErrorKind.MODEL_CONNECTION_ERROR,
    ErrorKind.MODEL_BAD_RESPONSE})
#: the kinds whose answer may say when to come back (``Retry-After``): 429s, and many 503s.
RETRY_AFTER_KINDS: frozenset[ErrorKind] = frozenset({ErrorKind.MODEL_RATE_LIMIT, ErrorKind.MODEL_SERVER_ERROR})


def model_error_kind(status: int) -> ErrorKind:
    """The ``ModelError`` kind of a model endpoint's non-success HTTP status (below 400: an unusable answer)."""
    if status == 429:
        return ErrorKind.MODEL_RATE_LIMIT
    if status >= 500:
        return ErrorKind.MODEL_SERVER_ERROR
    if status in (401, 403):
        return ErrorKind.MODEL_AUTH
    if status >= 400:
        return ErrorKind.MODEL_BAD_REQUEST
    return ErrorKind.MODEL_BAD_RESPONSE


__all__ = ["RETRY_AFTER_KINDS", "TRANSIENT_MODEL_KINDS", "model_error_kind"]
