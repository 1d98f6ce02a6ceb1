"""The scripted server's fault plan over real HTTP, and how the chat client classifies each fault."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import httpx
import pytest

from agentcompass._errors import ConfigError, ModelError
from agentcompass.models.clients.http import HttpModelClient
from agentcompass.models.clients.openai_chat import OpenAIChatClient
from agentcompass.models.scripted.server import FaultPlan, ScriptedServer
from tests.conftest import REPO, start_server_process
from tests.fixtures_scripted import running_scripted_server

pytestmark = pytest.mark.timeout(30)

ECHO = {"echo": True, "bundled": False}
ASK = [{"role": "user", "content": "ping"}]


async def _warm(srv: ScriptedServer, client: HttpModelClient) -> None:
    """One answered call first, so the client's first connection (and what it imports lazily) is not paid inside
    the deadline under test: on a cold, loaded machine that alone outlasted it."""
    plan, srv.fault_plan = srv.fault_plan, None
    assert (await client.complete(ASK, timeout=30)).content == "ping"  # its own wide deadline
    srv.fault_plan = plan


@pytest.mark.parametrize(("fault", "kind", "status"), [
    ("429", "model_rate_limit", 429),
    ("500", "model_server_error", 500),
    ("503", "model_server_error", 503),
    ("400", "model_bad_request", 400),
    ("garbage", "model_bad_response", 200),
    ("close", "model_connection_error", None),
    ("hang", "model_connection_error", None),
    ("ping", "model_connection_error", None),
    ("trickle", "model_connection_error", None),
])
async def test_each_fault_kind_maps_to_its_model_error_kind(fault: str, kind: str, status: int | None) -> None:
    async with running_scripted_server(ECHO, faults={fault: 1.0}) as srv:
        assert srv.base_url
        # the answers that must beat the deadline come at once: 2 s is wide for them on a loaded machine
        async with OpenAIChatClient("scripted", srv.base_url, params={"timeout": 2.0}) as client:
            await _warm(srv, client)
            start = time.monotonic()
            with pytest.raises(ModelError) as info:
                await client.complete(ASK)
            elapsed = time.monotonic() - start
    assert (info.value.kind, info.value.status) == (kind, status)
    assert srv.faults_injected == {fault: 1}
    assert srv.completions_served == 1  # the warm-up
    assert elapsed < 60  # hang guard: a hang is bounded by the client's read timeout


@pytest.mark.parametrize("fault", ["ping", "trickle"])
@pytest.mark.parametrize("stream", [False, True])
async def test_keepalive_and_trickle_faults_time_out_on_the_overall_deadline_not_a_read_timeout(
        fault: str, stream: bool) -> None:
    # bytes arrive every 0.05 s, so httpx's per-read timeout of 2 s never fires: only the deadline can. The same
    # 2 s bounds the answer's head, which comes at once: wide for that on a loaded machine
    async with running_scripted_server(ECHO, faults={fault: 1.0}, fault_interval_s=0.05) as srv:
        assert srv.base_url
        async with OpenAIChatClient("scripted", srv.base_url, params={"timeout": 2.0}) as client:
            await _warm(srv, client)
            start = time.monotonic()
            with pytest.raises(ModelError) as info:
                await client.complete(ASK, stream=stream)
            elapsed = time.monotonic() - start
        for _ in range(3000):  # the server notices the client left and ends the handler (bounded: 30 s)
            if not srv.open_connections:
                break
            await asyncio.sleep(0.01)
        assert srv.open_connections == 0
    assert info.value.kind == "model_connection_error"
    expected = "its stream made no progress for 2s" if stream else "no response within 2s"
    assert expected in str(info.value)
    assert srv.faults_injected == {fault: 1} and srv.completions_served == 1  # the warm-up
    assert 1.95 <= elapsed < 60  # the bytes keep coming: without the deadline it would never end


async def test_a_trickled_answer_arrives_whole_when_the_client_waits_long_enough() -> None:
    async with running_scripted_server(ECHO, faults={"trickle": 1.0}, fault_interval_s=0.001) as srv:
        assert srv.base_url
        async with OpenAIChatClient("scripted", srv.base_url, params={"timeout": 20}) as client:
            r = await client.complete(ASK)
            for _ in range(3000):  # the handler counts the answer once its last byte is out (bounded: 30 s)
                if srv.completions_served:
                    break
                await asyncio.sleep(0.01)
    assert r.content == "ping"
    assert srv.faults_injected == {"trickle": 1} and srv.completions_served == 1


async def test_an_injected_429_carries_retry_after_and_an_openai_error_body() -> None:
    async with running_scripted_server(ECHO, faults={"429": 1.0}, retry_after=0.25) as srv, \
            httpx.AsyncClient(base_url=srv.base_url or "") as http:
        r = await http.post("/chat/completions", json={"model": "scripted", "messages": ASK})
    async with running_scripted_server(ECHO, faults={"500": 1.0}, retry_after=0.25) as srv, \
            httpx.AsyncClient(base_url=srv.base_url or "") as http:
        r500 = await http.post("/chat/completions", json={"model": "scripted", "messages": ASK})
    assert r.status_code == 429 and r.headers["retry-after"] == "0.25"
    assert r.json()["error"]["type"] == "rate_limit_exceeded"
    assert r500.status_code == 500 and "retry-after" not in r500.headers
    assert r500.json()["error"]["type"] == "server_error"


async def test_a_keep_alive_connection_serves_the_next_request_after_garbage_and_errors() -> None:
    async with running_scripted_server(ECHO, faults={"garbage": 0.5, "500": 0.3}, fault_seed=3) as srv, \
            httpx.AsyncClient(base_url=srv.base_url or "") as http:
        codes = []
        for _ in range(20):
            r = await http.post("/chat/completions", json={"model": "scripted", "messages": ASK})
            codes.append(r.status_code)
    assert srv.connections_accepted == 1
    assert codes.count(500) == srv.faults_injected["500"] > 0
    assert srv.faults_injected["garbage"] > 0
    assert srv.completions_served == 20 - sum(srv.faults_injected.values())


async def test_the_same_seed_injects_the_same_faults_in_the_same_order() -> None:
    async def sequence(seed: int) -> list[int]:
        async with running_scripted_server(ECHO, faults={"429": 0.3, "500": 0.2}, fault_seed=seed) as srv, \
                httpx.AsyncClient(base_url=srv.base_url or "") as http:
            return [(await http.post("/chat/completions", json={"messages": ASK})).status_code
                    for _ in range(30)]

    first, again, other = await sequence(1234), await sequence(1234), await sequence(99)
    assert first == again
    assert first != other
    assert {429, 500, 200} <= set(first)


def test_a_fault_plan_injects_close_to_its_probabilities() -> None:
    plan = FaultPlan({"429": 0.30, 500: 0.05, "close": 0.1}, seed=1234)
    draws = [plan.draw() for _ in range(10_000)]
    assert plan.injected == {k: draws.count(k) for k in ("429", "500", "close")}
    assert 2800 < plan.injected["429"] < 3200
    assert 400 < plan.injected["500"] < 600
    assert 850 < plan.injected["close"] < 1150
    assert draws.count(None) == 10_000 - sum(plan.injected.values())


@pytest.mark.parametrize(("faults", "field"), [
    ({"418x": 0.1}, "faults"),
    ({"200": 0.1}, "faults"),
    ({"timeout": 0.1}, "faults"),
    ({"429": 1.5}, "faults.429"),
    ({"hang": -0.1}, "faults.hang"),
    ({"garbage": "0.1"}, "faults.garbage"),
    ({"429": 0.7, "500": 0.5}, "faults"),
])
def test_a_bad_fault_plan_raises_config_error_naming_the_field(faults: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        ScriptedServer(ECHO, faults=faults)  # type: ignore[arg-type]
    assert info.value.field == field
    assert "garbage" in str(info.value) or "between 0 and 1" in str(info.value) or "at most 1" in str(info.value)


@pytest.mark.parametrize(("options", "field"), [
    ({"fault_interval_s": 0}, "fault_interval_s"),
    ({"fault_interval_s": -1}, "fault_interval_s"),
    ({"fault_interval_s": "0.1"}, "fault_interval_s"),
    ({"stream_interval_s": -0.5}, "stream_interval_s"),
    ({"stream_interval_s": True}, "stream_interval_s"),
])
def test_a_bad_fault_or_stream_interval_raises_config_error_naming_the_field(options: dict[str, object],
                                                                              field: str) -> None:
    with pytest.raises(ConfigError) as info:
        ScriptedServer(ECHO, **options)  # type: ignore[arg-type]
    assert info.value.field == field and "seconds" in str(info.value)


async def test_a_hung_handler_ends_when_the_server_stops() -> None:
    srv = ScriptedServer(ECHO, faults={"hang": 1.0})
    base_url = await srv.start()
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        pending = asyncio.create_task(http.post("/chat/completions", json={"messages": ASK}))
        for _ in range(3000):  # bounded: 30 s
            if srv.faults_injected.get("hang"):
                break
            await asyncio.sleep(0.01)
        assert srv.open_connections == 1
        await srv.stop()
        with pytest.raises(httpx.RemoteProtocolError):
            await asyncio.wait_for(pending, 30)
    assert srv.open_connections == 0  # the hung handler was cancelled, not waited out


async def test_a_hung_handler_ends_when_the_client_gives_up() -> None:
    async with running_scripted_server(ECHO, faults={"hang": 1.0}) as srv:
        # only the read is short: a connect or write slowed by a loaded machine must not end it first
        async with httpx.AsyncClient(base_url=srv.base_url or "", timeout=httpx.Timeout(30, read=0.2)) as http:
            with pytest.raises(httpx.ReadTimeout):
                await http.post("/chat/completions", json={"messages": ASK})
        for _ in range(3000):  # the server notices the closed connection and drops the handler (bounded: 30 s)
            if not srv.open_connections:
                break
            await asyncio.sleep(0.01)
        assert srv.open_connections == 0


def test_serve_scripted_cli_injects_faults_with_retry_after() -> None:
    proc, url = start_server_process("--fault", "429=0.5", "--fault", "500=0.5", "--fault-seed", "7",
                                     "--retry-after", "0.25")
    try:
        with httpx.Client(base_url=url, timeout=10) as http:
            replies = [http.post("/chat/completions", json={"messages": ASK}) for _ in range(12)]
    finally:
        proc.terminate()
        proc.wait(10)
    statuses = [r.status_code for r in replies]
    assert set(statuses) == {429, 500}
    assert all(r.headers.get("retry-after") == "0.25" for r in replies if r.status_code == 429)


@pytest.mark.parametrize("arg", ["429", "429=lots", "teapot=0.1", "429=2"])
def test_serve_scripted_cli_rejects_a_bad_fault(arg: str) -> None:
    res = subprocess.run([sys.executable, "-m", "agentcompass.cli", "serve-scripted", "--port", "0",
                          "--fault", arg], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert res.returncode == 2
    assert "fault" in res.stderr.lower()
