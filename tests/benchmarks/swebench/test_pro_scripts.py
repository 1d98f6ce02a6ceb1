"""SWE-bench Pro run scripts: the pinned repository tarball downloaded from a local stand-in file host into
data_dir (only run_scripts/ and dockerfiles/ regular files, atomically, capped, with a deadline), the cache,
a user's folder, and the errors that say what to provide."""

from __future__ import annotations

import io
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench.pro_scripts import (
    DEFAULT_COMMIT,
    MANIFEST,
    REPOSITORY,
    TARBALL_URL,
    ScriptsDownloadError,
    ScriptsManifest,
    _unpack,
    download,
    find_cached,
    locate,
    scripts_dir,
)

from ...standins.file_host import FileHost

# our own stand-in tarballs; PEP 706 filters where this Python has them (not Debian 12's 3.11.2)
SAFE_EXTRACT: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}

IID = "instance_octo__demo-1234abcd-vnan"
COMMIT = "c" * 40
TOP = f"SWE-bench_Pro-os-{COMMIT}"


def repo_tarball(extra: dict[str, bytes] | None = None, *, evil: bool = False, run: bytes = b"echo run") -> bytes:
    """A .tar.gz laid out as GitHub's tarball of the repository (one top folder)."""
    files = {
        f"run_scripts/{IID}/run_script.sh": b"#!/bin/bash\n" + run + b"\n",
        f"run_scripts/{IID}/parser.py": b"print('parse')\n",
        f"run_scripts/{IID}/instance_info.txt": b"Instance ID: x\n",
        f"dockerfiles/base_dockerfile/{IID}/Dockerfile": b"FROM debian\nENV A=1\n",
        f"dockerfiles/instance_dockerfile/{IID}/Dockerfile": b"FROM base\nENV B=2\n",
        "swe_bench_pro_eval.py": b"print('not kept')\n",
        "README.md": b"readme\n",
        **(extra or {}),
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{TOP}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if evil:
            link = tarfile.TarInfo(f"{TOP}/run_scripts/{IID}/link.sh")
            link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(link)
            up = tarfile.TarInfo(f"{TOP}/run_scripts/../../escaped.txt")
            up.size = 3
            tar.addfile(up, io.BytesIO(b"bad"))
    return buf.getvalue()


@pytest.fixture
def host() -> Iterator[FileHost]:
    with FileHost() as h:
        yield h


def _serve(host: FileHost, data: bytes, path: str = f"/{REPOSITORY}/tar.gz/{COMMIT}") -> str:
    host.files[path] = data
    return host.url + path


def test_default_url_is_the_repositorys_tarball_at_the_pinned_commit() -> None:
    assert TARBALL_URL.format(repo=REPOSITORY, commit=DEFAULT_COMMIT).endswith(
        f"scaleapi/SWE-bench_Pro-os/tar.gz/{DEFAULT_COMMIT}")
    assert len(DEFAULT_COMMIT) == 40


def test_download_keeps_only_scripts_and_dockerfiles_then_the_cache_needs_no_request(host: FileHost,
                                                                                     tmp_path: Path) -> None:
    url = _serve(host, repo_tarball(evil=True))
    src = download(tmp_path, COMMIT, url)
    root = scripts_dir(tmp_path, COMMIT, url)
    assert src.root == root and src.manifest is not None and src.manifest.commit == COMMIT
    kept = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert kept == sorted([MANIFEST, f"run_scripts/{IID}/run_script.sh", f"run_scripts/{IID}/parser.py",
                           f"run_scripts/{IID}/instance_info.txt", f"dockerfiles/base_dockerfile/{IID}/Dockerfile",
                           f"dockerfiles/instance_dockerfile/{IID}/Dockerfile"])
    assert not (tmp_path / "escaped.txt").exists() and not list(tmp_path.rglob("escaped.txt"))
    got = src.scripts(IID)
    assert got.run_script == "#!/bin/bash\necho run\n" and got.parser == "print('parse')\n"
    assert "ENV A=1" in got.base_dockerfile and "ENV B=2" in got.instance_dockerfile
    assert src.missing([IID, "instance_other"]) == ["instance_other"]
    assert len(host.requests) == 1
    again = locate(tmp_path, user_dir=None, commit=COMMIT, url=url, allow_download=True)
    assert again.root == root and len(host.requests) == 1  # from the cache
    assert [p.name for p in root.parent.iterdir()] == [root.name]  # no partial folders left


def test_redirects_are_followed(host: FileHost, tmp_path: Path) -> None:
    url = _serve(host, repo_tarball())
    host.redirects["/archive"] = url
    assert download(tmp_path, COMMIT, host.url + "/archive").missing([IID]) == []


@pytest.mark.parametrize("case", ["404", "not a tarball", "no run_scripts", "too big", "file too big",
                                  "unpacked too big", "too many files", "cancelled while unpacking"])
def test_a_failed_download_leaves_nothing_that_reads_as_scripts(host: FileHost, tmp_path: Path, case: str) -> None:
    url = host.url + "/missing"
    max_bytes = 1 << 30
    limits: dict[str, int] = {}
    cancelled = threading.Event()

    def on_progress(done: int, total: int) -> None:
        if case == "cancelled while unpacking" and done >= total:
            cancelled.set()  # after the last chunk: the download itself completes
    if case == "not a tarball":
        url = _serve(host, b"<html>nope</html>")
    elif case == "no run_scripts":
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            info = tarfile.TarInfo(f"{TOP}/README.md")
            tar.addfile(info, io.BytesIO(b""))
        url = _serve(host, buf.getvalue())
    elif case == "too big":
        url = _serve(host, repo_tarball())
        max_bytes = 100
    elif case == "file too big":
        url = _serve(host, repo_tarball({f"run_scripts/{IID}/huge.log": b"0" * (5 << 20)}))
    elif case == "unpacked too big":  # every file under the per-file cap, together over the total cap
        url = _serve(host, repo_tarball({f"run_scripts/{IID}/part{i}.log": b"0" * 4000 for i in range(10)}))
        limits["max_unpacked_bytes"] = 30_000
    elif case == "too many files":
        url = _serve(host, repo_tarball({f"run_scripts/{IID}/f{i}.txt": b"" for i in range(20)}))
        limits["max_files"] = 10
    elif case == "cancelled while unpacking":
        url = _serve(host, repo_tarball())
    with pytest.raises(ScriptsDownloadError) as err:
        download(tmp_path, COMMIT, url, max_bytes=max_bytes, on_progress=on_progress, cancelled=cancelled, **limits)
    if limits or cancelled.is_set():
        assert ("cap" if limits else "unpacking the scripts: cancelled") in str(err.value)
    assert find_cached(tmp_path, COMMIT, url) is None
    folder = scripts_dir(tmp_path, COMMIT, url).parent
    assert not folder.exists() or list(folder.iterdir()) == []


def test_a_stalled_download_ends_at_its_deadline(host: FileHost, tmp_path: Path) -> None:
    data = repo_tarball()
    url = _serve(host, data)
    host.stall_after[url.removeprefix(host.url)] = len(data) // 2
    with pytest.raises(ScriptsDownloadError, match="ReadTimeout|took more than"):
        download(tmp_path, COMMIT, url, deadline=1.0)
    assert find_cached(tmp_path, COMMIT) is None


def test_without_download_or_folder_the_error_says_what_to_provide(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="scripts_dir") as err:
        locate(tmp_path, user_dir=None, commit=COMMIT, url=None, allow_download=False)
    assert str(scripts_dir(tmp_path, COMMIT)) in str(err.value) and err.value.field == "benchmark.params.scripts_dir"
    with pytest.raises(ConfigError, match="is not a directory"):
        locate(tmp_path, user_dir=str(tmp_path / "nope"), commit=COMMIT, url=None, allow_download=True)


def test_an_unreachable_host_names_the_scripts_dir_alternative(tmp_path: Path) -> None:
    with FileHost() as h:
        dead = h.url  # nothing listens there once stopped
    with pytest.raises(ScriptsDownloadError, match="scripts_dir"):
        locate(tmp_path, user_dir=None, commit=COMMIT, url=dead + "/x.tar.gz", allow_download=True)


def test_a_users_folder_may_be_the_repo_or_its_run_scripts_folder(tmp_path: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(repo_tarball()), mode="r:gz") as tar:
        tar.extractall(tmp_path, **SAFE_EXTRACT)
    repo = tmp_path / TOP
    src = locate(tmp_path / "data", user_dir=str(repo), commit=COMMIT, url=None, allow_download=False)
    assert src.missing([IID]) == [] and "ENV A=1" in src.scripts(IID).base_dockerfile
    inner = locate(tmp_path / "data", user_dir=str(repo / "run_scripts"), commit=COMMIT, url=None,
                   allow_download=False)
    assert inner.missing([IID]) == [] and inner.scripts(IID).base_dockerfile == ""
    with pytest.raises(ConfigError):
        inner.scripts("../escape")


def test_unpacking_stops_at_the_downloads_deadline(tmp_path: Path) -> None:
    tarball = tmp_path / "t.tar.gz"
    tarball.write_bytes(repo_tarball())
    with pytest.raises(ScriptsDownloadError, match="took more than"):
        _unpack(tarball, tmp_path / "out", end=time.monotonic() - 1, deadline=5.0, cancelled=None)
    assert not list((tmp_path / "out").rglob("*.sh"))


def test_the_cache_of_one_url_is_never_used_for_another(host: FileHost, tmp_path: Path) -> None:
    url_a = _serve(host, repo_tarball(run=b"echo A"), "/a.tar.gz")
    url_b = _serve(host, repo_tarball(run=b"echo B"), "/b.tar.gz")
    assert "echo A" in locate(tmp_path, user_dir=None, commit=COMMIT, url=url_a, allow_download=True).scripts(
        IID).run_script
    assert find_cached(tmp_path, COMMIT, url_a) is not None and find_cached(tmp_path, COMMIT) is None
    with pytest.raises(ConfigError, match="scripts_dir"):  # the default source was never downloaded
        locate(tmp_path, user_dir=None, commit=COMMIT, url=None, allow_download=False)
    b = locate(tmp_path, user_dir=None, commit=COMMIT, url=url_b, allow_download=True)
    assert "echo B" in b.scripts(IID).run_script and b.manifest is not None and b.manifest.url == url_b
    assert host.requests == ["/a.tar.gz", "/b.tar.gz"]
    a = locate(tmp_path, user_dir=None, commit=COMMIT, url=url_a, allow_download=False)
    assert "echo A" in a.scripts(IID).run_script and len(host.requests) == 2  # each from its own cache


def _write_cache(folder: Path, manifest: ScriptsManifest, run: str = "echo cached") -> None:
    """A scripts folder as a download of ``manifest.url`` leaves it."""
    (folder / "run_scripts" / IID).mkdir(parents=True)
    (folder / "run_scripts" / IID / "run_script.sh").write_text(run)
    (folder / "run_scripts" / IID / "parser.py").write_text("print()")
    (folder / MANIFEST).write_bytes(msgspec.json.encode(manifest))


def test_a_scripts_url_is_downloaded_even_with_the_default_cached(host: FileHost, tmp_path: Path) -> None:
    default = TARBALL_URL.format(repo=REPOSITORY, commit=COMMIT)
    _write_cache(scripts_dir(tmp_path, COMMIT), ScriptsManifest(default, COMMIT, "0" * 64, 1, 2))
    assert locate(tmp_path, user_dir=None, commit=COMMIT, url=None, allow_download=False).manifest is not None
    url = _serve(host, repo_tarball(run=b"echo mirror"))
    got = locate(tmp_path, user_dir=None, commit=COMMIT, url=url, allow_download=True)
    assert "echo mirror" in got.scripts(IID).run_script and len(host.requests) == 1
    assert "echo cached" in locate(tmp_path, user_dir=None, commit=COMMIT, url=default,
                                   allow_download=False).scripts(IID).run_script


def test_a_cache_whose_manifest_names_another_source_is_replaced(host: FileHost, tmp_path: Path) -> None:
    url = _serve(host, repo_tarball(run=b"echo fresh"))
    _write_cache(scripts_dir(tmp_path, COMMIT, url), ScriptsManifest(url, "d" * 40, "0" * 64, 1, 2))
    assert find_cached(tmp_path, COMMIT, url) is None
    got = download(tmp_path, COMMIT, url)
    assert "echo fresh" in got.scripts(IID).run_script and len(host.requests) == 1
    assert [p.name for p in scripts_dir(tmp_path, COMMIT, url).parent.iterdir()] == [
        scripts_dir(tmp_path, COMMIT, url).name]  # the stale copy went, no partial folders left


def _place_by_hand(folder: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(repo_tarball(run=b"echo by hand")), mode="r:gz") as tar:
        tar.extractall(folder.parent / "unpacked", **SAFE_EXTRACT)
    (folder.parent / "unpacked" / TOP).rename(folder)
    (folder.parent / "unpacked").rmdir()


def test_a_folder_placed_by_hand_in_the_cache_is_used_offline(tmp_path: Path) -> None:
    folder = scripts_dir(tmp_path, COMMIT)
    folder.parent.mkdir(parents=True)
    _place_by_hand(folder)
    src = locate(tmp_path, user_dir=None, commit=COMMIT, url=None, allow_download=False)
    assert src.root == folder and src.manifest is None and src.missing([IID]) == []
    assert "echo by hand" in src.scripts(IID).run_script and "ENV A=1" in src.scripts(IID).base_dockerfile


def test_a_folder_placed_by_hand_is_never_deleted_by_a_download(host: FileHost, tmp_path: Path) -> None:
    url = _serve(host, repo_tarball(run=b"echo downloaded"))
    folder = scripts_dir(tmp_path, COMMIT, url)
    folder.parent.mkdir(parents=True)
    _place_by_hand(folder)
    src = locate(tmp_path, user_dir=None, commit=COMMIT, url=url, allow_download=True)
    assert "echo by hand" in src.scripts(IID).run_script and host.requests == []
    (folder / "run_scripts").rename(folder / "elsewhere")  # now not a scripts folder: refused, still kept
    with pytest.raises(ScriptsDownloadError, match="not written by"):
        locate(tmp_path, user_dir=None, commit=COMMIT, url=url, allow_download=True)
    assert (folder / "elsewhere" / IID / "run_script.sh").is_file() and host.requests == []
