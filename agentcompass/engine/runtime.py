"""What a request's TaskActors share: resolved components, settings and sinks (built by the RequestActor)."""

from __future__ import annotations

import contextvars
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..interfaces import Benchmark, EnvironmentProvider, Harness, ModelClient, NetworkPolicy
from ..records import ProgressEvent, TryRecord
from .env_pool import EnvironmentPool
from .run_dir import RunDir

if TYPE_CHECKING:
    from ..models.pricing import PriceTable
    from .image_cache import RequestImages
    from .model_access import ModelAccess

#: the task an attempt's code is working on (set by the TaskActor; read by hooks that get no context, such as
#: the model client's retry hook).
CURRENT_TASK: contextvars.ContextVar[str | None] = contextvars.ContextVar("agentcompass_task", default=None)


@dataclass
class PhaseTimeouts:
    """Per-phase bounds, seconds."""

    env_open: float = 600.0
    env_close: float = 60.0
    setup: float = 600.0
    agent: float = 3600.0
    verify: float = 1800.0
    #: the harness made no progress (no step, no command or model call started or finished) for this long.
    stall: float = 900.0


@dataclass
class NetworkPhases:
    """Network policy at open, while the harness runs, and while grading."""

    baseline: NetworkPolicy = field(default_factory=NetworkPolicy)
    run: NetworkPolicy | None = None
    verifier: NetworkPolicy | None = None


@dataclass
class RequestRuntime:
    """Everything a TaskActor needs to run attempts of one request."""

    index: int
    name: str
    run_id: str
    benchmark: Benchmark
    harness: Harness
    provider: EnvironmentProvider
    model: ModelClient
    pool: EnvironmentPool
    run_dir: RunDir
    log: logging.Logger
    emit: Callable[[ProgressEvent], None]
    k: int = 1
    max_retries: int = 0
    #: the cap on one backoff wait between tries (and the model client's), seconds.
    max_backoff_s: float = 120.0
    retry_patterns: list[re.Pattern[str]] = field(default_factory=list)
    keep_environment: bool = False
    #: the level of the request's log files (run.log and logs/tasks/*.log).
    file_log_level: int = logging.INFO
    timeouts: PhaseTimeouts = field(default_factory=PhaseTimeouts)
    network: NetworkPhases = field(default_factory=NetworkPhases)
    #: environment variables every environment of this request gets (e.g. the in-container model URL).
    container_env: dict[str, str] = field(default_factory=dict)
    #: the request's route through the model gateway (per-try grants), when it uses one.
    model_access: ModelAccess | None = None
    #: prices per million tokens (model param ``price_per_million``), to cost each attempt.
    price: PriceTable | None = None
    #: the tries so far of each running attempt, by (task id, attempt): kept by TaskActors while the attempt
    #: runs (and after a cancel), read when the run is interrupted.
    partial_tries: dict[tuple[str, int], list[TryRecord]] = field(default_factory=dict)
    #: analyzers run on each finished attempt (``enable_analysis``).
    analyzers: list[Any] = field(default_factory=list)
    #: the request's handle on the launch's image cache (providers with images), asked before each open.
    images: RequestImages | None = None
    extra: dict[str, Any] = field(default_factory=dict)
