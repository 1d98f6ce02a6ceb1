"""An upstream's connections are spread over small httpx pools (httpcore scans every connection of a pool for each
request: one pool of 100 served ~370 calls/s at 100 at once, see benchmarks_perf/gateway.py)."""

from __future__ import annotations

import asyncio

import httpx

from agentcompass.models.clients.http import POOL_CONNECTIONS
from agentcompass.models.clients.openai_chat import OpenAIChatClient
from tests.fixtures_scripted import running_scripted_server

from ..gateway_helpers import KEY, running_gateway


async def test_tries_rotate_over_pools_of_a_few_connections_each() -> None:
    async with running_scripted_server() as srv, running_gateway(srv.base_url or "", max_limit=20) as gw:
        up = gw._upstreams[KEY.request]
        assert len(up.pools) == 3 and up.http is up.pools[0]  # 20 connections: pools of 8, 8 and 4
        assert all(p._transport._pool._max_keepalive_connections == POOL_CONNECTIONS  # type: ignore[attr-defined]
                   for p in up.pools[:2])
        answered: list[int] = []
        for i, pool in enumerate(up.pools):
            async def hook(resp: httpx.Response, i: int = i) -> None:
                answered.append(i)
            pool.event_hooks["response"].append(hook)
        grant = gw.open_grant(KEY)
        client = OpenAIChatClient("m", gw.url_for(gw.base_url or "", grant), api_key=grant.api_key)
        try:
            await asyncio.gather(*(client.complete([{"role": "user", "content": f"hi {n}"}]) for n in range(6)))
        finally:
            await client.aclose()
        assert sorted(answered) == [0, 0, 1, 1, 2, 2]  # each pool took its turn
    assert all(p.is_closed for p in up.pools)  # the gateway's close closed every pool
