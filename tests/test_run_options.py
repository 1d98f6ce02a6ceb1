"""The run options are declared once (agentcompass/run_options.py over the specs' fields): run_evaluation's
arguments and defaults, the spec fields they set and their descriptions all come from that one declaration."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import msgspec
import msgspec.inspect as mi
import pytest

from agentcompass import run_evaluation
from agentcompass.run_options import (
    LAUNCH_ONLY,
    REQUIRED,
    RUN_OPTIONS,
    SDK_DEFAULTS,
    evaluation_spec,
)
from agentcompass.specs import (
    DEFAULT_MAX_BACKOFF_S,
    ComponentSpec,
    ModelSpec,
    OrchestrationSpec,
    RunRequestSpec,
    parse_orchestration,
)

PACKAGE = Path(__file__).resolve().parents[1] / "agentcompass"
SPECS = (ComponentSpec, ModelSpec, RunRequestSpec, OrchestrationSpec)


def test_run_evaluations_arguments_are_the_declared_options_in_order_with_their_defaults() -> None:
    params = inspect.signature(run_evaluation).parameters
    assert list(params) == [o.name for o in RUN_OPTIONS]
    for name, p in params.items():
        expected = SDK_DEFAULTS.get(name, inspect.Parameter.empty)
        assert p.default == expected and type(p.default) is type(expected), name
    assert [n for n, p in params.items() if p.default is inspect.Parameter.empty] == ["benchmark", "harness", "model"]


def test_run_evaluations_defaults_are_not_written_as_literals() -> None:
    tree = ast.parse((PACKAGE / "api.py").read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "run_evaluation")
    defaults = [*fn.args.defaults, *fn.args.kw_defaults]
    assert defaults and not [ast.unparse(d) for d in defaults if d is not None and not isinstance(d, ast.Subscript)]


def _fields(cls: type[msgspec.Struct]) -> list[tuple[str, mi.Type]]:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return [(f.name, f.type) for f in info.fields]


@pytest.mark.parametrize("cls", SPECS, ids=lambda c: c.__name__)
def test_every_spec_field_has_a_one_line_description(cls: type[msgspec.Struct]) -> None:
    for name, t in _fields(cls):
        assert isinstance(t, mi.Metadata), f"{cls.__name__}.{name} has no msgspec.Meta(description=...)"
        about = (t.extra_json_schema or {}).get("description", "")
        assert about.strip() and "\n" not in about, f"{cls.__name__}.{name}"


def test_every_option_has_a_one_line_help() -> None:
    for opt in RUN_OPTIONS:
        assert opt.help.strip() and "\n" not in opt.help, opt.name


def test_every_field_a_single_request_can_set_is_a_run_option() -> None:
    set_by = {o.field for o in RUN_OPTIONS if o.field}
    reached = {f.rsplit(".", 1)[0] for f in set_by if f.count(".") == 2}  # request.model.base_url -> request.model
    for name, _ in _fields(RunRequestSpec):
        assert f"request.{name}" in set_by or f"request.{name}" in reached, name
    for name, _ in _fields(ModelSpec):
        assert f"request.model.{name}" in set_by, name
    for component in ("benchmark", "harness", "environment"):
        for name, _ in _fields(ComponentSpec):
            assert f"request.{component}.{name}" in set_by, (component, name)
    for name, _ in _fields(OrchestrationSpec):
        assert (f"launch.{name}" in set_by) != (name in LAUNCH_ONLY), name


def test_the_options_defaults_are_the_spec_fields() -> None:
    spec = evaluation_spec({"benchmark": "b", "harness": "h", "model": "m"})
    assert spec == parse_orchestration({"requests": [{"benchmark": "b", "harness": "h", "model": "m"}]})
    # omit_defaults drops a field whose value is its default: only the selection is left (the environment is a
    # new default ComponentSpec each time, so it is kept)
    assert msgspec.to_builtins(spec) == {"requests": [{"benchmark": {"id": "b"}, "harness": {"id": "h"},
                                                       "model": {"id": "m"}, "environment": {"id": "local"}}]}
    assert SDK_DEFAULTS["max_backoff_s"] == DEFAULT_MAX_BACKOFF_S == spec.requests[0].max_backoff_s
    assert SDK_DEFAULTS["environment"] == "local" and SDK_DEFAULTS["benchmark_params"] is None
    assert {o.name for o in RUN_OPTIONS if o.default is REQUIRED} == {"benchmark", "harness", "model"}


def test_each_option_lands_at_its_spec_field() -> None:
    spec = evaluation_spec({"benchmark": "b", "harness": "h", "model": "m", "environment": "docker",
                            "environment_params": {"x": 1}, "model_base_url": "http://h/v1",
                            "model_api_protocol": "anthropic-messages", "max_backoff_s": 5.0, "run_name": "n",
                            "timeout_seconds": 9.0, "log_level": "debug", "recipe_dirs": ["r"]})
    request = spec.requests[0]
    assert (request.environment.id, request.environment.params) == ("docker", {"x": 1})
    assert (request.model.base_url, request.model.api_protocol) == ("http://h/v1", "anthropic-messages")
    assert (request.max_backoff_s, request.name) == (5.0, "n")
    assert (spec.timeout_seconds, spec.log_level, spec.recipe_dirs) == (9.0, "DEBUG", ["r"])


def _constants(path: Path, value: object) -> list[int]:
    return [n.lineno for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Constant) and type(n.value) is type(value) and n.value == value]


def test_the_backoff_default_is_written_once() -> None:
    users = ["specs.py", "api.py", "cli.py", "run_options.py", "engine/runtime.py", "engine/task_actor.py",
             "engine/request_actor.py", "engine/request_builder.py", "engine/model_access.py", "models/retry.py",
             "models/factory.py"]
    found = {u: _constants(PACKAGE / u, DEFAULT_MAX_BACKOFF_S) for u in users}
    assert {u: lines for u, lines in found.items() if lines} == {"specs.py": found["specs.py"]}
    assert len(found["specs.py"]) == 1
