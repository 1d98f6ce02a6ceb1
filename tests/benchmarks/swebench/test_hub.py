"""SWE-bench datasets from the Hub (a stand-in with the Hub's URL layout on 127.0.0.1): download, the cache
under data_dir, revisions, old names, killed downloads, offline mode, and an untouched os.environ."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench.dataset import load_instances
from agentcompass.common.hub import MANIFEST, DatasetDownloadError, HubSettings, download, find_cached, split_dir
from agentcompass.engine.identity import request_identity

from ...standins.hf_hub import HubStandIn, swebench_parquet

REPO = Path(__file__).resolve().parents[3]
VERIFIED = "SWE-bench/SWE-bench_Verified"
TEST_FILE = "data/test-00000-of-00001.parquet"


def _row(iid: str, **over: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "instance_id": iid, "repo": "octo/demo", "base_commit": "a" * 40, "problem_statement": "it breaks",
        "patch": "diff --git a/x.py b/x.py\n", "test_patch": "diff --git a/tests/t.py b/tests/t.py\n",
        "FAIL_TO_PASS": ["tests/t.py::test_a"], "PASS_TO_PASS": ["tests/t.py::test_b"], "version": "1.0",
        "hints_text": "", "created_at": "2024-01-01T00:00:00Z", "environment_setup_commit": "a" * 40}
    row.update(over)
    return row


def _parquet(*ids: str, pad: int = 0) -> bytes:
    return swebench_parquet([_row(i, hints_text=os.urandom(pad).hex()) for i in ids])


@pytest.fixture
def hub() -> Iterator[HubStandIn]:
    with HubStandIn() as h:
        yield h


def _env(hub: HubStandIn, **more: str) -> dict[str, str]:
    return {"HF_ENDPOINT": hub.url, **more}


def test_download_then_cache_second_load_makes_no_request(hub: HubStandIn, tmp_path: Path) -> None:
    commit = hub.add_dataset(VERIFIED, {TEST_FILE: _parquet("octo__demo-1", "octo__demo-2"),
                                        "data/dev-00000-of-00001.parquet": _parquet("octo__dev-1")})
    seen: list[tuple[int, int]] = []
    rows, source = load_instances("swebench_verified", str(tmp_path), environ=_env(hub, HF_TOKEN="hf_secret_1"),
                                  on_progress=lambda done, total: seen.append((done, total)))
    assert [r["instance_id"] for r in rows] == ["octo__demo-1", "octo__demo-2"]
    assert rows[0]["FAIL_TO_PASS"] == ["tests/t.py::test_a"]
    assert (source.kind, source.repo, source.revision, source.commit) == ("hub", VERIFIED, "main", commit)
    assert source.files == [TEST_FILE]  # only the split asked for
    folder = split_dir(tmp_path, VERIFIED, "main", "test")
    assert source.path == str(folder) and (folder / TEST_FILE).is_file() and (folder / MANIFEST).is_file()
    assert not (folder / ".cache").exists() and not list(folder.parent.glob(".partial-*"))
    assert seen and seen[-1][0] == seen[-1][1] == (folder / TEST_FILE).stat().st_size
    assert hub.downloads() == [f"/datasets/{VERIFIED}/resolve/{commit}/{TEST_FILE}"]
    assert {auth for _, _, auth in hub.requests} == {"Bearer hf_secret_1"}  # HF_TOKEN, passed explicitly

    served = len(hub.requests)
    again, source2 = load_instances("swebench_verified", str(tmp_path), environ=_env(hub))
    assert again == rows and source2 == source
    assert len(hub.requests) == served  # the cache, no network at all


def test_revision_pins_the_dataset_version_and_is_part_of_the_identity(hub: HubStandIn, tmp_path: Path) -> None:
    old = hub.add_dataset(VERIFIED, {TEST_FILE: _parquet("octo__old-1")})
    new = hub.add_dataset(VERIFIED, {TEST_FILE: _parquet("octo__new-1", "octo__new-2")})
    rows, src = load_instances("swebench_verified", str(tmp_path), environ=_env(hub))
    assert [r["instance_id"] for r in rows] == ["octo__new-1", "octo__new-2"] and src.commit == new
    rows, src = load_instances("swebench_verified", str(tmp_path), revision=old, environ=_env(hub))
    assert [r["instance_id"] for r in rows] == ["octo__old-1"] and (src.revision, src.commit) == (old, old)
    assert split_dir(tmp_path, VERIFIED, old, "test").is_dir()

    with pytest.raises(ConfigError) as err:
        load_instances("swebench_verified", str(tmp_path), revision="v9-nope", environ=_env(hub))
    assert err.value.field == "benchmark.params.revision" and "v9-nope" in str(err.value)

    def ident(params: dict[str, Any]) -> str:
        return request_identity(benchmark="swebench_verified", benchmark_params=params, benchmark_version="1",
                                harness="h", harness_params={}, model="m", model_params={}, api_protocol="p",
                                environment="docker", environment_params={})
    assert ident({"revision": old}) != ident({"revision": new}) != ident({})


def test_old_princeton_nlp_name_is_the_fallback(hub: HubStandIn, tmp_path: Path) -> None:
    commit = hub.add_dataset("princeton-nlp/SWE-bench_Lite", {TEST_FILE: _parquet("octo__lite-1")})
    rows, src = load_instances("swebench_lite", str(tmp_path), environ=_env(hub))
    assert [r["instance_id"] for r in rows] == ["octo__lite-1"]
    assert (src.repo, src.commit) == ("princeton-nlp/SWE-bench_Lite", commit)
    asked = [p for m, p, _ in hub.requests if p.startswith("/api/")]
    assert asked == ["/api/datasets/SWE-bench/SWE-bench_Lite/revision/main",
                     "/api/datasets/princeton-nlp/SWE-bench_Lite/revision/main"]
    served = len(hub.requests)
    load_instances("swebench_lite", str(tmp_path), environ=_env(hub))
    assert len(hub.requests) == served

    with pytest.raises(DatasetDownloadError, match="SWE-bench/SWE-bench or princeton-nlp/SWE-bench"):
        load_instances("swebench", str(tmp_path), environ=_env(hub))


def test_files_in_data_dir_come_before_the_hub(hub: HubStandIn, tmp_path: Path) -> None:
    (tmp_path / "swebench_verified.jsonl").write_text(json.dumps(_row("octo__mine-1")) + "\n")
    rows, src = load_instances("swebench_verified", str(tmp_path), environ=_env(hub))
    assert [r["instance_id"] for r in rows] == ["octo__mine-1"] and src.kind == "file"
    assert hub.requests == []


def test_a_killed_download_never_reads_as_a_dataset(hub: HubStandIn, tmp_path: Path) -> None:
    commit = hub.add_dataset(VERIFIED, {TEST_FILE: _parquet("octo__demo-1", pad=200_000)})
    hub.stall_after[TEST_FILE] = 50_000
    code = ("import sys; from agentcompass.benchmarks.swebench.dataset import load_instances; "
            "load_instances('swebench_verified', sys.argv[1])")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(REPO), "HF_ENDPOINT": hub.url}
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "data")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        partial = split_dir(tmp_path / "data", VERIFIED, "main", "test").parent
        # the transfer is under way, and stuck, with its partial directory written (the state the kill must leave)
        while not (hub.downloads() and list(partial.glob(".partial-test-*"))):
            assert proc.poll() is None and time.monotonic() < deadline, "the download never started"
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    data = tmp_path / "data"
    assert list(split_dir(data, VERIFIED, "main", "test").parent.glob(".partial-test-*"))  # what the kill left
    assert not split_dir(data, VERIFIED, "main", "test").exists()
    assert find_cached(data, [VERIFIED], "main", "test") is None
    with pytest.raises(ConfigError, match="HF_HUB_OFFLINE"):  # offline, nothing counts as cached
        load_instances("swebench_verified", str(data), environ=_env(hub, HF_HUB_OFFLINE="1"))

    del hub.stall_after[TEST_FILE]
    rows, src = load_instances("swebench_verified", str(data), environ=_env(hub))
    assert [r["instance_id"] for r in rows] == ["octo__demo-1"] and src.commit == commit
    assert not list(split_dir(data, VERIFIED, "main", "test").parent.glob(".partial-*"))  # swept


def test_a_transfer_cut_short_fails_and_leaves_nothing(hub: HubStandIn, tmp_path: Path) -> None:
    hub.add_dataset(VERIFIED, {TEST_FILE: _parquet("octo__demo-1", pad=20_000)})
    hub.cut_after[TEST_FILE] = 1000
    with pytest.raises(DatasetDownloadError, match=r"downloading data/test-00000-of-00001\.parquet") as err:
        load_instances("swebench_verified", str(tmp_path), environ=_env(hub))
    assert str(tmp_path / "swebench_verified.jsonl") in str(err.value)  # what to do instead
    parent = split_dir(tmp_path, VERIFIED, "main", "test").parent
    assert sorted(p.name for p in parent.iterdir()) == [".test.lock"]


def test_download_size_is_capped(hub: HubStandIn, tmp_path: Path) -> None:
    hub.add_dataset(VERIFIED, {TEST_FILE: _parquet("octo__demo-1")})
    with pytest.raises(DatasetDownloadError, match="cap"):
        download(tmp_path, [VERIFIED], "main", "test", where="t", settings=HubSettings(endpoint=hub.url),
                 max_bytes=100)
    assert hub.downloads() == []


def test_unknown_split_names_the_splits_there_are(hub: HubStandIn, tmp_path: Path) -> None:
    hub.add_dataset(VERIFIED, {TEST_FILE: _parquet("octo__demo-1")})
    with pytest.raises(ConfigError, match="splits seen: test") as err:
        load_instances("swebench_verified", str(tmp_path), split="train", environ=_env(hub))
    assert err.value.field == "benchmark.params.split"


def test_offline_with_an_empty_cache_says_which_file_to_place(hub: HubStandIn, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    hub.add_dataset(VERIFIED, {TEST_FILE: _parquet("octo__demo-1")})
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = dict(os.environ)
    with pytest.raises(ConfigError) as err:
        load_instances("swebench_verified", str(tmp_path))
    msg = str(err.value)
    assert str(tmp_path / "swebench_verified.jsonl") in msg and "HF_HUB_OFFLINE" in msg
    assert str(split_dir(tmp_path, VERIFIED, "main", "test")) in msg and err.value.field == "data_dir"
    assert hub.requests == [] and dict(os.environ) == before

    monkeypatch.delenv("HF_HUB_OFFLINE")
    load_instances("swebench_verified", str(tmp_path))  # fills the cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    served = len(hub.requests)
    rows, _ = load_instances("swebench_verified", str(tmp_path))  # offline, from the cache
    assert [r["instance_id"] for r in rows] == ["octo__demo-1"] and len(hub.requests) == served


def test_hub_false_never_asks_the_hub(hub: HubStandIn, tmp_path: Path) -> None:
    hub.add_dataset(VERIFIED, {TEST_FILE: _parquet("octo__demo-1")})
    with pytest.raises(ConfigError, match="dataset not found"):
        load_instances("swebench_verified", str(tmp_path), hub=False, environ=_env(hub))
    assert hub.requests == []


def test_missing_libraries_name_the_extra_to_install(hub: HubStandIn, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"pip install 'agentcompass\[swebench\]'"):
        load_instances("swebench_verified", str(tmp_path), environ=_env(hub))


def test_the_process_environment_is_unchanged_from_first_import_on(hub: HubStandIn, tmp_path: Path) -> None:
    hub.add_dataset(VERIFIED, {TEST_FILE: _parquet("octo__demo-1")})
    code = ("import os, sys; before = dict(os.environ); "
            "from agentcompass.benchmarks.swebench.dataset import load_instances; "
            "rows, _ = load_instances('swebench_verified', sys.argv[1]); "
            "rows2, _ = load_instances('swebench_verified', sys.argv[1]); "
            "assert 'huggingface_hub' in sys.modules and len(rows) == len(rows2) == 1; "
            "print(dict(os.environ) == before)")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(REPO), "HF_ENDPOINT": hub.url}
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "data")], env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "True"


def test_a_wait_for_another_download_stops_when_cancelled(hub: HubStandIn, tmp_path: Path) -> None:
    """The engine sets ``ComponentContext.cancelled`` when a request is cancelled while its benchmark's
    constructor runs in a worker thread: the wait for another process's download of the same split ends."""
    import fcntl

    hub.add_dataset(VERIFIED, {TEST_FILE: _parquet("octo__demo-1")})
    lock = split_dir(tmp_path, VERIFIED, "main", "test").parent / ".test.lock"
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)  # "another process" downloading the same split
    fcntl.flock(fd, fcntl.LOCK_EX)
    cancelled = threading.Event()
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            load_instances("swebench_verified", str(tmp_path), environ=_env(hub), cancelled=cancelled)
        except BaseException as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=load, daemon=True)
    try:
        waiter.start()
        deadline = time.monotonic() + 60
        while not hub.requests and time.monotonic() < deadline:  # it asked the Hub, now it waits
            time.sleep(0.05)
        waiter.join(1.0)
        assert waiter.is_alive() and not outcome, outcome  # waiting on the lock (up to LOCK_WAIT otherwise)
        cancelled.set()
        waiter.join(60)
        assert not waiter.is_alive()
    finally:
        os.close(fd)
    [err] = outcome
    assert isinstance(err, DatasetDownloadError) and "cancelled" in str(err)
    assert find_cached(tmp_path, [VERIFIED], "main", "test") is None and not hub.downloads()


def test_a_cancelled_download_stops_at_the_next_bytes(hub: HubStandIn, tmp_path: Path) -> None:
    hub.add_dataset(VERIFIED, {TEST_FILE: _parquet("octo__demo-1", pad=50_000)})
    cancelled = threading.Event()
    cancelled.set()
    with pytest.raises(DatasetDownloadError, match="cancelled"):
        download(tmp_path, [VERIFIED], "main", "test", where="benchmark x", settings=HubSettings(endpoint=hub.url),
                 cancelled=cancelled)
    assert find_cached(tmp_path, [VERIFIED], "main", "test") is None
    assert not list(split_dir(tmp_path, VERIFIED, "main", "test").parent.glob(".partial-*"))
