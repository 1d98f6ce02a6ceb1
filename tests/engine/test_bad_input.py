"""Bad input gets one readable paragraph naming the field, never a traceback from deep inside."""

from __future__ import annotations

from pathlib import Path

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
