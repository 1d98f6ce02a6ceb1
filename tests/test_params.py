"""Component params: converted once by the registry to the class's Params struct, with one readable error."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

import msgspec
import pytest

from agentcompass._errors import ConfigError
from agentcompass._validate import env_vars, size_bytes
from agentcompass.environments.local.provider import LocalProvider
from agentcompass.harnesses.shell_agent import ShellAgent, ShellAgentParams
from agentcompass.interfaces import ComponentContext, EnvOpenSpec
from agentcompass.params import convert_params, selection_params
from agentcompass.registry import Registries


class Untyped:
    """A third-party component that declares no Params: it gets the dict as given."""

    def __init__(self, params: dict[str, Any], ctx: ComponentContext) -> None:
        self.params = params


def test_the_registry_converts_the_dict_once_to_the_declared_struct() -> None:
    reg = Registries(use_entry_points=False)["harness"]
    params = reg.convert_params(ShellAgent, {"step_limit": 3}, "shell_agent")
    assert isinstance(params, ShellAgentParams) and params.step_limit == 3 and params.command_timeout == 60.0
    assert convert_params(ShellAgent, params, "harness shell_agent") is params  # a struct is not converted again
    assert ShellAgent(params, ComponentContext()).step_limit == 3
    raw = {"anything": [1]}
    assert reg.convert_params(Untyped, raw, "untyped") is raw


@pytest.mark.parametrize(("params", "field", "needles"), [
    ({"step_limt": 3}, "harness.params.step_limt", ["Did you mean 'step_limit'?", "observation_limit"]),
    ({"step_limit": 0}, "harness.params.step_limit", ["an integer >= 1 and <= 1000000", "got 0"]),
    ({"step_limit": True}, "harness.params.step_limit", ["an integer", "got True"]),
    ({"command_timeout": float("nan")}, "harness.params.command_timeout", ["a number > 0", "got nan"]),
    ({"model_params": ["temperature"]}, "harness.params.model_params", ["a mapping of (a string) to (any value)"]),
])
def test_errors_name_the_param_the_value_and_what_is_allowed(params: dict[str, Any], field: str,
                                                            needles: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        Registries(use_entry_points=False)["harness"].convert_params(ShellAgent, params, "shell_agent")
    assert info.value.field == field
    assert "harness shell_agent" in str(info.value)
    for needle in needles:
        assert needle in str(info.value)


class _Ordered(msgspec.Struct, forbid_unknown_fields=True):
    order: Literal["zeta", "alpha", "mid"] = "zeta"


class _WithLiteral:
    Params: ClassVar[type[_Ordered]] = _Ordered


def test_literal_values_are_listed_in_their_declared_order() -> None:
    with pytest.raises(ConfigError, match="must be one of zeta, alpha, mid, got 'beta'") as info:
        convert_params(_WithLiteral, {"order": "beta"}, "benchmark c")
    assert info.value.field == "benchmark.params.order"


def test_a_benchmark_without_a_declaration_keeps_the_former_selection_names() -> None:
    class Old:
        pass

    assert set(selection_params(Old)) == {"sample_ids", "limit", "categories", "shard", "repeat"}


def test_sizes_are_one_rule() -> None:
    assert size_bytes("1.5GiB", "f") == 3 << 29 and size_bytes(4096, "f") == 4096
    for bad in ("0m", 0, "lots"):
        with pytest.raises(ConfigError, match="size like '512m'") as info:
            size_bytes(bad, "environment.params.memory")  # type: ignore[arg-type]
        assert info.value.field == "environment.params.memory"


@pytest.mark.parametrize("name", ["MY_VAR", "lower_case", "_X1"])
def test_env_var_names_a_shell_keeps_reach_the_command(name: str, tmp_path: Path) -> None:
    import asyncio

    assert env_vars({name: "v"}, "env") == {name: "v"}

    async def run() -> str:
        provider = LocalProvider({"base_dir": str(tmp_path)}, ComponentContext(run_id="envs"))
        try:
            env = await provider.open(EnvOpenSpec(run_id="envs", task_id="t", env={name: "v"}))
            try:
                return (await env.exec(["env"], timeout=30)).stdout
            finally:
                await env.close()
        finally:
            await provider.aclose()

    assert f"{name}=v" in asyncio.run(run()).splitlines()


@pytest.mark.parametrize("name", ["", "A=B", "NUL\0", 3, "MY-VAR", "lower.case", "1ABC"])
def test_env_var_names_a_shell_would_drop_are_refused_naming_the_field(name: Any) -> None:
    with pytest.raises(ConfigError, match="invalid variable name") as info:
        env_vars({name: "v"}, "env")
    assert info.value.field == "env"
