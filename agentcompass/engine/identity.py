"""Identity hashes for reuse: a task result is reused only when everything that shaped it matches."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from ..interfaces import TaskSpec

#: benchmark params that select tasks but do not change what a task is.
SELECTION_PARAMS = frozenset({"sample_ids", "limit", "categories", "shard", "repeat"})
_encoder = msgspec.json.Encoder(order="sorted")


def request_identity(*, benchmark: str, benchmark_params: dict[str, Any], benchmark_version: str,
                     harness: str, harness_params: dict[str, Any], model: str, model_params: dict[str, Any],
                     api_protocol: str, environment: str, environment_params: dict[str, Any]) -> str:
    """Hash of the request parts that shape every task's result (secrets and task selection excluded)."""
    doc = {
        "benchmark": [benchmark, benchmark_version,
                      {k: v for k, v in benchmark_params.items() if k not in SELECTION_PARAMS}],
        "harness": [harness, harness_params],
        "model": [model, api_protocol, model_params],
        "environment": [environment, environment_params],
    }
    return hashlib.sha256(_encoder.encode(doc)).hexdigest()


def task_identity(request_id_hash: str, task: TaskSpec) -> str:
    """Hash of the request identity and the task itself (input and ground truth)."""
    h = hashlib.sha256(request_id_hash.encode())
    h.update(_encoder.encode(task))
    return h.hexdigest()[:32]
