"""Safe extraction on both paths: the PEP 706 ``data`` filter (Python >= 3.11.4) and the checked fallback
used where the stdlib has no filters (Debian 12's system Python 3.11.2). The fallback is forced by clearing
the module's stdlib capability flag, so every check runs on whichever Python runs the suite."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.environments import _tar
from agentcompass.environments._tar import extract_tar, tar_from_files


@pytest.fixture(params=["data_filter", "checked_fallback"])
def extraction_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "data_filter":
        if not hasattr(tarfile, "data_filter"):
            pytest.skip("this Python has no PEP 706 filters (the fallback is tested instead)")
        monkeypatch.setattr(_tar, "_HAS_DATA_FILTER", True)
    else:
        monkeypatch.setattr(_tar, "_HAS_DATA_FILTER", False)
    return str(request.param)


def _archive(*infos: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for info, content in infos:
            if content is not None:
                info.size = len(content)
            tf.addfile(info, io.BytesIO(content) if content is not None else None)
    return buf.getvalue()


def _file(name: str, mode: int = 0o644, uid: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode, info.uid, info.gid = mode, uid, uid
    return info


def _dir(name: str, mode: int) -> tarfile.TarInfo:
    info = _file(name, mode)
    info.type = tarfile.DIRTYPE
    return info


def _link(name: str, target: str, *, hard: bool = False) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    return info


def _special(name: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.devmajor, info.devminor = 1, 3
    return info


ESCAPES = {
    "absolute": [(_file("/abs/evil"), b"x")],
    "dotdot": [(_file("../evil"), b"x")],
    "nested-dotdot": [(_file("ok/../../evil"), b"x")],
    "symlink-up": [(_link("up", "../.."), None)],
    "symlink-absolute": [(_link("abs", "/etc"), None)],
    "write-through-planted-symlink": [(_link("sub", "."), None), (_link("sub/hop", "../outside"), None),
                                      (_file("sub/hop/evil"), b"x")],
    "hardlink-up": [(_link("hl", "../../evil", hard=True), None)],
    "hardlink-absolute": [(_link("hl", "/etc/passwd", hard=True), None)],
    "char-device": [(_special("null", tarfile.CHRTYPE), None)],
    "block-device": [(_special("sda", tarfile.BLKTYPE), None)],
    "fifo": [(_special("pipe", tarfile.FIFOTYPE), None)],
}


@pytest.mark.parametrize("case", list(ESCAPES))
def test_every_escaping_or_special_member_is_refused(extraction_path: str, case: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest" / "inner"
    dest.mkdir(parents=True)
    with pytest.raises(ConfigError):
        extract_tar(_archive(*ESCAPES[case]), dest)
    assert not (tmp_path / "evil").exists() and not (tmp_path / "dest" / "evil").exists()
    assert os.listdir(outside) == []
    assert not any(p.is_char_device() or p.is_block_device() or p.is_fifo() for p in dest.rglob("*"))


def test_setuid_setgid_sticky_and_foreign_owners_are_dropped(extraction_path: str, tmp_path: Path) -> None:
    archive = _archive((_file("suid", 0o4755, uid=4242), b"#!/bin/sh\n"), (_file("sgid", 0o2775), b"x"),
                   (_file("world", 0o666), b"y"), (_dir("dir", 0o3777), None), (_file("dir/f"), b"z"))
    extract_tar(archive, tmp_path)
    modes = {p.name: stat.S_IMODE(p.lstat().st_mode) for p in tmp_path.rglob("*")}
    assert not any(m & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX) for m in modes.values()), modes
    assert modes["suid"] & 0o100  # still executable by its owner
    assert not modes["world"] & 0o022  # no group/other write
    assert (tmp_path / "suid").stat().st_uid == os.getuid()  # never chowned to the archive's uid
    assert (tmp_path / "dir" / "f").read_bytes() == b"z"


def test_ordinary_files_links_and_dirs_round_trip(extraction_path: str, tmp_path: Path) -> None:
    extract_tar(tar_from_files({"a.txt": "one", "sub/b.txt": b"two"}), tmp_path)
    extract_tar(_archive((_link("sub/link", "b.txt"), None), (_link("hard", "a.txt", hard=True), None)), tmp_path)
    assert (tmp_path / "a.txt").read_text() == "one" and (tmp_path / "sub" / "b.txt").read_bytes() == b"two"
    assert os.readlink(tmp_path / "sub" / "link") == "b.txt" and (tmp_path / "hard").read_text() == "one"
