"""A gateway in front of a real (scripted or raw) upstream, for the gateway and envelope tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from agentcompass.models.adaptive import AdaptiveLimiter
from agentcompass.models.gateway.envelope import AttemptKey, EnvelopeSigner
from agentcompass.models.gateway.server import Gateway, Upstream
from agentcompass.models.retry import RetryPolicy

KEY = AttemptKey("req", "task-1", 1, 1)
FAST_RETRIES = RetryPolicy(retries=3, backoff=0.01, max_wait=0.05)


@asynccontextmanager
async def running_gateway(base_url: str, *, api_key: str | None = None, protocol: str = "openai-chat",
                          model_id: str = "scripted", max_limit: int = 8, policy: RetryPolicy = FAST_RETRIES,
                          timeout_s: float = 10.0, signer: EnvelopeSigner | None = None,
                          requests: tuple[str, ...] = ("req",), **upstream: Any) -> AsyncIterator[Gateway]:
    """A started gateway routing ``requests`` to ``base_url`` (``upstream``: more ``Upstream`` fields); closed on
    exit."""
    gw = Gateway(signer or EnvelopeSigner(), revoke_grace_s=0.3)
    await gw.start()
    try:
        for name in requests:
            gw.add_upstream(Upstream(request=name, model_id=model_id, base_url=base_url, api_key=api_key,
                                     api_protocol=protocol, limiter=AdaptiveLimiter("test", max_limit),
                                     policy=policy, timeout_s=timeout_s, connect_timeout_s=2.0, **upstream))
        yield gw
    finally:
        await gw.aclose()
