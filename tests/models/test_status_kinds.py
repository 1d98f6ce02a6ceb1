"""An endpoint's HTTP status gets the same kind, and the same retry decision, in the client and the gateway."""

from __future__ import annotations

import httpx
import pytest

from agentcompass._errors import ModelError
from agentcompass.common.http_status import TRANSIENT_MODEL_KINDS, model_error_kind
from agentcompass.models.clients.openai_chat import OpenAIChatClient
from agentcompass.models.retry import RetryingModelClient, RetryPolicy
from tests.fixtures_scripted import running_scripted_server

from .gateway_helpers import FAST_RETRIES, KEY, running_gateway

SCRIPT = {"script": [{"match": "hi", "turns": ["hello"]}]}
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("status", [400, 401, 413, 429, 503, 529])
async def test_the_client_and_the_gateway_classify_and_retry_a_status_alike(status: int) -> None:
    kind = model_error_kind(status)
    transient = kind in TRANSIENT_MODEL_KINDS
    async with running_scripted_server(SCRIPT, fail_status=status) as server:
        retried: list[str] = []
        client = RetryingModelClient(OpenAIChatClient("scripted", server.base_url or ""),
                                     RetryPolicy(retries=2, backoff=0.0, max_wait=0.0),
                                     on_retry=lambda k, _w, _n: retried.append(k))
        with pytest.raises(ModelError) as got:
            await client.complete(MESSAGES)
        await client.aclose()
        assert got.value.kind is kind and got.value.status == status
        assert retried == ([kind] * 2 if transient else [])

        async with running_gateway(server.base_url or "") as gw, httpx.AsyncClient(timeout=10) as http:
            grant = gw.open_grant(KEY)
            resp = await http.post(f"{gw.url_for(gw.base_url or '', grant)}/chat/completions",
                                   json={"messages": MESSAGES})
            used = await gw.close_grant(KEY)
        assert resp.status_code == status
        assert used.retries == (FAST_RETRIES.retries if transient else 0)
