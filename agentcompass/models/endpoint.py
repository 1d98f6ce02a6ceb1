"""A second model endpoint a benchmark talks to itself: an LLM judge, a user simulator.

``ModelEndpoint`` is the param shape (``judge_model``, ``user_model``): the same fields as the model under test.
``open_endpoint`` makes its client: the scripted model in-process, or an HTTP client of its protocol wrapped in
a ``RetryingModelClient`` with its own adaptive limiter, so its calls are retried and rate-limited like the
model under test's. Its ``api_key`` is a secret: a benchmark returns it from ``Benchmark.secrets()``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..interfaces import ModelClient
from ..specs import ApiProtocol, ModelSpec
from .adaptive import AdaptiveLimiter
from .factory import create_model_client, is_scripted
from .retry import RetryingModelClient


class ModelEndpoint(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, frozen=True):
    """A model a benchmark calls itself. ``id`` ``scripted`` without ``base_url``: the built-in scripted model
    (its ``params`` are the script). ``max_concurrency``: calls in flight at most (adaptive below it)."""

    id: str
    base_url: str | None = None
    api_key: str | None = None
    api_protocol: ApiProtocol = "openai-chat"
    params: dict[str, Any] = {}
    max_concurrency: int = 16
    timeout_s: float = 300.0

    def secrets(self) -> tuple[str, ...]:
        """The strings to mask everywhere (the key)."""
        return (self.api_key,) if self.api_key else ()


def open_endpoint(endpoint: ModelEndpoint) -> ModelClient:
    """The client for ``endpoint``; ``await client.aclose()`` when done."""
    spec = ModelSpec(id=endpoint.id, base_url=endpoint.base_url, api_key=endpoint.api_key,
                     api_protocol=endpoint.api_protocol, params=dict(endpoint.params))
    client = create_model_client(spec, max_connections=max(endpoint.max_concurrency, 1), timeout=endpoint.timeout_s)
    if not is_scripted(spec) and isinstance(client, RetryingModelClient):
        client.limiter = AdaptiveLimiter(endpoint.base_url or endpoint.id, max(endpoint.max_concurrency, 1))
    return client


__all__ = ["ModelEndpoint", "open_endpoint"]
