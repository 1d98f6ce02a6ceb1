"""The run options, declared once: each argument of ``run_evaluation``, the spec field it sets and its ``run`` flag.

An option's type, default and one-line description are its spec field's own (``specs.py``, the description in
``msgspec.Meta(description=...)``); this table adds where each SDK argument lands and its command-line shape.
``run_evaluation`` takes its defaults from ``SDK_DEFAULTS`` and builds its spec with ``evaluation_spec``;
``agentcompass run`` builds its flags and their help from ``RUN_OPTIONS`` (``cli.py``)."""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from typing import Any

import msgspec
import msgspec.inspect as mi

from .params import literal_values
from .specs import OrchestrationSpec, RunRequestSpec, parse_orchestration, parse_request

#: the roots of a field path: ``request.<field>...`` is on the single request, ``launch.<field>`` on the launch.
_ROOTS: dict[str, type[msgspec.Struct]] = {"request": RunRequestSpec, "launch": OrchestrationSpec}
#: OrchestrationSpec fields ``run_evaluation`` does not set: they matter only across several requests.
LAUNCH_ONLY = ("requests", "task_concurrency", "max_concurrent_tasks", "max_env_creates_in_flight")
#: the default of an option that has none (the positional benchmark, harness and model)
REQUIRED = msgspec.NODEFAULT


@dataclasses.dataclass(frozen=True)
class RunOption:
    """One argument of ``run_evaluation``: where it lands in the spec, its ``run`` flags, type, default and help."""

    name: str
    #: the spec field it sets (``request.model.base_url``, ``launch.progress``); None: SDK only
    field: str | None
    #: the ``run`` flags, the first naming argparse's dest; one without dashes is positional; () = no flag
    flags: tuple[str, ...]
    #: one line: the spec field's description, or the table's own for an option whose field is shared
    help: str
    #: ``run_evaluation``'s default (``REQUIRED`` for the positional ones); None where the spec's is ``{}``/``[]``
    default: Any
    #: the spec field's default (``REQUIRED`` when it has none)
    spec_default: Any
    #: the spec field's type (``msgspec.inspect``), its description and ``| None`` taken off; None: SDK only
    type: mi.Type | None
    #: the allowed values, in their declared order, when the spec type is a fixed set (a ``Literal``)
    choices: tuple[Any, ...] = ()
    #: for the command line only: said after the help (e.g. the flag's own syntax)
    cli_note: str = ""
    #: argparse keywords the type does not give (a metavar, a converter, nargs)
    cli: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def dest(self) -> str:
        """The argparse attribute of the first flag (``--env-params`` -> ``env_params``)."""
        return self.flags[0].lstrip("-").replace("-", "_")


def _described(t: mi.Type) -> tuple[mi.Type, str]:
    """``t`` without its ``msgspec.Meta(description=...)``, and that description."""
    if isinstance(t, mi.Metadata):
        return t.type, str((t.extra_json_schema or {}).get("description", ""))
    return t, ""


@functools.cache
def _type_info(cls: type[msgspec.Struct]) -> mi.Type:
    return mi.type_info(cls)


@functools.cache
def _annotations(cls: type[Any]) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _field_info(path: str) -> tuple[mi.Type, Any, str, tuple[Any, ...]]:
    """(type, default, description, literal values in declared order) of the spec field at ``path``; a nested
    field's default is its parent's default's (``request.environment.id``: ``"local"``)."""
    root, *names = path.split(".")
    node: mi.Type = _type_info(_ROOTS[root])
    default: Any = REQUIRED
    about = ""
    choices: tuple[Any, ...] = ()
    for name in names:
        struct, _ = _described(node)
        assert isinstance(struct, mi.StructType), path
        f = next(f for f in struct.fields if f.name == name)
        # msgspec.inspect sorts a Literal's values; the annotation keeps the order they were written in
        choices = tuple(literal_values(_annotations(struct.cls)[name]))
        if default is not REQUIRED:
            default = getattr(default, name)
        elif f.default is not msgspec.NODEFAULT:
            default = f.default
        elif f.default_factory is not msgspec.NODEFAULT:
            default = f.default_factory()
        node, about = _described(f.type)
    return node, default, about, choices


def _without_none(t: mi.Type) -> mi.Type:
    if isinstance(t, mi.UnionType):
        kept = [u for u in t.types if not isinstance(u, mi.NoneType)]
        return kept[0] if len(kept) == 1 else mi.UnionType(tuple(kept))
    return t


def _option(name: str, field: str | None, *flags: str, about: str = "", cli_note: str = "",
            **cli: Any) -> RunOption:
    if field is None:
        return RunOption(name, None, flags, about, None, None, None, (), cli_note, cli)
    t, spec_default, description, choices = _field_info(field)
    default = None if spec_default in ({}, []) else spec_default
    return RunOption(name, field, flags, about or description, default, spec_default, _without_none(t), choices,
                     cli_note, cli)


def _level(value: str) -> str:
    return value.upper()  # a level in any case, as the specs take it (argparse checks choices after this)


#: every argument of ``run_evaluation``, in its order.
RUN_OPTIONS: tuple[RunOption, ...] = (
    _option("benchmark", "request.benchmark.id", "benchmark",
            about="the benchmark: a registry id (agentcompass list benchmarks) or module:Class"),
    _option("harness", "request.harness.id", "harness",
            about="the harness (the agent): a registry id (agentcompass list harnesses) or module:Class"),
    _option("model", "request.model.id", "model"),
    _option("environment", "request.environment.id", "--env", metavar="ID",
            about="the environment provider: local, docker, ray_docker or module:Class"),
    _option("benchmark_params", "request.benchmark.params", "--benchmark-params", about="the benchmark's params"),
    _option("harness_params", "request.harness.params", "--harness-params", about="the harness's params"),
    _option("environment_params", "request.environment.params", "--env-params", "--environment-params",
            about="the environment provider's params"),
    _option("model_base_url", "request.model.base_url", "--model-base-url", metavar="URL"),
    _option("model_api_key", "request.model.api_key", "--model-api-key", metavar="KEY",
            cli_note="; as a flag it is visible to every process on this machine: prefer MODEL_API_KEY or "
                     "--model-api-key-file"),
    _option("model_api_protocol", "request.model.api_protocol", "--model-api-protocol"),
    _option("model_params", "request.model.params", "--model-params"),
    _option("wrap_api_key", "request.wrap_api_key", "--wrap-api-key"),
    _option("task_concurrency", "request.task_concurrency", "--task-concurrency", metavar="N"),
    _option("max_retries", "request.max_retries", "--max-retries", metavar="N"),
    _option("max_backoff_s", "request.max_backoff_s", "--max-backoff-s", metavar="S"),
    _option("retry_pattern_list", "request.retry_pattern_list", "--retry-pattern", metavar="REGEX"),
    _option("provider_limits", "launch.provider_limits", "--provider-limits"),
    _option("env_open_qps", "launch.env_open_qps", "--env-open-qps", metavar="X", type=float,
            cli_note="; as a flag: one number for every provider"),
    _option("timeout_seconds", "launch.timeout_seconds", "--timeout-seconds", metavar="S"),
    _option("reuse", "request.reuse", "--reuse"),
    _option("reuse_run_id", "request.reuse_run_id", "--reuse-run-id", metavar="ID"),
    _option("overwrite", "request.overwrite", "--overwrite"),
    _option("keep_environment", "request.keep_environment", "--keep-environment"),
    _option("progress", "launch.progress", "--progress"),
    _option("on_progress", None, about="a callback for each progress event (sync or async)"),
    _option("log_level", "launch.log_level", "--log-level", type=_level),
    _option("file_log_level", "request.file_log_level", "--file-log-level", type=_level),
    _option("auto_install_dependencies", "request.auto_install_dependencies", "--auto-install-dependencies"),
    _option("recipe_dirs", "launch.recipe_dirs", "--recipe-dir", metavar="DIR"),
    _option("results_dir", "request.results_dir", "--results-dir", metavar="DIR"),
    _option("data_dir", "request.data_dir", "--data-dir", metavar="DIR"),
    _option("run_id", "request.run_id", "--run-id", metavar="ID"),
    _option("run_name", "request.name", "--run-name", metavar="NAME"),
    _option("enable_analysis", "request.enable_analysis", "--enable-analysis", nargs="?", const="all",
            metavar="IDS", cli_note="; as a flag: alone or all for every analyzer, else comma-separated ids"),
)
OPTIONS_BY_NAME: dict[str, RunOption] = {o.name: o for o in RUN_OPTIONS}
#: ``run_evaluation``'s default of each keyword argument (the positional ``benchmark``, ``harness``, ``model``
#: have none).
SDK_DEFAULTS: dict[str, Any] = {o.name: o.default for o in RUN_OPTIONS if o.default is not REQUIRED}


def evaluation_spec(values: Mapping[str, Any]) -> OrchestrationSpec:
    """The OrchestrationSpec of one ``run_evaluation`` call: each option's value (its default when absent) at its
    spec field, None standing for an empty dict or list. The request is checked first, so an error in it names
    the request's field."""
    request: dict[str, Any] = {}
    launch: dict[str, Any] = {}
    for opt in RUN_OPTIONS:
        if opt.field is None:
            continue
        value = values.get(opt.name, opt.default)
        if value is REQUIRED:  # left for parse_request's error naming the missing field
            continue
        if value is None and opt.spec_default in ({}, []):
            value = type(opt.spec_default)()
        root, *path = opt.field.split(".")
        node = request if root == "request" else launch
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return parse_orchestration({**launch, "requests": [parse_request(request)]})
