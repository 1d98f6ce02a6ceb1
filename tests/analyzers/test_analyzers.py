"""run_analyzers / build_analyzers / flag_names: merging with the benchmark's analysis, errors, selection."""

from __future__ import annotations

from typing import Any

import pytest

from agentcompass._errors import ConfigError
from agentcompass.analyzers import ERRORS_KEY, build_analyzers, flag_names, run_analyzers
from agentcompass.interfaces import TaskSpec
from agentcompass.records import AttemptRecord
from agentcompass.registry import BUILTINS, Registries

from .trajectories import CTX, shell, task


class Fixed:
    """Returns what it was given."""

    def __init__(self, name: str, result: Any) -> None:
        self.name = name
        self.result = result

    def analyze(self, task: TaskSpec, attempt: AttemptRecord) -> Any:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def test_findings_are_stored_under_the_analyzer_name_next_to_the_benchmark_flags() -> None:
    attempt = shell("ls")
    attempt.analysis = {"suspected_reward_hacking": "the patch changes test files only"}
    out = run_analyzers([Fixed("loop", {"n": 3}), Fixed("quiet", None)], task(), attempt)
    assert out == {"suspected_reward_hacking": "the patch changes test files only", "loop": {"n": 3}}
    assert flag_names(out) == ["loop", "suspected_reward_hacking"]


def test_a_finding_under_a_key_the_benchmark_used_is_merged_or_kept_apart() -> None:
    attempt = shell("ls")
    attempt.analysis = {"reward_hacking": {"modified_tests": ["tests/a.py"]}, "note": "from the benchmark"}
    out = run_analyzers([Fixed("reward_hacking", {"reasons": ["deleted_test"]}), Fixed("note", {"x": 1})],
                        task(), attempt)
    assert out["reward_hacking"] == {"modified_tests": ["tests/a.py"], "reasons": ["deleted_test"]}
    assert out["note"] == "from the benchmark" and out["note_analyzer"] == {"x": 1}


def test_an_analyzer_that_raises_is_recorded_and_the_others_still_run() -> None:
    out = run_analyzers([Fixed("boom", RuntimeError("bad trajectory")), Fixed("ok", {"hit": True}),
                         Fixed("weird", {"value": object()})], task(), shell("ls"))
    assert out["ok"] == {"hit": True}
    assert out[ERRORS_KEY]["boom"] == "RuntimeError: bad trajectory"
    assert out[ERRORS_KEY]["weird"].startswith("TypeError")  # not JSON-serialisable: an error, not a crash
    assert flag_names(out) == ["ok"]


def test_flag_names_follow_flagged_false_and_flag_lists() -> None:
    assert flag_names({"a": {"flagged": False, "why": "x"}, "b": {"flagged": True}, "c": [], "d": "",
                       "flags": ["e", ""], ERRORS_KEY: {"x": "y"}}) == ["b", "e"]


def test_true_enables_every_registered_analyzer_with_defaults() -> None:
    regs = Registries(use_entry_points=False)
    analyzers = build_analyzers(True, regs["analyzer"], CTX)
    assert sorted(a.name for a in analyzers) == sorted(BUILTINS["analyzer"]) and len(analyzers) == 6
    assert build_analyzers(False, regs["analyzer"], CTX) == []


def test_a_list_selects_analyzers_and_passes_params() -> None:
    from agentcompass.specs import ComponentSpec

    regs = Registries(use_entry_points=False)
    analyzers = build_analyzers(["truncated", ComponentSpec(id="repeated_tool_calls", params={"consecutive": 5})],
                                regs["analyzer"], CTX)
    assert [a.name for a in analyzers] == ["truncated", "repeated_tool_calls"]
    assert analyzers[1].consecutive == 5  # type: ignore[attr-defined]


def test_unknown_ids_bad_params_and_duplicates_are_config_errors_naming_the_entry() -> None:
    from agentcompass.specs import ComponentSpec

    reg = Registries(use_entry_points=False)["analyzer"]
    with pytest.raises(ConfigError, match="Did you mean 'truncated'") as unknown:
        build_analyzers(["empty_output", "truncate"], reg, CTX)
    assert unknown.value.field == "enable_analysis[1]"
    with pytest.raises(ConfigError, match="consecutive") as bad:
        build_analyzers([ComponentSpec(id="repeated_tool_calls", params={"consecutive": 0})], reg, CTX)
    assert bad.value.field == "enable_analysis[0].params"
    with pytest.raises(ConfigError, match="enabled twice"):
        build_analyzers(["truncated", "truncated"], reg, CTX)
