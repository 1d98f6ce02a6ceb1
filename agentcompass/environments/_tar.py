"""Tar archives of a directory's contents, made and extracted safely.

Member names are relative to the archived directory (``a.txt``, ``sub/b.txt``), never absolute.
Extraction refuses absolute names, ``..`` components, links that point outside the target, device
files, and writing through an existing symlink that leads outside the target.
"""

from __future__ import annotations

import io
import os
import posixpath
import tarfile
from collections.abc import Mapping
from pathlib import Path

from .._errors import ConfigError


class UnsafeArchiveError(ConfigError):
    """An archive member would land (or point) outside the extraction target."""


def safe_relpath(path: str, *, field: str = "path") -> str:
    """Normalise a relative POSIX path; ConfigError if it is empty, absolute or climbs out with ``..``."""
    if not isinstance(path, str) or not path or "\x00" in path:
        raise ConfigError(f"{field}: expected a non-empty relative path, got {path!r}", field=field)
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        raise ConfigError(f"{field}: {path!r} is absolute; only paths relative to the workspace are allowed",
                          field=field)
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ConfigError(f"{field}: {path!r} contains '..'; paths may not leave the workspace", field=field)
    if not parts:
        raise ConfigError(f"{field}: {path!r} names the workspace itself, not a file in it", field=field)
    return "/".join(parts)


def make_tar(src: str | os.PathLike[str]) -> bytes:
    """A tar of ``src``: the contents of a directory (names relative to it) or a single file (its name).

    Symlinks are stored as links, not followed.
    """
    src_path = Path(src)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        if src_path.is_dir() and not src_path.is_symlink():
            for entry in sorted(os.listdir(src_path)):
                tf.add(src_path / entry, arcname=entry, recursive=True)
        elif src_path.exists() or src_path.is_symlink():
            tf.add(src_path, arcname=src_path.name, recursive=False)
        else:
            raise FileNotFoundError(f"no such file or directory: {str(src_path)!r}")
    return buf.getvalue()


def tar_from_files(files: Mapping[str, bytes | str], *, mode: int = 0o644) -> bytes:
    """A tar holding ``files`` (relative path -> content; str is written as UTF-8)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, content in files.items():
            rel = safe_relpath(name, field=f"files[{name!r}]")
            data = content.encode() if isinstance(content, str) else bytes(content)
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mode = mode
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _check_member(member: tarfile.TarInfo, dest_real: str) -> None:
    name = member.name
    if name.startswith("/") or os.path.isabs(name):
        raise UnsafeArchiveError(f"archive member {name!r} has an absolute path", field="archive")
    parts = name.replace("\\", "/").split("/")
    if ".." in parts:
        raise UnsafeArchiveError(f"archive member {name!r} contains '..'", field="archive")
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise UnsafeArchiveError(f"archive member {name!r} is a device or fifo: refused", field="archive")
    # realpath follows symlinks that earlier members (or the existing tree) put on the way.
    target = os.path.realpath(os.path.join(dest_real, name))
    if not _inside(dest_real, target):
        raise UnsafeArchiveError(f"archive member {name!r} would be written outside the target "
                                 "(through a symlink)", field="archive")
    if member.issym():
        link = member.linkname
        if posixpath.isabs(link):
            raise UnsafeArchiveError(f"archive symlink {name!r} -> {link!r} is absolute", field="archive")
        resolved = os.path.realpath(os.path.join(dest_real, os.path.dirname(name), link))
        if not _inside(dest_real, resolved):
            raise UnsafeArchiveError(f"archive symlink {name!r} -> {link!r} points outside the target",
                                     field="archive")
    elif member.islnk():
        link = member.linkname
        resolved = os.path.realpath(os.path.join(dest_real, link))
        if posixpath.isabs(link) or ".." in link.split("/") or not _inside(dest_real, resolved):
            raise UnsafeArchiveError(f"archive hard link {name!r} -> {link!r} points outside the target",
                                     field="archive")


def extract_tar(tar_bytes: bytes, dest: str | os.PathLike[str]) -> None:
    """Extract ``tar_bytes`` into the existing directory ``dest``; UnsafeArchiveError on an escaping member.

    Members are checked one by one right before each is extracted, so a symlink planted by an earlier
    member cannot be used to escape by a later one.
    """
    dest_real = os.path.realpath(dest)
    if not os.path.isdir(dest_real):
        raise FileNotFoundError(f"extraction target is not a directory: {str(dest)!r}")

    try:
        with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:*") as tf:
            if _HAS_DATA_FILTER:
                def _filter(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
                    _check_member(member, dest_real)
                    # The stdlib "data" filter additionally clears setuid bits and ownership.
                    return tarfile.data_filter(member, path)  # type: ignore[attr-defined,unused-ignore]

                tf.extractall(dest_real, filter=_filter)  # type: ignore[call-arg,unused-ignore]
            else:
                _extract_checked(tf, dest_real)
    except _FILTER_ERRORS as exc:
        raise UnsafeArchiveError(f"unsafe archive: {exc}", field="archive") from exc
    except tarfile.ReadError as exc:
        raise ConfigError(f"archive: not a readable tar archive ({exc})", field="archive") from exc


# tarfile's extraction filters arrived in 3.11.4 (PEP 706); Debian 12's system Python is 3.11.2.
_HAS_DATA_FILTER = hasattr(tarfile, "data_filter")
_FILTER_ERRORS: tuple[type[Exception], ...] = (
    (tarfile.FilterError,) if hasattr(tarfile, "FilterError") else ())  # type: ignore[attr-defined,unused-ignore]


def _extract_checked(tf: tarfile.TarFile, dest_real: str) -> None:
    """Extraction without PEP 706 filters: each member checked, then written with no owner and no
    setuid/setgid/sticky or group/other-write bits (what the "data" filter does)."""
    for member in tf:
        _check_member(member, dest_real)
        # No chown (set_attrs=False); the mode is applied by hand for regular files and directories.
        tf.extract(member, dest_real, set_attrs=False)
        target = os.path.join(dest_real, member.name)
        if member.isfile() or member.isdir():
            os.chmod(target, (member.mode & 0o755) | (0o700 if member.isdir() else 0o600))
