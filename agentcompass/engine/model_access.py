"""How attempts reach their model: adaptive limits per endpoint, the gateway, grants per try, usage and cost.

``ModelServices`` (one per launch, owned by the Supervisor) holds one ``AdaptiveLimiter`` per endpoint
(shared by every request using it, by their in-process clients and by the gateway), the envelope signer
(its secret is redacted everywhere) and the gateway, started on first need.

``ModelAccess`` (one per request that uses the gateway) opens a grant per try: the environment variables an
agent uses (``OPENAI_BASE_URL``/``OPENAI_API_KEY``, ``ANTHROPIC_BASE_URL``/``ANTHROPIC_API_KEY``,
``AGENTCOMPASS_MODEL_BASE_URL``/``AGENTCOMPASS_MODEL_API_KEY``, ``AGENTCOMPASS_MODEL``,
``AGENTCOMPASS_MODEL_API_PROTOCOL``) pointing at the gateway, with a signed envelope (``wrap_api_key``) or a
route token as the key, never the real key. Closing the grant returns what the try used through the gateway.

When the gateway is used (``needs_gateway``): the request wraps its key; or its harness declares
``needs_model_endpoint = True`` (it hands a URL to an agent running on the host); or its environment is a
sandbox (a provider with ``ensure_model_route``, e.g. docker) whose agent phase has network. A trusted
local environment without ``wrap_api_key`` keeps calling the model in-process, as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from .._errors import ConfigError, EnvironmentError_
from .._validate import count
from ..models.adaptive import AdaptiveLimiter, LimiterRegistry
from ..models.gateway.envelope import AttemptKey, EnvelopeSigner
from ..models.gateway.ledger import CallBudget, GatewayUsage, Ledger
from ..models.pricing import PRICE_PARAM, PriceTable, parse_price_table
from ..records import ModelLimitChanged, ModelRetrying, ProgressEvent, Usage
from ..specs import MAX_CONCURRENCY, ModelSpec

if TYPE_CHECKING:
    from ..models.gateway.server import Gateway, Grant
    from .runtime import RequestRuntime

log = logging.getLogger("agentcompass.engine.model_access")

#: model params for the engine only, never sent upstream.
#: a model call with no answer for this long (a quarter of its ``timeout`` when that is shorter) shows in progress
MODEL_WAIT_REPORT_S = 30.0
#: the longest gap between two looks at the waiting calls
MODEL_WAIT_CHECK_S = 10.0
MAX_CONCURRENCY_PARAM = "max_concurrency"
ENGINE_MODEL_PARAMS = frozenset({PRICE_PARAM, MAX_CONCURRENCY_PARAM})
#: an envelope outlives its try's agent phase by this much at most (the gateway revokes it when the try ends).
ENVELOPE_SLACK_S = 300.0


@dataclass
class EngineModelParams:
    """The engine's own model params, split from those that go to the client."""

    price: PriceTable | None = None
    max_concurrency: int | None = None
    client_params: dict[str, Any] = field(default_factory=dict)


def split_engine_params(params: Mapping[str, Any]) -> EngineModelParams:
    """Take ``price_per_million`` and ``max_concurrency`` out of the model params (validated)."""
    out = EngineModelParams(client_params={k: v for k, v in params.items() if k not in ENGINE_MODEL_PARAMS})
    if PRICE_PARAM in params:
        out.price = parse_price_table(params[PRICE_PARAM])
    if MAX_CONCURRENCY_PARAM in params:
        out.max_concurrency = count(params[MAX_CONCURRENCY_PARAM], f"model_params.{MAX_CONCURRENCY_PARAM}",
                                    maximum=MAX_CONCURRENCY)
    return out


def try_usage(harness: Usage | None, gateway: GatewayUsage | None, price: PriceTable | None) -> Usage:
    """One try's usage: what the harness reported (in-process calls) plus the calls through the gateway,
    priced with ``price`` when there is one."""
    total = Usage()
    if harness is not None:
        total.add(harness)
    if gateway is not None:
        total.add(gateway.usage)
    if price is not None:
        total.cost = price.cost(total)
    return total


def wait_report_after(model_params: Mapping[str, Any]) -> float:
    """Seconds without an answer after which a model call shows in progress: ``MODEL_WAIT_REPORT_S``, or a
    quarter of the model's ``timeout`` param when that is shorter."""
    timeout = model_params.get("timeout")
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 0 < timeout < float("inf"):
        timeout = 600.0  # the clients' default (a bad value is refused when the client is built)
    return min(MODEL_WAIT_REPORT_S, float(timeout) / 4)


async def report_waiting_calls(limiter: AdaptiveLimiter, after_s: float,
                               report: Callable[[int, float, int], None]) -> None:
    """Until cancelled: ``report(calls, oldest_s, queued)`` every ``min(MODEL_WAIT_CHECK_S, after_s / 2)`` s while
    calls at ``limiter``'s endpoint have waited ``after_s`` or more for an answer, and ``report(0, 0.0, 0)`` once
    when none does any more. A hanging endpoint then shows as waiting calls, not only as running tasks."""
    reported = False
    while True:
        await asyncio.sleep(min(MODEL_WAIT_CHECK_S, after_s / 2))
        calls, oldest = limiter.slow_calls(after_s)
        if calls:
            report(calls, round(oldest, 1), limiter.waiting)
            reported = True
        elif reported:
            report(0, 0.0, 0)
            reported = False


class ModelServices:
    """Per launch: endpoint limiters, the envelope signer, the ledger and the (lazily started) gateway."""

    def __init__(self, emit: Callable[[ProgressEvent], None]) -> None:
        self.signer = EnvelopeSigner()
        self.limiters = LimiterRegistry()
        self.ledger = Ledger()
        self._emit = emit
        self._gateway: Gateway | None = None
        self._lock = asyncio.Lock()
        self._run_ids: dict[str, str] = {}

    def limiter_for(self, request: str, run_id: str, base_url: str, model_id: str, max_limit: int) -> AdaptiveLimiter:
        """The endpoint's limiter; ``request``'s progress hears of its limit changes."""
        self._run_ids[request] = run_id

        def changed(endpoint: str, limit: int, reason: str) -> None:
            self._emit(ModelLimitChanged(ts=time.time(), request=request, run_id=run_id, endpoint=endpoint,
                                         limit=limit, reason=reason))

        return self.limiters.get(base_url, model_id, max_limit, subscriber=request, on_change=changed)

    def _on_gateway_retry(self, key: AttemptKey, kind: str, backoff_s: float, try_no: int) -> None:
        self._emit(ModelRetrying(ts=time.time(), request=key.request, run_id=self._run_ids.get(key.request, ""),
                                 error_kind=kind, try_no=try_no, backoff_s=backoff_s, task_id=key.task_id))

    async def gateway(self) -> Gateway:
        """The launch's gateway, started on first use."""
        async with self._lock:
            if self._gateway is None:
                from ..models.gateway.server import Gateway

                gw = Gateway(self.signer, self.ledger, on_retry=self._on_gateway_retry)
                await gw.start()
                self._gateway = gw
            return self._gateway

    async def release(self, request: str) -> None:
        """A request ended: stop routing its calls and telling it about limits."""
        self.limiters.unsubscribe(request)
        if self._gateway is not None:
            await self._gateway.remove_upstream(request)

    async def aclose(self) -> None:
        """Stop the gateway (bounded, idempotent)."""
        gw, self._gateway = self._gateway, None
        if gw is not None:
            await gw.aclose()


@dataclass
class TryGrant:
    """One try's model access: env vars for its environment and for a host-side harness."""

    key: AttemptKey
    sandbox_env: dict[str, str]
    host_env: dict[str, str]


def agent_env(openai_url: str, anthropic_url: str, api_key: str, model: ModelSpec) -> dict[str, str]:
    """The variables OpenAI/Anthropic SDKs and our own agents read to find their model."""
    return {
        "AGENTCOMPASS_MODEL_BASE_URL": openai_url, "AGENTCOMPASS_MODEL_API_KEY": api_key,
        "AGENTCOMPASS_MODEL": model.id, "AGENTCOMPASS_MODEL_API_PROTOCOL": model.api_protocol,
        "OPENAI_BASE_URL": openai_url, "OPENAI_API_KEY": api_key,
        "ANTHROPIC_BASE_URL": anthropic_url, "ANTHROPIC_API_KEY": api_key,
    }


class ModelAccess:
    """A request's route through the gateway: one grant per try (see the module doc)."""

    def __init__(self, gateway: Gateway, *, request: str, run_id: str, model: ModelSpec, wrap: bool,
                 envelope_ttl_s: float, host_base: str, sandbox_base: str | None) -> None:
        self.gateway = gateway
        self.request = request
        self.run_id = run_id
        self.model = model
        self.wrap = wrap
        self.envelope_ttl_s = envelope_ttl_s
        self.host_base = host_base
        self.sandbox_base = sandbox_base

    def _env(self, base: str, grant: Grant) -> dict[str, str]:
        return agent_env(self.gateway.url_for(base, grant), self.gateway.url_for(base, grant, anthropic=True),
                         grant.api_key, self.model)

    def open(self, task_id: str, attempt: int, try_no: int, *, budget: CallBudget | None = None) -> TryGrant:
        """Grant this try access; env vars for its sandbox (none if the sandbox cannot reach the gateway).
        ``budget`` is asked before each of the try's model calls and charged after it."""
        key = AttemptKey(self.request, task_id, attempt, try_no)
        grant = self.gateway.open_grant(key, run_id=self.run_id,
                                        envelope_ttl_s=self.envelope_ttl_s if self.wrap else None, budget=budget)
        host_env = self._env(self.host_base, grant)
        sandbox_env = self._env(self.sandbox_base, grant) if self.sandbox_base else {}
        return TryGrant(key, sandbox_env, host_env)

    async def close(self, grant: TryGrant) -> GatewayUsage:
        """Revoke the try's access and return what it used through the gateway."""
        return await self.gateway.close_grant(grant.key)


def gateway_usage_of(meta: Mapping[str, Any]) -> GatewayUsage | None:
    """The ``GatewayUsage`` stored in an attempt's ``meta["gateway"]``, if any."""
    raw = meta.get("gateway")
    return msgspec.convert(raw, GatewayUsage) if raw else None


async def open_model_access(services: ModelServices, rt: RequestRuntime, model: ModelSpec, *, wrap: bool,
                            limiter: AdaptiveLimiter | None) -> ModelAccess | None:
    """Route ``rt``'s agents through the gateway when it needs to (see the module doc), else None.

    ``model`` carries the client params (engine params already split off). For a sandbox whose agent phase
    uses the ``model`` network policy the provider's model route points at the gateway; for ``public`` the
    gateway also listens on the address containers reach the host by."""
    net = rt.network
    phases = [p for p in (net.baseline, net.run, net.verifier) if p is not None]
    model_mode = any(p.mode == "model" for p in phases)
    # an allowlist sandbox reaches the model the same way: through the provider's model route on its network
    routed = model_mode or any(p.mode == "allowlist" for p in phases)
    mode = "model" if routed else (net.run or net.baseline).mode
    sandboxed = rt.harness.needs_environment and rt.provider.capabilities.model_route
    needs_endpoint = rt.harness.needs_model_endpoint
    if not model.base_url or limiter is None:
        if model_mode:
            raise ConfigError(
                'network_policy "model" needs a model endpoint reachable over HTTP (`model_base_url`); the '
                "in-process scripted model has none: serve it with `agentcompass serve-scripted`.",
                field="model_base_url")
        if wrap or needs_endpoint:
            rt.log.warning("the in-process model %r has no endpoint or key: there is nothing to route or wrap",
                           model.id)
        return None
    if not (wrap or needs_endpoint or model_mode or (sandboxed and mode != "none")):
        return None
    if model_mode and not rt.provider.capabilities.model_route:
        raise ConfigError(f'network_policy "model": environment {rt.provider.name!r} cannot route its sandboxes '
                          "to the model gateway.", field="environment_params.network_policy")
    from ..models.clients.http import client_params
    from ..models.clients.liveness import DEFAULT_PROBE_AFTER_S, DEFAULT_PROBE_TIMEOUT_S
    from ..models.gateway.server import Upstream
    from ..models.retry import RetryPolicy, split_retry_params

    policy, params = split_retry_params(model.params, RetryPolicy(max_backoff=rt.max_backoff_s), model_id=model.id)
    p = client_params(params, model.id)
    timeout = p.timeout if p.timeout is not None else 600.0
    gw = await services.gateway()
    assert gw.base_url is not None  # started
    gw.add_upstream(Upstream(
        request=rt.name, model_id=model.id, base_url=model.base_url, api_key=model.api_key,
        api_protocol=model.api_protocol, limiter=limiter, policy=policy, timeout_s=timeout,
        connect_timeout_s=p.connect_timeout if p.connect_timeout is not None else min(timeout, 30.0),
        total_timeout_s=p.total_timeout, extra_headers=dict(p.extra_headers or {}),
        max_response_bytes=p.max_response_bytes,
        probe_after_s=p.probe_after if p.probe_after is not None else DEFAULT_PROBE_AFTER_S,
        probe_timeout_s=p.probe_timeout if p.probe_timeout is not None else DEFAULT_PROBE_TIMEOUT_S))
    sandbox_base: str | None = None
    if sandboxed and mode == "model":
        port = int(gw.base_url.rsplit(":", 1)[1])
        host, cport = await asyncio.wait_for(rt.provider.ensure_model_route("127.0.0.1", port), rt.timeouts.env_open)
        sandbox_base = f"http://{host}:{cport}"
    elif sandboxed and mode == "public":
        try:
            sandbox_base = await gw.listen_on(await asyncio.wait_for(rt.provider.host_address(), rt.timeouts.env_open))
        except (ConfigError, EnvironmentError_, OSError) as exc:
            rt.log.warning("agents inside %s environments get no model endpoint: %s", rt.provider.name, exc)
    elif not sandboxed and rt.harness.needs_environment:
        sandbox_base = gw.base_url  # a local environment: same host
    ttl = rt.timeouts.agent + rt.timeouts.env_open + ENVELOPE_SLACK_S
    access = ModelAccess(gw, request=rt.name, run_id=rt.run_id, model=model, wrap=wrap, envelope_ttl_s=ttl,
                         host_base=gw.base_url, sandbox_base=sandbox_base)
    rt.log.info("model gateway for this request: %s (sandboxes: %s, keys: %s)", gw.base_url, sandbox_base or "-",
                "envelopes" if wrap else "route tokens")
    return access


class AttemptSpend:
    """Sums what an attempt's tries used (every try's calls were real, retried or not)."""

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self.gateway: GatewayUsage | None = None

    def add_try(self, meta: Mapping[str, Any]) -> Usage | None:
        """Count one try (its ``meta["usage"]`` / ``meta["gateway"]``); returns its usage for its TryRecord."""
        gw = gateway_usage_of(meta)
        if gw is not None:
            self.gateway = self.gateway or GatewayUsage()
            self.gateway.merge(gw)
        raw = meta.get("usage")
        if raw is None:
            return None
        usage = msgspec.convert(raw, Usage)
        self.usage = self.usage or Usage()
        self.usage.add(usage)
        return usage

    def write(self, meta: dict[str, Any]) -> None:
        """Put the attempt's totals into its ``meta``."""
        if self.usage is not None:
            meta["usage"] = msgspec.to_builtins(self.usage)
        if self.gateway is not None:
            meta["gateway"] = msgspec.to_builtins(self.gateway)
