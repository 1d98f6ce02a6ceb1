"""The viewer's JSON API over real run directories, served over real HTTP on 127.0.0.1."""

from __future__ import annotations

import http.client
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import msgspec

from agentcompass.engine.run_dir import iter_details, safe_name
from agentcompass.records import TaskDetail
from agentcompass.viewer import ViewerServer

from .conftest import REAL_KEY, REAL_TASKS, get
from .rundirs import event, make_detail, write_detail, write_run

Serve = Callable[[Path], ViewerServer]


def _raw(server: ViewerServer, path: str, host: str | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(server.server_name, server.server_port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_host=host is not None)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def test_runs_list_finds_the_real_run_with_status_and_metrics(real_results: Path, serve: Serve) -> None:
    server = serve(real_results)
    assert server.server_name == "127.0.0.1"
    status, body = get(server, "/api/runs")
    assert status == 200
    [run] = body["runs"]
    assert run["key"] == REAL_KEY and run["run_id"] == "real"
    assert (run["benchmark"], run["harness"], run["model"]) == ("shell_tasks", "shell_agent", "scripted")
    assert run["status"] == "completed" and not run["live"]
    assert run["counts"]["done"] == len(REAL_TASKS)
    assert run["metrics"]["pass_rate"] == 1.0


def test_a_single_run_dir_is_served_as_run_dot(real_results: Path, serve: Serve) -> None:
    server = serve(real_results / REAL_KEY)
    _, body = get(server, "/api/runs")
    assert [r["key"] for r in body["runs"]] == ["."]
    status, page = get(server, "/api/tasks", run=".")
    assert status == 200 and page["total"] == len(REAL_TASKS)


def test_task_rows_agree_with_the_detail_files(real_results: Path, serve: Serve) -> None:
    server = serve(real_results)
    _, page = get(server, "/api/tasks", run=REAL_KEY, limit=100)
    rows = {r["task_id"]: r for r in page["rows"]}
    details = list(iter_details(real_results / REAL_KEY / "details"))
    assert sorted(rows) == sorted(REAL_TASKS) == sorted(d.task_id for d in details)
    for d in details:
        row, a = rows[d.task_id], d.attempts["1"]
        assert row["category"] == d.category and row["correct"] is d.correct and row["score"] == d.score
        assert row["outcome"] == "pass" and row["status"] == a.status
        assert row["steps"] == len(a.trajectory.steps) > 0  # type: ignore[union-attr]
        assert row["tokens"] == a.meta["usage"]["total_tokens"] > 0
        assert row["tries"] == len(a.tries) == 1
        assert row["time_s"] == round(a.meta["duration_s"], 3)
        assert "trajectory" not in row and "steps_detail" not in row


def test_run_page_has_metrics_by_category_and_index_stats(real_results: Path, serve: Serve) -> None:
    server = serve(real_results)
    status, run = get(server, "/api/run", run=REAL_KEY)
    assert status == 200
    assert set(run["by_category"]) == {"files", "answer", "text"}
    assert run["by_category"]["files"]["tasks"] == 2
    assert run["index"]["rows"] == len(REAL_TASKS) and run["index"]["build_s"] >= 0
    assert run["facets"]["category"] == {"answer": 1, "files": 2, "text": 1}
    assert run["params"]["run_id"] == "real"
    assert run["progress_size"] > 0


def test_task_detail_carries_the_trajectory_and_log(real_results: Path, serve: Serve) -> None:
    server = serve(real_results)
    status, body = get(server, "/api/task", run=REAL_KEY, task="files/hello_world")
    assert status == 200
    detail = msgspec.convert(body["detail"], TaskDetail)
    steps = detail.attempts["1"].trajectory.steps  # type: ignore[union-attr]
    assert any("hello.txt" in (s.action or "") for s in steps)
    assert any("Hello, World!" in (s.observation or "") for s in steps)
    assert body["row"]["task_id"] == "files/hello_world"
    # cut from run.log: this task's lines only
    assert body["log"] and "agentcompass.task.files/hello_world#1: " in body["log"]
    assert "attempt 1 finished" in body["log"] and "agentcompass.task." in body["log"]
    assert all("files/hello_world#1: " in line for line in body["log"].splitlines() if " agentcompass." in line)


def test_a_run_with_a_log_file_per_task_still_shows_it(real_results: Path, serve: Serve, tmp_path: Path) -> None:
    root = tmp_path / "results"
    shutil.copytree(real_results, root)
    (root / REAL_KEY / "logs" / "tasks").mkdir()  # as earlier versions wrote it
    (root / REAL_KEY / "logs" / "tasks" / f"{safe_name('files/hello_world')}.log").write_text("an older line\n")
    server = serve(root)
    _, body = get(server, "/api/task", run=REAL_KEY, task="files/hello_world")
    assert body["log"] == "an older line\n"


def _synthetic(tmp_path: Path) -> Path:
    details = [make_detail(f"t/{i:03d}", category="even" if i % 2 == 0 else "odd", correct=i % 3 != 0,
                           steps=1 + i % 5, tokens=100 + i) for i in range(30)]
    details.append(make_detail("t/broken", correct=None, status="run_error", error_kind="env_open",
                               error="Traceback: environment did not open", steps=0, tokens=0))
    details.append(make_detail("t/hacky", analysis={"modified_tests": ["tests/test_x.py"], "repeat": {"flagged": False},
                                                    "flags": ["suspected_reward_hacking"]}))
    return write_run(tmp_path / "res" / "bench" / "h" / "m" / "r1", details)


def test_paging_sorting_and_filtering_happen_on_the_server(tmp_path: Path, serve: Serve) -> None:
    run_dir = _synthetic(tmp_path)
    server = serve(tmp_path / "res")
    key = "bench/h/m/r1"
    ids: list[str] = []
    for offset in range(0, 40, 7):
        _, page = get(server, "/api/tasks", run=key, offset=offset, limit=7)
        assert page["total"] == page["matched"] == 32 and len(page["rows"]) <= 7
        ids += [r["task_id"] for r in page["rows"]]
    assert ids == sorted(d.task_id for d in iter_details(run_dir / "details"))

    _, page = get(server, "/api/tasks", run=key, sort="tokens", desc=1, limit=1000)
    tokens = [r["tokens"] for r in page["rows"]]
    assert tokens == sorted(tokens, reverse=True) and tokens[0] == 129

    _, page = get(server, "/api/tasks", run=key, sort="score", limit=1000)
    scores = [r["score"] for r in page["rows"]]
    assert scores[-1] is None and scores[:-1] == sorted(scores[:-1])  # ungraded last

    _, page = get(server, "/api/tasks", run=key, outcome="fail")
    assert page["matched"] == 10 and all(r["outcome"] == "fail" for r in page["rows"])
    _, page = get(server, "/api/tasks", run=key, outcome="error")
    assert [r["task_id"] for r in page["rows"]] == ["t/broken"]
    assert page["rows"][0]["error_kind"] == "env_open" and page["rows"][0]["status"] == "run_error"
    _, page = get(server, "/api/tasks", run=key, q="T/01", category="odd")
    assert [r["task_id"] for r in page["rows"]] == ["t/011", "t/013", "t/015", "t/017", "t/019"]
    _, page = get(server, "/api/tasks", run=key, flag="*")
    assert [(r["task_id"], r["flags"]) for r in page["rows"]] == [
        ("t/hacky", ["modified_tests", "suspected_reward_hacking"])]


def test_bad_query_parameters_are_a_400_naming_the_field(real_results: Path, serve: Serve) -> None:
    server = serve(real_results)
    status, body = get(server, "/api/tasks", run=REAL_KEY, sort="trajectory")
    assert status == 400 and body["field"] == "sort" and "task_id" in body["error"]
    status, body = get(server, "/api/tasks", run=REAL_KEY, limit="lots")
    assert status == 400 and body["field"] == "limit"
    status, body = get(server, "/api/tasks")
    assert status == 400 and body["field"] == "run"


def test_new_changed_and_removed_detail_files_reach_the_index(tmp_path: Path, serve: Serve) -> None:
    run_dir = write_run(tmp_path / "run", [make_detail("a"), make_detail("b")], status="running", summary=False,
                        pid=os.getpid())
    server = serve(run_dir)
    assert get(server, "/api/tasks", run=".")[1]["total"] == 2
    write_detail(run_dir, make_detail("c", correct=False))
    write_detail(run_dir, make_detail("a", correct=False))  # replaced (e.g. rerun)
    _, page = get(server, "/api/tasks", run=".")
    assert [(r["task_id"], r["outcome"]) for r in page["rows"]] == [("a", "fail"), ("b", "pass"), ("c", "fail")]
    (run_dir / "details" / "b.json").unlink()
    (run_dir / "details" / "junk.json").write_bytes(b"{not json")
    (run_dir / "details" / ".c.json.123.tmp").write_bytes(b"half")
    _, run = get(server, "/api/run", run=".")
    assert run["index"]["rows"] == 2 and run["index"]["unreadable"] == ["junk.json"]
    assert run["live"] and run["status"] == "running"


def test_progress_is_tailed_by_offset_without_torn_lines(tmp_path: Path, serve: Serve) -> None:
    first = event("attempt_started", task_id="a", attempt=1)
    run_dir = write_run(tmp_path / "run", [make_detail("a")], status="running", pid=os.getpid(), summary=False,
                        progress=[first, b'{"event": "task_fin'])
    server = serve(run_dir)
    _, chunk = get(server, "/api/progress", run=".", offset=0)
    assert [e["event"] for e in chunk["events"]] == ["attempt_started"] and chunk["offset"] == len(first)
    with open(run_dir / "progress.jsonl", "ab") as f:
        f.write(b'ished", "task_id": "a", "correct": true, "ts": 1, "request": "r"}\n')
    _, chunk = get(server, "/api/progress", run=".", offset=chunk["offset"])
    assert [(e["event"], e["task_id"]) for e in chunk["events"]] == [("task_finished", "a")]
    assert chunk["offset"] == (run_dir / "progress.jsonl").stat().st_size


def test_nothing_outside_the_viewed_path_is_served(tmp_path: Path, serve: Serve) -> None:
    secret = tmp_path / "outside.json"
    secret.write_text('{"task_id": "stolen", "k": 1, "attempts": {}, "marker": "TOP-SECRET"}')
    root = tmp_path / "res"
    run_dir = write_run(root / "b" / "h" / "m" / "r", [make_detail("a")])
    os.symlink(secret, run_dir / "details" / "stolen.json")
    other = write_run(root / "b" / "h" / "m" / "evil", [make_detail("x")])
    (other / "run_info.json").unlink()
    (other / "summary.json").unlink()
    os.symlink(secret, other / "summary.json")
    os.symlink(tmp_path, root / "b" / "h" / "m" / "link-to-parent")
    server = serve(root)

    _, runs = get(server, "/api/runs")
    assert "TOP-SECRET" not in str(runs) and "link-to-parent" not in str(runs)
    _, page = get(server, "/api/tasks", run="b/h/m/r")
    assert [r["task_id"] for r in page["rows"]] == ["a"]
    for run in ("..", "../..", "/etc", "b/h/m/r/../../../../..", "b/h/m/link-to-parent", str(tmp_path)):
        assert get(server, "/api/run", run=run)[0] == 404, run
        assert get(server, "/api/tasks", run=run)[0] == 404, run
    for task in ("stolen", "../../../outside", "../details/a", "/etc/passwd"):
        status, body = get(server, "/api/task", run="b/h/m/r", task=task)
        assert status == 404 and "TOP-SECRET" not in str(body), task
    for path in ("/static/../../../../etc/passwd", "/static/%2e%2e/%2e%2e/etc/passwd", "//etc/passwd",
                 "/static/app.js/../../../outside.json", "/../outside.json", "/static/index.html"):
        status, body = _raw(server, path)
        assert status == 404 and b"root:" not in body and b"TOP-SECRET" not in body, path


def test_requests_naming_another_host_are_refused(real_results: Path, serve: Serve) -> None:
    server = serve(real_results)
    assert _raw(server, "/api/runs", host="evil.example:80")[0] == 421  # DNS rebinding
    assert _raw(server, "/api/runs", host=f"localhost:{server.server_port}")[0] == 200
    status, body = _raw(server, "/")
    assert status == 200 and b"/static/app.js" in body


def test_secret_looking_params_are_masked_and_token_counts_are_not(tmp_path: Path, serve: Serve) -> None:
    params = {"spec": {"model": {"api_key": "sk-live-abcdef", "params": {"max_tokens": 7}},
                       "harness": {"headers": {"Authorization": "Bearer xyz"}, "access_token": "tok-123"}}}
    run_dir = write_run(tmp_path / "run", [make_detail("a")], params=params)
    server = serve(run_dir)
    _, run = get(server, "/api/run", run=".")
    text = str(run)
    assert "sk-live-abcdef" not in text and "Bearer xyz" not in text and "tok-123" not in text
    assert run["params"]["spec"]["model"]["api_key"] == "***"
    assert run["params"]["spec"]["model"]["params"]["max_tokens"] == 7


def test_security_headers_are_sent(real_results: Path, serve: Serve) -> None:
    server = serve(real_results)
    conn = http.client.HTTPConnection(server.server_name, server.server_port, timeout=10)
    conn.request("GET", "/static/app.js")
    r = conn.getresponse()
    r.read()
    conn.close()
    assert r.status == 200 and r.getheader("Content-Type", "").startswith("text/javascript")
    csp = r.getheader("Content-Security-Policy", "")
    assert "script-src 'self'" in csp and "default-src 'none'" in csp
    assert r.getheader("X-Content-Type-Options") == "nosniff"
