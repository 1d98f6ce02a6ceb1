"""A run whose small files are hostile (nested past any sane depth, too large) is listed as unreadable with a
reason; every other run under the same path is listed and served as usual."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentcompass import ConfigError
from agentcompass.rundata import MAX_JSON_DEPTH, list_runs, load_run
from agentcompass.viewer import ViewerServer

from .conftest import get
from .rundirs import make_detail, write_run

Serve = Callable[[Path], ViewerServer]


def _nested(depth: int) -> bytes:
    return b'{"run_id": "deep", "status": "completed", "metrics": {"x": ' + b"[" * depth + b"]" * depth + b"}}"


def _results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    write_run(results / "good", [make_detail("t1"), make_detail("t2", correct=False)])
    # past the JSON decoder's own recursion limit
    write_run(results / "deep_info", [make_detail("t1")])
    (results / "deep_info" / "run_info.json").write_bytes(_nested(100_000))
    # decodes, but deeper than any run file the engine writes: recursive readers downstream must not see it
    write_run(results / "deep_summary", [make_detail("t1")])
    (results / "deep_summary" / "summary.json").write_bytes(_nested(MAX_JSON_DEPTH + 5))
    (results / "deep_summary" / "run_info.json").write_bytes(_nested(100_000))
    # one hostile detail file in the good run
    (results / "good" / "details" / "evil.json").write_bytes(b'{"task_id": "evil", "k": 1, "attempts": '
                                                            + b"[" * 100_000 + b"]" * 100_000 + b"}")
    return results


def test_a_deeply_nested_run_file_leaves_the_other_runs_listed(tmp_path: Path, serve: Serve) -> None:
    server = serve(_results(tmp_path))
    status, body = get(server, "/api/runs")
    assert status == 200, body
    runs = {r["key"]: r for r in body["runs"]}
    assert set(runs) == {"good", "deep_info", "deep_summary"}
    assert runs["good"]["status"] == "completed" and not runs["good"].get("unreadable")
    assert runs["good"]["metrics"]["pass_rate"] == 0.5
    assert runs["deep_info"]["status"] == "completed"  # from its readable summary.json
    assert "run_info.json" in runs["deep_info"]["unreadable"] and "nested" in runs["deep_info"]["unreadable"]
    assert runs["deep_summary"]["status"] == "unreadable"
    for name in ("run_info.json", "summary.json"):
        assert name in runs["deep_summary"]["unreadable"]
    # the bad run's own page and the good run's tasks are served too
    status, page = get(server, "/api/run", run="deep_summary")
    assert status == 200 and page["status"] == "unreadable", page
    status, page = get(server, "/api/run", run="good")
    assert status == 200 and page["index"]["unreadable"] == ["evil.json"], page
    status, tasks = get(server, "/api/tasks", run="good")
    assert status == 200 and [r["task_id"] for r in tasks["rows"]] == ["t1", "t2"]


def test_list_runs_and_load_run_name_the_unreadable_file(tmp_path: Path) -> None:
    results = _results(tmp_path)
    entries = {e.key: e for e in list_runs(results)}
    assert set(entries) == {"good", "deep_info", "deep_summary"}
    assert entries["good"].status == "completed" and entries["good"].unreadable is None
    assert entries["deep_summary"].status == "unreadable"
    assert "summary.json" in (entries["deep_summary"].unreadable or "")
    assert load_run(results / "deep_info").status == "completed"
    with pytest.raises(ConfigError, match="summary.json is nested too deeply"):
        load_run(results / "deep_summary")


def test_an_oversized_run_info_is_unreadable_with_its_size_named(tmp_path: Path, serve: Serve) -> None:
    results = tmp_path / "results"
    write_run(results / "good", [make_detail("t1")])
    write_run(results / "huge", [make_detail("t1")], summary=False)
    (results / "huge" / "run_info.json").write_bytes(b'{"pad": "' + b"x" * (17 << 20) + b'"}')
    _, body = get(serve(results), "/api/runs")
    runs = {r["key"]: r for r in body["runs"]}
    assert runs["good"]["status"] == "completed"
    assert runs["huge"]["status"] == "unreadable" and "MiB" in runs["huge"]["unreadable"]


def test_run_info_fields_of_the_wrong_type_do_not_break_the_list(tmp_path: Path, serve: Serve) -> None:
    results = tmp_path / "results"
    write_run(results / "good", [make_detail("t1")])
    write_run(results / "odd", [make_detail("t1")], summary=False)
    (results / "odd" / "run_info.json").write_bytes(
        b'{"status": "running", "pid": "1", "started_at": "yesterday", "duration_s": ' + b"9" * 400
        + b', "counts": [1], "metrics": "all", "run_id": 7}')
    status, body = get(serve(results), "/api/runs")
    assert status == 200, body
    runs = {r["key"]: r for r in body["runs"]}
    assert runs["good"]["status"] == "completed"
    odd = runs["odd"]
    assert (odd["run_id"], odd["started_at"], odd["duration_s"], odd["counts"], odd["metrics"], odd["live"]) == (
        "odd", None, None, {}, {}, False)
