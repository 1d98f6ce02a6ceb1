"""Bad input gets one readable paragraph naming the field, never a traceback from deep inside."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass import ConfigError
from agentcompass.specs import parse_orchestration


def _run(tmp_path: Path, **kw: object) -> None:
    args: dict[str, object] = {"results_dir": str(tmp_path), "progress": "none"}
    args.update(kw)
    bench = args.pop("benchmark", "shell_tasks")
    harness = args.pop("harness", "shell_agent")
    env = args.pop("environment", "local")
    agentcompass.run_evaluation(bench, harness, "scripted", env, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(("kind", "value", "listed"), [
    ("benchmark", "no_such_bench", "shell_tasks"),
    ("harness", "no_such_harness", "shell_agent"),
    ("environment", "no_such_env", "local"),
])
def test_unknown_component_ids_list_the_known_ones(tmp_path: Path, kind: str, value: str, listed: str) -> None:
    with pytest.raises(ConfigError) as info:
        _run(tmp_path, **{kind: value})
    msg = str(info.value)
    assert f"Unknown {kind} id {value!r}" in msg and listed in msg and f"`{kind}`" in msg
    assert info.value.field == kind


def test_wrong_type_in_a_request_field_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _run(tmp_path, task_concurrency="many")
    assert "task_concurrency" in str(info.value) and "Expected `int`" in str(info.value)


def test_out_of_range_value_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"requests\[0\]\.max_retries"):
        parse_orchestration({"requests": [{"benchmark": "shell_tasks", "harness": "none", "model": "scripted",
                                           "max_retries": -1}]})


def test_unknown_field_in_a_spec_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"unknown field `concurency`.*spelling"):
        parse_orchestration({"requests": [{"benchmark": "shell_tasks", "harness": "none", "model": "scripted",
                                           "concurency": 3}]})


def test_wrong_type_in_benchmark_params_names_the_param(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sample_ids"):
        _run(tmp_path, benchmark_params={"sample_ids": 5})


def test_unknown_benchmark_param_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="smaple_ids"):
        _run(tmp_path, benchmark_params={"smaple_ids": ["files/hello_world"]})


def test_bad_network_policy_value_lists_the_allowed_values(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"environment_params.network_policy.*\"public\", \"none\", \"model\""):
        _run(tmp_path, environment_params={"network_policy": "offline"})


def test_local_environment_refuses_a_policy_it_cannot_enforce(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="network_policy \"none\".*docker") as info:
        _run(tmp_path, environment_params={"run_network_policy": "none"})
    assert info.value.field == "environment_params.run_network_policy"
    assert "`environment_params.run_network_policy`" in str(info.value)
    assert not any(tmp_path.iterdir())  # refused before any task started


def test_results_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "results.txt"
    f.write_text("precious")
    with pytest.raises(ConfigError, match="results_dir.*is a file"):
        _run(tmp_path, results_dir=str(f))
    assert f.read_text() == "precious"  # nothing already written is lost


def test_unknown_provider_in_provider_limits(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="provider_limits.*dokcer.*docker"):
        _run(tmp_path, provider_limits={"dokcer": 2})


def test_invalid_retry_pattern_names_its_index(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"retry_pattern_list\[1\]"):
        _run(tmp_path, retry_pattern_list=["ok", "(unclosed"])


def test_empty_requests_list_is_refused() -> None:
    with pytest.raises(ConfigError, match="requests"):
        parse_orchestration({"requests": []})


def test_existing_run_id_without_reuse_is_refused(tmp_path: Path) -> None:
    _run(tmp_path, harness="none", run_id="r1")
    with pytest.raises(ConfigError, match="already exists.*reuse=True"):
        _run(tmp_path, harness="none", run_id="r1")


def test_unknown_reuse_run_id_is_refused_before_any_run_directory_exists(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"reuse_run_id.*'no-such-run'.*no run directory") as info:
        _run(tmp_path, reuse_run_id="no-such-run")
    assert info.value.field == "reuse_run_id"
    assert not any(p.is_file() for p in tmp_path.rglob("*")), "nothing may be written for a refused request"


def test_unknown_provider_in_env_open_qps_is_refused_with_the_closest_match(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"env_open_qps\.dokcer.*Did you mean 'docker'") as info:
        _run(tmp_path, env_open_qps={"dokcer": 2})
    assert info.value.field == "env_open_qps.dokcer"


def test_data_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    a_file = tmp_path / "data.jsonl"
    a_file.write_text("{}\n")
    with pytest.raises(ConfigError, match=r"`data_dir`.*is a file, not a directory") as info:
        _run(tmp_path / "r", data_dir=str(a_file))
    assert info.value.field == "data_dir"


# --------------------------------------------------------------------------- NaN, infinities, huge counts

_NOT_FINITE = [float("nan"), float("inf"), float("-inf")]
_DEAD_URL = "http://127.0.0.1:9/v1"  # never called: every case is refused while the request resolves

#: (run_evaluation kwargs that put ``value`` into one numeric setting, the field the error must name)
_NUMERIC_FIELDS: list[tuple[str, Any]] = [
    ("harness_params.agent_timeout", lambda v: {"harness_params": {"agent_timeout": v}}),
    ("harness_params.setup_timeout", lambda v: {"harness_params": {"setup_timeout": v}}),
    ("harness.params.command_timeout", lambda v: {"harness_params": {"command_timeout": v}}),
    ("benchmark_params.verify_timeout", lambda v: {"benchmark_params": {"verify_timeout": v}}),
    ("benchmark.params.eval_timeout", lambda v: {"benchmark_params": {"eval_timeout": v}}),
    ("environment_params.open_timeout", lambda v: {"environment_params": {"open_timeout": v}}),
    ("environment_params.close_timeout", lambda v: {"environment_params": {"close_timeout": v}}),
    ("environment.params.default_timeout", lambda v: {"environment_params": {"default_timeout": v}}),
    ("model_params.timeout", lambda v: {"model_base_url": _DEAD_URL, "model_params": {"timeout": v}}),
    ("model_params.total_timeout", lambda v: {"model_base_url": _DEAD_URL, "model_params": {"total_timeout": v}}),
    ("model_params.connect_timeout",
     lambda v: {"model_base_url": _DEAD_URL, "model_params": {"connect_timeout": v}}),
    ("model_params.retry_backoff", lambda v: {"model_base_url": _DEAD_URL, "model_params": {"retry_backoff": v}}),
    ("model_params.retry_max_wait",
     lambda v: {"model_base_url": _DEAD_URL, "model_params": {"retry_max_wait": v}}),
    ("model_params.price_per_million.input",
     lambda v: {"model_params": {"price_per_million": {"input": v, "output": 1.0}}}),
    ("timeout_seconds", lambda v: {"timeout_seconds": v}),
    ("env_open_qps", lambda v: {"env_open_qps": v}),
    ("env_open_qps.local", lambda v: {"env_open_qps": {"local": v}}),
]


def _one_task(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` selecting a single task, so that code which wrongly accepts a value fails fast."""
    bench = {"limit": 1, **kwargs.get("benchmark_params", {})}
    return {**kwargs, "benchmark_params": bench}


@pytest.mark.parametrize("value", _NOT_FINITE, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize(("field", "kwargs"), _NUMERIC_FIELDS, ids=[f for f, _ in _NUMERIC_FIELDS])
def test_nan_and_infinities_are_refused_naming_the_field(tmp_path: Path, field: str, kwargs: Any,
                                                        value: float) -> None:
    with pytest.raises(ConfigError) as info:
        _run(tmp_path / "r", **_one_task(kwargs(value)))
    leaf = field.rsplit(".", 1)[-1]
    assert info.value.field is not None and info.value.field.endswith(leaf), info.value.field
    assert leaf in str(info.value)
    assert not (tmp_path / "r").exists() or not any(p.is_file() for p in (tmp_path / "r").rglob("*")), \
        "nothing may be written for a refused request"


#: counts with their cap: one past the cap is refused naming the field, whatever path it came in by.
_COUNT_FIELDS: list[tuple[str, Any]] = [
    ("benchmark.params.k", lambda v: {"benchmark_params": {"k": v}}),
    ("benchmark.params.repeat", lambda v: {"benchmark_params": {"repeat": v}}),
    ("benchmark.params.limit", lambda v: {"benchmark_params": {"limit": v}}),
    ("harness.params.step_limit", lambda v: {"harness_params": {"step_limit": v}}),
    ("task_concurrency", lambda v: {"task_concurrency": v}),
    ("max_retries", lambda v: {"max_retries": v}),
    ("provider_limits.local", lambda v: {"provider_limits": {"local": v}}),
    ("model_params.retries", lambda v: {"model_base_url": _DEAD_URL, "model_params": {"retries": v}}),
]


@pytest.mark.parametrize(("field", "kwargs"), _COUNT_FIELDS, ids=[f for f, _ in _COUNT_FIELDS])
def test_huge_counts_are_refused_naming_the_field_and_the_range(tmp_path: Path, field: str, kwargs: Any) -> None:
    with pytest.raises(ConfigError) as info:
        _run(tmp_path / "r", **_one_task(kwargs(10**12)))
    leaf = field.rsplit(".", 1)[-1]
    assert info.value.field is not None and info.value.field.endswith(leaf), info.value.field
    assert leaf in str(info.value) and "<=" in str(info.value)
    assert not (tmp_path / "r").exists() or not any(p.is_file() for p in (tmp_path / "r").rglob("*"))


def test_k_up_to_the_cap_is_accepted() -> None:
    from agentcompass._validate import MAX_K
    from agentcompass.benchmarks.shell_tasks.benchmark import ShellTasks
    from agentcompass.interfaces import ComponentContext

    assert ShellTasks({"k": MAX_K}, ComponentContext(run_id="r", request="q")).k == MAX_K
