"""The task index: rows of k attempts, incremental refresh as details are committed."""

from __future__ import annotations

from pathlib import Path

from agentcompass.viewer.index import RunIndex

from .rundirs import make_detail, write_detail, write_run


def test_rows_of_k_attempts_sum_steps_tokens_and_tries(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "r", [make_detail("multi", k=3, steps=4, tokens=50, correct=False)])
    idx = RunIndex(run_dir / "details")
    assert idx.refresh()
    [row] = idx.rows()
    assert (row.k, row.steps, row.tokens, row.tries, row.outcome) == (3, 12, 150, 3, "fail")
    assert row.time_s == 1.8
    assert not idx.refresh()  # nothing changed: cheap no-op


def test_every_detail_committed_in_quick_succession_is_seen(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "r", [])
    idx = RunIndex(run_dir / "details")
    idx.refresh()
    for i in range(25):  # same second, often the same directory timestamp tick
        write_detail(run_dir, make_detail(f"t{i:02d}"))
        idx.refresh()
        assert len(idx) == i + 1
    assert idx.detail_file("t07") == run_dir / "details" / "t07.json"
    assert idx.detail_file("../t07") is None
