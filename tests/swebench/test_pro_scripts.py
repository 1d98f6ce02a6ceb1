"""SWE-bench Pro run scripts: the pinned repository tarball downloaded from a local stand-in file host into
data_dir (only run_scripts/ and dockerfiles/ regular files, atomically, capped, with a deadline), the cache,
a user's folder, and the errors that say what to provide."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.swebench.pro_scripts import (
    DEFAULT_COMMIT,
    MANIFEST,
    REPOSITORY,
    TARBALL_URL,
    ScriptsDownloadError,
    download,
    find_cached,
    locate,
    scripts_dir,
)

from ..standins.file_host import FileHost

IID = "instance_octo__demo-1234abcd-vnan"
COMMIT = "c" * 40
TOP = f"SWE-bench_Pro-os-{COMMIT}"


def repo_tarball(extra: dict[str, bytes] | None = None, *, evil: bool = False) -> bytes:
    """A .tar.gz laid out as GitHub's tarball of the repository (one top folder)."""
    files = {
        f"run_scripts/{IID}/run_script.sh": b"#!/bin/bash\necho run\n",
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


def _serve(host: FileHost, data: bytes) -> str:
    path = f"/{REPOSITORY}/tar.gz/{COMMIT}"
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
    root = scripts_dir(tmp_path, COMMIT)
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
    assert [p.name for p in root.parent.iterdir()] == [COMMIT]  # no partial folders left


def test_redirects_are_followed(host: FileHost, tmp_path: Path) -> None:
    url = _serve(host, repo_tarball())
    host.redirects["/archive"] = url
    assert download(tmp_path, COMMIT, host.url + "/archive").missing([IID]) == []


@pytest.mark.parametrize("case", ["404", "not a tarball", "no run_scripts", "too big", "file too big"])
def test_a_failed_download_leaves_nothing_that_reads_as_scripts(host: FileHost, tmp_path: Path, case: str) -> None:
    url = host.url + "/missing"
    max_bytes = 1 << 30
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
    with pytest.raises(ScriptsDownloadError):
        download(tmp_path, COMMIT, url, max_bytes=max_bytes)
    assert find_cached(tmp_path, COMMIT) is None
    folder = scripts_dir(tmp_path, COMMIT).parent
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
        tar.extractall(tmp_path, filter="data")
    repo = tmp_path / TOP
    src = locate(tmp_path / "data", user_dir=str(repo), commit=COMMIT, url=None, allow_download=False)
    assert src.missing([IID]) == [] and "ENV A=1" in src.scripts(IID).base_dockerfile
    inner = locate(tmp_path / "data", user_dir=str(repo / "run_scripts"), commit=COMMIT, url=None,
                   allow_download=False)
    assert inner.missing([IID]) == [] and inner.scripts(IID).base_dockerfile == ""
    with pytest.raises(ConfigError):
        inner.scripts("../escape")
