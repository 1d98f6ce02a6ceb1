"""Tailing progress.jsonl: whole lines only, garbage skipped, restarts when the file shrinks."""

from __future__ import annotations

from pathlib import Path

from agentcompass.viewer.progress import read_progress

from .rundirs import event


def test_a_torn_last_line_waits_until_it_is_complete(tmp_path: Path) -> None:
    p = tmp_path / "progress.jsonl"
    a = event("attempt_started", task_id="x", attempt=1)
    p.write_bytes(a + b'{"event": "attempt_fin')
    chunk = read_progress(p, 0)
    assert [e["task_id"] for e in chunk.events] == ["x"] and chunk.offset == len(a)
    assert read_progress(p, chunk.offset).events == []
    with open(p, "ab") as f:
        f.write(b'ished", "task_id": "x"}\n')
    again = read_progress(p, chunk.offset)
    assert [e["event"] for e in again.events] == ["attempt_finished"] and again.offset == p.stat().st_size


def test_a_line_torn_by_a_kill_then_continued_by_a_resumed_run_is_skipped(tmp_path: Path) -> None:
    p = tmp_path / "progress.jsonl"
    p.write_bytes(event("request_started", total_tasks=3) + b'{"event": "task_fi\n' + b"[1, 2]\n"
                  + event("request_started", total_tasks=3))
    chunk = read_progress(p, 0)
    assert [e["event"] for e in chunk.events] == ["request_started", "request_started"]
    assert chunk.skipped == 2


def test_an_offset_inside_a_line_starts_at_the_next_line(tmp_path: Path) -> None:
    p = tmp_path / "progress.jsonl"
    lines = [event("attempt_started", task_id=f"t{i}", attempt=1) for i in range(5)]
    p.write_bytes(b"".join(lines))
    chunk = read_progress(p, len(lines[0]) + 5)
    assert [e["task_id"] for e in chunk.events] == ["t2", "t3", "t4"]


def test_a_shrunk_file_is_read_again_from_the_start(tmp_path: Path) -> None:
    p = tmp_path / "progress.jsonl"
    p.write_bytes(event("request_started", total_tasks=1))
    chunk = read_progress(p, 10_000)
    assert chunk.reset and len(chunk.events) == 1
    missing = read_progress(tmp_path / "nope.jsonl", 0)
    assert missing.events == [] and missing.offset == 0


def test_a_line_longer_than_a_chunk_is_skipped_not_stuck(tmp_path: Path) -> None:
    p = tmp_path / "progress.jsonl"
    tail = event("attempt_started", task_id="after", attempt=1)
    p.write_bytes(b'{"x": "' + b"y" * 5000 + b'"}\n' + tail)
    offset, seen = 0, []
    for _ in range(10):
        chunk = read_progress(p, offset, max_bytes=1000)
        seen += [e.get("task_id") for e in chunk.events]
        offset = chunk.offset
    assert seen == ["after"] and offset == p.stat().st_size
