"""A silent endpoint is probed: a dead one (no answer to the call, none to the probe) fails a call after two tries,
in minutes by default instead of 7 x 600 s; a slow but live one (the probe is answered) is waited for."""

from __future__ import annotations

import httpx
import pytest

from agentcompass._errors import ConfigError, ModelError
from agentcompass.models.clients.liveness import DEFAULT_PROBE_AFTER_S, DEFAULT_PROBE_TIMEOUT_S
from agentcompass.models.clients.openai_chat import OpenAIChatClient
from agentcompass.models.retry import RetryingModelClient, RetryPolicy
from tests.fixtures_scripted import running_scripted_server

from .._raw_http import raw_server
from ..gateway_helpers import KEY, running_gateway

FAST = {"probe_after": 0.3, "probe_timeout": 0.3}
MSGS = [{"role": "user", "content": "capital of France"}]
SCRIPT = [{"match": "capital of France", "turns": ["Paris."]}]


async def test_a_dead_endpoint_fails_a_call_after_one_retry_naming_the_probe() -> None:
    retries: list[tuple[str, int]] = []
    async with raw_server(None) as dead:  # accepts connections, reads the request, never answers anything
        inner = OpenAIChatClient("m", dead.base_url, params={**FAST, "timeout": 600})
        client = RetryingModelClient(inner, RetryPolicy(backoff=0.01, max_wait=0.02),
                                     on_retry=lambda kind, _wait, n: retries.append((kind, n)))
        try:
            with pytest.raises(ModelError) as info:
                await client.complete(MSGS)
        finally:
            await client.aclose()
    assert info.value.kind == "model_connection_error" and info.value.unresponsive
    assert "nothing is answering" in str(info.value) and "probe_after" in str(info.value)
    assert retries == [("model_connection_error", 1)]  # one retry, not six: the policy's unresponsive_retries
    methods = [head.split(" ", 1)[0] for head in dead.heads]
    assert methods.count("POST") == 2 and methods.count("GET") >= 1, methods


async def test_a_slow_endpoint_that_answers_the_probe_is_waited_for() -> None:
    async with running_scripted_server({"script": SCRIPT}, latency_s=1.2) as server:
        client = OpenAIChatClient("m", server.base_url or "", params=FAST)
        try:
            resp = await client.complete(MSGS)
            probes = client.liveness.probes
        finally:
            await client.aclose()
    assert resp.content == "Paris."
    assert probes >= 1  # it was probed (every 0.3 s, one verdict shared for 0.15 s) and found alive


async def test_probing_is_off_when_probe_after_is_not_below_the_timeout() -> None:
    async with raw_server(None) as dead:
        client = OpenAIChatClient("m", dead.base_url, params={"timeout": 0.5, "probe_after": 5})
        try:
            with pytest.raises(ModelError) as info:
                await client.complete(MSGS)
            probes = client.liveness.probes
        finally:
            await client.aclose()
    assert not info.value.unresponsive and "no response within 0.5s" in str(info.value)
    assert probes == 0 and [h.split(" ", 1)[0] for h in dead.heads] == ["POST"]


def test_the_defaults_fail_a_dead_endpoint_within_minutes() -> None:
    policy = RetryPolicy()
    tries = 1 + policy.unresponsive_retries
    worst = tries * (DEFAULT_PROBE_AFTER_S + DEFAULT_PROBE_TIMEOUT_S) + policy.unresponsive_retries * policy.max_wait
    assert worst <= 5 * 60, worst  # it was 7 tries x 600 s (70 min) before the first error


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "soon"])
def test_bad_probe_params_name_the_field(bad: object) -> None:
    for key in ("probe_after", "probe_timeout"):
        with pytest.raises(ConfigError) as info:
            OpenAIChatClient("m", "http://127.0.0.1:9/v1", params={key: bad})
        assert info.value.field == f"model_params.{key}" and key in str(info.value) and "> 0" in str(info.value)


async def test_through_the_gateway_a_dead_upstream_is_a_502_after_two_tries() -> None:
    async with raw_server(None) as dead, running_gateway(
            dead.base_url, timeout_s=600, policy=RetryPolicy(backoff=0.01, max_wait=0.02),
            probe_after_s=0.3, probe_timeout_s=0.3) as gw:
        grant = gw.open_grant(KEY)
        async with httpx.AsyncClient(timeout=60) as http:
            r = await http.post(f"{gw.url_for(gw.base_url or '', grant)}/chat/completions",
                                json={"messages": MSGS})
        used = await gw.close_grant(KEY)
    assert r.status_code == 502 and "nor a probe" in r.text, r.text
    assert used.failed == 1 and used.retries == 1
    methods = [head.split(" ", 1)[0] for head in dead.heads]
    assert methods.count("POST") == 2 and methods.count("GET") >= 1, methods

