"""rundata: finding runs, loading their files, and task rows streamed one detail file at a time."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import msgspec
import pytest

from agentcompass._errors import ConfigError
from agentcompass.engine.run_dir import safe_name
from agentcompass.records import AttemptRecord, Step, TaskDetail, Trajectory, TryRecord
from agentcompass.rundata import (
    find_runs,
    is_run_dir,
    iter_details,
    iter_task_rows,
    list_runs,
    load_run,
    mask_secrets,
    read_task,
    task_outcomes,
)

from .results_runs import SAMPLE, make_runs, write_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    results = tmp_path_factory.mktemp("results")
    a, b = make_runs(results)
    return results, a, b


def test_runs_under_a_results_dir_are_found_with_their_overview(runs: tuple[Path, Path, Path]) -> None:
    results, a, b = runs
    found = find_runs(results)
    assert found == {"shell_tasks/shell_agent/scripted/a": a, "shell_tasks/shell_agent/scripted/b": b}
    assert find_runs(a) == {".": a} and is_run_dir(a) and not is_run_dir(results)
    entries = list_runs(results)
    assert [e.run_id for e in entries] == ["b", "a"]  # newest first
    assert entries[1].benchmark == "shell_tasks" and entries[1].status == "completed"
    assert entries[1].metrics["tasks"] == len(SAMPLE) and entries[1].counts["done"] == len(SAMPLE)
    assert entries[1].usage["calls"] > 0


def test_a_run_loads_with_its_summary_params_and_metrics(runs: tuple[Path, Path, Path]) -> None:
    _, a, _ = runs
    run = load_run(a)
    assert run.run_id == "a" and run.status == "completed" and run.k == 2
    assert run.title == "shell_tasks / shell_agent / scripted (a)"
    assert run.metrics["pass@2"] == run.summary["metrics"]["pass@2"]  # type: ignore[index]
    assert set(run.by_category) == {"files", "text", "answer", "python"}
    assert run.params is not None and run.params["spec"]["model"]["api_key"] == "***"


def test_a_directory_that_is_not_a_run_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a run directory") as err:
        load_run(tmp_path)
    assert err.value.field == "run_dir"


def test_task_rows_match_the_details(runs: tuple[Path, Path, Path]) -> None:
    _, a, b = runs
    rows = list(iter_task_rows(b))
    assert [r.task_id for r in rows] == sorted(SAMPLE, key=safe_name)
    for row in rows:
        detail = read_task(b, row.task_id)
        assert detail is not None and read_task(b, row.file) == detail
        attempts = list(detail.attempts.values())
        assert row.k == 2 and row.tries == 2 and row.correct == detail.correct
        assert row.steps == sum(len(x.trajectory.steps) for x in attempts if x.trajectory)
        assert row.tokens == sum(x.meta["usage"]["total_tokens"] for x in attempts) > 0
        assert row.outcome == ("pass" if detail.correct else "fail")
    flags = {r.task_id: r.flags for r in rows if r.flags}
    assert flags == {"files/hello_world": ["repeated_tool_calls", "reward_hacking"],
                     "text/sort_unique": ["reward_hacking"]}
    assert not any(r.flags for r in iter_task_rows(a))
    assert task_outcomes(a)["files/hello_world"] == "pass" and task_outcomes(b)["files/hello_world"] == "fail"


def test_error_and_skipped_tasks_and_unreadable_files(tmp_path: Path) -> None:
    err = TaskDetail(task_id="x/err", k=1, category="x", attempts={"1": AttemptRecord(
        status="run_error", error_kind="env_lost", error="E" * 1000,
        tries=[TryRecord(try_no=1, status="run_error", started_at=1, finished_at=2),
               TryRecord(try_no=2, status="run_error", started_at=3, finished_at=4)])})
    skipped = TaskDetail(task_id="x/skip", k=1, attempts={"1": AttemptRecord(status="skipped")})
    run = write_run(tmp_path / "r", [err, skipped], summary=False)
    (run / "details" / "broken.json").write_text("{not json")
    (run / "details" / ".x_tmp.json.1.tmp").write_text("{}")
    bad: list[str] = []
    rows = {r.task_id: r for r in iter_task_rows(run, on_error=bad.append)}
    assert bad == ["broken.json"] and set(rows) == {"x/err", "x/skip"}
    assert rows["x/err"].outcome == "error" and rows["x/err"].error_kind == "env_lost"
    assert rows["x/err"].tries == 2 and len(rows["x/err"].error or "") == 300
    assert rows["x/skip"].outcome == "skipped"
    assert task_outcomes(run) == {"x/err": "error:env_lost", "x/skip": "skipped"}
    assert load_run(run).status == "running" and load_run(run).summary is None
    assert [k for k, _ in iter_details(run)] == [safe_name("x/err"), safe_name("x/skip")]


def test_read_task_does_not_leave_the_details_directory(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", [TaskDetail(task_id="a", k=1, attempts={})])
    (tmp_path / "secret.json").write_bytes(msgspec.json.encode(TaskDetail(task_id="s", k=1, attempts={})))
    assert read_task(run, "a") is not None
    assert read_task(run, "../../secret") is None and read_task(run, "missing") is None


def test_rows_stream_one_detail_at_a_time(tmp_path: Path) -> None:
    big = "x" * 2_000_000
    details = [TaskDetail(task_id=f"t{i:02d}", k=1, correct=True, attempts={"1": AttemptRecord(
        status="completed", correct=True, trajectory=Trajectory(steps=[Step(index=0, observation=big)]))})
        for i in range(30)]
    run = write_run(tmp_path / "r", details)
    del details
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_task_rows(run))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 30
    assert peak < 10_000_000  # 30 files of 2 MB: only about one is held at a time


def test_mask_secrets_hides_secret_looking_keys() -> None:
    assert mask_secrets({"model": {"api_key": "k", "id": "m"}, "headers": [{"Authorization": "Bearer x"}],
                         "max_tokens": 5, "api_key": None}) == {
        "model": {"api_key": "***", "id": "m"}, "headers": [{"Authorization": "***"}], "max_tokens": 5,
        "api_key": None}
