"""The viewer in a real headless Chromium (system binary, driven by Playwright): click through, filter, sort,
hostile text, live updates. Skipped only outside CI when no Chromium or Playwright is installed; in CI
(``CI`` set) a missing browser fails the test."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from agentcompass.viewer import ViewerServer
from agentcompass.viewer.chromium import find_chromium

from .conftest import REAL_KEY, REAL_TASKS
from .rundirs import event, make_detail, write_detail, write_run, write_summary

Serve = Callable[[Path], ViewerServer]
TIMEOUT_MS = 20_000


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{why}; CI must run the browser tests (apt-get install -y chromium; pip install playwright)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    exe = find_chromium()
    if exe is None:
        _unavailable("no Chromium found (set AGENTCOMPASS_CHROMIUM or install Debian's chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, timeout=60_000,
                              args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page; any JavaScript error or console error (CSP violations included) fails the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    problems: list[str] = []
    pg.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    try:
        yield pg
    finally:
        context.close()
    assert problems == []


# Predicates are passed as functions: a bare expression would be eval()ed, which the page's CSP forbids.
def _rows(pg: Any) -> list[str]:
    return pg.eval_on_selector_all("#tasks tbody tr", "rows => rows.map(r => r.dataset.task)")


def _wait_rows(pg: Any, expected: list[str]) -> None:
    pg.wait_for_function("ids => { const t = document.querySelector('#tasks');"
                         " return t && t.dataset.state === 'ready' &&"
                         " JSON.stringify([...t.querySelectorAll('tbody tr')].map(r => r.dataset.task)) ==="
                         " JSON.stringify(ids); }", arg=expected)


def test_click_from_the_runs_list_into_a_task_and_see_its_trajectory(real_results: Path, serve: Serve,
                                                                      page: Any) -> None:
    server = serve(real_results)
    page.goto(server.url)
    page.click("a.run-link:text-is('real')")
    _wait_rows(page, sorted(REAL_TASKS))
    assert page.locator("#categories .barrow").count() == 3
    assert "100.0%" in page.inner_text("#categories")
    assert page.inner_text("#taskcount").startswith("1\u20134 of 4")

    page.click("a.task-link:text-is('files/hello_world')")
    page.wait_for_selector(".step")
    assert page.inner_text("#taskid") == "files/hello_world"
    actions = page.locator(".step pre.action").all_inner_texts()
    assert any("printf 'Hello, World!\\n' > hello.txt" in a for a in actions), actions
    observations = page.locator(".step pre.observation").all_inner_texts()
    assert any("Hello, World!" in o for o in observations), observations
    assert "ok" in page.inner_text(".verifier")
    assert page.evaluate("location.hash") == f"#/task/{quote(REAL_KEY, safe='')}/{quote('files/hello_world', safe='')}"

    page.go_back()
    _wait_rows(page, sorted(REAL_TASKS))


def test_filter_and_sort_the_task_table_in_the_browser(real_results: Path, serve: Serve, page: Any) -> None:
    server = serve(real_results)
    page.goto(server.url + "#/run/" + quote(REAL_KEY, safe=""))
    _wait_rows(page, sorted(REAL_TASKS))

    page.fill("input[name=q]", "count")
    _wait_rows(page, ["answer/count_lines"])
    assert "(filtered from 4)" in page.inner_text("#taskcount")
    page.fill("input[name=q]", "")
    _wait_rows(page, sorted(REAL_TASKS))
    page.select_option("select[name=category]", "files")
    _wait_rows(page, ["files/hello_world", "files/mkdir_tree"])
    page.select_option("select[name=category]", "")

    page.click("th[data-col=task_id]")  # already ascending by task: now descending
    _wait_rows(page, sorted(REAL_TASKS, reverse=True))
    assert page.get_attribute("th[data-col=task_id]", "aria-sort") == "descending"
    page.click("th[data-col=category]")
    page.wait_for_function("() => document.querySelector('th[data-col=category]').getAttribute('aria-sort')"
                           " === 'ascending'"
                           " && document.querySelector('#tasks').dataset.state === 'ready'")
    categories = [r.split("/")[0] for r in _rows(page)]
    assert categories == sorted(categories) and categories[0] == "answer"


def test_hostile_text_in_a_trajectory_is_shown_as_inert_text(tmp_path: Path, serve: Serve, page: Any) -> None:
    hostile = ('<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
               '\x1b[31mRED\x1b[0m \x1b]0;title\x07done')
    tid = '<b onmouseover="window.pwned=3">bold</b>'
    write_run(tmp_path / "res" / "b" / "h" / "m" / "r", [
        make_detail(tid, observation=hostile, action="cat '<iframe src=javascript:alert(1)>'",
                    content="<style>body{display:none}</style>",
                    patch="--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new line\n",
                    correct=False, analysis={"suspected_reward_hacking": "edits tests <i>only</i>"})])
    server = serve(tmp_path / "res")
    page.goto(server.url + "#/run/" + quote("b/h/m/r", safe=""))
    _wait_rows(page, [tid])
    assert page.inner_text("#tasks tbody td:first-child") == tid
    assert "suspected_reward_hacking" in page.inner_text("#tasks tbody")
    page.click("a.task-link")
    page.wait_for_selector(".step")
    assert page.inner_text("#taskid") == tid
    obs = page.inner_text(".step pre.observation")
    assert '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>' in obs
    assert "RED done" in obs and "\x1b" not in obs and "[31m" not in obs
    assert "<iframe src=javascript:alert(1)>" in page.inner_text(".step pre.action")
    assert page.locator("#app img, #app script, #app iframe, #app style, #app b, #app i").count() == 0
    assert page.evaluate("window.pwned") is None
    assert page.is_visible("#app")
    assert [t.strip() for t in page.locator("pre.diff span.add").all_inner_texts()] == ["+new line"]
    assert [t.strip() for t in page.locator("pre.diff span.del").all_inner_texts()] == ["-old"]
    assert "edits tests <i>only</i>" in page.inner_text(".analysis")


def test_each_attempt_shows_the_node_that_ran_it(tmp_path: Path, serve: Serve, page: Any) -> None:
    detail = make_detail("t/one", k=2)
    for n, node in (("1", "10.0.0.7"), ("2", "10.0.0.8")):
        detail.attempts[n].meta["environments"] = [
            {"role": "agent", "id": "c1", "provider": "ray_docker", "node": node},
            {"role": "verifier", "id": "c2", "provider": "ray_docker", "node": node}]
    write_run(tmp_path / "res" / "b" / "h" / "m" / "r", [detail])
    server = serve(tmp_path / "res")
    page.goto(server.url + "#/run/" + quote("b/h/m/r", safe=""))
    _wait_rows(page, ["t/one"])
    page.click("a.task-link")
    page.wait_for_selector(".attempt")
    shown = page.inner_text(".attempt[data-attempt='1'] dl.kv")
    assert "node\n10.0.0.7" in shown, shown  # the attempt's own node, once for its two environments


def test_a_running_evaluation_page_updates_from_progress(tmp_path: Path, serve: Serve, page: Any) -> None:
    details = [make_detail("t/1"), make_detail("t/2", correct=False)]
    run_dir = write_run(tmp_path / "run", details, status="running", pid=os.getpid(), summary=False,
                        run_id="live-run", progress=[event("request_started", total_tasks=3, run_dir="x")])
    server = serve(run_dir)
    page.goto(server.url + "#/run/.")
    _wait_rows(page, ["t/1", "t/2"])
    page.wait_for_selector("#livebox:not([hidden])")
    assert page.inner_text("#live") == "live"

    write_detail(run_dir, make_detail("t/3"))
    line = event("task_finished", task_id="t/3", correct=True)
    with open(run_dir / "progress.jsonl", "ab") as f:  # a torn write first: the page must not choke on it
        f.write(line[:20])
        f.flush()
        time.sleep(1.5)
        f.write(line[20:])
    _wait_rows(page, ["t/1", "t/2", "t/3"])
    page.wait_for_function("() => document.querySelector('#events').innerText.includes('t/3')")

    final = [*details, make_detail("t/3")]
    write_summary(run_dir, final, status="completed", run_id="live-run", benchmark="synthetic",
                  harness="scripted_harness", model="scripted")
    write_run(run_dir, final, status="completed", run_id="live-run",
              progress=[event("request_finished", status="completed")])
    page.wait_for_selector("#runhead .badge.completed")
    page.wait_for_function("() => document.querySelector('#live').innerText === 'completed'")
