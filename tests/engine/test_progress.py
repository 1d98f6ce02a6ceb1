"""The displays show image pulls: a line per active pull (rich), throttled lines (plain)."""

from __future__ import annotations

import io

from agentcompass.engine.progress import PlainDisplay, RichDisplay
from agentcompass.records import ImagePull


def _pull(status: str, done: int = 0, ts: float = 0.0) -> ImagePull:
    return ImagePull(ts=ts, request="r", image="swebench/sweb.eval.x86_64.a_1776_b-1:latest", status=status,
                     layers_done=3, layers_total=7, bytes_done=done, bytes_total=2_700_000_000, rate_bps=35_200_000.0)


def test_the_plain_display_prints_a_pull_when_it_starts_and_ends_and_throttles_between() -> None:
    stream = io.StringIO()
    display = PlainDisplay(stream, interval=3600)
    display.update(_pull("pulling"))
    for n in range(1, 50):
        display.update(_pull("pulling", done=n * 1_000_000))
    display.update(_pull("done", done=2_700_000_000))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("[r] image swebench/sweb.eval.x86_64.a_1776_b-1:latest: pulling, 3/7 layers")
    assert "35.2 MB/s" in lines[0] and "2700.0 MB" in lines[1] and "done" in lines[1]
    assert display.pulls == {}


def test_the_rich_display_has_a_line_per_active_pull() -> None:
    from rich.console import Console

    display = RichDisplay()
    display.update(_pull("pulling", done=120_000_000))
    console = Console(file=io.StringIO(), width=200)
    console.print(display._render())
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "sweb.eval.x86_64.a_1776_b-1" in text and "120.0 MB/2700.0 MB" in text and "35.2 MB/s" in text
    display.update(_pull("done"))
    assert display.pulls == {}


async def test_a_download_reported_from_a_worker_thread_reaches_on_progress_throttled() -> None:
    """``ComponentContext.report_download`` is called from the constructor's worker thread: events arrive on
    the loop, at most one per interval per download plus the final ``done``."""
    import asyncio

    from agentcompass.engine.progress import download_line, download_reporter
    from agentcompass.records import DataDownload

    got: list[DataDownload] = []
    report = download_reporter(lambda ev: got.append(ev), "req", "run-1", every_s=3600)

    def download() -> None:
        for done in range(0, 1000, 100):
            report("demo dataset (test)", done, 1000)
        report("demo dataset (test)", 1000, 1000)

    await asyncio.to_thread(download)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert [(e.status, e.bytes_done) for e in got] == [("downloading", 0), ("done", 1000)]
    assert download_line(got[-1]) == "[req] downloaded demo dataset (test): 0.0 MB / 0.0 MB"
