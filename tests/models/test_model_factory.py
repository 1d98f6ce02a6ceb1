"""create_model_client: which client a ModelSpec gets."""

from __future__ import annotations

import pytest

from agentcompass._errors import ConfigError
from agentcompass.models import create_model_client
from agentcompass.models.clients.anthropic_messages import AnthropicMessagesClient
from agentcompass.models.clients.openai_chat import OpenAIChatClient
from agentcompass.models.clients.openai_responses import OpenAIResponsesClient
from agentcompass.models.factory import SUPPORTED_PROTOCOLS
from agentcompass.models.retry import RetryingModelClient
from agentcompass.models.scripted.model import ScriptedClient
from agentcompass.specs import ModelSpec
from tests.fixtures_scripted import running_scripted_server

SCRIPT = [{"match": "hello", "turns": ["hi there"]}]


@pytest.mark.parametrize("model_id", ["scripted", "scripted-shell"])
async def test_scripted_without_base_url_is_the_in_process_client(model_id: str) -> None:
    client = create_model_client(ModelSpec(id=model_id, params={"script": SCRIPT}))
    assert isinstance(client, ScriptedClient) and client.model_id == model_id
    r = await client.complete([{"role": "user", "content": "hello"}])
    assert r.content == "hi there"
    await client.aclose()


async def test_scripted_with_base_url_talks_http_to_the_scripted_server() -> None:
    async with running_scripted_server({"script": SCRIPT}) as srv:
        client = create_model_client(ModelSpec(id="scripted", base_url=srv.base_url,
                                               params={"temperature": 0}), max_connections=7, timeout=12)
        try:
            assert isinstance(client, RetryingModelClient) and isinstance(client.inner, OpenAIChatClient)
            assert client.inner.max_connections == 7 and client.inner.timeout.read == 12
            r = await client.complete([{"role": "user", "content": "hello"}])
        finally:
            await client.aclose()
    assert r.content == "hi there"
    assert srv.recent_requests[-1]["temperature"] == 0


def test_a_real_model_without_base_url_names_the_model_base_url_field() -> None:
    with pytest.raises(ConfigError, match="model_base_url") as info:
        create_model_client(ModelSpec(id="gpt-4o-mini"))
    assert info.value.field == "model_base_url"


@pytest.mark.parametrize(("protocol", "cls", "url"), [
    ("openai-chat", OpenAIChatClient, "http://127.0.0.1:1/v1/chat/completions"),
    ("openai-responses", OpenAIResponsesClient, "http://127.0.0.1:1/v1/responses"),
    ("anthropic-messages", AnthropicMessagesClient, "http://127.0.0.1:1/v1/messages")])
async def test_each_api_protocol_gets_its_client_wrapped_for_retries(protocol: str, cls: type, url: str) -> None:
    spec = ModelSpec(id="m", base_url="http://127.0.0.1:1/v1", api_key="k", api_protocol=protocol,  # type: ignore[arg-type]
                     params={"retries": 1, "temperature": 0})
    client = create_model_client(spec, max_connections=5, timeout=7)
    try:
        assert isinstance(client, RetryingModelClient) and type(client.inner) is cls
        assert client.policy.retries == 1 and client.inner.params == {"temperature": 0}
        assert client.inner.url == url and client.inner.max_connections == 5 and client.inner.timeout.read == 7
    finally:
        await client.aclose()
    assert SUPPORTED_PROTOCOLS == ("openai-chat", "openai-responses", "anthropic-messages")


def test_an_unknown_protocol_names_the_field_and_the_allowed_values() -> None:
    spec = ModelSpec(id="m", base_url="http://127.0.0.1:1/v1")
    spec.api_protocol = "grpc"  # type: ignore[assignment]  # decoding refuses it; the factory checks anyway
    with pytest.raises(ConfigError) as info:
        create_model_client(spec)
    assert info.value.field == "model_api_protocol" and "anthropic-messages" in str(info.value)


def test_model_params_override_the_factory_pool_size_and_timeout() -> None:
    spec = ModelSpec(id="m", base_url="http://127.0.0.1:1/v1",
                     params={"max_connections": 3, "timeout": 9, "temperature": 1})
    client = create_model_client(spec, max_connections=100, timeout=600)
    assert isinstance(client, RetryingModelClient) and isinstance(client.inner, OpenAIChatClient)
    assert client.inner.max_connections == 3 and client.inner.timeout.read == 9
    assert client.inner.params == {"temperature": 1}


def test_bad_scripted_params_raise_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        create_model_client(ModelSpec(id="scripted", params={"script": "not a list"}))
    assert info.value.field == "script"
