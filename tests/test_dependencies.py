"""ensure_installed against a real pip and a local PEP 503 index: refused, installed once, retried, timed out."""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import logging
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.common import pip_install
from agentcompass.dependencies import Requirement, ensure_installed, install_counts, missing, pip_command
from agentcompass.records import DependencyInstalled, DependencyInstalling, ProgressEvent
from tests.pypi_index import SimpleIndex


@pytest.fixture
def index() -> Iterator[SimpleIndex]:
    with SimpleIndex(gate_deadline_s=120) as idx:
        yield idx


def pip_env(index: SimpleIndex, url: str | None = None) -> dict[str, str]:
    return {"PIP_INDEX_URL": url or index.url, "PIP_NO_CACHE_DIR": "1"}


async def test_a_missing_package_without_auto_install_is_a_config_error_naming_the_command() -> None:
    req = Requirement("acdep-absent==1.0", "acdep_absent")
    with pytest.raises(ConfigError) as exc:
        await ensure_installed([req], auto_install=False, field="benchmark", who="benchmark 'x'")
    assert exc.value.field == "benchmark"
    assert pip_command([req]) in str(exc.value) and "auto_install_dependencies=True" in str(exc.value)
    assert "benchmark 'x' needs 'acdep-absent==1.0' (module 'acdep_absent')" in str(exc.value)
    assert "acdep-absent==1.0" not in install_counts()
    # present ones need nothing, whatever the flag
    assert await ensure_installed([Requirement("msgspec", "msgspec")], auto_install=False, field="harness") == []


async def test_concurrent_callers_in_two_event_loops_share_one_pip_run(index: SimpleIndex, tmp_path: Path) -> None:
    index.add_wheel("acdep-once", "1.0", {"acdep_once/__init__.py": "ANSWER = 42\n"}, gated=True)
    req = Requirement("acdep-once==1.0", "acdep_once")
    target = str(tmp_path / "target")
    events: list[ProgressEvent] = []
    # credentials in the index URL never reach the returned output
    env = pip_env(index, index.url.replace("http://", "http://user:s3cret-token@"))

    def call(request: str) -> asyncio.Future[list]:
        return asyncio.ensure_future(ensure_installed([req], auto_install=True, field="harness", request=request,
                                                      emit=events.append, target=target, pip_env=env))

    first, second = call("a"), call("b")
    other_loop = asyncio.ensure_future(asyncio.to_thread(lambda: asyncio.run(ensure_installed(
        [req], auto_install=True, field="benchmark", request="c", emit=events.append, target=target,
        pip_env=env))))
    assert await asyncio.to_thread(index.requested.wait, 120), "pip never asked for the wheel"
    index.release()
    reports = [r for fut in (first, second, other_loop) for r in await asyncio.wait_for(fut, 120)]
    assert index.released_by == "test"
    assert index.downloads == {"acdep-once": 1} and install_counts()["acdep-once==1.0"] == 1
    assert [r.ran_pip for r in reports].count(True) == 1
    ran = next(r for r in reports if r.ran_pip)
    assert "Successfully installed acdep-once-1.0" in ran.output and "s3cret-token" not in ran.output
    assert importlib.import_module("acdep_once").ANSWER == 42
    installed = [e for e in events if isinstance(e, DependencyInstalled)]
    # whichever came first ran pip (here or in the other loop); the others awaited it
    assert sorted(e.request for e in installed) == ["a", "b", "c"] and all(e.ok for e in installed)
    assert [e.shared for e in installed].count(False) == 1
    assert sorted(e.request for e in events if isinstance(e, DependencyInstalling)) == ["a", "b", "c"]
    # later: present, nothing to do
    assert await ensure_installed([req], auto_install=True, field="harness", target=target, pip_env=env) == []
    assert install_counts()["acdep-once==1.0"] == 1


async def test_a_failed_install_is_reported_and_a_later_call_tries_again(index: SimpleIndex, tmp_path: Path) -> None:
    req = Requirement("acdep-later==1.0", "acdep_later")
    target = str(tmp_path / "target")
    with pytest.raises(ConfigError) as exc:  # not on the index (yet)
        await ensure_installed([req], auto_install=True, field="harness", target=target, pip_env=pip_env(index))
    assert exc.value.field == "harness" and "failed (pip exit 1)" in str(exc.value)
    assert "No matching distribution found for acdep-later==1.0" in str(exc.value)
    index.add_wheel("acdep-later", "1.0", {"acdep_later/__init__.py": ""})
    [report] = await ensure_installed([req], auto_install=True, field="harness", target=target,
                                      pip_env=pip_env(index))
    assert report.ran_pip and install_counts()["acdep-later==1.0"] == 2


async def test_a_package_that_does_not_provide_the_module_is_refused(index: SimpleIndex, tmp_path: Path) -> None:
    index.add_wheel("acdep-other", "1.0", {"acdep_other_name/__init__.py": ""})
    with pytest.raises(ConfigError, match="Installed .acdep-other==1.0. but module 'acdep_other' still cannot be "
                                          "imported"):
        await ensure_installed([Requirement("acdep-other==1.0", "acdep_other")], auto_install=True, field="harness",
                               target=str(tmp_path / "t"), pip_env=pip_env(index))


async def test_pip_past_its_timeout_is_killed_and_named(index: SimpleIndex, tmp_path: Path) -> None:
    index.add_wheel("acdep-stuck", "1.0", {"acdep_stuck/__init__.py": ""}, gated=True)
    req = Requirement("acdep-stuck==1.0", "acdep_stuck")
    with pytest.raises(ConfigError) as exc:
        await ensure_installed([req], auto_install=True, field="harness", target=str(tmp_path / "t"),
                               pip_env=pip_env(index), timeout_s=3)
    assert "timed out after 3s" in str(exc.value) and "AGENTCOMPASS_PIP_TIMEOUT" in str(exc.value)
    assert index.released_by is None  # the held download was never let go: pip was stopped, not finished


async def test_a_cancelled_install_lets_the_next_caller_run_pip(index: SimpleIndex, tmp_path: Path) -> None:
    index.add_wheel("acdep-cancel", "1.0", {"acdep_cancel/__init__.py": ""}, gated=True)
    req = Requirement("acdep-cancel==1.0", "acdep_cancel")
    kw = dict(auto_install=True, field="harness", target=str(tmp_path / "t"), pip_env=pip_env(index))
    owner = asyncio.ensure_future(ensure_installed([req], **kw))  # type: ignore[arg-type]
    assert await asyncio.to_thread(index.requested.wait, 120)
    waiting = asyncio.Event()
    # its DependencyInstalling is emitted just before it joins the install in flight (no await in between)
    waiter = asyncio.ensure_future(ensure_installed([req], emit=lambda ev: waiting.set(), **kw))  # type: ignore[arg-type]
    await asyncio.wait_for(waiting.wait(), 60)
    owner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await owner
    index.release()  # the waiter took over and ran pip itself
    [report] = await asyncio.wait_for(waiter, 120)
    assert report.ran_pip and install_counts()["acdep-cancel==1.0"] == 2


async def test_an_optional_requirement_is_installed_only_when_allowed(tmp_path: Path) -> None:
    """Optional requirements (a download path the user may not need) are skipped without auto-install, never
    refused; with it they are installed like the others (here: refused only because the index is empty)."""
    req = Requirement("agentcompass-no-such-package-xyz", "agentcompass_no_such_package_xyz", optional=True)
    assert await ensure_installed([req], auto_install=False, field="benchmark") == []
    with pytest.raises(ConfigError) as info:
        await ensure_installed([req], auto_install=True, field="benchmark", target=str(tmp_path / "t"),
                               timeout_s=120, pip_env={"PIP_INDEX_URL": "http://127.0.0.1:9/simple",
                                                       "PIP_RETRIES": "0", "PIP_TIMEOUT": "2"})
    assert info.value.field == "benchmark"


def _fake_installed(where: Path, name: str, module: str, version: str) -> None:
    """A package as pip leaves it: the module and its dist-info (METADATA with the version)."""
    (where / module).mkdir(parents=True)
    (where / module / "__init__.py").write_text("")
    info = where / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_an_installed_version_outside_the_specifier_counts_as_missing(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_installed(tmp_path, "acdep-aged", "acdep_aged", "0.5")
    monkeypatch.syspath_prepend(str(tmp_path))
    old_enough, too_old = Requirement("acdep-aged>=0.1", "acdep_aged"), Requirement("acdep-aged>=1.1", "acdep_aged")
    assert missing([old_enough, too_old, Requirement("acdep-aged", "acdep_aged")]) == [too_old]


async def test_a_too_old_package_is_upgraded_by_auto_install(index: SimpleIndex, tmp_path: Path) -> None:
    target = tmp_path / "target"
    _fake_installed(target, "acdep-upgr", "acdep_upgr", "0.5")
    index.add_wheel("acdep-upgr", "2.0", {"acdep_upgr/__init__.py": "NEW = True\n"})
    req = Requirement("acdep-upgr>=1.1", "acdep_upgr")
    with pytest.raises(ConfigError, match="not a matching version"):
        await ensure_installed([req], auto_install=False, field="benchmark", target=str(target))
    [report] = await ensure_installed([req], auto_install=True, field="benchmark", target=str(target),
                                      pip_env=pip_env(index))
    assert report.ran_pip and missing([req]) == []
    assert "2.0" in {d.version for d in importlib.metadata.distributions(name="acdep-upgr")}
    assert importlib.import_module("acdep_upgr").NEW


async def test_pip_that_outlives_its_kill_still_ends_in_the_config_error(
        index: SimpleIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """No wait for the killed pip to exit (it cannot have been reaped yet): the caller still gets the
    ConfigError naming its field, not a bare TimeoutError, and the log says so."""
    monkeypatch.setattr(pip_install, "_KILL_WAIT_S", 0.0)
    index.add_wheel("acdep-unkilled", "1.0", {"acdep_unkilled/__init__.py": ""}, gated=True)
    with caplog.at_level(logging.WARNING, logger="agentcompass.pip_install"), pytest.raises(ConfigError) as exc:
        await ensure_installed([Requirement("acdep-unkilled==1.0", "acdep_unkilled")], auto_install=True,
                               field="harness", target=str(tmp_path / "t"), pip_env=pip_env(index), timeout_s=3)
    assert exc.value.field == "harness" and "timed out after 3s" in str(exc.value)
    [pid] = [int(m) for r in caplog.records for m in re.findall(r"pip \(pid (\d+)\) was killed", r.getMessage())]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # let this loop reap it (no "Event loop is closed" from its transport)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0)
