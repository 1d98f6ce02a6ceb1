"""A second model endpoint a benchmark talks to itself: an LLM judge, a user simulator.

``ModelEndpoint`` is the param shape (``judge_model``, ``user_model``): the same fields as the model under test.
``open_endpoint`` makes its client: the scripted model in-process, or an HTTP client of its protocol wrapped in
a ``RetryingModelClient`` with its own adaptive limiter, so its calls are retried and rate-limited like the
model under test's. Its key is a secret: a benchmark returns it from ``Benchmark.secrets()``. ``api_key_env`` names
an environment variable holding the key instead (so it never sits on a command line or in a request file).
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import msgspec

from .._errors import ConfigError
from .._validate import Count, Seconds
from ..interfaces import ModelClient
from ..specs import DEFAULT_API_PROTOCOL, ApiProtocol, ModelSpec
from .adaptive import AdaptiveLimiter
from .factory import create_model_client, is_scripted
from .retry import RetryingModelClient


class ModelEndpoint(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, frozen=True):
    """A model a benchmark calls itself. ``id`` ``scripted`` without ``base_url``: the built-in scripted model
    (its ``params`` are the script). ``max_concurrency``: calls in flight at most (adaptive below it).
    ``api_key`` or ``api_key_env`` (the name of an environment variable holding it), not both."""

    id: Annotated[str, msgspec.Meta(min_length=1)]
    base_url: Annotated[str, msgspec.Meta(pattern=r"^https?://\S+$")] | None = None
    api_key: str | None = None
    api_key_env: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    api_protocol: ApiProtocol = DEFAULT_API_PROTOCOL
    params: dict[str, Any] = {}
    max_concurrency: Count = 16
    timeout_s: Seconds = 300.0

    def key(self, field: str = "api_key_env") -> str | None:
        """The key: ``api_key``, else the value of ``api_key_env`` (a ConfigError naming ``field`` when that
        variable is unset or both are given)."""
        return key_of(self.api_key, self.api_key_env, field)

    def secrets(self) -> tuple[str, ...]:
        """The strings to mask everywhere (the key)."""
        key = self.key()
        return (key,) if key else ()


def key_of(api_key: str | None, api_key_env: str | None, field: str) -> str | None:
    """``api_key``, else the environment variable ``api_key_env`` (see ``ModelEndpoint.key``)."""
    if api_key_env is None:
        return api_key
    if api_key is not None:
        raise ConfigError(f"give api_key or api_key_env, not both ({field})", field=field)
    value = os.environ.get(api_key_env)
    if not value:
        raise ConfigError(f"the environment variable {api_key_env} ({field}) is not set", field=field)
    return value


def open_endpoint(endpoint: ModelEndpoint) -> ModelClient:
    """The client for ``endpoint``; ``await client.aclose()`` when done."""
    spec = ModelSpec(id=endpoint.id, base_url=endpoint.base_url, api_key=endpoint.key(),
                     api_protocol=endpoint.api_protocol, params=dict(endpoint.params))
    client = create_model_client(spec, max_connections=max(endpoint.max_concurrency, 1), timeout=endpoint.timeout_s)
    if not is_scripted(spec) and isinstance(client, RetryingModelClient):
        client.limiter = AdaptiveLimiter(endpoint.base_url or endpoint.id, max(endpoint.max_concurrency, 1))
    return client


__all__ = ["ModelEndpoint", "key_of", "open_endpoint"]
