"""agentcompass report: HTML (well-formed, self-contained, escaped), Markdown and JSON of a real run."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import msgspec
import pytest

from agentcompass import cli
from agentcompass._errors import ConfigError
from agentcompass.engine.run_dir import safe_name
from agentcompass.records import AttemptRecord, Step, TaskDetail, Trajectory
from agentcompass.report import write_report
from agentcompass.rundata import iter_task_rows

from .results_runs import SAMPLE, SECRET, make_runs, write_run

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
SVG_EMPTY = {"rect", "path", "line", "circle"}


class Checker(HTMLParser):
    """Checks that every element is closed in order, and collects ids, links, classes and text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.srcs: list[str] = []
        self.tags: dict[str, int] = {}
        self.row_classes: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if a.get("id"):
            self.ids.add(a["id"] or "")
        if tag == "a" and a.get("href"):
            self.links.append(a["href"] or "")
        if "src" in a or (tag == "link"):
            self.srcs.append(a.get("src") or a.get("href") or "")
        if tag == "tr" and a.get("class"):
            self.row_classes.append(a["class"] or "")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag not in VOID and tag not in SVG_EMPTY:
            self.errors.append(f"self-closed <{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(html_text: str) -> Checker:
    c = Checker()
    c.feed(html_text)
    c.close()
    return c


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_runs(tmp_path_factory.mktemp("results"))


def test_html_report_is_well_formed_self_contained_and_complete(runs: tuple[Path, Path],
                                                                 tmp_path: Path) -> None:
    _, b = runs
    out = write_report(b, "html", tmp_path / "r.html")
    text = (tmp_path / "r.html").read_text()
    assert out == tmp_path / "r.html" and text.startswith("<!DOCTYPE html>")
    doc = parse(text)
    assert doc.errors == [] and doc.stack == []
    assert doc.srcs == [] and "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in text
    rows = list(iter_task_rows(b))
    assert sorted(doc.row_classes) == sorted(r.outcome for r in rows)  # one table row per task
    for r in rows:  # each task links to its trajectory section
        assert f"#t-{r.file}" in doc.links and f"t-{r.file}" in doc.ids
    body = "".join(doc.text)
    assert doc.tags["svg"] == 1 and doc.tags["section"] == len(SAMPLE)
    assert "rm -f tests/test_hello.py" in body and "FAIL: hello.txt is missing" in body  # action, verifier
    assert "deleted_test" in body and "reward_hacking" in body and "95% CI" in body


def test_no_report_format_leaks_the_api_key(runs: tuple[Path, Path], tmp_path: Path) -> None:
    for run in runs:
        for fmt in ("html", "md", "json"):
            target = tmp_path / f"{run.name}.{fmt}"
            write_report(run, fmt, target)
            assert SECRET not in target.read_text()


def test_markdown_report_has_the_metrics_categories_flags_and_one_row_per_task(runs: tuple[Path, Path],
                                                                                tmp_path: Path) -> None:
    _, b = runs
    write_report(b, "md", tmp_path / "r.md")
    text = (tmp_path / "r.md").read_text()
    assert text.startswith("# shell_tasks / shell_agent / scripted (b)")
    for section in ("## Metrics", "## By category", "## Analysis flags (attempts)", "## Tasks"):
        assert section in text
    task_lines = [ln for ln in text.split("## Tasks")[1].splitlines() if ln.startswith("| ") and "/" in ln]
    assert len(task_lines) == len(SAMPLE)
    assert "| reward_hacking | 4 |" in text and "| repeated_tool_calls | 2 |" in text  # attempts, k=2


def test_json_report_holds_run_summary_params_and_task_rows(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = runs
    write_report(a, "json", tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["run"]["run_id"] == "a" and doc["summary"]["metrics"]["tasks"] == len(SAMPLE)
    assert doc["params"]["spec"]["model"]["api_key"] == "***"
    assert doc["tasks"] == [msgspec.to_builtins(r) for r in iter_task_rows(a)]


def test_run_text_is_escaped_and_long_text_is_clipped(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    detail = TaskDetail(task_id=f"t/{evil}", k=1, category=evil, correct=False, attempts={"1": AttemptRecord(
        status="completed", correct=False, score=0.0, final_answer=evil, extra={"output": "y" * 50_000},
        analysis={"reward_hacking": {"reasons": [evil]}},
        trajectory=Trajectory(steps=[Step(index=0, content=evil, action=evil, observation="z" * 50_000)]))})
    piped = TaskDetail(task_id="t/a|b", k=1, attempts={"1": AttemptRecord(
        status="run_error", error_kind="harness_crash", error="line one\nline | two")})
    run = write_run(tmp_path / "r", [detail, piped])
    write_report(run, "html", tmp_path / "r.html", max_chars=1000)
    text = (tmp_path / "r.html").read_text()
    assert evil not in text and "&lt;script&gt;" in text
    assert parse(text).errors == []
    assert "z" * 1001 not in text and "characters omitted" in text
    write_report(run, "md", tmp_path / "r.md")
    row = next(ln for ln in (tmp_path / "r.md").read_text().splitlines() if ln.startswith("| t/a"))
    assert len(re.split(r"(?<!\\)\|", row)) == 13  # 11 cells: the | in the id is escaped


def test_trajectories_can_be_left_out(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = runs
    write_report(a, "html", tmp_path / "r.html", trajectories=False)
    doc = parse((tmp_path / "r.html").read_text())
    assert doc.errors == [] and "section" not in doc.tags and doc.links == []


def test_cli_report_writes_next_to_the_run_by_default_and_stdout_for_md(
        runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = runs
    assert cli.main(["report", str(a)]) == 0
    assert (a / "report.html").is_file() and "report written to" in capsys.readouterr().err
    assert cli.main(["report", str(a), "--format", "md"]) == 0
    assert capsys.readouterr().out.startswith("# shell_tasks")
    assert cli.main(["report", str(tmp_path), "--format", "json"]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_an_unknown_format_is_a_config_error(runs: tuple[Path, Path]) -> None:
    with pytest.raises(ConfigError, match="Allowed: html, md, json"):
        write_report(runs[0], "pdf")


def test_a_task_id_with_unsafe_characters_links_to_its_section(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", [TaskDetail(task_id="a b/c", k=1, attempts={"1": AttemptRecord(
        status="completed", correct=True)}, correct=True)])
    write_report(run, "html", tmp_path / "r.html")
    doc = parse((tmp_path / "r.html").read_text())
    assert doc.links == [f"#t-{safe_name('a b/c')}"] and f"t-{safe_name('a b/c')}" in doc.ids


def test_terminal_escape_sequences_in_run_text_never_reach_a_text_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentcompass.compare import compare_runs, write_text

    evil = "t/\x1b[2J\x1b]0;pwned\x07red\x9b31m\r"
    raw = set(evil) - set("t/[2J]0;pwnedred31m")
    details = [TaskDetail(task_id=evil, k=1, category="c\x1b[5m", correct=False, attempts={"1": AttemptRecord(
        status="run_error", error_kind="harness_crash", error="boom\x1b[31m", correct=False)})]
    a = write_run(tmp_path / "a", details)
    b = write_run(tmp_path / "b", [TaskDetail(task_id=evil, k=1, correct=True, attempts={"1": AttemptRecord(
        status="completed", correct=True)})])
    assert cli.main(["report", str(a), "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert evil.split("\x1b")[0] in out and not raw & set(out), repr(out)
    assert "\\x1b[2J" in out  # shown, escaped
    write_report(a, "html", tmp_path / "r.html")
    html_text = (tmp_path / "r.html").read_text()
    assert not raw & set(html_text) and parse(html_text).errors == []
    assert cli.main(["compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert "\\x1b[2J" in text and not raw & set(text), repr(text)
    import io
    buf = io.StringIO()
    write_text(compare_runs([a, b]), buf)
    assert not raw & set(buf.getvalue())
