"""``rescore`` grades a finished run again: with the same grader its new summary is the old one byte for byte;
with another judge the verdicts and metrics change, and the run itself (its summary, details) is untouched."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentcompass
from agentcompass.cli import EXIT_BAD_INPUT, EXIT_OK, main
from tests.benchmarks.qa.test_judged_qa import AGENT, IDS, quoted
from tests.run_details import details_by_task

JUDGE = {"id": "scripted", "params": {"bundled": False, "fallback": "garbage", "script": [
    {"match": quoted("The symbol is Au."), "turns": ["A"]},
    {"match": quoted("Sydney"), "turns": ["B"]},
    {"match": quoted("I don't know."), "turns": ["C"]},
    {"match": "Answer: B", "turns": ["A"]},
    {"match": "Rayleigh scattering by air molecules, much stronger", "turns": ["VERDICT: 7"]}]}}
#: a judge that calls Sydney right and the sky answer poor
LENIENT = {"id": "scripted", "params": {"bundled": False, "fallback": "garbage", "script": [
    {"match": quoted("The symbol is Au."), "turns": ["A"]},
    {"match": quoted("Sydney"), "turns": ["A"]},
    {"match": quoted("I don't know."), "turns": ["C"]},
    {"match": "Answer: B", "turns": ["A"]},
    {"match": "Rayleigh scattering by air molecules, much stronger", "turns": ["VERDICT: 2"]}]}}


def _run(tmp_path: Path) -> Path:
    out = agentcompass.run_evaluation("qa_local", "openai_chat", "scripted", "local",
                                      model_params={"bundled": False, "script": AGENT},
                                      benchmark_params={"sample_ids": IDS, "judge_model": JUDGE},
                                      results_dir=str(tmp_path / "results"), progress="none", run_id="graded")
    assert out.status == "completed" and out.run_dir is not None, out.error
    return Path(out.run_dir)


def _fingerprint(run_dir: Path) -> dict[str, str]:
    """Every file of the run outside rescore/ and the re-scored summaries, by content hash."""
    return {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and not p.relative_to(run_dir).parts[0] == "rescore"
            and not (p.parent == run_dir and p.name.startswith("summary.rescore"))}


def test_the_same_grader_gives_the_same_summary_byte_for_byte_and_another_judge_changes_only_the_new_one(
        tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    before = _fingerprint(run_dir)
    same = agentcompass.rescore(run_dir, progress="none")
    assert same.ok and same.rescore_id == "rescore-1" and same.changed == [], same.error
    assert Path(same.summary or "").read_bytes() == (run_dir / "summary.json").read_bytes()
    assert same.regrade_run_dir is not None and Path(same.regrade_run_dir).is_relative_to(run_dir / "rescore")

    other = agentcompass.rescore(run_dir, benchmark_params={"judge_model": LENIENT}, progress="none")
    assert other.ok and other.rescore_id == "rescore-2", other.error
    assert sorted(other.changed) == ["qa-local-03", "qa-local-16"]
    old, new = json.loads((run_dir / "summary.json").read_text()), json.loads(Path(other.summary or "").read_text())
    assert (old["metrics"]["correct"], new["metrics"]["correct"]) == (3, 3)  # Sydney now right, the sky now wrong
    assert (old["metrics"]["incorrect"], new["metrics"]["incorrect"]) == (1, 1)
    assert new["metrics"]["mean_score"] != old["metrics"]["mean_score"]
    assert new["by_category"]["geography"]["correct"] == old["by_category"]["geography"]["correct"] + 1
    # what grading does not decide is the run's
    for key in ("run_id", "harness", "model", "usage", "duration_s", "status"):
        assert new[key] == old[key], key
    regraded = details_by_task(other.regrade_run_dir or "")
    assert regraded["qa-local-03"].attempts["1"].extra["grade"] == "correct"
    assert regraded["qa-local-03"].attempts["1"].meta.get("usage", {}).get("calls", 0) == 0  # no model call
    assert _fingerprint(run_dir) == before  # the run itself is untouched


def test_the_cli_prints_the_metrics_before_and_after_and_refuses_a_name_taken(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _run(tmp_path)
    assert main(["rescore", str(run_dir), "--progress", "none", "--rescore-id", "again"]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"rescore again: {run_dir / 'summary.again.json'}" in out and "accuracy: 0.6 -> 0.6" in out
    assert "tasks whose verdict changed: 0" in out
    assert main(["rescore", str(run_dir), "--progress", "none", "--rescore-id", "again"]) == EXIT_BAD_INPUT
    assert "already has a re-score of that name" in capsys.readouterr().err


@pytest.mark.parametrize(("bad", "field", "said"), [
    ("missing", "run_dir", "not a run directory"),
    ("../escape", "rescore_id", "letters, digits"),
])
def test_bad_input_names_the_field(tmp_path: Path, bad: str, field: str, said: str) -> None:
    run_dir = _run(tmp_path) if field == "rescore_id" else tmp_path / bad
    with pytest.raises(agentcompass.ConfigError) as info:
        agentcompass.rescore(run_dir, rescore_id=bad if field == "rescore_id" else None, progress="none")
    assert info.value.field == field and said in str(info.value)


def test_a_benchmark_graded_in_the_agents_workspace_is_refused_naming_the_benchmark(tmp_path: Path) -> None:
    out = agentcompass.run_evaluation("shell_tasks", "shell_agent", "scripted", "local",
                                      benchmark_params={"sample_ids": ["files/hello_world"]},
                                      results_dir=str(tmp_path), progress="none")
    assert out.run_dir is not None
    with pytest.raises(agentcompass.ConfigError) as info:
        agentcompass.rescore(out.run_dir, progress="none")
    assert info.value.field == "benchmark" and "'shell_tasks' cannot grade a finished run again" in str(info.value)
    assert not list(Path(out.run_dir).glob("summary.rescore*")) and not (Path(out.run_dir) / "rescore").exists()
    # the harness itself refuses such a pairing too, before any task
    with pytest.raises(agentcompass.ConfigError) as info:
        agentcompass.run_evaluation("shell_tasks", "recorded", "scripted", "local",
                                    harness_params={"run_dir": str(out.run_dir)}, results_dir=str(tmp_path),
                                    progress="none")
    assert info.value.field == "benchmark"


def test_a_hostile_detail_file_is_an_attempt_that_cannot_be_replayed_not_a_crash(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    victim = next((run_dir / "details").glob("qa-local-03*.json"))
    victim.write_bytes(b"[" * 100_000)  # nested past any decoder's depth
    result = agentcompass.rescore(run_dir, progress="none")
    assert result.ok, result.error
    regraded: dict[str, Any] = details_by_task(result.regrade_run_dir or "")
    assert "qa-local-03" not in regraded  # the run's own details no longer name it: nothing to grade
    assert result.changed == []


def test_a_judge_key_the_run_kept_masked_must_be_given_again(tmp_path: Path) -> None:
    judge = {**JUDGE, "api_key": "sk-judge-secret-123"}
    out = agentcompass.run_evaluation("qa_local", "openai_chat", "scripted", "local",
                                      model_params={"bundled": False, "script": AGENT},
                                      benchmark_params={"sample_ids": IDS[:2], "judge_model": judge},
                                      results_dir=str(tmp_path), progress="none")
    assert out.status == "completed" and out.run_dir is not None, out.error
    assert b"sk-judge-secret-123" not in (Path(out.run_dir) / "params.json").read_bytes()
    with pytest.raises(agentcompass.ConfigError) as info:
        agentcompass.rescore(out.run_dir, progress="none")
    assert info.value.field == "benchmark_params.judge_model.api_key" and "give it again" in str(info.value)
    again = agentcompass.rescore(out.run_dir, benchmark_params={"judge_model": judge}, progress="none")
    assert again.ok and Path(again.summary or "").read_bytes() == (Path(out.run_dir) / "summary.json").read_bytes()
    assert not any(b"sk-judge-secret-123" in p.read_bytes() for p in Path(out.run_dir).rglob("*") if p.is_file())


def test_the_sdk_function_stays_the_function_whatever_was_imported_first() -> None:
    """``agentcompass.rescore`` is the function even after its module was imported by name (as the CLI does): a
    module of the same name became the package's attribute and shadowed it (``'module' object is not callable``,
    seen in a CI run whose test order put the CLI's import first)."""
    code = ("import importlib, agentcompass\n"
            "importlib.import_module(agentcompass._LAZY['rescore'])\n"  # its module first, as the CLI's command does
            "assert callable(agentcompass.rescore) and callable(agentcompass.async_rescore), agentcompass.rescore\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
