"""Installing bfcl-eval into its cache directory: the install lock is waited for under a deadline and gives up when
the request is cancelled; a half-written cache directory (a killed install) is replaced by a complete one. pip runs
for real against a local PEP 503 index serving stand-in wheels of bfcl-eval and mpmath."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.bfcl import package as bfcl_package
from agentcompass.benchmarks.bfcl.package import BFCL_EVAL_VERSION, _in_cache, _install, _install_async
from tests.pypi_index import SimpleIndex

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleIndex]:
    with SimpleIndex(gate_deadline_s=60) as idx:
        idx.add_wheel("bfcl-eval", BFCL_EVAL_VERSION, {"bfcl_eval/__init__.py": "",
                                                       "bfcl_eval/data/BFCL_v4_simple_python.json": "{}\n"})
        idx.add_wheel("mpmath", "1.3.0", {"mpmath/__init__.py": ""})
        monkeypatch.setenv("PIP_INDEX_URL", idx.url)
        monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
        yield idx


@contextlib.contextmanager
def _lock_held(target: Path) -> Iterator[None]:
    """The install lock held by another installer (this test) until the block ends."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        yield


def test_a_cancelled_request_stops_waiting_for_the_install_lock(tmp_path: Path) -> None:
    target = tmp_path / "bfcl"
    cancelled = threading.Event()
    cancelled.set()
    with _lock_held(target), pytest.raises(ConfigError) as err:
        _install(target, "benchmark", cancelled)
    assert "cancelled" in str(err.value) and ".bfcl.lock" in str(err.value)
    assert not target.exists()


def test_the_install_lock_is_given_up_at_its_deadline(tmp_path: Path) -> None:
    target = tmp_path / "bfcl"
    with _lock_held(target), pytest.raises(ConfigError) as err:
        _install(target, "benchmark", None, timeout_s=0.5)
    assert "held the install lock" in str(err.value) and ".bfcl.lock" in str(err.value)


def test_a_half_written_cache_directory_is_replaced(index: SimpleIndex, tmp_path: Path) -> None:
    target = tmp_path / "bfcl"
    (target / "bfcl_eval").mkdir(parents=True)
    (target / "bfcl_eval" / "__init__.py").write_text("")  # left by a killed install: no data, no dist-info
    assert not _in_cache(target)
    _install(target, "benchmark", None)
    assert _in_cache(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".bfcl.lock", "bfcl"]  # no staging directory left


def test_a_failed_install_leaves_nothing_and_names_the_manual_command(index: SimpleIndex, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", index.url.replace("/simple/", "/nothing/"))
    target = tmp_path / "bfcl"
    with pytest.raises(ConfigError) as err:
        _install(target, "benchmark", None)
    assert "--no-deps" in str(err.value) and bfcl_package.DIR_ENV in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".bfcl.lock"]


async def test_on_an_event_loop_the_install_is_awaited_and_never_run_blocking(index: SimpleIndex,
                                                                              tmp_path: Path) -> None:
    target = tmp_path / "bfcl"
    with pytest.raises(ConfigError, match="would block this event loop"):
        _install(target, "benchmark", None)  # sync code on the loop: refused, not a loop stalled for minutes
    assert not target.exists()
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.05)

    ticker = asyncio.ensure_future(tick())
    try:
        await _install_async(target, "benchmark", None)
    finally:
        ticker.cancel()
    assert _in_cache(target) and ticks > 3  # the loop ran on while pip did
