"""The run's log handlers: a full disk stops them once; a bad record does not."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from agentcompass.engine.redact import LogWriteState, RunLogHandler


def test_a_bad_record_does_not_stop_the_runs_file_logging(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = LogWriteState("the test run")
    handler = RunLogHandler(tmp_path / "run.log", state)
    log = logging.Logger("t", level=logging.INFO)
    log.addHandler(handler)
    try:
        log.info("%s %s", "only one arg")  # a formatting bug in one call site
        log.info("still logged")
    finally:
        handler.close()
    assert state.error is None
    assert "still logged" in (tmp_path / "run.log").read_text()


async def test_lines_logged_on_the_loop_are_on_disk_when_the_loops_round_ends(tmp_path: Path) -> None:
    state = LogWriteState("the test run")
    handler = RunLogHandler(tmp_path / "run.log", state, delay=True)
    log = logging.Logger("t", level=logging.INFO)
    log.addHandler(handler)
    try:
        for i in range(3):
            log.info("line %d", i)
        await asyncio.sleep(0)  # the rest of this round of callbacks runs, the batch's flush among them
        assert (tmp_path / "run.log").read_text().count("line ") == 3
        log.info("after")
    finally:
        handler.close()
    assert state.error is None and (tmp_path / "run.log").read_text().endswith("after\n")
