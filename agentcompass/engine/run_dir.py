"""The run directory: layout, safe file names, atomic writes and redaction at the persistence boundary."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from .._errors import AgentCompassError, ConfigError
from ..records import RunInfo, RunPaths, Summary, TaskDetail
from .detail_caps import clip_detail
from .redact import LogWriteState, Redactor, RunLogHandler

try:
    import fcntl
except ImportError:  # not POSIX: no cross-process run lock
    fcntl = None  # type: ignore[assignment]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_encoder = msgspec.json.Encoder()
_detail_decoder = msgspec.json.Decoder(TaskDetail)
_run_info_decoder = msgspec.json.Decoder(RunInfo)
#: bytes kept free in every live run directory (``.reserve``), released so the final run_info.json and
#: summary.json still fit when the disk fills up during the run.
RESERVE_BYTES = 128 * 1024


class ResultsWriteError(AgentCompassError):
    """A file of the run directory could not be written (disk full, quota, I/O error): the run stops."""

    def __init__(self, run_dir: Path, path: Path, exc: OSError) -> None:
        code = errno.errorcode.get(exc.errno or 0, "")
        what = (exc.strerror or str(exc)).lower() + (f" ({code})" if code else "")
        try:
            rel = str(path.relative_to(run_dir))
        except ValueError:
            rel = str(path)
        super().__init__(f"results_dir {str(run_dir)!r}: {what} writing {rel}")
        self.errno = exc.errno


def safe_name(value: str, *, max_len: int = 120) -> str:
    """A stable file-name-safe form of ``value``: no ``/``, ``..`` or control characters.

    Names that had to change get a short hash of the original, so two ids never map to one file."""
    cleaned = _UNSAFE.sub("_", value).strip("._") or "_"
    if cleaned == value and len(value) <= max_len and not value.startswith("."):
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:8]
    return f"{cleaned[:max_len]}-{digest}"


def new_run_id(name: str | None = None) -> str:
    """``[name-]YYYYmmdd-HHMMSS-xxxxxx``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    rid = f"{stamp}-{secrets.token_hex(3)}"
    return f"{safe_name(name)}-{rid}" if name else rid


def request_dir(results_dir: str | Path, benchmark: str, harness: str, model: str, run_id: str) -> Path:
    """``results/<benchmark>/<harness>/<model>/<run_id>``."""
    return Path(results_dir) / safe_name(benchmark) / safe_name(harness) / safe_name(model) / safe_name(run_id)


def check_data_dir(data_dir: str | None) -> None:
    """data_dir, when given and present, must be a directory (a missing one is the benchmark's to report)."""
    if data_dir is not None and Path(data_dir).exists() and not Path(data_dir).is_dir():
        raise ConfigError(f"Invalid `data_dir` {data_dir!r}: it is a file, not a directory. Pass the directory "
                          "that holds the datasets.", field="data_dir")


def check_results_dir(results_dir: str) -> None:
    """results_dir must be a writable directory or creatable as one."""
    p = Path(results_dir)
    for parent in (p, *p.parents):
        if parent.exists():
            if not parent.is_dir():
                what = "is a file" if parent == p else f"is below {str(parent)!r}, which is a file"
                raise ConfigError(
                    f"Invalid `results_dir` {results_dir!r}: it {what}, not a directory. "
                    "Pass a directory path (it is created if missing).", field="results_dir")
            if not os.access(parent, os.W_OK | os.X_OK):
                _unwritable(results_dir, parent, None)
            break


def _unwritable(results_dir: str, where: Path, exc: OSError | None) -> None:
    try:
        read_only = bool(os.statvfs(where).f_flag & os.ST_RDONLY) or (exc is not None and exc.errno == errno.EROFS)
    except OSError:
        read_only = False
    why = "is on a read-only file system" if read_only else "is not writable (permission denied)"
    at = "it" if str(where) == str(Path(results_dir)) else f"{str(where)!r}"
    raise ConfigError(f"Invalid `results_dir` {results_dir!r}: {at} {why}. Pass a writable directory.",
                      field="results_dir") from None


def summary_bytes(summary: Summary) -> bytes:
    """The bytes of ``summary.json`` (indented JSON), also of a re-scored summary (``rescored_summary_path``)."""
    return msgspec.json.format(_encoder.encode(summary), indent=2)


def rescored_summary_path(run_dir: Path, rescore_id: str) -> Path:
    """Where ``agentcompass rescore`` writes the summary of re-score ``rescore_id``: beside ``summary.json``."""
    return run_dir / f"summary.{rescore_id}.json"


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temp file in the same directory and rename: readers and a SIGKILL see old or new."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a half-written temp file only takes the space a full disk lacks
        raise


class RunDir:
    """One request's run directory. Every write is redacted and atomic."""

    def __init__(self, path: Path, redactor: Redactor) -> None:
        self.path = path
        self.redactor = redactor
        self._lock_fd: int | None = None  # held from create() to close()
        #: the first failed write of a result file; the request fails with it
        self.write_error: ResultsWriteError | None = None
        #: every log file of the run stops after its first failed write (reported once)
        self.log_state = LogWriteState(str(path))
        self.details = path / "details"
        self.logs = path / "logs"
        self.paths = RunPaths(
            run_dir=str(path), params=str(path / "params.json"), run_info=str(path / "run_info.json"),
            progress=str(path / "progress.jsonl"), details_dir=str(self.details),
            summary=str(path / "summary.json"), log=str(self.logs / "run.log"))

    def create(self) -> None:
        """Make the layout and take the run's lock (one process writes a run at a time)."""
        try:
            self.logs.mkdir(parents=True, exist_ok=True)
            self.details.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise ConfigError(f"Cannot create the run directory {str(self.path)!r}: {exc}. Check `results_dir`.",
                              field="results_dir") from None
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                _unwritable(str(self.path), self.path, exc)
            raise ResultsWriteError(self.path, self.path, exc) from None
        self._lock()
        for stale in self.path.glob("**/.*.tmp"):  # half-written files of a killed run (never a live writer's)
            stale.unlink(missing_ok=True)
        try:
            with open(self.path / ".reserve", "wb") as f:  # written, not sparse: the blocks are really taken
                f.write(bytes(RESERVE_BYTES))
        except OSError as exc:
            (self.path / ".reserve").unlink(missing_ok=True)
            raise ResultsWriteError(self.path, self.path / ".reserve", exc) from None

    def release_reserve(self) -> None:
        """Free the space kept for the final files (idempotent)."""
        with contextlib.suppress(OSError):
            (self.path / ".reserve").unlink(missing_ok=True)

    def log_handler(self, path: str | Path, *, delay: bool = False) -> RunLogHandler:
        """A file log handler of this run: every one stops after the run's first failed log write."""
        return RunLogHandler(path, self.log_state, delay=delay)

    def _lock(self) -> None:
        # flock, not a pid file: the kernel drops it when the holder dies, even by SIGKILL.
        if fcntl is None:
            return
        fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise ConfigError(
                f"Run directory {str(self.path)!r} is being written by another run (pid {holder}). Wait for it to "
                "finish, or pick a different `run_id`.", field="run_id") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def close(self) -> None:
        """Release the run's lock (idempotent)."""
        self.release_reserve()
        fd = self._lock_fd
        if fd is not None:
            self._lock_fd = None
            with contextlib.suppress(OSError):
                os.close(fd)

    def _write(self, path: Path, data: bytes) -> None:
        try:
            write_atomic(path, self.redactor.bytes(data))
        except OSError as exc:
            err = ResultsWriteError(self.path, path, exc)
            self.write_error = self.write_error or err
            raise err from None

    def write_params(self, params: dict[str, Any]) -> None:
        self._write(self.path / "params.json", msgspec.json.format(_encoder.encode(params), indent=2))

    def write_run_info(self, info: RunInfo) -> None:
        self._write(self.path / "run_info.json", _encoder.encode(info))  # compact: small enough to fit at the end

    def write_summary(self, summary: Summary) -> None:
        self._write(self.path / "summary.json", summary_bytes(summary))

    def detail_path(self, task_id: str) -> Path:
        return self.details / f"{safe_name(task_id)}.json"

    def write_detail(self, detail: TaskDetail) -> None:
        clip_detail(detail)  # one step's text is capped: no detail file of hundreds of MB
        self._write(self.detail_path(detail.task_id), _encoder.encode(detail))

    def read_detail(self, task_id: str) -> TaskDetail | None:
        return read_detail_file(self.detail_path(task_id))

    def iter_details(self) -> Iterator[TaskDetail]:
        yield from iter_details(self.details)


def read_detail_file(path: Path) -> TaskDetail | None:
    """A committed detail, or None when missing or unreadable."""
    try:
        return _detail_decoder.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def iter_details(details_dir: Path) -> Iterator[TaskDetail]:
    """Committed details of a run, one at a time (temp files are skipped)."""
    if not details_dir.is_dir():
        return
    for entry in sorted(os.scandir(details_dir), key=lambda e: e.name):
        if entry.name.endswith(".json") and not entry.name.startswith("."):
            d = read_detail_file(Path(entry.path))
            if d is not None:
                yield d


#: a line of run.log written by a task's logger: ``<date> <time>,<ms> <LEVEL> agentcompass.task.<id>#<attempt>: ``
_TASK_LINE = rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ agentcompass\.task\.%s#\d+: "
_LINE_START = re.compile(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ", re.M)


def task_log_lines(run_log: bytes, task_id: str) -> bytes:
    """The lines one task's attempts logged, cut from the run's ``logs/run.log`` (with the continuation lines of
    a multi-line message, e.g. a traceback)."""
    head = re.compile(_TASK_LINE % re.escape(task_id.encode()), re.M)
    out: list[bytes] = []
    for m in head.finditer(run_log):
        nxt = _LINE_START.search(run_log, m.end())
        out.append(run_log[m.start():nxt.start() if nxt else len(run_log)])
    return b"".join(out)


def read_run_info(run_dir: Path) -> RunInfo | None:
    """A run's run_info.json, or None."""
    try:
        return _run_info_decoder.decode((run_dir / "run_info.json").read_bytes())
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def run_changes(path: Path, fields: dict[str, Any]) -> list[str]:
    """How the run at ``path`` differs from ``fields`` (``identity.run_fields``): ``[]`` when it can be continued.

    Read from the run's params.json (its ``spec`` and benchmark version), so runs of any earlier version count."""
    from ..specs import RunRequestSpec
    from .identity import diff_fields, run_fields

    try:
        params = json.loads((path / "params.json").read_bytes())
        spec = msgspec.convert(params["spec"], RunRequestSpec)
        version = str(params["versions"]["benchmark"])
    except (OSError, ValueError, KeyError, TypeError, msgspec.ValidationError) as exc:
        if next(iter_details(path / "details"), None) is None:
            return []  # nothing committed yet: nothing to mix with
        return [f"its params.json cannot be read ({type(exc).__name__}), so what made its details is unknown"]
    before = run_fields(
        benchmark=spec.benchmark.id, benchmark_params=spec.benchmark.params, benchmark_version=version,
        harness=spec.harness.id, harness_params=spec.harness.params, model=spec.model.id,
        model_params=spec.model.params, api_protocol=spec.model.api_protocol, environment=spec.environment.id,
        environment_params=spec.environment.params)
    return diff_fields(before, fields)


def move_run_aside(path: Path) -> Path:
    """Rename the run directory at ``path`` to ``<run_id>.overwritten-<UTC stamp>`` beside it (kept whole, never
    deleted). Refused while another process writes it."""
    fd = os.open(path / ".lock", os.O_RDWR | os.O_CREAT, 0o644) if fcntl is not None else None
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ConfigError(f"Run directory {str(path)!r} is being written by another run; it cannot be "
                                  "overwritten now. Wait for it to finish, or pick a different `run_id`.",
                                  field="run_id") from None
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        backup = path.with_name(f"{path.name}.overwritten-{stamp}")
        n = 1
        while backup.exists():
            n += 1
            backup = path.with_name(f"{path.name}.overwritten-{stamp}-{n}")
        try:
            os.rename(path, backup)
        except OSError as exc:
            raise ConfigError(f"Run directory {str(path)!r} could not be moved aside to {backup.name!r} "
                              f"({exc.strerror or exc}); nothing was changed.", field="overwrite") from None
        return backup
    finally:
        if fd is not None:
            os.close(fd)
