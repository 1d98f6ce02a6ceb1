"""Model clients on httpx (OpenAI chat, OpenAI Responses, Anthropic Messages) and the built-in scripted model.

Imports are lazy so ``import agentcompass.models`` stays cheap (httpx loads only for real endpoints).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .clients.anthropic_messages import AnthropicMessagesClient
    from .clients.openai_chat import OpenAIChatClient
    from .clients.openai_responses import OpenAIResponsesClient
    from .factory import create_model_client
    from .scripted.model import ScriptedClient, ScriptedPolicy
    from .scripted.server import ScriptedServer, serve_scripted_main

_EXPORTS = {
    "create_model_client": ".factory",
    "AnthropicMessagesClient": ".clients.anthropic_messages",
    "OpenAIChatClient": ".clients.openai_chat",
    "OpenAIResponsesClient": ".clients.openai_responses",
    "ScriptedClient": ".scripted.model",
    "ScriptedPolicy": ".scripted.model",
    "ScriptedServer": ".scripted.server",
    "serve_scripted_main": ".scripted.server",
}

__all__ = ["AnthropicMessagesClient", "OpenAIChatClient", "OpenAIResponsesClient", "ScriptedClient", "ScriptedPolicy",
           "ScriptedServer", "create_model_client", "serve_scripted_main"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
