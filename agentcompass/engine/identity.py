"""Identity hashes for reuse: a task result is reused only when everything that shaped it matches."""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from typing import Any

import msgspec

from ..interfaces import TaskSpec
from ..params import DEFAULT_SELECTION_PARAMS

#: benchmark params that select tasks but do not change what a task is, for a benchmark that declares none (a
#: benchmark declares its own in ``selection_params``).
SELECTION_PARAMS = frozenset(DEFAULT_SELECTION_PARAMS)
#: model params that change how a call is made, paced, retried or billed, never what the model answers.
OPERATIONAL_MODEL_PARAMS = frozenset({"timeout", "connect_timeout", "total_timeout", "probe_after", "probe_timeout",
                                      "max_connections", "retries", "retry_backoff", "retry_max_wait",
                                      "price_per_million", "max_concurrency"})
#: environment params that change where or how patiently an environment is opened, not what runs in it.
OPERATIONAL_ENV_PARAMS = frozenset({"base_dir", "open_timeout", "close_timeout", "cache_level", "min_free_disk",
                                    "max_concurrent_pulls", "prefetch_images", "disk_wait_timeout", "pull_timeout",
                                    "pull_inactivity_timeout", "pull_retries", "prestart",
                                    "relay_max_connections"})
#: harness params that only bound how long the engine waits for a stuck attempt (a stalled try is never reused).
OPERATIONAL_HARNESS_PARAMS = frozenset({"stall_timeout"})
_encoder = msgspec.json.Encoder(order="sorted")


def request_identity(*, benchmark: str, benchmark_params: dict[str, Any], benchmark_version: str,
                     harness: str, harness_params: dict[str, Any], model: str, model_params: dict[str, Any],
                     api_protocol: str, environment: str, environment_params: dict[str, Any],
                     selection_params: Collection[str] = SELECTION_PARAMS) -> str:
    """Hash of the request parts that shape every task's result.

    Left out: secrets, task selection (the benchmark's declared ``selection_params``), and operational knobs
    (model-call retries and timeouts, prices, a local workspace's base dir), so a run resumed with more retries
    after a rate-limit storm reuses its results.
    """
    doc = {
        "benchmark": [benchmark, benchmark_version,
                      {k: v for k, v in benchmark_params.items() if k not in selection_params}],
        "harness": [harness, {k: v for k, v in harness_params.items() if k not in OPERATIONAL_HARNESS_PARAMS}],
        "model": [model, api_protocol, {k: v for k, v in model_params.items() if k not in OPERATIONAL_MODEL_PARAMS}],
        "environment": [environment,
                        {k: v for k, v in environment_params.items() if k not in OPERATIONAL_ENV_PARAMS}],
    }
    return hashlib.sha256(_encoder.encode(doc)).hexdigest()


def task_identity(request_id_hash: str, task: TaskSpec) -> str:
    """Hash of the request identity and the task itself (input and ground truth)."""
    h = hashlib.sha256(request_id_hash.encode())
    h.update(_encoder.encode(task))
    return h.hexdigest()[:32]


def run_fields(*, benchmark: str, benchmark_params: dict[str, Any], benchmark_version: str, harness: str,
               harness_params: dict[str, Any], model: str, model_params: dict[str, Any], api_protocol: str,
               environment: str, environment_params: dict[str, Any]) -> dict[str, Any]:
    """What a continued run (``reuse=True`` on its run id) must keep: the identity fields plus the task
    selection, flat (``harness_params.step_limit``). Operational knobs may change."""
    out: dict[str, Any] = {"benchmark": benchmark, "benchmark_version": benchmark_version, "harness": harness,
                           "model": model, "api_protocol": api_protocol, "environment": environment}
    for prefix, params, left_out in (("benchmark_params", benchmark_params, frozenset()),
                                     ("harness_params", harness_params, OPERATIONAL_HARNESS_PARAMS),
                                     ("model_params", model_params, OPERATIONAL_MODEL_PARAMS),
                                     ("environment_params", environment_params, OPERATIONAL_ENV_PARAMS)):
        out.update({f"{prefix}.{k}": v for k, v in params.items() if k not in left_out})
    return msgspec.to_builtins(out)


def _shown(value: Any, missing: bool) -> str:
    text = "(not set)" if missing else repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def diff_fields(before: dict[str, Any], after: dict[str, Any], limit: int = 10) -> list[str]:
    """``"<field>: <before> -> <after>"`` for each field that differs (at most ``limit`` and a count)."""
    out = [f"{k}: {_shown(before.get(k), k not in before)} -> {_shown(after.get(k), k not in after)}"
           for k in sorted(before.keys() | after.keys()) if before.get(k, _MISSING) != after.get(k, _MISSING)]
    return out if len(out) <= limit else [*out[:limit], f"... and {len(out) - limit} more"]


_MISSING = object()
