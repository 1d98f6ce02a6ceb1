"""Archives into a container, prepared on this side: a tar built from files, a tar re-owned for the container's
user, and the check of an archive's member names before the daemon extracts it.

The daemon extracts a ``PUT /containers/{id}/archive`` body as root, wherever its members say: what goes in
is checked here first (no member leaves its target directory), and owned by the provider's ``user`` when that
is numeric (a named user is left to the daemon's ``copyUIDGID``).
"""

from __future__ import annotations

import io
import posixpath
import re
import tarfile
import tempfile
import time
from typing import IO

from ..._errors import ConfigError
from .._tar import forget_members


def files_tar(files: dict[str, bytes]) -> bytes:
    """A tar of ``files`` (safe relative path -> bytes), stamped with the current time."""
    now = int(time.time())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, now
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _tar_source(tar: bytes | IO[bytes]) -> IO[bytes]:
    if isinstance(tar, bytes | bytearray | memoryview):
        return io.BytesIO(tar)
    tar.seek(0)
    return tar


def chown_tar(tar: bytes | IO[bytes], owner: tuple[int, int]) -> IO[bytes]:
    """The same archive, in an unlinked temp file, with every member owned by ``owner`` (uid, gid)."""
    out = tempfile.TemporaryFile()
    try:
        with tarfile.open(fileobj=_tar_source(tar), mode="r|*") as src, \
                tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst:
            for member in src:
                member.uid, member.gid = owner
                member.uname = member.gname = ""
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
                forget_members(src)
                forget_members(dst)
    except BaseException:
        out.close()
        raise
    return out


def numeric_owner(user: str | None) -> tuple[int, int] | None:
    """``"1000"`` / ``"1000:1000"`` -> (uid, gid); None for root, unset or named users."""
    match = re.fullmatch(r"(\d+)(?::(\d+))?", user or "")
    if not match or user in ("0", "0:0"):
        return None
    uid = int(match.group(1))
    return uid, int(match.group(2)) if match.group(2) is not None else uid


def check_member_names(tar: bytes | IO[bytes]) -> None:
    """Refuse members with absolute names or ``..``, hard links to outside the target, and members beneath a link
    of the same archive (written through it): an archive's files land inside its target directory. A symlink may
    point anywhere: the daemon extracts inside the container, where it is just a link (a workspace holding a
    virtualenv has absolute ones), and nothing of the archive is written through it."""
    links: set[str] = set()
    try:
        with tarfile.open(fileobj=_tar_source(tar), mode="r|*") as tf:
            for member in tf:
                parts = member.name.split("/")
                if member.name.startswith("/") or ".." in parts:
                    raise ConfigError(f"archive member {member.name!r} would leave the target directory",
                                      field="archive")
                if member.ischr() or member.isblk() or member.isfifo():
                    raise ConfigError(f"archive member {member.name!r} is a device or fifo: refused",
                                      field="archive")
                name = posixpath.normpath(member.name)  # "./a/b/" -> "a/b"
                parts = name.split("/")
                if any("/".join(parts[:i]) in links for i in range(1, len(parts))):
                    raise ConfigError(f"archive member {member.name!r} lies beneath a link of the archive",
                                      field="archive")
                if member.issym() or member.islnk():
                    base = posixpath.dirname(name) if member.issym() else ""
                    target = posixpath.normpath(posixpath.join(base, member.linkname))
                    if member.islnk() and (member.linkname.startswith("/") or target == ".."
                                           or target.startswith("../")):
                        raise ConfigError(f"archive link {member.name!r} -> {member.linkname!r} points outside "
                                          f"the target directory", field="archive")
                    links.add(name)
                forget_members(tf)
    except tarfile.TarError as exc:
        raise ConfigError(f"archive: not a readable tar archive ({exc})", field="archive") from exc


__all__ = ["check_member_names", "chown_tar", "files_tar", "numeric_owner"]
