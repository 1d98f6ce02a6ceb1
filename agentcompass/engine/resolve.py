"""Resolution: a request spec -> a frozen ``ResolvedRequest``, before any component, client or file is made.

Pure: it reads the spec and the registries (no filesystem, no network, no component built). Bad input raises a
``ConfigError`` naming the field. The engine's own settings are taken out of the component params here (the
places the SDK accepts them) and become fields: per-phase timeouts, network policies, the image-cache policy
and the model's engine params.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from .._errors import ConfigError
from .._validate import seconds
from ..interfaces import NetworkPolicy
from ..params import selection_params
from ..registry import Registries
from ..specs import ModelSpec, RunRequestSpec
from .attempt_limits import AttemptLimits, parse_limits
from .identity import request_identity, run_fields
from .image_cache import ImagePolicy, pop_image_policy
from .model_access import EngineModelParams, split_engine_params
from .runtime import NetworkPhases, PhaseTimeouts

_NET_KEYS = ("network_policy", "run_network_policy", "verifier_network_policy")


@dataclass(frozen=True)
class ResolvedRequest:
    """What a request asks for, checked and split: component classes and their params, and the engine's
    settings taken out of them."""

    benchmark_cls: type[Any]
    harness_cls: type[Any]
    provider_cls: type[Any]
    #: the request's identity hash (params as given) and the fields a continued run must match
    identity: str
    run_fields: dict[str, Any]
    #: the params each component is built with (reserved keys removed)
    benchmark_params: Mapping[str, Any]
    harness_params: Mapping[str, Any]
    environment_params: Mapping[str, Any]
    #: the image-cache params as given (taken out of the environment params; params.json records them there)
    image_params: Mapping[str, Any]
    timeouts: PhaseTimeouts
    network: NetworkPhases
    #: the network policies as given, by param name (each is checked by the provider under its name)
    network_given: Mapping[str, NetworkPolicy]
    #: the provider has images (an image cache applies)
    has_images: bool
    image_policy: ImagePolicy
    #: the model params the engine keeps (price, concurrency) and the model spec with the client's params only
    model_engine_params: EngineModelParams
    model_spec: ModelSpec
    #: each attempt's limits (``token_limit``, ``message_limit``, ``cost_limit``, ``working_limit``)
    limits: AttemptLimits
    retry_patterns: tuple[re.Pattern[str], ...]


def _declared(component_cls: type[Any]) -> frozenset[str]:
    """The names of the params a component's ``Params`` struct declares (none without one)."""
    params = getattr(component_cls, "Params", None)
    if isinstance(params, type) and issubclass(params, msgspec.Struct):
        return frozenset(f.name for f in msgspec.structs.fields(params))
    return frozenset()


def _pop_float(params: dict[str, Any], key: str, default: float, field: str) -> float:
    return seconds(params.pop(key, default), f"{field}.{key}")


def parse_network_policy(value: Any, field: str) -> NetworkPolicy:
    """``"none"`` or ``{"mode": "allowlist", "hosts": [...]}`` -> NetworkPolicy, with a readable error."""
    raw = {"mode": value} if isinstance(value, str) else value
    try:
        return msgspec.convert(raw, NetworkPolicy)
    except msgspec.ValidationError as exc:
        raise ConfigError(
            f"Invalid `environment_params.{field}`: {str(exc).split(' - at')[0]}. Allowed: \"public\", \"none\", "
            f"\"model\", or {{\"mode\": \"allowlist\", \"hosts\": [...]}}.", field=f"environment_params.{field}"
        ) from None


def compile_retry_patterns(patterns: list[str]) -> tuple[re.Pattern[str], ...]:
    """Each ``retry_pattern_list`` entry compiled; a bad one is a ConfigError naming its index."""
    out: list[re.Pattern[str]] = []
    for i, pat in enumerate(patterns):
        try:
            out.append(re.compile(pat))
        except re.error as exc:
            raise ConfigError(f"Invalid `retry_pattern_list[{i}]` {pat!r}: not a regular expression ({exc}).",
                              field=f"retry_pattern_list[{i}]") from None
    return tuple(out)


def check_pairing(bench_cls: type[Any], harness_cls: type[Any], spec: RunRequestSpec) -> None:
    """Refuse a harness the benchmark cannot serve before any task runs: the oracle needs reference solutions,
    a tool-calling harness the benchmark's tools, the predictions harness a benchmark that grades patches."""
    from ..benchmarks.base import Benchmark

    if harness_cls.needs_tools and bench_cls.tool_session is Benchmark.tool_session:
        raise ConfigError(f"Invalid `harness`: {spec.harness.id!r} calls the benchmark's tools, and benchmark "
                          f"{spec.benchmark.id!r} offers none (it does not define tool_session). Use it on a "
                          "tool-use benchmark (bfcl, tau2, agentdojo, or a judged QA benchmark with search tools), "
                          "or another harness (shell_agent, openai_chat...).", field="harness")
    if harness_cls.oracle and bench_cls.reference_solution is Benchmark.reference_solution:
        raise ConfigError(f"Invalid `harness`: {spec.harness.id!r} runs each task's reference solution, and "
                          f"benchmark {spec.benchmark.id!r} has none (it does not define reference_solution). "
                          "Use an agent harness, or a benchmark with solutions (e.g. task folders: task_dir).",
                          field="harness")
    if harness_cls.submits_patches and not bench_cls.grades_patch:
        raise ConfigError(f"Invalid `harness`: {spec.harness.id!r} submits a predictions file's patches, and "
                          f"benchmark {spec.benchmark.id!r} does not grade a submitted patch. Benchmarks that do: "
                          "the SWE-bench family (swebench, swebench_verified, swebench_lite, swebench_jsonl, "
                          "swebench_local, swebench_multilingual, swebench_pro).", field="harness")
    if harness_cls.regrades and not bench_cls.rescorable:
        raise not_rescorable(spec.benchmark.id)


def not_rescorable(benchmark: str) -> ConfigError:
    """The error for re-scoring a run of ``benchmark``, whose grading needs the agent's environment."""
    return ConfigError(f"Invalid `benchmark`: {benchmark!r} cannot grade a finished run again: its grading reads the "
                       "agent's environment (what it left in its workspace), which a run does not keep. Benchmarks "
                       "that can: the SWE-bench family (graded from the recorded patch) and the judged QA benchmarks "
                       "(from the recorded answer).", field="benchmark")


def resolve(spec: RunRequestSpec, reg: Registries) -> ResolvedRequest:
    """The request spec, resolved (see the module doc)."""
    retry_patterns = compile_retry_patterns(spec.retry_pattern_list)
    bench_cls = reg["benchmark"].resolve(spec.benchmark.id, field="benchmark")
    # Hashed from the params as given (network policies, agent/verify timeouts shape results too; the
    # operational keys are left out in request_identity).
    id_parts: dict[str, Any] = dict(
        benchmark=spec.benchmark.id, benchmark_params=spec.benchmark.params,
        benchmark_version=str(bench_cls.version), harness=spec.harness.id,
        harness_params=spec.harness.params, model=spec.model.id, model_params=spec.model.params,
        api_protocol=spec.model.api_protocol, environment=spec.environment.id,
        environment_params=spec.environment.params)
    identity = request_identity(**id_parts, selection_params=selection_params(bench_cls))
    fields = run_fields(**id_parts)
    harness_cls = reg["harness"].resolve(spec.harness.id, field="harness")
    provider_cls = reg["environment"].resolve(spec.environment.id, field="environment")
    check_pairing(bench_cls, harness_cls, spec)

    bench_params = dict(spec.benchmark.params)
    harness_params = dict(spec.harness.params)
    env_params = dict(spec.environment.params)
    env_timeouts: dict[str, Any] = {k: env_params[k] for k in ("open_timeout", "close_timeout") if k in env_params}
    timeouts = PhaseTimeouts(
        env_open=_pop_float(env_params, "open_timeout", 600.0, "environment_params"),
        env_close=_pop_float(env_params, "close_timeout", 60.0, "environment_params"),
        setup=_pop_float(harness_params, "setup_timeout", 600.0, "harness_params"),
        agent=_pop_float(harness_params, "agent_timeout", 3600.0, "harness_params"),
        stall=_pop_float(harness_params, "stall_timeout", 900.0, "harness_params"),
        verify=_pop_float(bench_params, "verify_timeout", 1800.0, "benchmark_params"),
    )
    net = {k: parse_network_policy(env_params.pop(k), k) for k in _NET_KEYS if k in env_params}
    network = NetworkPhases(baseline=net.get("network_policy", NetworkPolicy()),
                            run=net.get("run_network_policy"), verifier=net.get("verifier_network_policy"))

    # price_per_million / max_concurrency are the engine's: they never reach the client or the upstream
    engine_params = split_engine_params(spec.model.params)
    limits = parse_limits(harness_params, price=engine_params.price, harness_keys=_declared(harness_cls))
    if provider_cls.capabilities.phase_timeouts:
        env_params.update(env_timeouts)
    has_images = provider_cls.capabilities.images
    image_policy, image_params = pop_image_policy(env_params, supported=has_images, provider=spec.environment.id)
    return ResolvedRequest(
        benchmark_cls=bench_cls, harness_cls=harness_cls, provider_cls=provider_cls, identity=identity,
        run_fields=fields, benchmark_params=bench_params, harness_params=harness_params,
        environment_params=env_params, image_params=image_params,
        timeouts=timeouts, network=network, network_given=net, has_images=has_images, image_policy=image_policy,
        model_engine_params=engine_params,
        model_spec=msgspec.structs.replace(spec.model, params=engine_params.client_params),
        retry_patterns=retry_patterns, limits=limits)
