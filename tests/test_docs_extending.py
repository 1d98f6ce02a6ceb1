"""docs/extending.md as a user reads it: its Python blocks run as shown, its examples subclass their bases and the
registry accepts them; the built-in tables (extending.md, benchmarks.md, harnesses.md) list every registered name."""

from __future__ import annotations

import ast
import importlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcompass import ConfigError
from agentcompass.interfaces import Benchmark, ComponentContext, Harness
from agentcompass.registry import BUILTINS, Registries

DOCS = Path(__file__).resolve().parent.parent / "docs"
#: the modules the page's file blocks define (dropped from ``sys.modules`` after each test)
PAGE_MODULES = ("my_bench", "my_harness")


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def _file_of(block: str) -> str | None:
    """``recipes/echo.py`` for a block whose first line is ``# recipes/echo.py``: the file it is."""
    found = re.fullmatch(r"# ([\w/]+\.py)", block.splitlines()[0])
    return found.group(1) if found else None


@pytest.fixture
def page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Every Python block of extending.md in order, in a fresh directory on ``sys.path``: a block headed by a file
    name is written to that file, the others run there in one namespace (returned)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    namespace: dict[str, Any] = {"__name__": "extending_md"}
    try:
        for block in _python_blocks((DOCS / "extending.md").read_text()):
            name = _file_of(block)
            if name is None:
                exec(compile(block, str(DOCS / "extending.md"), "exec"), namespace)
                continue
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block)
        yield namespace
    finally:
        for module in PAGE_MODULES:
            sys.modules.pop(module, None)


def test_every_python_block_of_extending_md_runs_as_shown(page: dict[str, Any], tmp_path: Path) -> None:
    (summary,) = tmp_path.glob("results/**/summary.json")  # run_evaluation("my_bench:Arithmetic", ...)
    assert json.loads(summary.read_text())["metrics"]["tasks"] == 10
    # the names printed are those in the block's comment
    block = next(b for b in _python_blocks((DOCS / "extending.md").read_text()) if "Registries([" in b)
    shown = next(line for line in block.splitlines() if "names())" in line).split("#", 1)[1].strip()
    assert page["regs"]["harness"].names() == ast.literal_eval(shown) == sorted([*BUILTINS["harness"], "echo"])


def test_the_pages_components_subclass_their_bases_and_the_registry_accepts_them(page: dict[str, Any]) -> None:
    regs = Registries(use_entry_points=False)
    my_harness = importlib.import_module("my_harness")
    regs["harness"].register("my_harness", my_harness.MyHarness)
    regs["harness"].register("echo", page["regs"]["harness"].resolve("echo"))
    regs["benchmark"].register("hub_arithmetic", page["HubArithmetic"])
    for kind, name, base in (("harness", "my_harness", Harness), ("harness", "echo", Harness),
                             ("benchmark", "my_bench:Arithmetic", Benchmark),
                             ("benchmark", "hub_arithmetic", Benchmark)):
        cls = regs[kind].resolve(name)  # type: ignore[index]
        assert issubclass(cls, base)
        params = regs[kind].convert_params(cls, {}, name)  # type: ignore[index]
        ctx = ComponentContext()
        component = cls(params, ctx)
        assert component.params is params and component.ctx is ctx
    echo = regs["harness"].resolve("echo")
    assert echo(regs["harness"].convert_params(echo, {"answer": "832040"}, "echo"), ctx).params.answer == "832040"
    harness = regs["harness"].resolve("my_harness")
    assert harness(regs["harness"].convert_params(harness, {"style": "verbose"}, "my_harness"), ctx).verbose
    with pytest.raises(ConfigError) as info:  # the refusal the page quotes
        regs["harness"].convert_params(harness, {"style": "loud"}, "my_harness")
    assert str(info.value) == "Parameter 'style' of harness my_harness must be one of terse, verbose, got 'loud'."
    assert info.value.field == "harness.params.style"


def _table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of each row of the table whose header row starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_built_in_names_table_of_extending_md_is_the_registry() -> None:
    rows = _table_rows((DOCS / "extending.md").read_text(), "| kind | name | target |")
    listed = {(kind, _names(name)[0], _names(target)[0]) for kind, name, target in rows}
    registered = {(kind, name, target) for kind, entries in BUILTINS.items() for name, target in entries.items()}
    assert listed == registered
    assert len(rows) == len(registered)


def test_the_benchmark_and_harness_pages_tables_list_every_built_in() -> None:
    for page, header, kind in (("benchmarks.md", "| benchmark | dimension |", "benchmark"),
                               ("harnesses.md", "| harness | where the agent runs |", "harness")):
        rows = _table_rows((DOCS / page).read_text(), header)
        listed = [name for row in rows for name in _names(row[0])]
        assert sorted(listed) == sorted(BUILTINS[kind]), page  # type: ignore[index]
    assert len(BUILTINS["benchmark"]) == 23
