"""Reading a task folder's files as the hostile input they are.

A task folder comes from anyone (a downloaded dataset, a checkout), so nothing of it is read through a link
that leads out of the folder (``instruction.md -> /etc/passwd`` would become the prompt; a linked ``solution/``
file would ship host content into a container), nothing is read past a cap (a file's size is checked before it
is read, and it is read in chunks), nothing that is not a regular file is opened for reading (a FIFO would block
the read forever), and ``task.toml`` is refused when it nests deeper than ``MAX_TOML_DEPTH`` before the
recursive parser sees it. Links that stay inside the folder are followed.

Every refusal is a :class:`TaskFileError` naming the task and the file (relative to the task folder).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...environments._tar import ArchiveLimits, SpooledArchive, write_tree

#: ``instruction.md`` (the prompt: a megabyte is already some 250k tokens)
MAX_INSTRUCTION_BYTES = 1 << 20
#: ``task.toml`` and ``environment/Dockerfile``
MAX_CONFIG_BYTES = 1 << 20
#: one file of ``tests/``, ``solution/`` or ``environment/``
MAX_FILE_BYTES = 100 << 20
#: all of ``tests/`` or of ``environment/`` (each is packed into a container or an image build)
MAX_TREE_BYTES = 1 << 30
#: all of ``solution/`` (handed to the oracle harness in memory)
MAX_SOLUTION_BYTES = 100 << 20
#: files, folders and links in one of those folders
MAX_TREE_ENTRIES = 100_000
#: how deep ``task.toml``'s arrays and tables may nest
MAX_TOML_DEPTH = 32
_CHUNK = 1 << 20


class TaskFileError(ValueError):
    """A task folder's file is refused (a link leaving the folder, over a cap, not a regular file, unreadable)."""


def _inside(root_real: str, path_real: str) -> bool:
    return path_real == root_real or path_real.startswith(root_real.rstrip(os.sep) + os.sep)


def resolve(root: Path, rel: str, task_id: str) -> str:
    """The real path of ``root/rel``; ``TaskFileError`` when a link on the way leads outside ``root``."""
    root_real = os.path.realpath(root)
    real = os.path.realpath(os.path.join(root_real, rel))
    if not _inside(root_real, real):
        raise TaskFileError(f"task {task_id!r}: {rel} is a link that leads outside the task folder (to {real}); "
                            f"refused: a task may only link to its own files")
    return real


def read_bytes(root: Path, rel: str, task_id: str, cap: int) -> bytes:
    """The bytes of regular file ``root/rel`` (links inside ``root`` followed), at most ``cap`` of them."""
    real = resolve(root, rel, task_id)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below as not a regular file)
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise TaskFileError(f"task {task_id!r}: cannot read {rel} ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise TaskFileError(f"task {task_id!r}: {rel} is not a regular file")
        if st.st_size > cap:
            raise TaskFileError(f"task {task_id!r}: {rel} is larger than {cap} bytes (it has {st.st_size}), the "
                                f"cap for this file")
        chunks: list[bytes] = []
        got = 0
        while got <= cap:
            chunk = f.read(min(_CHUNK, cap + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    if got > cap:  # it grew while being read
        raise TaskFileError(f"task {task_id!r}: {rel} is larger than {cap} bytes, the cap for this file")
    return b"".join(chunks)


def read_text(root: Path, rel: str, task_id: str, cap: int) -> str:
    """``read_bytes`` decoded as UTF-8."""
    data = read_bytes(root, rel, task_id, cap)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskFileError(f"task {task_id!r}: {rel} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _entries(base: str, rel: str, task_id: str) -> Iterator[tuple[str, str, os.stat_result]]:
    """(host path, name relative to the task folder, lstat) of everything under folder ``base`` (named ``rel``),
    links not followed, at most ``MAX_TREE_ENTRIES``."""
    count = 0
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        sub = os.path.relpath(dirpath, base)
        for name in sorted(dirnames + filenames):
            count += 1
            if count > MAX_TREE_ENTRIES:
                raise TaskFileError(f"task {task_id!r}: {rel}/ holds more than {MAX_TREE_ENTRIES} entries, the cap")
            path = os.path.join(dirpath, name)
            shown = f"{rel}/{name}" if sub == "." else f"{rel}/{sub}/{name}".replace(os.sep, "/")
            try:
                st = os.lstat(path)
            except OSError as exc:
                raise TaskFileError(f"task {task_id!r}: cannot read {shown} ({exc.strerror or exc})") from None
            yield path, shown, st


def check_tree(root: Path, rel: str, task_id: str, *, file_cap: int = MAX_FILE_BYTES,
               total_cap: int = MAX_TREE_BYTES, digest: Any = None) -> None:
    """Refuse folder ``root/rel`` when a link in it leads outside ``root``, a file is over ``file_cap``, all of
    them over ``total_cap``, or it holds a FIFO, socket or device. ``digest`` (a hashlib object), when given, is
    fed each regular file's name, executable bit and content (streamed) and each link's name and target."""
    base = resolve(root, rel, task_id)
    root_real = os.path.realpath(root)
    total = 0
    hashed: list[tuple[tuple[str, ...], str, os.stat_result]] = []
    for path, shown, st in _entries(base, rel, task_id):
        if stat.S_ISLNK(st.st_mode):
            if not _inside(root_real, os.path.realpath(path)):
                raise TaskFileError(f"task {task_id!r}: {shown} is a link that leads outside the task folder (to "
                                    f"{os.path.realpath(path)}); refused: a task may only link to its own files")
        elif stat.S_ISREG(st.st_mode):
            if st.st_size > file_cap:
                raise TaskFileError(f"task {task_id!r}: {shown} is larger than {file_cap} bytes (it has "
                                    f"{st.st_size}), the cap for one file")
            total += st.st_size
            if total > total_cap:
                raise TaskFileError(f"task {task_id!r}: {rel}/ holds more than {total_cap} bytes, the cap")
        elif not stat.S_ISDIR(st.st_mode):
            raise TaskFileError(f"task {task_id!r}: {shown} is not a regular file, folder or link")
        if digest is not None and not stat.S_ISDIR(st.st_mode):
            hashed.append((tuple(shown.split("/")[1:]), path, st))
    if digest is not None:
        for parts, path, st in sorted(hashed, key=lambda e: e[0]):
            _hash_entry(digest, "/".join(parts), path, st)


def _hash_entry(h: Any, name: str, path: str, st: os.stat_result) -> None:
    h.update(name.encode(errors="surrogateescape") + b"\0")
    if stat.S_ISLNK(st.st_mode):
        h.update(b"l" + os.readlink(path).encode(errors="surrogateescape") + b"\0")
        return
    h.update(b"x" if os.access(path, os.X_OK) else b"-")
    content = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            content.update(chunk)
    h.update(content.digest())


def tree_digest(root: Path, rel: str, task_id: str) -> str:
    """A content hash of folder ``root/rel`` (names, contents, executable bits, link targets), checked as
    ``check_tree`` checks it."""
    h = hashlib.sha256()
    check_tree(root, rel, task_id, digest=h)
    return h.hexdigest()


def read_tree(root: Path, rel: str, task_id: str, *, total_cap: int = MAX_SOLUTION_BYTES) -> dict[str, bytes]:
    """Every regular file of folder ``root/rel`` (name relative to it -> content; links to files inside the
    task folder read through), checked as ``check_tree`` checks it."""
    check_tree(root, rel, task_id, total_cap=total_cap)
    base = resolve(root, rel, task_id)
    files: dict[str, bytes] = {}
    total = 0
    for path, shown, st in _entries(base, rel, task_id):
        if stat.S_ISDIR(st.st_mode) or (stat.S_ISLNK(st.st_mode) and os.path.isdir(path)):
            continue
        if stat.S_ISLNK(st.st_mode) and not os.path.exists(path):
            continue  # a dangling link: nothing to read
        data = read_bytes(root, shown, task_id, MAX_FILE_BYTES)
        total += len(data)
        if total > total_cap:
            raise TaskFileError(f"task {task_id!r}: {rel}/ holds more than {total_cap} bytes, the cap")
        files[shown[len(rel) + 1:]] = data
    return files


def tree_archive(root: Path, rel: str, task_id: str) -> SpooledArchive:
    """A tar of folder ``root/rel``'s contents in an unlinked temp file (links kept as links, files streamed
    in chunks), checked as ``check_tree`` checks it. Blocking: run it in a thread. The caller closes it."""
    check_tree(root, rel, task_id)
    archive = SpooledArchive()
    try:
        # room for the headers of as many entries as the folder may hold
        write_tree(resolve(root, rel, task_id), archive,
                   ArchiveLimits(MAX_FILE_BYTES, MAX_TREE_BYTES + MAX_TREE_ENTRIES * 8 * 512 + (1 << 20)))
        if archive.skipped_count:
            raise TaskFileError(f"task {task_id!r}: {rel}/ changed since the task was loaded "
                                f"({archive.skipped_report()})")
    except BaseException:
        archive.close()
        raise
    return archive


_TOML_SPECIAL = re.compile(r"[\[\]{}\"'#\n\\]")


def toml_depth(text: str) -> int:
    """How deep ``text``'s arrays and inline tables (and table headers) nest, brackets inside strings and
    comments not counted: linear, so it can run before the recursive parser."""
    if text.count("[") + text.count("{") <= MAX_TOML_DEPTH:
        return 0
    depth = deepest = 0
    pos = 0
    closer: str | None = None  # what ends the string or comment we are in
    escapes = False
    while (m := _TOML_SPECIAL.search(text, pos)) is not None:
        c, i = m.group(), m.start()
        pos = i + 1
        if closer is not None:
            if escapes and c == "\\":
                pos = i + 2
            elif text.startswith(closer, i) or (c == "\n" and closer in ('"', "'", "\n")):
                pos = i + len(closer) if c != "\n" else i + 1
                closer = None
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth = max(depth - 1, 0)
        elif c == "#":
            closer, escapes = "\n", False
        elif c in "\"'":
            closer = c * 3 if text.startswith(c * 3, i) else c
            escapes = c == '"'
            pos = i + len(closer)
    return deepest


def _value_depth(value: Any) -> int:
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if d > MAX_TOML_DEPTH:
            break
        if isinstance(v, dict):
            stack.extend((c, d + 1) for c in v.values())
        elif isinstance(v, list):
            stack.extend((c, d + 1) for c in v)
    return deepest


def load_task_toml(root: Path, task_id: str) -> dict[str, Any]:
    """``root/task.toml`` parsed, within ``MAX_CONFIG_BYTES`` and ``MAX_TOML_DEPTH``."""
    text = read_text(root, "task.toml", task_id, MAX_CONFIG_BYTES)
    deep = f"task {task_id!r}: task.toml is nested deeper than {MAX_TOML_DEPTH} levels (arrays and tables), the cap"
    if toml_depth(text) > MAX_TOML_DEPTH:
        raise TaskFileError(deep)
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TaskFileError(f"task {task_id!r}: cannot read task.toml ({exc})") from None
    except RecursionError:
        raise TaskFileError(deep) from None
    if _value_depth(config) > MAX_TOML_DEPTH:  # dotted keys nest without brackets: a.b.c...
        raise TaskFileError(deep)
    return config


__all__ = ["MAX_CONFIG_BYTES", "MAX_FILE_BYTES", "MAX_INSTRUCTION_BYTES", "MAX_SOLUTION_BYTES", "MAX_TOML_DEPTH",
           "MAX_TREE_BYTES", "MAX_TREE_ENTRIES", "TaskFileError", "check_tree", "load_task_toml", "read_bytes",
           "read_text", "read_tree", "resolve", "toml_depth", "tree_archive", "tree_digest"]
