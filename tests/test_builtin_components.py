"""Every built-in component, built through the registry, calls its base's constructor: ``self.params`` is the
struct the registry converted (never converted again) and ``self.ctx`` the context it was given."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from agentcompass import ConfigError
from agentcompass.analyzers import Analyzer
from agentcompass.common.hub import DatasetDownloadError
from agentcompass.environments.local.provider import LocalParams, LocalProvider
from agentcompass.harnesses.shell_agent import ShellAgent, ShellAgentParams
from agentcompass.interfaces import Benchmark, ComponentContext, EnvironmentProvider, Harness
from agentcompass.params import params_type
from agentcompass.registry import BASES, BUILTINS, Kind, Registries, import_object

KINDS: tuple[Kind, ...] = ("benchmark", "harness", "environment", "analyzer")
BUILT_INS = [(kind, name) for kind in KINDS for name in BUILTINS[kind]]
BASE_OF = {"benchmark": Benchmark, "harness": Harness, "environment": EnvironmentProvider, "analyzer": Analyzer}


def test_the_bases_here_are_the_registrys() -> None:
    assert {kind: import_object(path) for kind, path in BASES.items()} == \
        {kind: base for kind, base in BASE_OF.items() if kind in BASES}


@pytest.mark.parametrize(("kind", "name"), BUILT_INS, ids=[f"{k}-{n}" for k, n in BUILT_INS])
def test_a_built_in_keeps_the_registrys_params_and_its_context(kind: Kind, name: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a benchmark whose data is not here fails at once, not downloading
    registry = Registries(use_entry_points=False)[kind]
    cls = registry.resolve(name)
    assert issubclass(cls, BASE_OF[kind])
    declared = params_type(cls)
    assert declared is not None, f"{kind} {name} declares no Params"
    params = registry.convert_params(cls, {}, name)
    assert type(params) is declared
    # environment "local": the benchmarks that need docker refuse it before loading anything
    ctx = ComponentContext(run_id="t", data_dir=str(tmp_path), environment="local")
    component = cls.__new__(cls)
    try:
        component.__init__(params, ctx)
    except (ConfigError, DatasetDownloadError):
        pass  # default params that cannot run here (no dataset, a required param): the base ran first
    assert component.params is params
    assert component.ctx is ctx


@pytest.mark.parametrize(("cls", "struct"), [(ShellAgent, ShellAgentParams), (LocalProvider, LocalParams)])
def test_a_dict_given_by_hand_is_converted_by_the_base(cls: type, struct: type[msgspec.Struct]) -> None:
    component = cls({}, ComponentContext())
    assert type(component.params) is struct


def test_a_bad_dict_given_by_hand_is_refused_as_the_registry_refuses_it() -> None:
    with pytest.raises(ConfigError) as by_hand:
        ShellAgent({"stepLimit": 3}, ComponentContext())
    with pytest.raises(ConfigError) as by_registry:
        Registries(use_entry_points=False)["harness"].convert_params(ShellAgent, {"stepLimit": 3}, "shell_agent")
    assert str(by_hand.value) == str(by_registry.value)
    assert by_hand.value.field == by_registry.value.field == "harness.params.stepLimit"
