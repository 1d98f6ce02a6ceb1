"""The on-disk formats, in one place: details, trajectories, run info, summary and progress events.

Every file in a run directory is one of these Structs encoded as JSON (see ``engine/run_dir.py``).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

SCHEMA_VERSION = "1.0"

AttemptStatus = Literal["completed", "run_error", "eval_error", "run_error_or_eval_error", "skipped"]
RunStatus = Literal["pending", "running", "completed", "failed", "timed_out", "cancelled"]


class ToolCall(msgspec.Struct, omit_defaults=True):
    """A tool call proposed by the model (OpenAI shape: arguments is a JSON string)."""

    id: str
    name: str
    arguments: str = ""


class Usage(msgspec.Struct, omit_defaults=True):
    """Token usage summed over model calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    calls: int = 0
    retries: int = 0  # failed model tries that were retried before a call succeeded
    cached_tokens: int = 0  # the part of prompt_tokens served from a prompt cache
    cost: float = 0.0  # from the request's price table (model param ``price_per_million``), when given

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens
        self.calls += other.calls
        self.retries += other.retries
        self.cached_tokens += other.cached_tokens
        self.cost = round(self.cost + other.cost, 9)


class Step(msgspec.Struct, omit_defaults=True):
    """One turn of an agent: what the model said/called and what the environment answered."""

    index: int
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCall] = []
    action: str | None = None
    observation: str | None = None
    exit_code: int | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_latency_s: float | None = None
    exec_latency_s: float | None = None
    finish_reason: str | None = None
    started_at: float | None = None


class Trajectory(msgspec.Struct, omit_defaults=True):
    """All steps of one attempt."""

    schema_version: str = SCHEMA_VERSION
    started_at: float | None = None
    finished_at: float | None = None
    steps: list[Step] = []
    stop_reason: str | None = None


class TryRecord(msgspec.Struct, omit_defaults=True):
    """One try of an attempt. Every try is recorded; retries never overwrite."""

    try_no: int
    status: AttemptStatus
    started_at: float
    finished_at: float
    error: str | None = None
    error_kind: str | None = None
    usage: Usage | None = None  # this try's model usage (harness-reported plus calls through the gateway)


class AttemptRecord(msgspec.Struct, omit_defaults=True):
    """The outcome of one attempt (of k) at a task."""

    status: AttemptStatus
    correct: bool | None = None
    score: float | None = None
    error: str | None = None
    error_kind: str | None = None
    final_answer: str | None = None
    artifacts: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    analysis: dict[str, Any] = {}
    trajectory: Trajectory | None = None
    tries: list[TryRecord] = []


class TaskDetail(msgspec.Struct, omit_defaults=True):
    """``details/<safe_task_id>.json``: one task with its k attempts (ACTF v1.0 shape)."""

    task_id: str
    k: int
    attempts: dict[str, AttemptRecord]
    category: str | None = None
    correct: bool | None = None
    score: float | None = None
    attempts_tried: int = 0
    solved_at: int | None = None
    identity: str | None = None
    reused_from: str | None = None


class RequestCounts(msgspec.Struct):
    """Task counts of one request."""

    total: int = 0
    done: int = 0
    running: int = 0
    correct: int = 0
    errors: int = 0
    skipped: int = 0
    reused: int = 0
    retries: int = 0
    #: attempts that ended with ``engine_error`` (a bug in the code running them): the run is failed.
    engine_errors: int = 0


class RunPaths(msgspec.Struct, omit_defaults=True):
    """Where a request wrote its outputs."""

    run_dir: str
    params: str
    run_info: str
    progress: str
    details_dir: str
    summary: str
    log: str


class RunInfo(msgspec.Struct, omit_defaults=True):
    """``run_info.json``: written at start, updated while running, final at the end."""

    run_id: str
    request: str
    status: RunStatus
    benchmark: str
    harness: str
    model: str
    environment: str
    started_at: float
    paths: RunPaths
    counts: RequestCounts = msgspec.field(default_factory=RequestCounts)
    updated_at: float | None = None
    finished_at: float | None = None
    duration_s: float | None = None
    metrics: dict[str, Any] = {}
    error: str | None = None
    pid: int | None = None
    version: str | None = None
    usage: Usage | None = None  # model usage (and cost) of the tasks committed so far


class Summary(msgspec.Struct, omit_defaults=True):
    """``summary.json``: aggregate metrics, by category, errors by kind, reuse report."""

    run_id: str
    benchmark: str
    harness: str
    model: str
    environment: str
    status: RunStatus
    metrics: dict[str, Any]
    by_category: dict[str, dict[str, Any]] = {}
    #: what the benchmark measures (``Benchmark.dimension``); ``compare`` groups runs by it
    dimension: str | None = None
    errors_by_kind: dict[str, int] = {}
    counts: RequestCounts = msgspec.field(default_factory=RequestCounts)
    reuse: dict[str, Any] = {}
    usage: Usage = msgspec.field(default_factory=Usage)
    duration_s: float | None = None
    #: attempts that raised each analysis flag (analyzers and benchmark flags), and ``analyzer_errors``.
    analysis: dict[str, int] = {}
    #: the image cache of the run (docker): ``pulled``, ``built``, ``removed`` (images), ``bytes_pulled``,
    #: ``bytes_removed``
    images: dict[str, int] = {}
    #: per node that ran attempts (a provider spread over machines, ``ray_docker``): ``attempts``, ``tries`` and
    #: ``attempts_per_s`` (its attempts over the span from its first start to its last finish)
    nodes: dict[str, dict[str, Any]] = {}


# ---------------------------------------------------------------- progress events (progress.jsonl)


class _Event(msgspec.Struct, tag_field="event", omit_defaults=True, kw_only=True):
    ts: float
    request: str
    run_id: str = ""

    @property
    def event(self) -> str:
        """The event's kind, e.g. ``"task_finished"``: its tag, the ``event`` key of its ``progress.jsonl`` line."""
        return str(self.__struct_config__.tag)


class RequestStarted(_Event, tag="request_started"):
    """A request resolved its components and knows its task count."""

    run_dir: str
    total_tasks: int
    reused_tasks: int = 0


class AttemptStarted(_Event, tag="attempt_started"):
    """A try of an attempt got a slot and starts."""

    task_id: str
    attempt: int
    try_no: int = 1


class EnvOpened(_Event, tag="env_opened"):
    """An environment opened (the pool's pacing is measured from these)."""

    task_id: str
    provider: str
    env_id: str
    role: str
    open_s: float
    #: the monotonic time the ``env_open_qps`` pacer granted this open (0 without pacing); grants are spaced
    #: at least ``1/qps`` apart, whatever the machine's load does to when the open then ran
    granted_at: float = 0.0
    #: the node the environment runs on, for a provider spread over several machines (``ray_docker``)
    node: str | None = None


class TryRetrying(_Event, tag="try_retrying"):
    """A try failed with a transient error and will be tried again after a backoff."""

    task_id: str
    attempt: int
    try_no: int
    error_kind: str | None
    error: str
    backoff_s: float


class ModelRetrying(_Event, tag="model_retrying"):
    """A model call failed transiently (429, 5xx, connection) and is tried again after a backoff."""

    error_kind: str
    try_no: int
    backoff_s: float
    task_id: str | None = None


class ModelLimitChanged(_Event, tag="model_limit_changed"):
    """The adaptive concurrency limit of a model endpoint changed (``reason``: ``start``, ``increase``,
    ``rate_limited``, ``max_changed``)."""

    endpoint: str
    limit: int
    reason: str


class ModelCallsWaiting(_Event, tag="model_calls_waiting"):
    """Model calls at ``endpoint`` have had no answer for a while (the oldest for ``oldest_s``), reported every
    few seconds while it lasts; ``calls`` 0 once none waits that long any more. ``queued``: calls waiting for a
    slot of the endpoint's concurrency limit."""

    endpoint: str
    calls: int
    oldest_s: float
    queued: int = 0


class AttemptFinished(_Event, tag="attempt_finished"):
    """An attempt finished (after all its tries)."""

    task_id: str
    attempt: int
    status: AttemptStatus
    correct: bool | None = None
    duration_s: float = 0.0
    error_kind: str | None = None


class TaskFinished(_Event, tag="task_finished"):
    """All k attempts of a task are done and its detail is committed."""

    task_id: str
    correct: bool | None
    reused: bool = False


class RequestFinished(_Event, tag="request_finished"):
    """A request ended: its outcome."""

    status: RunStatus
    metrics: dict[str, Any] = {}
    error: str | None = None


class DependencyInstalling(_Event, tag="dependency_installing"):
    """A component's declared requirement is missing and is being installed (``auto_install_dependencies``)."""

    package: str
    #: what declared it: ``benchmark``, ``harness`` or ``environment``
    component: str


class DependencyInstalled(_Event, tag="dependency_installed"):
    """An install ended. ``shared``: another request's pip run was awaited (pip runs once per package)."""

    package: str
    component: str
    seconds: float
    ok: bool
    shared: bool = False
    error: str | None = None


class DataDownload(_Event, tag="data_download"):
    """A benchmark is downloading its dataset (e.g. SWE-bench from the Hugging Face Hub into ``data_dir``),
    before the request's run directory exists (so not in ``progress.jsonl``). ``status``: ``downloading``
    (repeated with byte counts, at most a few per second) or ``done``."""

    what: str
    status: str
    bytes_done: int = 0
    bytes_total: int = 0


class ImagePull(_Event, tag="image_pull"):
    """An image a task needs is being made present (``engine/image_cache.py``).

    ``status``: ``scheduled`` (the engine decided to prefetch it for ``task_id``), ``queued`` (waiting for a
    pull slot), ``waiting_disk`` (below ``min_free_disk``), ``pulling`` /
    ``building`` (started; ``pulling`` again with byte counts while it runs), ``done``, ``present`` (there
    already), ``failed``, ``cancelled`` (stopped: its request
    ended, or a prefetch deferred for disk room). ``prefetch``: asked ahead of the task that needs it."""

    image: str
    status: str
    task_id: str | None = None
    prefetch: bool = False
    layers_done: int = 0
    layers_total: int = 0
    bytes_done: int = 0
    bytes_total: int = 0
    rate_bps: float = 0.0
    error: str | None = None


class ImageRemoved(_Event, tag="image_removed"):
    """An image this run pulled or built was removed after its last task (``cache_level``); ``kept``: why it
    was not (a container still uses it), with ``bytes_freed`` 0."""

    image: str
    bytes_freed: int = 0
    kept: str | None = None


ProgressEvent = RequestStarted | AttemptStarted | EnvOpened | TryRetrying | ModelRetrying | ModelLimitChanged \
    | ModelCallsWaiting | AttemptFinished | TaskFinished | RequestFinished | DependencyInstalling \
    | DependencyInstalled | DataDownload | ImagePull | ImageRemoved
