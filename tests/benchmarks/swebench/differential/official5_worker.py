"""Run in its own interpreter by official5.py: reads a JSON list of jobs on stdin, answers with swebench 5.0.2.

``argv[1]`` is the cache directory holding swebench 5.0.2 (``pip --target``). Jobs:
``{"kind": "version"}``; ``{"kind": "parse", "parser": "parse_log_pytest", "log": ...}`` (the parser's map);
``{"kind": "logs_eval", "parser": ..., "log": ...}`` (``get_logs_eval`` on the log as a file: map and found);
``{"kind": "report", "status_map": ..., "f2p": [...], "p2p": [...], "eval_type": "pass_and_fail"}``
(``get_eval_tests_report`` and ``get_resolution_status``); ``{"kind": "grade", "parser", "log", "f2p", "p2p",
"eval_type"}`` (both: a whole eval log graded, status RESOLVED_NO when not found); ``{"kind": "parser_map"}``
(repo -> parser function name, every language). An exception is answered as ``{"raised": "Name"}``.
"""

import io
import json
import sys
import types
from pathlib import Path

root = Path(sys.argv[1])
sys.path.insert(0, str(root))
# swebench/harness/__init__.py imports docker, datasets and modal: load the subpackages without it
harness = types.ModuleType("swebench.harness")
harness.__path__ = [str(root / "swebench" / "harness")]
sys.modules["swebench.harness"] = harness

import swebench  # noqa: E402
from swebench.harness import grading  # noqa: E402
from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, EvalType  # noqa: E402
from swebench.harness.log_parsers import (  # noqa: E402
    PARSER_REGISTRY,
    c,
    go,
    java,
    javascript,
    php,
    python,
    ruby,
    rust,
)

assert swebench.__file__.startswith(str(root)), swebench.__file__


def report(status_map, job):
    tests = grading.get_eval_tests_report(status_map, {FAIL_TO_PASS: job["f2p"], PASS_TO_PASS: job["p2p"]},
                                          eval_type=EvalType(job["eval_type"]))
    return {"report": {k: tests[k] for k in (FAIL_TO_PASS, PASS_TO_PASS)},
            "status": grading.get_resolution_status(tests)}


def run(job, log_file):
    kind = job["kind"]
    if kind == "version":
        return {"value": swebench.__version__}
    if kind == "parser_map":
        maps = (python.MAP_REPO_TO_PARSER_PY, c.MAP_REPO_TO_PARSER_C, go.MAP_REPO_TO_PARSER_GO,
                java.MAP_REPO_TO_PARSER_JAVA, javascript.MAP_REPO_TO_PARSER_JS, php.MAP_REPO_TO_PARSER_PHP,
                ruby.MAP_REPO_TO_PARSER_RUBY, rust.MAP_REPO_TO_PARSER_RUST)
        return {"value": {repo: fn.__name__ for m in maps for repo, fn in m.items()}}
    spec = types.SimpleNamespace(log_parser=job.get("parser"), instance_id=job.get("instance_id", "x__y-1"))
    if kind == "parse":
        return {"map": PARSER_REGISTRY[job["parser"]](job["log"], spec)}
    if kind == "logs_eval":
        log_file[0] = job["log"]
        status_map, found = grading.get_logs_eval(spec, "test_output.txt")
        return {"map": status_map, "found": found}
    if kind == "report":
        return report(job["status_map"], job)
    if kind == "grade":
        log_file[0] = job["log"]
        status_map, found = grading.get_logs_eval(spec, "test_output.txt")
        if not found:
            return {"found": False, "map": {}, "status": "RESOLVED_NO"}
        return {"found": True, "map": status_map, **report(status_map, job)}
    raise ValueError(kind)


def main():
    jobs = json.load(sys.stdin)
    answer_to = sys.stdout
    sys.stdout = sys.stderr  # the official parsers print warnings (maven, gradle): keep stdout for the answers
    out = []
    log_file = [""]
    # get_logs_eval reads the log from a file: served from memory (no disk write per case)
    grading.open = lambda *_a, **_k: io.StringIO(log_file[0])
    for job in jobs:
        try:
            out.append(run(job, log_file))
        except Exception as exc:  # the caller decides what an official exception means
            out.append({"raised": type(exc).__name__})
    json.dump(out, answer_to)


main()
