"""The engine is built as docs/engine.md says: one EnvironmentPool per launch (no pool state shared between
launches but the process-wide counters), a RequestActor whose message loop is short (the request is built by
``request_builder.py``), and a docs tree naming the classes and files that exist."""

from __future__ import annotations

import ast
import asyncio
import re
import uuid
from pathlib import Path
from typing import Any, cast

import pytest

import agentcompass
from agentcompass import OrchestrationSpec, RunRequestSpec
from agentcompass.engine import supervisor as supervisor_module
from agentcompass.engine.env_pool import EnvironmentPool
from agentcompass.engine.process_slots import PROCESS_COUNTERS, ProviderCounters
from agentcompass.interfaces import Environment, EnvironmentProvider, EnvOpenSpec
from agentcompass.specs import ComponentSpec, ModelSpec

ENGINE = Path(agentcompass.__file__).parent / "engine"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "engine.md"


# ----------------------------------------------------------------------------- one pool per launch


class RecordingPool(EnvironmentPool):
    made: list[RecordingPool] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.opened: list[str] = []
        self.made.append(self)

    async def open(self, provider: EnvironmentProvider, spec: EnvOpenSpec, *, timeout: float,
                   request: str) -> Environment:
        env = await super().open(provider, spec, timeout=timeout, request=request)
        self.opened.append(request)
        return env


def _request(tmp_path: Path, name: str) -> RunRequestSpec:
    return RunRequestSpec(benchmark=ComponentSpec("shell_tasks", {"sample_ids": ["files/hello_world",
                                                                                 "text/reverse_lines"]}),
                          harness=ComponentSpec("shell_agent"), model=ModelSpec("scripted"),
                          environment=ComponentSpec("local", {"base_dir": str(tmp_path)}), name=name,
                          results_dir=str(tmp_path / "results"))


async def test_two_concurrent_launches_on_one_loop_have_pools_of_their_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    RecordingPool.made.clear()
    monkeypatch.setattr(supervisor_module, "EnvironmentPool", RecordingPool)
    specs = [OrchestrationSpec(requests=[_request(tmp_path, f"launch{i}")], progress="none", env_open_qps=50.0)
             for i in range(2)]
    results = await asyncio.gather(*(agentcompass.async_launch(s) for s in specs))
    assert [r.status for r in results] == ["completed", "completed"]
    first, second = RecordingPool.made
    assert first is not second
    # each launch's opens went through its own pool, and each pool paces with pacers of its own
    assert sorted(first.opened + second.opened) == ["launch0"] * 2 + ["launch1"] * 2
    assert set(first.opened) != set(second.opened)
    assert first._states["local"] is not second._states["local"]
    assert first._states["local"].pacer is not second._states["local"].pacer
    assert not first._held and not second._held


def test_each_supervisor_makes_its_pool_and_hands_that_one_to_its_requests(tmp_path: Path) -> None:
    sups = [supervisor_module.Supervisor(OrchestrationSpec(requests=[_request(tmp_path, "r")], progress="none"))
            for _ in range(2)]
    assert sups[0].pool is not sups[1].pool
    assert all(s.services.pool is s.pool for s in sups)


async def test_pools_with_counters_of_their_own_do_not_count_against_each_other() -> None:
    name = f"fake-{uuid.uuid4().hex[:8]}"

    class Env:
        id, workdir = "e", "/"

        async def close(self) -> None:
            pass

    class Provider(EnvironmentProvider):
        def __init__(self) -> None:  # no params, no context: only ``open`` is used
            pass

        async def open(self, spec: EnvOpenSpec) -> Environment:
            return cast(Environment, Env())

    Provider.name = name
    provider = Provider()
    spec = EnvOpenSpec(run_id="r", task_id="t")
    own = [EnvironmentPool({name: 1}, 0, lambda e: None, counters=ProviderCounters()) for _ in range(2)]
    async with asyncio.timeout(10):  # with one shared counter, the second open would wait forever
        envs = [await p.open(provider, spec, timeout=5, request="r") for p in own]
    assert PROCESS_COUNTERS.active(name).count == 0
    for p, env in zip(own, envs, strict=True):
        await p.close(env, timeout=5)


def test_the_pool_module_holds_no_lock_and_no_mutable_global() -> None:
    tree = ast.parse((ENGINE / "env_pool.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "threading" not in imported
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if names == ["__all__"]:
                continue
            mutable = isinstance(node.value, ast.Dict | ast.List | ast.Set) or (
                isinstance(node.value, ast.Call) and ast.unparse(node.value.func) != "logging.getLogger")
            assert not mutable, f"module-level state in env_pool.py: {ast.unparse(node)}"


# ----------------------------------------------------------------------------- the request actor's loop


def _functions(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text())
    return {n.name: (n.end_lineno or n.lineno) - n.lineno + 1 for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_the_request_actors_message_loop_is_short_and_builds_nothing() -> None:
    path = ENGINE / "request_actor.py"
    lengths = _functions(path)
    assert lengths["_execute"] + lengths["_receive"] < 80, lengths
    assert max(lengths.values()) < 80, lengths
    source = path.read_text()
    # installing, constructing components, creating the run directory and writing params are the builder's
    for name in ("ensure_installed", "ComponentContext", "build_analyzers", "create_model_client", "write_params",
                 "convert_params", ".create()"):
        assert name not in source, name
        assert name in (ENGINE / "request_builder.py").read_text(), name


# ----------------------------------------------------------------------------- the docs name what exists


def test_the_docs_tree_names_classes_in_the_files_it_gives() -> None:
    text = DOCS.read_text()
    tree = text[text.index("async_launch(spec)"):].split("```", 1)[0]
    rows = re.findall(r"([A-Z]\w+)(?: \N{MULTIPLICATION SIGN} \w)?\s+(\w+\.py)\s+(actor|service|builds|one-shot)", tree)
    assert {r[0] for r in rows} >= {"Supervisor", "EnvironmentPool", "Scheduler", "RequestActor", "RequestBuilder",
                                     "AttemptRun"}, rows
    for cls, file, _ in rows:
        assert re.search(rf"^class {cls}\b", (ENGINE / file).read_text(), re.M), (cls, file)
    assert "TaskActor" not in text
