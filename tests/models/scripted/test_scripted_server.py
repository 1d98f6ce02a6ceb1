"""The scripted model as a real OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest

from agentcompass.models.clients.openai_chat import OpenAIChatClient
from agentcompass.models.scripted.server import ScriptedServer
from tests.fixtures_scripted import running_scripted_server, start_scripted_server

pytestmark = pytest.mark.timeout(60)

SCRIPT = {"script": [{"match": "capital of France", "turns": ["Paris, which is a lovely city to visit."]}],
          "bundled": False}
ASK = {"model": "scripted", "messages": [{"role": "user", "content": "What is the capital of France?"}]}
REPO = Path(__file__).resolve().parents[3]


async def test_chat_completion_has_the_openai_response_shape() -> None:
    async with start_scripted_server(SCRIPT) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        r = await http.post("/chat/completions", json=ASK)
    assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
    assert r.status_code == 200
    body = r.json()
    assert set(body) >= {"id", "object", "created", "model", "choices", "usage"}
    assert body["object"] == "chat.completion" and body["model"] == "scripted"
    assert isinstance(body["created"], int)
    assert body["choices"] == [{"index": 0, "message": {"role": "assistant",
                                                        "content": "Paris, which is a lovely city to visit."},
                                "logprobs": None, "finish_reason": "stop"}]
    u = body["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] and u["completion_tokens"] >= 1


async def test_models_endpoint_lists_the_model() -> None:
    async with start_scripted_server(SCRIPT) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        r = await http.get("/models")
    assert r.status_code == 200
    assert r.json()["object"] == "list"
    assert [m["id"] for m in r.json()["data"]] == ["scripted"]


async def test_streaming_sends_sse_chunks_ending_with_done() -> None:
    body = {**ASK, "stream": True, "stream_options": {"include_usage": True}}
    async with running_scripted_server(SCRIPT) as srv, httpx.AsyncClient(base_url=srv.base_url or "") as http:
        async with http.stream("POST", "/chat/completions", json=body) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = [line async for line in r.aiter_lines() if line]
        # the connection survives the stream (chunked framing, keep-alive)
        again = await http.post("/chat/completions", json=ASK)
        assert again.status_code == 200
        assert srv.connections_accepted == 1
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "Paris, which is a lovely city to visit."
    assert len([c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]) > 1
    finals = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finals[-1] == "stop" and set(finals[:-1]) == {None}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


async def test_malformed_json_gets_an_openai_shaped_400_and_the_connection_stays_usable() -> None:
    async with running_scripted_server(SCRIPT) as srv, httpx.AsyncClient(base_url=srv.base_url or "") as http:
        bad = await http.post("/chat/completions", content=b"{not json",
                              headers={"content-type": "application/json"})
        no_messages = await http.post("/chat/completions", json={"model": "scripted"})
        good = await http.post("/chat/completions", json=ASK)
        assert srv.connections_accepted == 1
    assert bad.status_code == 400
    assert set(bad.json()["error"]) == {"message", "type", "param", "code"}
    assert bad.json()["error"]["type"] == "invalid_request_error"
    assert no_messages.status_code == 400 and no_messages.json()["error"]["param"] == "messages"
    assert good.status_code == 200


async def test_unknown_path_is_404_and_wrong_method_is_405() -> None:
    async with start_scripted_server(SCRIPT) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        missing = await http.get("/nope")
        wrong = await http.get("/chat/completions")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_url"
    assert wrong.status_code == 405


async def test_request_body_over_the_limit_is_refused_with_413() -> None:
    big = {**ASK, "padding": "x" * 5000}
    async with start_scripted_server(SCRIPT, max_body_bytes=1000) as base_url, \
            httpx.AsyncClient(base_url=base_url) as http:
        r = await http.post("/chat/completions", json=big)
        ok = await http.post("/chat/completions", json=ASK)
    assert r.status_code == 413 and "error" in r.json()
    assert ok.status_code == 200


async def test_oversized_headers_are_refused_with_431() -> None:
    async with start_scripted_server(SCRIPT) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        r = await http.get("/models", headers={"x-big": "y" * 70_000})
    assert r.status_code == 431


async def test_wrong_or_missing_api_key_gets_401_without_echoing_it() -> None:
    async with start_scripted_server(SCRIPT, require_api_key="sk-right") as base_url, \
            httpx.AsyncClient(base_url=base_url) as http:
        wrong = await http.post("/chat/completions", json=ASK, headers={"authorization": "Bearer sk-wrong-123"})
        missing = await http.get("/models")
        right = await http.post("/chat/completions", json=ASK, headers={"authorization": "Bearer sk-right"})
    assert wrong.status_code == 401 and missing.status_code == 401
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    assert "sk-wrong-123" not in wrong.text
    assert right.status_code == 200


async def test_server_records_recent_request_bodies_in_a_bounded_list() -> None:
    async with running_scripted_server(SCRIPT, record_requests=3) as srv, \
            httpx.AsyncClient(base_url=srv.base_url or "") as http:
        for i in range(5):
            await http.post("/chat/completions", json={**ASK, "seed": i})
    assert [b["seed"] for b in srv.recent_requests] == [2, 3, 4]
    assert srv.requests_served == 5 and srv.completions_served == 5


async def test_fail_every_injects_errors_with_retry_after() -> None:
    async with running_scripted_server(SCRIPT, fail_status=429, fail_every=2, retry_after=3) as srv, \
            httpx.AsyncClient(base_url=srv.base_url or "") as http:
        statuses = [(await http.post("/chat/completions", json=ASK)) for _ in range(4)]
    assert [r.status_code for r in statuses] == [200, 429, 200, 429]
    assert statuses[1].headers["retry-after"] == "3"
    assert srv.completions_served == 2


async def test_hundreds_of_concurrent_keep_alive_connections_are_served_concurrently() -> None:
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    # every answer takes 5 s: all 300 connections are open before the first answer, however slowly they connect
    async with running_scripted_server(SCRIPT, latency_s=5.0) as srv:
        async with OpenAIChatClient("scripted", srv.base_url or "", max_connections=300) as client:
            loop = asyncio.get_running_loop()
            start = loop.time()
            rs = await asyncio.gather(*(client.complete(msgs) for _ in range(300)))
            elapsed = loop.time() - start
            open_after = len(srv._conns)
            again = await asyncio.gather(*(client.complete(msgs) for _ in range(20)))
    assert all(r.content == "Paris, which is a lovely city to visit." for r in rs + again)
    assert srv.peak_connections >= 250
    assert open_after >= 250  # kept alive after answering
    assert srv.connections_accepted <= 300  # ... and reused by the next requests
    assert elapsed < 300 * 5.0 / 2, f"300 requests took {elapsed:.1f}s: not concurrent"  # hang guard


async def test_stop_closes_idle_keep_alive_connections_and_is_idempotent() -> None:
    srv = ScriptedServer(SCRIPT)
    base_url = await srv.start()
    async with httpx.AsyncClient(base_url=base_url) as http:
        assert (await http.post("/chat/completions", json=ASK)).status_code == 200
        assert len(srv._conns) == 1
        await asyncio.wait_for(srv.stop(), 6)
        await srv.stop()
        assert not srv._conns
        with pytest.raises(httpx.TransportError):
            await http.post("/chat/completions", json=ASK)


def test_server_works_under_uvloop() -> None:
    uvloop = pytest.importorskip("uvloop")

    async def main() -> int:
        async with start_scripted_server(SCRIPT) as base_url, httpx.AsyncClient(base_url=base_url) as http:
            return (await http.post("/chat/completions", json=ASK)).status_code

    loop = uvloop.new_event_loop()
    try:
        assert loop.run_until_complete(main()) == 200
    finally:
        loop.close()


async def test_serve_scripted_main_prints_the_base_url_first_and_stops_on_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"match": "ping", "turns": ["pong"]}]))
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentcompass.models.scripted.server", "--port", "0",
        "--script-file", str(script), "--api-key", "k-1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        first = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode().strip()
        assert first.startswith("http://127.0.0.1:") and first.endswith("/v1")
        async with httpx.AsyncClient(base_url=first, timeout=10) as http:
            r = await http.post("/chat/completions", headers={"authorization": "Bearer k-1"},
                                json={"model": "m", "messages": [{"role": "user", "content": "ping"}]})
        assert r.json()["choices"][0]["message"]["content"] == "pong"
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
