"""Identity hashes for reuse: a task result is reused only when everything that shaped it matches."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from ..interfaces import TaskSpec

#: benchmark params that select tasks but do not change what a task is.
SELECTION_PARAMS = frozenset({"sample_ids", "limit", "categories", "shard", "repeat"})
#: model params that change how a call is made, paced, retried or billed, never what the model answers.
OPERATIONAL_MODEL_PARAMS = frozenset({"timeout", "connect_timeout", "total_timeout", "max_connections", "retries",
                                      "retry_backoff", "retry_max_wait", "price_per_million", "max_concurrency"})
#: environment params that change where or how patiently an environment is opened, not what runs in it.
OPERATIONAL_ENV_PARAMS = frozenset({"base_dir", "open_timeout", "close_timeout"})
#: harness params that only bound how long the engine waits for a stuck attempt (a stalled try is never reused).
OPERATIONAL_HARNESS_PARAMS = frozenset({"stall_timeout"})
_encoder = msgspec.json.Encoder(order="sorted")


def request_identity(*, benchmark: str, benchmark_params: dict[str, Any], benchmark_version: str,
                     harness: str, harness_params: dict[str, Any], model: str, model_params: dict[str, Any],
                     api_protocol: str, environment: str, environment_params: dict[str, Any]) -> str:
    """Hash of the request parts that shape every task's result.

    Left out: secrets, task selection, and operational knobs (model-call retries and timeouts, prices, a local
    workspace's base dir), so a run resumed with more retries after a rate-limit storm reuses its results.
    """
    doc = {
        "benchmark": [benchmark, benchmark_version,
                      {k: v for k, v in benchmark_params.items() if k not in SELECTION_PARAMS}],
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
