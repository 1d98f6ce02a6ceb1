"""Tar archives of a directory's contents, made and extracted safely.

Member names are relative to the archived directory (``a.txt``, ``sub/b.txt``), never absolute.
Extraction refuses absolute names, ``..`` components, links that point outside the target, device
files, and writing through an existing symlink that leads outside the target.

What comes back from an environment is streamed into a :class:`SpooledArchive` (an unlinked temp file)
under :class:`ArchiveLimits`: a file over the per-file cap, or one that would take the archive past the
total cap, is listed (name, size, reason) instead of copied, so neither memory nor disk grows with what
an agent leaves in its workspace.
"""

from __future__ import annotations

import asyncio
import io
import os
import posixpath
import tarfile
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Annotated, Any, Literal

import msgspec

from .._errors import ConfigError

#: default caps on what an environment hands back: per file, and for the whole archive.
DEFAULT_FILE_LIMIT = 100 << 20
DEFAULT_TOTAL_LIMIT = 1 << 30
#: how many skipped members are listed by name (the rest are only counted).
_SKIPPED_LISTED = 100
#: how many names of skipped files are remembered to drop hard links to them.
_SKIPPED_REMEMBERED = 100_000
_BLOCK = tarfile.BLOCKSIZE


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


FILE_LIMIT_PARAM = "archive_file_limit_bytes"
TOTAL_LIMIT_PARAM = "archive_total_limit_bytes"


class ArchiveLimits(msgspec.Struct, frozen=True):
    """Caps on an archive taken out of an environment: bytes per file, bytes for the whole tar."""

    file_bytes: int = DEFAULT_FILE_LIMIT
    total_bytes: int = DEFAULT_TOTAL_LIMIT


class ArchiveParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The environment params (local and docker) that set :class:`ArchiveLimits`: integers of bytes > 0."""

    archive_file_limit_bytes: Annotated[int, msgspec.Meta(gt=0)] = DEFAULT_FILE_LIMIT
    archive_total_limit_bytes: Annotated[int, msgspec.Meta(gt=0)] = DEFAULT_TOTAL_LIMIT

    def archive_limits(self) -> ArchiveLimits:
        """The caps these params set."""
        return ArchiveLimits(self.archive_file_limit_bytes, self.archive_total_limit_bytes)


class SkippedMember(msgspec.Struct, frozen=True):
    """A member left out of an archive: over the per-file cap, past the total cap, or unreadable."""

    name: str
    size: int
    reason: Literal["file_limit", "total_limit", "unreadable"]


class SpooledArchive:
    """A tar in an unlinked temp file, and what was left out of it.

    The file has no name, so its space is freed when it is closed, garbage-collected, or when the process
    ends however it ends; nothing is left to clean up on any path. Use as a context manager.
    """

    def __init__(self, dir: str | None = None) -> None:
        self.dir = dir
        self.file: IO[bytes] = tempfile.TemporaryFile(dir=dir)
        #: bytes of tar in ``file``
        self.size = 0
        #: the first members left out (at most 100 listed); ``skipped_count`` counts them all
        self.skipped: list[SkippedMember] = []
        self.skipped_count = 0

    def skip(self, name: str, size: int, reason: Literal["file_limit", "total_limit", "unreadable"]) -> None:
        """Record a member left out."""
        self.skipped_count += 1
        if len(self.skipped) < _SKIPPED_LISTED:
            self.skipped.append(SkippedMember(name, size, reason))

    def reset(self) -> None:
        """Empty it (before a retried transfer)."""
        self.file.seek(0)
        self.file.truncate()
        self.size, self.skipped, self.skipped_count = 0, [], 0

    def rewind(self) -> IO[bytes]:
        """The file, positioned at the start of the tar."""
        self.file.seek(0)
        return self.file

    def read_bytes(self) -> bytes:
        """The whole tar in memory (at most the total cap): for small archives and the bytes API."""
        return self.rewind().read()

    def skipped_report(self) -> list[dict[str, Any]]:
        """The skipped members as JSON-able dicts (name, size, reason)."""
        out: list[dict[str, Any]] = msgspec.to_builtins(self.skipped)
        return out

    def close(self) -> None:
        """Free the file's space. Idempotent."""
        self.file.close()

    def __enter__(self) -> SpooledArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Padded:
    """Reads exactly what tarfile asks for: zeros once the file ends early (it shrank after the stat), so a
    file changing under us cannot corrupt the archive; never more than the stat'ed size is read."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        return data if n < 0 or len(data) == n else data + bytes(n - len(data))


def forget_members(tf: tarfile.TarFile) -> None:
    """Drop the members ``tf`` remembers. Streaming reads and writes need only the current one, and a tree
    of many small files would otherwise grow memory with the count."""
    members = getattr(tf, "members", None)
    if isinstance(members, list):
        members.clear()


def _round_up(n: int) -> int:
    return -(-n // _BLOCK) * _BLOCK


class _CappedWriter:
    """Writes members into a SpooledArchive, leaving out (and listing) what the limits do not allow."""

    def __init__(self, out: SpooledArchive, limits: ArchiveLimits) -> None:
        self.out = out
        self.limits = limits
        self.tf = tarfile.open(fileobj=out.file, mode="w", format=tarfile.PAX_FORMAT)
        self._skipped_files: dict[str, Literal["file_limit", "total_limit"]] = {}
        self._past_total = False

    def _room_for(self, info: tarfile.TarInfo) -> bool:
        # header block, a PAX header (block + records) for long or non-ASCII names, the data, and the
        # end-of-archive record tarfile pads to on close.
        names = len(info.name.encode(errors="surrogateescape")) + len(info.linkname.encode(errors="surrogateescape"))
        need = 3 * _BLOCK + _round_up(2 * names + 512) + (_round_up(info.size) if info.isreg() else 0)
        return self.tf.offset + need + tarfile.RECORDSIZE <= self.limits.total_bytes

    def admit(self, info: tarfile.TarInfo) -> bool:
        """Whether ``info`` may go in; records why not."""
        if info.islnk() and (self._past_total or info.linkname in self._skipped_files):
            # a link to a file that is not in the archive would not extract
            self.out.skip(info.name, info.size, self._skipped_files.get(info.linkname, "total_limit"))
            return False
        if info.isreg() and info.size > self.limits.file_bytes:
            reason: Literal["file_limit", "total_limit"] = "file_limit"
        elif not self._room_for(info):
            reason = "total_limit"
        else:
            return True
        if info.isreg() and len(self._skipped_files) < _SKIPPED_REMEMBERED:
            self._skipped_files[info.name] = reason
        self._past_total = self._past_total or reason == "total_limit"
        self.out.skip(info.name, info.size, reason)
        return False

    def write(self, info: tarfile.TarInfo, data: Any) -> None:
        self.tf.addfile(info, data)
        forget_members(self.tf)

    def add(self, info: tarfile.TarInfo, data: IO[bytes] | None) -> None:
        """Append ``info`` (and ``data`` for a regular file) when the limits allow."""
        if self.admit(info):
            self.write(info, _Padded(data) if info.isreg() and data is not None else None)

    def close(self) -> None:
        self.tf.close()
        self.out.size = self.out.file.tell()

    def __enter__(self) -> _CappedWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _walk(src_path: Path) -> Iterator[tuple[str, str]]:
    """(host path, member name) of everything under directory ``src_path``, parents first, in name order;
    symlinks are not followed. Unreadable directories are yielded (and their contents cannot be)."""
    for dirpath, dirnames, filenames in os.walk(src_path):
        dirnames.sort()
        rel = os.path.relpath(dirpath, src_path)
        for name in sorted(dirnames + filenames):
            yield os.path.join(dirpath, name), name if rel == "." else f"{rel}/{name}"


def _forget_inode(tf: tarfile.TarFile, st: os.stat_result) -> None:
    # gettarinfo remembers each multiply-linked inode so later names become hard links to the first;
    # when the first was left out, a later one must carry the data itself.
    inodes = getattr(tf, "inodes", None)
    if isinstance(inodes, dict):
        inodes.pop((st.st_ino, st.st_dev), None)


def write_tree(src: str | os.PathLike[str], out: SpooledArchive, limits: ArchiveLimits) -> None:
    """Stream a tar of ``src`` into ``out`` under ``limits``: the contents of a directory (names relative
    to it) or a single file (its base name). Symlinks are stored as links; a file is read in chunks, so a
    sparse or huge file never sits in memory; one over a cap, or unreadable, is listed in ``out.skipped``."""
    src_path = Path(src)
    if src_path.is_dir() and not src_path.is_symlink():
        entries: Iterator[tuple[str, str]] = _walk(src_path)
    elif src_path.exists() or src_path.is_symlink():
        entries = iter([(str(src_path), src_path.name)])
    else:
        raise FileNotFoundError(f"no such file or directory: {str(src_path)!r}")
    with _CappedWriter(out, limits) as w:
        for path, name in entries:
            try:
                st = os.lstat(path)
                info = w.tf.gettarinfo(path, arcname=name)
            except OSError:
                out.skip(name, 0, "unreadable")
                continue
            if info is None:  # a socket: nothing to archive
                out.skip(name, 0, "unreadable")
                continue
            if not info.isreg():
                w.add(info, None)
                continue
            if not w.admit(info):
                _forget_inode(w.tf, st)  # a later hard link to it is then a file of its own
                continue
            try:
                f = open(path, "rb")
            except OSError:
                _forget_inode(w.tf, st)
                out.skip(name, info.size, "unreadable")
                continue
            with f:
                w.write(info, _Padded(f))


def filter_tar_stream(src: IO[bytes], out: SpooledArchive, limits: ArchiveLimits, *,
                      strip_top_dir: bool = False) -> None:
    """Copy the tar stream ``src`` into ``out`` under ``limits``, reading it once, front to back (members
    over a cap are read through and dropped, never held). ``strip_top_dir``: an archive of directory ``d``
    whose members are named ``d/...`` (Docker's) is renamed relative to ``d``; a single file is kept."""
    with tarfile.open(fileobj=src, mode="r|*") as tf, _CappedWriter(out, limits) as w:
        prefix: str | None = None
        for index, member in enumerate(tf):
            if strip_top_dir:
                if index == 0 and member.isdir():
                    prefix = member.name.rstrip("/") + "/"
                    continue
                if prefix is not None:
                    if not member.name.startswith(prefix):
                        continue
                    member.name = member.name[len(prefix):]
                    if member.islnk() and member.linkname.startswith(prefix):
                        member.linkname = member.linkname[len(prefix):]
            if member.isreg():
                if w.admit(member):
                    w.write(member, tf.extractfile(member))
            else:
                w.add(member, None)
            forget_members(tf)


async def spool(fill: Callable[[SpooledArchive], Awaitable[object]], dir: str | None = None) -> SpooledArchive:
    """A new ``SpooledArchive`` (under ``dir``) filled by ``fill``; closed, its space freed, if filling fails."""
    archive = SpooledArchive(dir)
    try:
        await fill(archive)
    except BaseException:
        archive.close()
        raise
    return archive


async def spooled_bytes(archive: Awaitable[SpooledArchive]) -> bytes:
    """The whole tar of ``archive`` in memory (at most its total cap), read off the event loop; then closed."""
    with await archive as a:
        return await asyncio.to_thread(a.read_bytes)


async def archive_of(env: Any, path: str) -> SpooledArchive:
    """``env.get_archive_file(path)`` (capped, on disk) when the environment has it, else its
    ``get_archive`` bytes spooled to a file."""
    get_file = getattr(env, "get_archive_file", None)
    if get_file is not None:
        archive: SpooledArchive = await get_file(path)
        return archive
    data: bytes = await env.get_archive(path)
    archive = SpooledArchive()
    archive.file.write(data)
    archive.size = len(data)
    return archive


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


def extract_tar(tar_bytes: bytes | IO[bytes], dest: str | os.PathLike[str], *,
                before_member: Callable[[], None] | None = None) -> None:
    """Extract ``tar_bytes`` (or a tar file object, read from its start) into the existing directory
    ``dest``; UnsafeArchiveError on an escaping member. ``before_member`` runs before each member (what it
    raises stops the extraction).

    Members are checked one by one right before each is extracted, so a symlink planted by an earlier
    member cannot be used to escape by a later one.
    """
    dest_real = os.path.realpath(dest)
    if not os.path.isdir(dest_real):
        raise FileNotFoundError(f"extraction target is not a directory: {str(dest)!r}")

    try:
        if isinstance(tar_bytes, bytes | bytearray | memoryview):
            source: IO[bytes] = io.BytesIO(tar_bytes)
        else:
            source = tar_bytes
            source.seek(0)
        with tarfile.open(fileobj=source, mode="r:*") as tf:
            if _HAS_DATA_FILTER:
                def _filter(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
                    if before_member is not None:
                        before_member()
                    _check_member(member, dest_real)
                    # The stdlib "data" filter additionally clears setuid bits and ownership.
                    return tarfile.data_filter(member, path)  # type: ignore[attr-defined,unused-ignore]

                tf.extractall(dest_real, filter=_filter)  # type: ignore[call-arg,unused-ignore]
            else:
                _extract_checked(tf, dest_real, before_member)
    except _FILTER_ERRORS as exc:
        raise UnsafeArchiveError(f"unsafe archive: {exc}", field="archive") from exc
    except tarfile.ReadError as exc:
        raise ConfigError(f"archive: not a readable tar archive ({exc})", field="archive") from exc


# tarfile's extraction filters arrived in 3.11.4 (PEP 706); Debian 12's system Python is 3.11.2.
_HAS_DATA_FILTER = hasattr(tarfile, "data_filter")
_FILTER_ERRORS: tuple[type[Exception], ...] = (
    (tarfile.FilterError,) if hasattr(tarfile, "FilterError") else ())  # type: ignore[attr-defined,unused-ignore]


# The fallback's members are checked above; where tarfile has filters (tests use the fallback there too), it is
# told so, as Python 3.14 would otherwise apply its default "data" filter on top.
_CHECKED_BY_US: dict[str, Any] = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}


def _extract_checked(tf: tarfile.TarFile, dest_real: str, before_member: Callable[[], None] | None) -> None:
    """Extraction without PEP 706 filters: each member checked, then written with no owner and no
    setuid/setgid/sticky or group/other-write bits (what the "data" filter does)."""
    for member in tf:
        if before_member is not None:
            before_member()
        _check_member(member, dest_real)
        # No chown (set_attrs=False); the mode is applied by hand for regular files and directories.
        tf.extract(member, dest_real, set_attrs=False, **_CHECKED_BY_US)
        target = os.path.join(dest_real, member.name)
        if member.isfile() or member.isdir():
            os.chmod(target, (member.mode & 0o755) | (0o700 if member.isdir() else 0o600))
