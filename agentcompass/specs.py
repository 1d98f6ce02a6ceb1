"""User-facing specifications: what to run. msgspec Structs, validated on construction via ``parse_*``."""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast, get_args

import msgspec
import msgspec.inspect as mi

from ._errors import ConfigError, did_you_mean
from ._validate import MAX_SECONDS, Seconds, check_number

#: the most concurrent tasks / environments / retries one setting may ask for (a typo, not a plan, beyond).
MAX_CONCURRENCY = 10_000
MAX_RETRIES = 100
#: environment opens per second, per provider.
MAX_QPS = 10_000.0
#: the slowest pacing allowed (one open per 100 s): below it the opens are spaced so far apart that a run sits
#: until its timeout (``1e-300`` is one open per 1e300 s). 0 is still allowed and means no pacing.
MIN_QPS = 0.01

ApiProtocol = Literal["openai-chat", "openai-responses", "anthropic-messages"]
ProgressMode = Literal["auto", "rich", "plain", "none"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
LOG_LEVELS: tuple[str, ...] = get_args(LogLevel)
NetworkPolicyName = Literal["public", "none", "model", "allowlist"]

#: a cap on one backoff wait, seconds: > 0 and at most a day (so NaN and infinity are refused too).
BackoffSeconds = Annotated[float, msgspec.Meta(gt=0, le=86400)]
Concurrency = Annotated[int, msgspec.Meta(ge=1, le=MAX_CONCURRENCY)]
RetryCount = Annotated[int, msgspec.Meta(ge=0, le=MAX_RETRIES)]
# the upper bound also refuses infinity (and msgspec refuses NaN against any bound)
Qps = Annotated[float, msgspec.Meta(ge=0, le=MAX_QPS)]


def _about(text: str) -> msgspec.Meta:
    """A field's one-line description: the SDK's and the ``run`` flag's help (``agentcompass.run_options``)."""
    return msgspec.Meta(description=text)


#: defaults also used outside these specs (the engine's and the model client's own, when no spec gives one)
DEFAULT_MAX_BACKOFF_S = 120.0
DEFAULT_API_PROTOCOL: ApiProtocol = "openai-chat"


class ComponentSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A benchmark, harness or environment selection: a registry id (or ``module:Class``) and its params."""

    id: Annotated[str, _about("a registry id or module:Class")]
    params: Annotated[dict[str, Any], _about("the component's params (its params class checks them)")] = {}


class ModelSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A model endpoint. ``id`` ``scripted`` with no base_url uses the built-in in-process scripted model."""

    id: Annotated[str, _about("the model id; scripted (or scripted-...) without a base URL is the built-in "
                              "scripted model")]
    base_url: Annotated[str | None, _about("the model endpoint's base URL, e.g. http://127.0.0.1:8000/v1")] = None
    api_key: Annotated[str | None, _about("the model API key, sent as a bearer token and redacted from every "
                                          "file")] = None
    api_protocol: Annotated[ApiProtocol, _about("the API the model endpoint speaks")] = DEFAULT_API_PROTOCOL
    params: Annotated[dict[str, Any], _about(
        "model params, sent in the request body except the client's reserved keys and the retry keys retries, "
        "retry_backoff, retry_max_wait")] = {}


class RunRequestSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One (benchmark, harness, model, environment) selection with its own run directory and outcome."""

    benchmark: Annotated[ComponentSpec, _about("the benchmark: a registry id or module:Class, and its params")]
    harness: Annotated[ComponentSpec, _about("the harness (the agent): a registry id or module:Class, and its "
                                             "params")]
    model: Annotated[ModelSpec, _about("the model under test")]
    environment: Annotated[ComponentSpec, _about(
        "the environment provider (local, docker, ray_docker or module:Class) and its params")] = msgspec.field(
        default_factory=lambda: ComponentSpec(id="local"))
    name: Annotated[str | None, _about("the request's name in progress, logs and events, and the prefix of a "
                                       "generated run id; default <benchmark>/<harness>/<model>")] = None
    run_id: Annotated[str | None, _about("the run directory's name; default [name-]YYYYmmdd-HHMMSS-xxxxxx "
                                         "(UTC)")] = None
    wrap_api_key: Annotated[bool, _about("harnesses and sandboxes get a signed per-try envelope for the model "
                                         "gateway, never the real key")] = False
    task_concurrency: Annotated[Concurrency, _about("attempts of this request running at once")] = 8
    max_retries: Annotated[RetryCount, _about("extra tries of an attempt after a retryable failure")] = 0
    max_backoff_s: Annotated[BackoffSeconds, _about(
        "cap on any one wait between tries, seconds: task-level retries and the model client's (Retry-After "
        "included)")] = DEFAULT_MAX_BACKOFF_S
    retry_pattern_list: Annotated[list[str], _about(
        "regexes: a failure whose '<error_kind>: <error>' matches one is retryable")] = []
    reuse: Annotated[bool, _about("continue a run: reuse the finished tasks of run_id, or of the latest run of "
                                  "this selection")] = False
    reuse_run_id: Annotated[str | None, _about("copy the finished tasks of this earlier run (same results_dir, "
                                               "benchmark, harness and model)")] = None
    overwrite: Annotated[bool, _about("move an existing run at run_id aside (<run_id>.overwritten-<time>) and "
                                      "start over")] = False
    keep_environment: Annotated[bool, _about("leave environments in place after use (for debugging)")] = False
    auto_install_dependencies: Annotated[bool, _about("pip-install the Python packages the components declare "
                                                      "when they are missing")] = False
    results_dir: Annotated[str, _about("root of the run directories (created if missing)")] = "results"
    data_dir: Annotated[str | None, _about("where components keep downloaded data and caches; default "
                                           "$AGENTCOMPASS_DATA_DIR, else ~/.cache/agentcompass/data")] = None
    file_log_level: Annotated[LogLevel, _about("level of the run's logs/run.log (any case)")] = "INFO"
    enable_analysis: Annotated[bool | list[str | ComponentSpec], _about(
        "analyzers run on each attempt: true = every registered one, or a list of ids / {id, params}")] = False

    def __post_init__(self) -> None:
        self.file_log_level = _normalise_log_level(self.file_log_level, "file_log_level")
        # Python callers may write components and the model as in YAML: an id string or an {"id": ...} dict.
        self.benchmark = _as_spec(self.benchmark, ComponentSpec, "benchmark")
        self.harness = _as_spec(self.harness, ComponentSpec, "harness")
        self.model = _as_spec(self.model, ModelSpec, "model")
        self.environment = _as_spec(self.environment, ComponentSpec, "environment")


class OrchestrationSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """An ordered set of requests sharing one task limit, one timeout and one environment pool."""

    requests: Annotated[list[RunRequestSpec], _about("the requests, run in order, each with its own run "
                                                     "directory and outcome")]
    task_concurrency: Annotated[Concurrency | None, _about(
        "attempts running at once across all requests (each request also has its own task_concurrency)")] = None
    max_concurrent_tasks: Annotated[Concurrency | None, _about(
        "accepted alias of task_concurrency, folded into it on construction (so always None after)")] = None
    timeout_seconds: Annotated[Seconds | None, _about("bound on the whole run, seconds")] = None
    provider_limits: Annotated[dict[str, Concurrency], _about(
        "most environments open at once per provider (process-wide), e.g. {\"docker\": 8}")] = {}
    env_open_qps: Annotated[Qps | dict[str, Qps] | None, _about(
        "environment opens per second, per provider: 0 = no pacing, else 0.01-10000; default 10 for remote "
        "providers, 0 otherwise")] = None
    max_env_creates_in_flight: Annotated[Concurrency | dict[str, Concurrency] | None, _about(
        "provider.open calls at once, process-wide: one int for every provider or one per provider name; default "
        "each provider's own (docker: 4)")] = None
    progress: Annotated[ProgressMode, _about("the console's progress display (auto: rich on a terminal, else "
                                             "plain)")] = "auto"
    log_level: Annotated[LogLevel, _about("the console's log level (any case)")] = "WARNING"
    recipe_dirs: Annotated[list[str], _about("trusted directories of recipe files")] = []

    def __post_init__(self) -> None:
        self.log_level = _normalise_log_level(self.log_level, "log_level")
        if self.max_concurrent_tasks is not None:
            _check_alias(self.task_concurrency, self.max_concurrent_tasks)
            self.task_concurrency, self.max_concurrent_tasks = self.max_concurrent_tasks, None
        if isinstance(self.requests, list | tuple):
            self.requests = [r if isinstance(r, RunRequestSpec) else _request_at(r, i)
                             for i, r in enumerate(self.requests)]


def _normalise_log_level(value: Any, field: str) -> LogLevel:
    """``value`` as an upper-case level name (``"info"`` -> ``"INFO"``); a ConfigError naming ``field`` and the
    allowed names otherwise."""
    level = _level_named(value)
    if level is not None:
        return level
    raise ConfigError(f"Invalid `{field}` {value!r}: expected one of {', '.join(LOG_LEVELS)} (any case).",
                      field=field)


def _level_named(value: Any) -> LogLevel | None:
    """The ``LOG_LEVELS`` entry ``value`` names in any case, or None. The entry itself, not an equal string:
    msgspec's ``omit_defaults`` tells a default by identity, so ``"info"`` must become the very ``"INFO"``."""
    if isinstance(value, str):
        upper = value.upper()
        for level in LOG_LEVELS:
            if level == upper:
                return cast(LogLevel, level)
    return None


def _canonical_log_level(raw: dict[str, Any], key: str) -> None:
    """``raw[key]`` as its ``LOG_LEVELS`` entry, before msgspec checks it; another value is left for msgspec's
    error."""
    level = _level_named(raw.get(key))
    if level is not None:
        raw[key] = level


def _request_at(raw: Any, i: int) -> RunRequestSpec:
    """``parse_request`` for ``requests[i]``, its error's field prefixed with ``requests[i].``."""
    try:
        return parse_request(raw, f"requests[{i}]")
    except ConfigError as exc:
        if exc.field and not exc.field.startswith("requests["):
            exc.field = f"requests[{i}].{exc.field}"
        raise


def _check_alias(canonical: Any, alias: Any) -> None:
    if canonical is not None and alias is not None and canonical != alias:
        raise ConfigError(f"Invalid orchestration spec: `task_concurrency` ({canonical!r}) and its alias "
                          f"`max_concurrent_tasks` ({alias!r}) differ; give only `task_concurrency`.",
                          field="task_concurrency")


def _as_spec(value: Any, cls: type[Any], field: str) -> Any:
    """``value`` as a ``cls`` (ComponentSpec / ModelSpec): kept if it is one, else from an id or a dict."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str) and value:
        return cls(id=value)
    if isinstance(value, dict):
        try:
            return msgspec.convert(value, cls)
        except msgspec.ValidationError as exc:
            err = readable_validation_error(exc, field, cls)
            sub = f"{field}.{err.field}" if err.field else field
            raise ConfigError(str(err).replace(f"`{err.field}`", f"`{sub}`", 1), field=sub) from None
    shape = '{"id": ..., "params": {...}}' if cls is ComponentSpec else '{"id": ..., "base_url": ..., "api_key": ...}'
    raise ConfigError(f"Invalid `{field}`: expected a {cls.__name__}, a dict {shape} or a non-empty id string, "
                      f"got {value!r}.", field=field)


_INT = {"integer": True}
#: numeric fields checked by ``check_number`` before msgspec, so NaN/inf/out-of-range values (also inside a
#: per-provider dict) get an error naming the exact field, the value and the allowed range.
_REQUEST_NUMBERS: dict[str, dict[str, Any]] = {
    "task_concurrency": {"ge": 1, "le": MAX_CONCURRENCY, **_INT},
    "max_retries": {"ge": 0, "le": MAX_RETRIES, **_INT},
}
_LAUNCH_NUMBERS: dict[str, dict[str, Any]] = {
    "task_concurrency": {"ge": 1, "le": MAX_CONCURRENCY, **_INT},
    "max_concurrent_tasks": {"ge": 1, "le": MAX_CONCURRENCY, **_INT},
    "timeout_seconds": {"gt": 0, "le": MAX_SECONDS},
    "provider_limits": {"ge": 1, "le": MAX_CONCURRENCY, **_INT},
    "env_open_qps": {"ge": MIN_QPS, "le": MAX_QPS},
    "max_env_creates_in_flight": {"ge": 1, "le": MAX_CONCURRENCY, **_INT},
}


def _check_numbers(raw: Any, table: dict[str, dict[str, Any]], where: str) -> None:
    """``check_number`` on each number of ``table``'s fields in ``raw`` (values of a dict field too); values
    of another type are left to msgspec, whose error names the expected type."""
    if not isinstance(raw, dict):
        return
    for key, bounds in table.items():
        value = raw.get(key)
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for sub, v in items:
            if isinstance(v, int | float) and not isinstance(v, bool):
                field = f"{where}{key}" + (f".{sub}" if sub is not None else "")
                if key == "env_open_qps":
                    _check_qps(v, field)
                else:
                    check_number(v, field, **bounds)


def _check_qps(value: float, field: str) -> None:
    """An open rate: 0 (no pacing) or a finite number in ``[MIN_QPS, MAX_QPS]``."""
    if value == 0:
        return
    check_number(value, field, ge=MIN_QPS, le=MAX_QPS, what="0 (no pacing) or a number")


def _component(value: Any, field: str) -> Any:
    """Accept ``"id"`` as shorthand for ``{"id": "id"}``."""
    if isinstance(value, str):
        return {"id": value}
    return value


def _normalise_request(raw: Any, where: str) -> Any:
    if not isinstance(raw, dict):
        return raw
    out = dict(raw)
    _canonical_log_level(out, "file_log_level")
    for key in ("benchmark", "harness", "environment"):
        if key in out:
            out[key] = _component(out[key], f"{where}.{key}")
    if isinstance(out.get("model"), str):
        out["model"] = {"id": out["model"]}
    return out


def _struct_at(root: type[msgspec.Struct], path: str | None) -> mi.StructType | None:
    """The Struct type found at ``path`` (``requests[0].model``) below ``root``, or None when it is not one."""
    node: mi.Type = mi.type_info(root)
    for part in (path or "").replace("[", ".[").split("."):
        if not part:
            continue
        if isinstance(node, mi.Metadata):  # a described field: its type
            node = node.type
        if isinstance(node, mi.UnionType):  # e.g. ``X | None``: the one Struct member, if any
            node = next((t for t in node.types if isinstance(t, mi.StructType)), node)
        if part.startswith("[") and isinstance(node, mi.ListType | mi.VarTupleType):
            node = node.item_type
        elif isinstance(node, mi.StructType):
            found = next((f.type for f in node.fields if f.encode_name == part), None)
            if found is None:
                return None
            node = found
        else:
            return None
    if isinstance(node, mi.Metadata):
        node = node.type
    if isinstance(node, mi.UnionType):
        node = next((t for t in node.types if isinstance(t, mi.StructType)), node)
    return node if isinstance(node, mi.StructType) else None


def readable_validation_error(exc: msgspec.ValidationError, what: str,
                              struct: type[msgspec.Struct] | None = None) -> ConfigError:
    """Turn msgspec's ``Expected `int`, got `str` - at `$.requests[0].task_concurrency` `` into a paragraph.

    With ``struct`` (the type that was converted), an unknown field also gets the closest valid name."""
    text = str(exc)
    field = None
    if " - at `" in text:
        text, _, path = text.partition(" - at `")
        field = path.rstrip("`").removeprefix("$").lstrip(".") or None
    hint = ""
    if text.startswith("Object contains unknown field `"):
        unknown = text.removeprefix("Object contains unknown field `").rstrip("`")
        at = _struct_at(struct, field) if struct is not None else None
        close = did_you_mean(unknown, [f.encode_name for f in at.fields]) if at is not None else ""
        hint = f"{close} Remove it or check its spelling."
    elif field and field.endswith("api_protocol"):
        hint = " Allowed: openai-chat, openai-responses, anthropic-messages."
    elif field and field.endswith("progress"):
        hint = " Allowed: auto, rich, plain, none."
    elif field and field.endswith("log_level"):
        hint = f" Allowed (any case): {', '.join(LOG_LEVELS)}."
    field = _capped(field) if field else None
    where = f" in field `{field}`" if field else ""
    return ConfigError(f"Invalid {what}{where}: {_capped(text)}.{hint}", field=field)


#: characters of an input's own text (an unknown field's name, a path through keys) an error quotes
_QUOTE_CAP = 200


def _capped(text: str) -> str:
    # the names come from the user's file or call: a 1 MB key must not become a 1 MB error message and log line
    if len(text) <= _QUOTE_CAP:
        return text
    half = _QUOTE_CAP // 2
    return f"{text[:half]}...[{len(text) - 2 * half} characters omitted]...{text[-half:]}"


def _id_of(value: Any, default: str) -> str:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, dict) and isinstance(value.get("id"), str) and value["id"]:
        return str(value["id"])
    return default


def parse_orchestration_isolated(raw: Any) -> tuple[OrchestrationSpec, dict[int, ConfigError]]:
    """Like ``parse_orchestration``, but a request that fails validation does not sink the launch.

    Each invalid request is replaced by a stand-in (same name and ids where they can be read) and its error is
    returned by index, so it ends with a failed outcome while the valid requests run. Launch-wide fields are
    still checked strictly."""
    if not isinstance(raw, dict) or not isinstance(raw.get("requests"), list):
        return parse_orchestration(raw), {}
    errors: dict[int, ConfigError] = {}
    requests: list[Any] = []
    for i, r in enumerate(raw["requests"]):
        try:
            requests.append(parse_request(r, f"requests[{i}]"))
        except ConfigError as exc:
            errors[i] = exc
            r = r if isinstance(r, dict) else {}
            name = r.get("name") if isinstance(r.get("name"), str) else None
            requests.append(RunRequestSpec(
                benchmark=ComponentSpec(_id_of(r.get("benchmark"), "invalid")),
                harness=ComponentSpec(_id_of(r.get("harness"), "invalid")),
                model=ModelSpec(_id_of(r.get("model"), "invalid")), name=name))
    spec = parse_orchestration({**raw, "requests": [msgspec.to_builtins(r) for r in requests]})
    return spec, errors


def parse_request(raw: Any, where: str = "request") -> RunRequestSpec:
    """Validate a dict (or a RunRequestSpec) into a RunRequestSpec with a readable error."""
    if isinstance(raw, RunRequestSpec):
        raw = msgspec.to_builtins(raw)
    _check_numbers(raw, _REQUEST_NUMBERS, "" if where == "request" else f"{where}.")
    try:
        return msgspec.convert(_normalise_request(raw, where), RunRequestSpec)
    except msgspec.ValidationError as exc:
        raise readable_validation_error(exc, where, RunRequestSpec) from None


def parse_orchestration(raw: Any) -> OrchestrationSpec:
    """Validate a dict / OrchestrationSpec (e.g. loaded from YAML) into an OrchestrationSpec."""
    if isinstance(raw, OrchestrationSpec):
        raw = msgspec.to_builtins(raw)
    if not isinstance(raw, dict):
        raise ConfigError(
            f"Invalid orchestration spec: expected a mapping with a `requests` list, got {type(raw).__name__}.",
            field="requests",
        )
    raw = dict(raw)
    _canonical_log_level(raw, "log_level")
    _check_numbers(raw, _LAUNCH_NUMBERS, "")
    _check_alias(raw.get("task_concurrency"), raw.get("max_concurrent_tasks"))
    if isinstance(raw.get("requests"), list):
        for i, r in enumerate(raw["requests"]):
            _check_numbers(r, _REQUEST_NUMBERS, f"requests[{i}].")
        raw["requests"] = [_normalise_request(r, f"requests[{i}]") for i, r in enumerate(raw["requests"])]
    try:
        spec = msgspec.convert(raw, OrchestrationSpec)
    except msgspec.ValidationError as exc:
        raise readable_validation_error(exc, "orchestration spec", OrchestrationSpec) from None
    if not spec.requests:
        raise ConfigError("Invalid orchestration spec: `requests` is empty; give at least one request.",
                          field="requests")
    return spec
