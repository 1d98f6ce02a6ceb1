"""Build a ``ModelClient`` from a ``ModelSpec``: the model is a value in the request, not a component.

- ``id`` ``scripted`` (or ``scripted-...``) without ``base_url``: the in-process ``ScriptedClient``;
  its params configure the script (see ``agentcompass.models.scripted.model``). It never fails, so it is not
  wrapped for retries (the retry params are still validated, then dropped).
- otherwise ``base_url`` is required and ``api_protocol`` picks the httpx client: ``openai-chat``
  (``OpenAIChatClient``, ``<base_url>/chat/completions``), ``openai-responses`` (``OpenAIResponsesClient``,
  ``<base_url>/responses``) or ``anthropic-messages`` (``AnthropicMessagesClient``, ``<base_url>/v1/messages``
  or ``<base_url>/messages`` when ``base_url`` ends in ``/v1``). All take OpenAI chat messages and tools,
  stream with ``stream: true``, and answer the same normalised ``ModelResponse``. Params go into the
  request body (each client maps the names its API spells differently, e.g. ``max_tokens``) except the
  reserved keys (see ``agentcompass.models.clients.http.RESERVED_PARAMS``) and the retry keys ``retries``,
  ``retry_backoff``, ``retry_max_wait`` (see ``agentcompass.models.retry``). HTTP clients come wrapped in a
  ``RetryingModelClient``; the HTTP client itself is its ``inner``.
"""

from __future__ import annotations

import importlib
from typing import Any

from .._errors import ConfigError, ModelError
from ..common.error_kinds import ErrorKind
from ..interfaces import ModelClient, ModelResponse
from ..specs import DEFAULT_MAX_BACKOFF_S, ModelSpec
from .retry import OnRetry, RetryPolicy, split_retry_params

#: api_protocol -> (module, class) of its client.
_CLIENTS = {
    "openai-chat": (".clients.openai_chat", "OpenAIChatClient"),
    "openai-responses": (".clients.openai_responses", "OpenAIResponsesClient"),
    "anthropic-messages": (".clients.anthropic_messages", "AnthropicMessagesClient"),
}
SUPPORTED_PROTOCOLS = tuple(_CLIENTS)


def is_scripted(spec: ModelSpec) -> bool:
    """True when ``spec`` selects the built-in in-process scripted model."""
    return spec.id.startswith("scripted") and not spec.base_url


class NoModelClient:
    """The client of a request whose harness calls no model (``Harness.calls_model`` False) and whose model has
    no endpoint: the model id only labels the run (e.g. a predictions file's ``model_name_or_path``)."""

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id

    async def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                       **params: Any) -> ModelResponse:
        raise ModelError(f"model {self.model_id!r} has no endpoint: this request's harness calls no model",
                         kind=ErrorKind.MODEL_BAD_REQUEST)

    async def aclose(self) -> None:
        return None


def create_model_client(spec: ModelSpec, *, max_connections: int = 100, timeout: float = 600.0,
                        on_retry: OnRetry | None = None, max_backoff_s: float = DEFAULT_MAX_BACKOFF_S,
                        calls_model: bool = True) -> ModelClient:
    """The client for ``spec``; size ``max_connections`` to the request's concurrency; ``max_backoff_s`` caps
    each retry wait (the request's ``max_backoff_s``); ``calls_model`` False (the harness's): a model without
    ``base_url`` gets a ``NoModelClient``.

    ``on_retry(kind, backoff_s, try_no)`` is called before each retry of a failed model call.
    """
    if not calls_model and not spec.base_url and not is_scripted(spec):
        return NoModelClient(spec.id)
    policy, params = split_retry_params(spec.params, RetryPolicy(max_backoff=max_backoff_s), model_id=spec.id)
    if is_scripted(spec):
        from .scripted.model import ScriptedClient

        return ScriptedClient(params, model_id=spec.id)
    if not spec.base_url:
        raise ConfigError(
            f"Model {spec.id!r} needs `model_base_url` (e.g. http://127.0.0.1:8000/v1); only the built-in "
            "`scripted` model runs without one.", field="model_base_url")
    target = _CLIENTS.get(spec.api_protocol)
    if target is None:
        raise ConfigError(f"Unknown model_api_protocol {spec.api_protocol!r}; allowed: "
                          f"{', '.join(SUPPORTED_PROTOCOLS)}.", field="model_api_protocol")
    from .retry import RetryingModelClient

    cls = getattr(importlib.import_module(target[0], __package__), target[1])
    inner = cls(spec.id, spec.base_url, spec.api_key, params, max_connections=max_connections, timeout=timeout)
    return RetryingModelClient(inner, policy, on_retry=on_retry)
