"""The contracts between the engine and its components: Benchmark, Harness, Environment, ModelClient.

A component is a class constructed as ``Cls(params, ctx: ComponentContext)`` that subclasses its declared base
(``Benchmark``, ``Harness``, ``EnvironmentProvider``: defined in ``benchmarks/base.py``, ``harnesses/base.py`` and
``environments/base.py``, re-exported here); the registries map short names to ``module:Class`` paths. Adding a
benchmark means adding one file with a ``Benchmark`` subclass and one registry line (or an entry point / recipe dir).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import IO, Any, Literal, Protocol, runtime_checkable

import msgspec

from .benchmarks.base import Benchmark
from .common.error_kinds import ErrorKind
from .environments.base import EnvironmentProvider, ProviderCapabilities
from .harnesses.base import Harness
from .models.pricing import PriceTable
from .records import AttemptRecord, TaskDetail, Trajectory, Usage

# ----------------------------------------------------------------------------- tasks


class TaskSpec(msgspec.Struct, omit_defaults=True):
    """A task as the benchmark loaded it. ``ground_truth`` is for the evaluator only."""

    task_id: str
    category: str | None = None
    input: dict[str, Any] = {}
    ground_truth: Any = None
    metadata: dict[str, Any] = {}

    def public(self) -> TaskSpec:
        """The task without its ground truth: the only form ``Benchmark.prepare`` ever sees."""
        return msgspec.structs.replace(self, ground_truth=None)


class ImageRecipe(msgspec.Struct, frozen=True, omit_defaults=True):
    """How to build a task's ``image`` locally when it is missing (no registry needed): a Docker build
    context directory on the host and the Dockerfile inside it."""

    context_dir: str
    dockerfile: str = "Dockerfile"


class Resources(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """What a task says its environment needs (e.g. ``[environment]`` of a Harbor ``task.toml``). A provider
    applies what it can enforce; its own limits (``cpus``, ``memory``), where the user set them, win over
    the task's."""

    cpus: float | None = None
    memory_bytes: int | None = None


class PreparedTask(msgspec.Struct, omit_defaults=True):
    """What the harness and the agent's environment may see. ``image_recipe`` builds ``image`` when it is
    missing; providers without images ignore both."""

    task_id: str
    prompt: str
    files: dict[str, str] = {}
    workdir: str | None = None
    image: str | None = None
    image_recipe: ImageRecipe | None = None
    env: dict[str, str] = {}
    metadata: dict[str, Any] = {}
    #: the task's own budget for the agent (seconds); the engine uses the smaller of it and ``agent_timeout``
    agent_timeout_s: float | None = None
    #: what the task's environments (the agent's and the verifier's) need
    resources: Resources | None = None


# ----------------------------------------------------------------------------- environments

NetworkMode = Literal["public", "none", "model", "allowlist"]


class NetworkPolicy(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True):
    """Network access of an environment; ``allowlist`` takes hosts."""

    mode: NetworkMode = "public"
    hosts: list[str] = []


class ExecResult(msgspec.Struct, omit_defaults=True):
    """Result of one command. Output is capped: head and tail kept, ``output_bytes`` is the real size."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    duration_s: float = 0.0
    truncated: bool = False
    output_bytes: int = 0

    @property
    def output(self) -> str:
        """stdout and stderr together, as an agent would read them."""
        if self.stderr and self.stdout:
            return f"{self.stdout}\n{self.stderr}"
        return self.stdout or self.stderr


class Mount(msgspec.Struct, frozen=True):
    """A host directory made visible inside an environment at ``target`` (e.g. an installed agent's program).
    Providers with ``capabilities.mounts`` honour it; the others ignore it."""

    source: str
    target: str
    read_only: bool = True


class EnvOpenSpec(msgspec.Struct, omit_defaults=True):
    """What the pool asks a provider to open. ``mounts``: host directories to bind (for the agent's
    environment, from ``Harness.mounts()``). ``upcoming``: how many of the request's attempts were still to start
    when this one started (None: unknown); a provider that opens environments ahead of need starts no more than
    that, so a run's last opens leave none unused."""

    run_id: str
    task_id: str
    role: Literal["agent", "verifier"] = "agent"
    image: str | None = None
    image_recipe: ImageRecipe | None = None
    workdir: str | None = None
    env: dict[str, str] = {}
    files: dict[str, str] = {}
    network: NetworkPolicy = msgspec.field(default_factory=NetworkPolicy)
    labels: dict[str, str] = {}
    keep: bool = False
    mounts: list[Mount] = []
    upcoming: int | None = None
    resources: Resources | None = None


@runtime_checkable
class Environment(Protocol):
    """An open sandbox. ``close`` is idempotent and bounded in time."""

    id: str
    workdir: str

    async def exec(self, cmd: str | Sequence[str], *, timeout: float | None = None, cwd: str | None = None,
                   env: dict[str, str] | None = None) -> ExecResult: ...
    async def write_file(self, path: str, data: bytes | str) -> None: ...
    async def read_file(self, path: str) -> bytes: ...
    #: ``tar_bytes``: the tar, or a file object holding it (read from its start, streamed)
    async def put_archive(self, path: str, tar_bytes: bytes | IO[bytes]) -> None: ...
    #: capped by the provider's ``archive_*_limit_bytes``; providers also offer ``get_archive_file`` (on disk)
    async def get_archive(self, path: str) -> bytes: ...
    async def set_network_policy(self, policy: NetworkPolicy) -> None: ...
    async def close(self) -> None: ...


# ----------------------------------------------------------------------------- models


class ModelResponse(msgspec.Struct, omit_defaults=True):
    """One model completion normalised across protocols."""

    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[Any] = []
    finish_reason: str | None = None
    usage: Usage = msgspec.field(default_factory=Usage)
    latency_s: float = 0.0
    raw: Any = None


class ModelClient(Protocol):
    """Talks to one model endpoint."""

    model_id: str

    async def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                       **params: Any) -> ModelResponse: ...
    async def aclose(self) -> None: ...


# ----------------------------------------------------------------------------- harnesses


class HarnessResult(msgspec.Struct, omit_defaults=True):
    """What an agent produced."""

    final_answer: str | None = None
    patch: str | None = None
    trajectory: Trajectory = msgspec.field(default_factory=Trajectory)
    usage: Usage = msgspec.field(default_factory=Usage)
    artifacts: dict[str, Any] = {}
    error: str | None = None
    #: an ``ErrorKind`` (the engine refuses another value: the attempt is an ``engine_error``)
    error_kind: ErrorKind | None = None


class ReferenceSolution(msgspec.Struct, frozen=True):
    """A task's known-good solution: ``files`` (relative path -> content) to put in ``directory`` of the agent's
    environment, then ``command`` run there. Given only to a harness declaring ``oracle = True``."""

    files: dict[str, bytes]
    command: list[str]
    directory: str = "/solution"
    timeout_s: float = 600.0
    env: dict[str, str] = {}


class RunContext(msgspec.Struct, omit_defaults=True):
    """Identity of the attempt a component is working on (for logs and labels).

    ``model_env``: when the request routes model calls through the gateway (``wrap_api_key``, a sandbox, or a
    harness declaring ``needs_model_endpoint = True``), the variables that point an agent on the host at it
    (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``ANTHROPIC_*``, ``AGENTCOMPASS_MODEL_*``); the key in them is
    an envelope or route token for this try, never the real key. Empty otherwise."""

    request: str
    run_id: str
    task_id: str
    attempt: int
    try_no: int = 1
    model_env: dict[str, str] = {}
    #: the try's live trajectory: a harness that appends its steps here as it goes keeps them when the engine
    #: stops it at ``agent_timeout`` (the attempt is still graded, and its detail shows what the agent did).
    trajectory: Trajectory = msgspec.field(default_factory=Trajectory)
    #: the task's reference solution: set only for a harness that declares ``oracle = True``.
    solution: ReferenceSolution | None = None
    #: the try's live artifacts: a harness that keeps what it has learnt so far here (e.g. an installed agent's
    #: exit code and transcript tail) has it in the engine's partial result when the run is stopped.
    artifacts: dict[str, Any] = msgspec.field(default_factory=dict)
    #: the benchmark's tools for this try (an ``agentcompass.tools.ToolSession``, from ``Benchmark.tool_session``);
    #: None when the benchmark offers none. Typed ``Any``: a live object, never encoded.
    tools: Any = None


# ----------------------------------------------------------------------------- benchmarks


class EvalResult(msgspec.Struct, omit_defaults=True):
    """The verifier's verdict on one attempt."""

    correct: bool
    score: float | None = None
    extra: dict[str, Any] = {}
    #: flags about how the attempt was solved (e.g. suspected reward hacking), kept in the attempt's analysis.
    analysis: dict[str, Any] = {}


class EvalContext:
    """What ``Benchmark.evaluate`` gets: the full task (with ground truth), the attempt, what
    ``Benchmark.collect`` took out of the agent's environment, and a way to open a fresh verifier
    environment the agent never saw. The agent's environment is already closed at this point, so an
    evaluation never holds two environments (that would deadlock under ``provider_limits``)."""

    def __init__(self, task: TaskSpec, prepared: PreparedTask, result: HarnessResult,
                 artifacts: dict[str, Any], open_verifier: Any, log: logging.Logger) -> None:
        self.task = task
        self.prepared = prepared
        self.result = result
        self.artifacts = artifacts
        self._open_verifier = open_verifier
        self.log = log
        #: what ``evaluate`` has recorded so far (e.g. the judge call it is waiting on): the attempt's ``extra``
        #: when ``evaluate`` runs out of ``verify_timeout`` or raises without an ``extra`` of its own.
        self.partial_extra: dict[str, Any] = {}

    def open_verifier(self, *, image: str | None = None, files: dict[str, str] | None = None,
                      workdir: str | None = None) -> AbstractAsyncContextManager[Environment]:
        """Open a verifier environment (same provider as the agent's, ``role=verifier``); closed on exit."""
        opener: AbstractAsyncContextManager[Environment] = self._open_verifier(
            image=image, files=files or {}, workdir=workdir)
        return opener


class MetricsAccumulator(Protocol):
    """Aggregates metrics one committed task at a time (so memory stays flat). A benchmark may offer its
    own through ``new_accumulator()``; the default is ``agentcompass.metrics.DefaultAccumulator``."""

    def add(self, detail: TaskDetail) -> None: ...
    def result(self) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """(metrics, metrics by category)."""
        ...


class ComponentContext(msgspec.Struct, omit_defaults=True):
    """What every component constructor gets besides its params."""

    run_id: str = ""
    request: str = ""
    data_dir: str | None = None
    auto_install_dependencies: bool = False
    #: attempts per task: the benchmark's resolved ``k``, set once the benchmark is constructed (so the harness,
    #: the provider and the analyzers see it; the benchmark's own constructor sees 1).
    k: int = 1
    #: the request's environment provider id (e.g. ``docker``), so a benchmark can refuse one it cannot use.
    environment: str = ""
    #: the launch's ``provider_limits`` entry for that provider (None: no limit), which a provider that starts
    #: environments ahead of need keeps within.
    provider_limit: int | None = None
    #: the launch's cap on that provider's creates in flight (``max_env_creates_in_flight``, else the provider's
    #: ``capabilities.max_creates_in_flight``; None: not given), which such a provider's creates wait for as well.
    max_creates_in_flight: int | None = None
    #: waits for the launch's next open slot of that provider (``env_open_qps``; the engine's own opens take
    #: theirs from the same pacer), for such a provider's creates; None outside the engine.
    open_pacer: Callable[[], Awaitable[float]] | None = None
    #: the request's benchmark id (e.g. ``swebench_verified``), so a harness can default to settings made for it.
    benchmark: str = ""
    #: the request's ``verify_timeout`` (seconds one ``Benchmark.evaluate`` may take), so a benchmark can fit its
    #: own waits (e.g. a judge call) inside it; None outside the engine.
    verify_timeout: float | None = None
    #: the model's prices (model param ``price_per_million``), None when not given: a harness's own cost limit.
    price: PriceTable | None = None
    #: ``report_download(what, bytes_done, bytes_total)``: a constructor's data download, shown as progress
    #: (``DataDownload`` events). Callable from any thread; None outside the engine.
    report_download: Callable[[str, int, int], None] | None = None
    #: ``report_install(component, package, seconds, error)``: a component's own install (an agent program, a
    #: venv) has started (``seconds`` None) or ended after ``seconds`` (``error`` None: it worked), shown as
    #: progress (``DependencyInstalling`` / ``DependencyInstalled`` events). Callable from any thread; None
    #: outside the engine. ``dependencies.reported_install`` wraps an install in the two calls.
    report_install: Callable[[str, str, float | None, str | None], None] | None = None
    #: set by the engine when the request is cancelled while a constructor runs (in a worker thread, which
    #: cannot be interrupted): a constructor's long wait (a download, a lock) checks it and gives up.
    cancelled: threading.Event | None = None


__all__ = [
    "AttemptRecord", "Benchmark", "ComponentContext", "EnvOpenSpec", "Environment", "EnvironmentProvider",
    "EvalContext", "EvalResult", "ExecResult", "Harness", "HarnessResult", "ImageRecipe", "MetricsAccumulator",
    "ModelClient", "ModelResponse", "Mount", "NetworkPolicy", "PreparedTask", "ProviderCapabilities",
    "ReferenceSolution", "Resources", "RunContext", "TaskSpec",
]
