"""The SDK's call shapes: OrchestrationSpec.task_concurrency (alias max_concurrent_tasks) and dict / id-string
components and models in RunRequestSpec and OrchestrationSpec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentcompass
from agentcompass import ConfigError, OrchestrationSpec, RunRequestSpec
from agentcompass.specs import ComponentSpec, ModelSpec, parse_orchestration, parse_request

REQ: dict[str, Any] = {"benchmark": "shell_tasks", "harness": "none", "model": "scripted"}


def test_dicts_and_id_strings_become_component_and_model_specs() -> None:
    r = RunRequestSpec(name="a", benchmark={"id": "shell_tasks", "params": {"k": 2}}, harness="shell_agent",
                       model={"id": "gpt-5-mini", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"},
                       environment={"id": "local"})
    assert r.benchmark == ComponentSpec("shell_tasks", {"k": 2}) and r.harness == ComponentSpec("shell_agent")
    assert r.model == ModelSpec("gpt-5-mini", base_url="http://127.0.0.1:9/v1", api_key="k")
    assert r.environment == ComponentSpec("local")
    assert RunRequestSpec(benchmark="b", harness="h", model="scripted", environment="docker").environment.id == "docker"
    # the same request written with specs is the same value
    assert r == RunRequestSpec(name="a", benchmark=ComponentSpec("shell_tasks", {"k": 2}),
                               harness=ComponentSpec("shell_agent"), environment=ComponentSpec("local"),
                               model=ModelSpec("gpt-5-mini", base_url="http://127.0.0.1:9/v1", api_key="k"))


@pytest.mark.parametrize(("kw", "field", "text"), [
    ({"benchmark": 5}, "benchmark", "id string"),
    ({"harness": ""}, "harness", "id string"),
    ({"benchmark": {"idd": "shell_tasks"}}, "benchmark", "unknown field `idd`"),
    ({"benchmark": {"id": 3}}, "benchmark.id", "Expected `str`"),
    ({"environment": ["local"]}, "environment", "ComponentSpec"),
    ({"model": {"id": "m", "api_protocol": "grpc"}}, "model.api_protocol", "openai-chat"),
    ({"model": 1.5}, "model", "ModelSpec"),
])
def test_a_bad_shape_is_a_config_error_naming_the_field(kw: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(ConfigError, match=text) as info:
        RunRequestSpec(**{**REQ, **kw})
    assert info.value.field == field


def test_orchestration_requests_may_be_dicts() -> None:
    spec = OrchestrationSpec(requests=[REQ, {**REQ, "benchmark": {"id": "shell_tasks", "params": {"k": 2}}}])
    assert all(isinstance(r, RunRequestSpec) for r in spec.requests)
    assert spec.requests[1].benchmark.params == {"k": 2}
    with pytest.raises(ConfigError) as info:
        OrchestrationSpec(requests=[REQ, {**REQ, "task_concurrency": 0}])
    assert info.value.field == "requests[1].task_concurrency"
    with pytest.raises(ConfigError) as info:
        OrchestrationSpec(requests=[{**REQ, "benchmark": 3}])
    assert info.value.field == "requests[0].benchmark"


def test_task_concurrency_is_the_canonical_name_and_max_concurrent_tasks_its_alias() -> None:
    assert OrchestrationSpec(requests=[], task_concurrency=4).task_concurrency == 4
    aliased = OrchestrationSpec(requests=[], max_concurrent_tasks=4)
    assert aliased.task_concurrency == 4 and aliased.max_concurrent_tasks is None
    assert msgspec.to_builtins(aliased) == {"requests": [], "task_concurrency": 4}  # one name when written out
    assert OrchestrationSpec(requests=[], task_concurrency=4, max_concurrent_tasks=4).task_concurrency == 4
    for raw in ({"task_concurrency": 3}, {"max_concurrent_tasks": 3}, {"task_concurrency": 3,
                                                                        "max_concurrent_tasks": 3}):
        spec = parse_orchestration({"requests": [REQ], **raw})
        assert spec.task_concurrency == 3 and spec.max_concurrent_tasks is None
        assert "max_concurrent_tasks" not in msgspec.to_builtins(spec)


@pytest.mark.parametrize("build", [
    lambda: OrchestrationSpec(requests=[], task_concurrency=4, max_concurrent_tasks=8),
    lambda: parse_orchestration({"requests": [REQ], "task_concurrency": 4, "max_concurrent_tasks": 8}),
])
def test_both_names_with_different_values_is_a_config_error(build: Any) -> None:
    with pytest.raises(ConfigError, match="max_concurrent_tasks") as info:
        build()
    assert info.value.field == "task_concurrency"


@pytest.mark.parametrize(("raw", "field"), [({"task_concurrency": 0}, "task_concurrency"),
                                            ({"task_concurrency": "many"}, "task_concurrency"),
                                            ({"max_concurrent_tasks": 0}, "max_concurrent_tasks")])
def test_a_bad_launch_wide_limit_names_the_key_given(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_orchestration({"requests": [REQ], **raw})
    assert info.value.field == field


@pytest.mark.parametrize("key", ["task_concurrency", "max_concurrent_tasks"])
def test_the_launch_wide_limit_bounds_the_attempts_running_at_once(key: str, tmp_path: Path) -> None:
    result = agentcompass.launch({
        "requests": [{"benchmark": {"id": "shell_tasks", "params": {"categories": ["answer"]}},
                      "harness": "openai_chat", "model": "scripted", "task_concurrency": 8,
                      "results_dir": str(tmp_path), "name": name} for name in ("a", "b")],
        key: 1, "progress": "none"})
    assert result.status == "completed" and result.peak_concurrent_tasks == 1
    params = json.loads(Path(result["a"].paths.params).read_text())
    assert "max_concurrent_tasks" not in json.dumps(params)


@pytest.mark.parametrize(("qps", "field"), [(1e-300, "env_open_qps"), (0.001, "env_open_qps"),
                                            (-1.0, "env_open_qps"), (float("nan"), "env_open_qps"),
                                            ({"local": 1e-300}, "env_open_qps.local"),
                                            ({"docker": float("inf")}, "env_open_qps.docker")])
def test_an_open_rate_below_the_floor_is_refused_naming_the_field_and_range(qps: Any, field: str,
                                                                           tmp_path: Path) -> None:
    # a tiny rate spaces opens ~1/qps seconds apart: the run would sit until its timeout
    for start in (lambda: parse_orchestration({"requests": [REQ], "env_open_qps": qps}),
                  lambda: agentcompass.launch({"requests": [{**REQ, "results_dir": str(tmp_path)}],
                                               "env_open_qps": qps, "progress": "none"}),
                  lambda: agentcompass.run_evaluation("shell_tasks", "none", "scripted", env_open_qps=qps,
                                                      results_dir=str(tmp_path), progress="none")):
        with pytest.raises(ConfigError, match=r"0 \(no pacing\) or a number >= 0\.01") as info:
            start()
        assert info.value.field == field
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


@pytest.mark.parametrize("qps", [0, 0.0, 0.01, 2, {"local": 0}, {"local": 0.5, "docker": 10_000}])
def test_zero_and_rates_from_the_floor_up_are_accepted(qps: Any) -> None:
    assert parse_orchestration({"requests": [REQ], "env_open_qps": qps}).env_open_qps == qps


def test_log_levels_are_taken_in_any_case_and_kept_upper_case() -> None:
    spec = parse_orchestration({"requests": [{**REQ, "file_log_level": "debug"}], "log_level": "Info"})
    assert (spec.log_level, spec.requests[0].file_log_level) == ("INFO", "DEBUG")
    assert parse_request({**REQ, "file_log_level": "warning"}).file_log_level == "WARNING"
    built = OrchestrationSpec(requests=[RunRequestSpec(**REQ, file_log_level="error")],  # type: ignore[arg-type]
                              log_level="critical")  # type: ignore[arg-type]
    assert (built.log_level, built.requests[0].file_log_level) == ("CRITICAL", "ERROR")


@pytest.mark.parametrize(("build", "field"), [
    (lambda: parse_orchestration({"requests": [REQ], "log_level": "loud"}), "log_level"),
    (lambda: parse_orchestration({"requests": [{**REQ, "file_log_level": "verbose"}]}), "requests[0].file_log_level"),
    (lambda: parse_request({**REQ, "file_log_level": 10}), "file_log_level"),
    (lambda: RunRequestSpec(**REQ, file_log_level="trace"), "file_log_level"),  # type: ignore[arg-type]
])
def test_a_bad_log_level_names_the_field_and_the_allowed_values(build: Any, field: str) -> None:
    with pytest.raises(ConfigError, match="DEBUG, INFO, WARNING, ERROR, CRITICAL") as info:
        build()
    assert info.value.field == field and f"`{field}`" in str(info.value)


def test_run_evaluation_takes_lower_case_log_levels(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation("shell_tasks", "openai_chat", "scripted", results_dir=str(tmp_path),
                                      progress="none", benchmark_params={"sample_ids": ["answer/count_lines"]},
                                      log_level="error", file_log_level="debug")
    assert out.status == "completed" and out.run_dir is not None
    assert " DEBUG " in (out.run_dir / "logs" / "run.log").read_text()
    with pytest.raises(ConfigError, match="DEBUG, INFO, WARNING, ERROR, CRITICAL") as info:
        agentcompass.run_evaluation("shell_tasks", "none", "scripted", results_dir=str(tmp_path), progress="none",
                                    log_level="chatty")
    assert info.value.field == "log_level"


@pytest.mark.parametrize(("build", "field", "meant"), [
    (lambda: parse_orchestration({"requests": [{**REQ, "max_retriez": 2}]}), "max_retriez", "max_retries"),
    (lambda: parse_orchestration({"requests": [REQ], "timeout_secs": 60}), "timeout_secs", "timeout_seconds"),
    (lambda: parse_orchestration({"requests": [{**REQ, "model": {"id": "m", "base_ulr": "http://h/v1"}}]}),
     "base_ulr", "base_url"),
    (lambda: parse_request({**REQ, "benchmark": {"id": "shell_tasks", "param": {}}}), "param", "params"),
    (lambda: parse_request({**REQ, "concurency": 3}), "concurency", "task_concurrency"),
    (lambda: RunRequestSpec(**{**REQ, "harness": {"id": "none", "parms": {}}}), "parms", "params"),
])
def test_an_unknown_field_names_the_closest_valid_field(build: Any, field: str, meant: str) -> None:
    with pytest.raises(ConfigError) as info:
        build()
    assert f"unknown field `{field}`" in str(info.value)
    assert f"Did you mean {meant!r}?" in str(info.value)


def test_an_unknown_field_with_a_huge_name_is_quoted_capped_not_whole() -> None:
    # a request file's key is the user's (or a generator's) text: a 1 MB name must not become a 1 MB error and log
    name = "q" * 1_000_000
    with pytest.raises(ConfigError) as info:
        parse_orchestration({"requests": [{**REQ, name: 1}]})
    message = str(info.value)
    assert len(message) < 1_000 and "unknown field `qqq" in message and "characters omitted" in message
    assert "Remove it or check its spelling." in message
