"""The ``grading_version`` benchmark param of the SWE-bench family: its default, its checking, and where it is
recorded (params.json through ``resolved_settings``, the request identity, each attempt's report, the report)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench.benchmark import SWEBench, SWEBenchLocal
from agentcompass.benchmarks.swebench.multilingual import SWEBenchMultilingual
from agentcompass.engine.identity import request_identity
from agentcompass.interfaces import ComponentContext
from agentcompass.report import write_markdown
from agentcompass.rundata import RunData


def _ctx(tmp_path: Path) -> ComponentContext:
    return ComponentContext(environment="docker", data_dir=str(tmp_path / "data"))


def test_the_default_is_5_0_2_and_4_1_0_is_selectable(tmp_path: Path) -> None:
    assert SWEBenchLocal({}, _ctx(tmp_path)).resolved_settings() == {"grading_version": "5.0.2"}
    old = SWEBenchLocal({"grading_version": "4.1.0"}, _ctx(tmp_path))
    assert old.grading_version == "4.1.0" and old.resolved_settings() == {"grading_version": "4.1.0"}
    assert SWEBenchMultilingual({"local": True, "grading_version": "4.1.0"}, _ctx(tmp_path)).grading_version == "4.1.0"


@pytest.mark.parametrize("value", ["5", "4.0.0", "latest", 5])
def test_another_value_is_a_config_error_naming_the_field_and_the_allowed_values(tmp_path: Path,
                                                                                value: object) -> None:
    with pytest.raises(ConfigError) as err:
        SWEBenchLocal({"grading_version": value}, _ctx(tmp_path))
    assert err.value.field is not None and "grading_version" in err.value.field
    if isinstance(value, str):
        assert "'5.0.2', '4.1.0'" in str(err.value)


def test_the_version_is_part_of_the_request_identity() -> None:
    def identity(params: dict[str, object]) -> str:
        return request_identity(benchmark="swebench_verified", benchmark_params=params,
                                benchmark_version=SWEBench.version, harness="h", harness_params={}, model="m",
                                model_params={}, api_protocol="chat", environment="docker", environment_params={})

    assert identity({"grading_version": "4.1.0"}) != identity({})
    # results graded before the default became 5.0.2 (benchmark version "1") are not reused
    assert SWEBench.version == "2"


def test_the_report_shows_the_grading_version(tmp_path: Path) -> None:
    run = RunData(path=str(tmp_path), run_info={"status": "completed", "benchmark": "swebench_verified"},
                  params={"component_settings": {"benchmark": {"grading_version": "4.1.0"}}})
    out = io.StringIO()
    write_markdown(run, out)
    assert "| graded as swebench | 4.1.0 |" in out.getvalue()
