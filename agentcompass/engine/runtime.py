"""What actors are handed at construction: the launch's shared services (``LaunchServices``, for each
RequestActor) and a request's resolved components, settings and sinks (``RequestRuntime``, for its attempt runs).
Both are frozen: nothing is patched into them after they are built."""

from __future__ import annotations

import contextvars
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..interfaces import Benchmark, EnvironmentProvider, Harness, ModelClient, NetworkPolicy
from ..records import ProgressEvent
from ..specs import DEFAULT_MAX_BACKOFF_S
from .attempt_limits import AttemptLimits
from .env_pool import EnvironmentPool
from .run_dir import RunDir

if TYPE_CHECKING:
    from ..models.pricing import PriceTable
    from ..registry import Registries
    from .image_cache import ImageCache, RequestImages
    from .model_access import ModelAccess, ModelServices
    from .progress import EventBus

#: the task an attempt's code is working on (set by the AttemptRun; read by hooks that get no context, such as
#: the model client's retry hook).
CURRENT_TASK: contextvars.ContextVar[str | None] = contextvars.ContextVar("agentcompass_task", default=None)


@dataclass(frozen=True)
class PhaseTimeouts:
    """Per-phase bounds, seconds."""

    env_open: float = 600.0
    env_close: float = 60.0
    setup: float = 600.0
    agent: float = 3600.0
    verify: float = 1800.0
    #: the harness made no progress (no step, no command or model call started or finished) for this long.
    stall: float = 900.0


@dataclass(frozen=True)
class NetworkPhases:
    """Network policy at open, while the harness runs, and while grading."""

    baseline: NetworkPolicy = field(default_factory=NetworkPolicy)
    run: NetworkPolicy | None = None
    verifier: NetworkPolicy | None = None

    def uses_model_route(self) -> bool:
        """Whether a phase uses the ``model`` policy (sandboxes reach only the model, through the gateway)."""
        return any(p is not None and p.mode == "model" for p in (self.baseline, self.run, self.verifier))


@dataclass(frozen=True)
class LaunchServices:
    """The few launch-wide services a RequestActor is handed (besides its inbox and the scheduler's)."""

    registries: Registries
    bus: EventBus
    pool: EnvironmentPool
    models: ModelServices
    images: ImageCache
    #: the launch's logger (a request's own logger is its child)
    log: logging.Logger
    console_level: int
    #: secrets every request's files and logs redact, besides its own model key
    extra_secrets: tuple[str, ...]
    #: the orchestration-wide ``task_concurrency`` (None: no limit)
    task_concurrency: int | None
    #: the launch's ``provider_limits`` (a provider holding environments ahead of need stays within its own)
    provider_limits: dict[str, int]
    #: the orchestration spec without its requests, as recorded in each request's params.json
    orchestration: dict[str, Any]


@dataclass(frozen=True)
class RequestRuntime:
    """Everything an AttemptRun needs to run an attempt of one request."""

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
    max_backoff_s: float = DEFAULT_MAX_BACKOFF_S
    retry_patterns: tuple[re.Pattern[str], ...] = ()
    keep_environment: bool = False
    #: the level of the request's log file (run.log, the tasks' lines included).
    file_log_level: int = logging.INFO
    timeouts: PhaseTimeouts = field(default_factory=PhaseTimeouts)
    network: NetworkPhases = field(default_factory=NetworkPhases)
    #: environment variables every environment of this request gets (e.g. the in-container model URL).
    container_env: dict[str, str] = field(default_factory=dict)
    #: the request's route through the model gateway (per-try grants), when it uses one.
    model_access: ModelAccess | None = None
    #: prices per million tokens (model param ``price_per_million``), to cost each attempt.
    price: PriceTable | None = None
    #: analyzers run on each finished attempt (``enable_analysis``).
    analyzers: tuple[Any, ...] = ()
    #: the request's handle on the launch's image cache (providers with images), asked before each open.
    images: RequestImages | None = None
    #: each attempt's limits (``harness_params.token_limit`` / ``message_limit`` / ``cost_limit`` / ``working_limit``)
    limits: AttemptLimits = field(default_factory=AttemptLimits)
