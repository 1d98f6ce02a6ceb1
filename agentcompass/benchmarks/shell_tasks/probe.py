"""The shell_tasks probe: copied into the verifier, it runs the agent's code and reports what it observed.

It holds no expected values and decides nothing. Usage: ``python3 -I probe.py SPEC_FILE MARKER``. It reads the
inputs from SPEC_FILE (JSON: a list of ``calls`` and ``run`` checks), runs them with the verifier's workdir as
cwd, and writes one line ``MARKER <json report>`` to the stdout it was started with; the agent's code gets
stderr as its stdout. The engine compares the report with the ground truth it alone holds, so anything the
agent's code does here (exit early, patch exits, print a forged report) yields at most a claim of values,
which is only a pass if the values are right. Stdlib only: it runs on whatever ``python3`` the verifier has.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import tempfile
from types import ModuleType
from typing import IO, Any

_REPR_CAP = 100_000


def _report_stream() -> IO[str]:
    """A private copy of the original stdout; fd 1 then points at stderr for everything the agent prints."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    return out


def _call(module: ModuleType, expr: str, as_bool: bool) -> dict[str, str]:
    node = ast.parse(expr, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.keywords:
        return {"error": "malformed call in the spec"}
    args = [ast.literal_eval(a) for a in node.args]
    try:
        value = getattr(module, node.func.id)(*args)
        if as_bool:
            value = bool(value)
        text = repr(value)
    except BaseException as exc:  # the agent's code may raise anything, SystemExit included
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}
    if len(text) > _REPR_CAP:
        return {"error": f"result repr is {len(text)} characters (cap {_REPR_CAP})"}
    return {"repr": text}


def _calls(check: dict[str, Any], workdir: str) -> dict[str, Any]:
    if workdir not in sys.path:
        sys.path.insert(0, workdir)  # kept: the agent's functions may import their siblings when called
    try:
        module = __import__(check["module"])
    except BaseException as exc:  # SystemExit at import is the agent's error, not ours
        return {"import_error": f"{type(exc).__name__}: {exc}"[:500], "results": []}
    return {"results": [_call(module, expr, check.get("as_bool", False)) for expr in check["calls"]]}


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:  # the group is gone already
        pass


def _run(check: dict[str, Any], timeout: float) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    for argv in check["runs"]:
        with tempfile.TemporaryDirectory(prefix="probe-") as inputs:
            for name, content in check.get("inputs", {}).items():
                with open(os.path.join(inputs, name), "w", encoding="utf-8") as f:
                    f.write(content)
            real = [a.replace("{inputs}", inputs) for a in argv]
            try:
                proc = subprocess.Popen(real, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        start_new_session=True)
            except OSError as exc:
                results.append({"error": f"{type(exc).__name__}: {exc}"[:500]})
                continue
            try:
                stdout, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid)
                proc.kill()
                proc.wait()
                results.append({"timed_out": True})
                continue
            _kill_group(proc.pid)  # whatever it left running in its group
            results.append({"exit_code": proc.returncode, "stdout": stdout[:_REPR_CAP].decode("utf-8", "replace")})
    return {"results": results}


def main() -> None:
    spec_file, marker = sys.argv[1], sys.argv[2]
    out = _report_stream()
    with open(spec_file, encoding="utf-8") as f:
        spec = json.load(f)
    workdir = os.getcwd()
    report: list[dict[str, Any]] = []
    for check in spec["checks"]:
        if check["kind"] == "calls":
            report.append(_calls(check, workdir))
        else:
            report.append(_run(check, spec["timeout"]))
    out.write(marker + " " + json.dumps({"checks": report}) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
