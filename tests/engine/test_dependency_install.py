"""auto_install_dependencies in a launch: pip runs while the other requests keep finishing their tasks."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

import agentcompass
from agentcompass.dependencies import install_counts
from agentcompass.engine.progress import PlainDisplay
from agentcompass.records import DependencyInstalled, DependencyInstalling, ProgressEvent, RequestFinished
from agentcompass.specs import ComponentSpec, ModelSpec, OrchestrationSpec, RunRequestSpec
from tests.engine.dependency_components import PROBE
from tests.pypi_index import SimpleIndex

SAMPLE = ["files/hello_world", "text/reverse_lines", "answer/count_lines", "python/fizzbuzz"]
PROBE_HARNESS = "tests.engine.dependency_components:ProbeHarness"
DEADLINE_S = 120.0


def request(results: Path, name: str, harness: str = "shell_agent", auto_install: bool = False) -> RunRequestSpec:
    return RunRequestSpec(benchmark=ComponentSpec("shell_tasks", {"sample_ids": SAMPLE}),
                          harness=ComponentSpec(harness), model=ModelSpec("scripted"), name=name,
                          results_dir=str(results), auto_install_dependencies=auto_install)


async def test_an_install_in_one_request_does_not_hold_up_the_others(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    solo = await agentcompass.async_launch(OrchestrationSpec(requests=[request(tmp_path / "solo", "b")],
                                                             progress="none"))
    assert solo["b"].status == "completed"

    # the wheel's download is held until B has finished all its tasks: if pip blocked the event loop, B could
    # not finish before the index's own deadline let the download go
    with SimpleIndex(gate_deadline_s=DEADLINE_S) as index:
        index.add_wheel("acdep-probe", "1.0", {"acdep_probe/__init__.py": "ANSWER = 42\n"}, gated=True)
        # what a user with a mirror sets; pip's process inherits it (the engine never writes os.environ)
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        monkeypatch.setenv("AGENTCOMPASS_PIP_TARGET", str(tmp_path / "site"))
        events: list[ProgressEvent] = []
        b_done = asyncio.Event()

        def on_progress(ev: ProgressEvent) -> None:
            events.append(ev)
            if isinstance(ev, RequestFinished) and ev.request == "b":
                b_done.set()

        launch = asyncio.ensure_future(agentcompass.async_launch(OrchestrationSpec(
            requests=[request(tmp_path / "both", "a", PROBE_HARNESS, auto_install=True),
                      request(tmp_path / "both", "b")], progress="none"), on_progress=on_progress))
        await asyncio.wait_for(b_done.wait(), DEADLINE_S)
        assert await asyncio.to_thread(index.requested.wait, DEADLINE_S), "pip never asked for the wheel"
        index.release()
        result = await asyncio.wait_for(launch, DEADLINE_S)

    assert index.released_by == "test"  # B finished while A's install was still held
    a, b = result["a"], result["b"]
    assert a.status == "completed" and a.counts.done == len(SAMPLE), a.error
    assert b.status == "completed" and b.metrics == solo["b"].metrics and b.counts.done == solo["b"].counts.done
    order = [(type(e).__name__, e.request) for e in events
             if isinstance(e, DependencyInstalling | DependencyInstalled | RequestFinished)]
    assert order[:3] == [("DependencyInstalling", "a"), ("RequestFinished", "b"), ("DependencyInstalled", "a")]
    installed = next(e for e in events if isinstance(e, DependencyInstalled))
    assert installed.ok and not installed.shared and installed.package == PROBE.pip
    assert index.downloads == {"acdep-probe": 1} and install_counts()[PROBE.pip] == 1
    assert a.paths is not None  # pip's output is in the request's log
    assert "Successfully installed acdep-probe-1.0" in Path(a.paths.log).read_text()

    # a later request in the same process finds it installed: no pip, no events
    events.clear()
    again = await agentcompass.async_launch(OrchestrationSpec(
        requests=[request(tmp_path / "again", "c", PROBE_HARNESS, auto_install=True)], progress="none"),
        on_progress=events.append)
    assert again["c"].status == "completed"
    assert not [e for e in events if isinstance(e, DependencyInstalling | DependencyInstalled)]
    assert install_counts()[PROBE.pip] == 1 and index.downloads == {"acdep-probe": 1}


def test_the_displays_show_an_install_in_progress() -> None:
    out = io.StringIO()
    display = PlainDisplay(stream=out)
    display.update(DependencyInstalling(ts=0, request="a", package="acdep-x==1", component="harness"))
    assert display.stats["a"].status_text() == "installing acdep-x==1"  # the rich table's status column
    display.update(DependencyInstalled(ts=0, request="a", package="acdep-x==1", component="harness", seconds=3.2,
                                       ok=True, shared=True))
    assert display.stats["a"].status == "starting"
    display.update(DependencyInstalled(ts=0, request="b", package="acdep-y==1", component="benchmark", seconds=1,
                                       ok=False, error="pip exit 1"))
    assert out.getvalue().splitlines() == [
        "[a] installing acdep-x==1 for the harness (auto_install_dependencies)",
        "[a] installed acdep-x==1 in 3.2s (another request's install)",
        "[b] installing acdep-y==1 failed after 1.0s: pip exit 1"]
