"""The ``agentcompass`` command line.

Commands: run, evaluate, launch, list, show, view, report, compare, serve-scripted, cleanup, images."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._errors import AgentCompassError, ConfigError
from .common.environ import deny_process_inspection, take_secret

if TYPE_CHECKING:
    from .run_options import RunOption

#: exit codes of every command (docs/cli.md lists exactly these)
EXIT_OK = 0  # done; for run/launch: status completed
EXIT_FAILED = 1  # run/launch not completed, cleanup with errors, images build-base failed
EXIT_BAD_INPUT = 2  # a ConfigError (or argparse usage error): nothing ran
EXIT_INTERRUPTED = 130  # Ctrl-C
EXIT_TERMINATED = 143  # SIGTERM during run/launch (128 + 15), after the run was recorded as cancelled

LIST_KINDS = {"benchmarks": "benchmark", "harnesses": "harness", "environments": "environment",
              "recipes": "recipe", "analyzers": "analyzer"}


def _json_arg(flag: str, text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"Invalid `{flag}`: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}). "
                          f"Example: {flag} '{{\"key\": 1}}'.", field=flag) from None
    except RecursionError:
        raise ConfigError(f"Invalid `{flag}`: JSON nested too deeply to read.", field=flag) from None


def _json_obj(flag: str, text: str | None) -> dict[str, Any] | None:
    value = _json_arg(flag, text)
    if text is not None and not isinstance(value, dict):  # JSON null too: leave the flag out for the default
        raise ConfigError(f"Invalid `{flag}`: expected a JSON object like '{{\"key\": 1}}', got "
                          f"{'null' if value is None else type(value).__name__}.", field=flag)
    return value


def load_spec_file(path: str) -> Any:
    """Read an OrchestrationSpec from YAML or JSON, with a readable error naming the file and position."""
    from .common.bounded_load import load_json, load_yaml, read_spec_text

    text = read_spec_text(path)  # size-capped
    if Path(path).suffix == ".json":
        return load_json(text, f"Spec file {path!r}", "spec")
    return load_yaml(text, f"Spec file {path!r}")  # alias expansion bounded


def _help(opt: RunOption, default: Any, note: str = "") -> str:
    """``opt``'s help for its flag: its description, the flag's own notes and ``default`` when it says something."""
    import msgspec.inspect as mi

    text = opt.help + opt.cli_note
    if isinstance(opt.type, mi.DictType):
        text += " (a JSON object)"
    elif isinstance(opt.type, mi.ListType):
        text += " (repeatable)"
    if default is not None and default is not False and not opt.flags[0].isidentifier():  # a positional has none
        text += f" (default: {default})"
    return (text + note).replace("%", "%%")  # argparse formats help with %


def _option_kwargs(opt: RunOption) -> dict[str, Any]:
    """argparse keywords for ``opt`` from its spec type: a bool is a switch, a number converted, a fixed set
    ``choices``, a dict JSON text, a list a repeatable flag; ``opt.cli`` adds to or overrides them."""
    import msgspec.inspect as mi

    t = opt.type
    kwargs: dict[str, Any] = {}
    if isinstance(t, mi.BoolType):
        kwargs["action"] = "store_true"
    elif isinstance(t, mi.IntType | mi.FloatType):
        kwargs["type"] = int if isinstance(t, mi.IntType) else float
    elif isinstance(t, mi.LiteralType):
        kwargs["choices"] = list(opt.choices)
    elif isinstance(t, mi.DictType):
        kwargs["metavar"] = "JSON"
    elif isinstance(t, mi.ListType):
        kwargs["action"] = "append"
    kwargs.update(opt.cli)
    if not opt.flags[0].isidentifier():
        kwargs["default"] = opt.default
    return kwargs


def _add_option(p: argparse.ArgumentParser, opt: RunOption, note: str = "", **override: Any) -> None:
    """``opt``'s flag on ``p``, its help and default from the declaration (``override``: e.g. another default,
    ``note`` saying what it means)."""
    kwargs = {**_option_kwargs(opt), **override}
    p.add_argument(*opt.flags, help=_help(opt, kwargs.get("default"), note), **kwargs)


def _add_run_parser(sub: Any) -> None:
    from .run_options import RUN_OPTIONS

    p = sub.add_parser("run", help="evaluate one benchmark x harness x model selection",
                       description="Evaluate one benchmark x harness x model selection (the SDK's run_evaluation) "
                                   "and print its metrics, counts and run directory.")
    for opt in RUN_OPTIONS:
        if opt.flags:
            _add_option(p, opt)
        if opt.name == "model_api_key":
            p.add_argument("--model-api-key-file", metavar="PATH",
                           help=f"read the model API key from this file (one line); else {API_KEY_ENV} is used")


#: run options ``evaluate`` does not take: it runs no agent and calls no model
_NOT_FOR_EVALUATE = frozenset({"harness", "harness_params", "model", "model_base_url", "model_api_key",
                               "model_api_protocol", "model_params", "wrap_api_key"})


def _add_evaluate_parser(sub: Any) -> None:
    from .run_options import RUN_OPTIONS

    p = sub.add_parser("evaluate", help="grade a predictions file (no agent), as the SWE-bench harness does",
                       description="Grade a predictions file (instance_id, model_patch, model_name_or_path; a JSON "
                                   "list or object, or JSON Lines) on a benchmark that grades patches (the SWE-bench "
                                   "family): each instance of the file is graded in a fresh verifier environment, "
                                   "with the same run directory and report as a run. No agent runs, no model is "
                                   "called; the run's model is the file's model_name_or_path.")
    p.add_argument("--predictions", required=True, metavar="FILE", help="the predictions file")
    for opt in RUN_OPTIONS:
        if opt.flags and opt.name not in _NOT_FOR_EVALUATE:
            if opt.name == "environment":  # the verifier needs the instances' images
                _add_option(p, opt, default="docker")
            else:
                _add_option(p, opt)


def _add_rescore_parser(sub: Any) -> None:
    from .run_options import OPTIONS_BY_NAME

    p = sub.add_parser("rescore", help="grade a finished run again (same or another grader), keeping the run",
                       description="Grade the recorded attempts of a finished run again, with its grader or another "
                                   "(--benchmark-params, e.g. another judge_model or grading_version): no agent runs, "
                                   "no model under test is called. The run is not changed: the regrading is a run "
                                   "under RUN_DIR/rescore/, the new summary RUN_DIR/summary.<rescore id>.json.")
    p.add_argument("run_dir", help="the finished run's directory")
    p.add_argument("--rescore-id", help="the re-score's name (default rescore-1, rescore-2, ...)")
    p.add_argument("--benchmark-params", help="JSON object: benchmark params over the run's (e.g. judge_model)")
    p.add_argument("--env", dest="environment", help="the environment of the verifier (default: the run's)")
    p.add_argument("--env-params", dest="environment_params", help="JSON object: that environment's params")
    _add_option(p, OPTIONS_BY_NAME["task_concurrency"], " (default: the run's)", default=None)
    _add_option(p, OPTIONS_BY_NAME["data_dir"], " (default: the run's)", default=None)
    _add_option(p, OPTIONS_BY_NAME["progress"])


def _cmd_rescore(a: argparse.Namespace) -> int:
    from .rescoring import rescore

    result = rescore(a.run_dir, benchmark_params=_json_obj("--benchmark-params", a.benchmark_params),
                     environment=a.environment,
                     environment_params=_json_obj("--env-params", a.environment_params),
                     rescore_id=a.rescore_id, task_concurrency=a.task_concurrency, progress=a.progress,
                     data_dir=a.data_dir)
    if not result.ok:
        print(f"rescore {result.rescore_id} {result.status}: {result.error}", file=sys.stderr)
        if result.regrade_run_dir:
            print(f"  regrading run: {result.regrade_run_dir}", file=sys.stderr)
        return EXIT_FAILED
    print(f"rescore {result.rescore_id}: {result.summary}")
    for key in sorted(set(result.metrics_before) | set(result.metrics)):
        before, after = result.metrics_before.get(key), result.metrics.get(key)
        mark = "" if before == after else "   (changed)"
        print(f"  {key}: {before} -> {after}{mark}")
    print(f"  tasks whose verdict changed: {len(result.changed)}"
          + (f" ({', '.join(result.changed[:10])}{', ...' if len(result.changed) > 10 else ''})" if result.changed
             else ""))
    print(f"  regrading run: {result.regrade_run_dir}")
    return EXIT_OK


def _add_results_parsers(sub: Any) -> None:
    p = sub.add_parser("report", help="write a static report of a run (html, md or json)")
    p.add_argument("run_dir")
    p.add_argument("--format", default="html", choices=["html", "md", "json"])
    p.add_argument("--out", help="output file ('-' = stdout); default: <run_dir>/report.html for html, "
                                 "stdout otherwise")
    p.add_argument("--no-trajectories", action="store_true", help="html: leave out the per-task trajectories")
    p.add_argument("--max-chars", type=int, default=20000, help="html: cap on each text block (middle cut)")
    p = sub.add_parser("compare", help="compare two or more runs: metrics side by side and differing tasks")
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--format", default="text", choices=["text", "json"])
    p.add_argument("--max-tasks", type=int, default=200, help="text: differing tasks listed at most")


def _version() -> str:
    """The installed distribution's version; the package's own when it runs from a source tree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentcompass")
    except PackageNotFoundError:
        from . import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    """The ``agentcompass`` parser; the run options' flags come from ``agentcompass.run_options``."""
    from .run_options import OPTIONS_BY_NAME

    parser = argparse.ArgumentParser(prog="agentcompass", description="Evaluate LLM agents.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run_parser(sub)
    _add_evaluate_parser(sub)
    _add_rescore_parser(sub)
    p = sub.add_parser("launch", help="run an OrchestrationSpec from a YAML or JSON file")
    p.add_argument("spec", help="the OrchestrationSpec file (.json: JSON, else YAML)")
    _add_option(p, OPTIONS_BY_NAME["progress"], " (default: the spec file's progress)", default=None)
    p = sub.add_parser("list", help="list registered components")
    p.add_argument("kind", choices=sorted(LIST_KINDS))
    _add_option(p, OPTIONS_BY_NAME["recipe_dirs"])
    p = sub.add_parser("show", help="print a run directory's summary")
    p.add_argument("run_dir")
    _add_results_parsers(sub)
    sub.add_parser("serve-scripted", help="serve the scripted model over HTTP (OpenAI-compatible)",
                   add_help=False)
    p = sub.add_parser("cleanup", help="remove agentcompass containers and networks of dead runs")
    p.add_argument("--run-id", help="only this run's")
    p.add_argument("--all", action="store_true", help="also those of live processes and kept environments")
    p = sub.add_parser("images", help="image helpers")
    p.add_argument("action", choices=["build-base"])
    p = sub.add_parser("view", help="browse results in a local web viewer (a results dir or one run dir)")
    p.add_argument("path", help="a results directory (many runs) or one run directory")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    p.add_argument("--no-open", action="store_true", help="do not open a web browser")
    return parser


def _print_outcome(outcome: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"{outcome.name}: {outcome.status}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in outcome.metrics.items():
        table.add_row(k, f"{v:.4f}" if isinstance(v, float) else str(v))
    c = outcome.counts
    table.add_row("tasks done / total", f"{c.done}/{c.total}")
    table.add_row("errors / retries / reused", f"{c.errors} / {c.retries} / {c.reused}")
    for kind, n in sorted(outcome.errors_by_kind.items()):
        table.add_row(f"error: {kind}", str(n))
    if outcome.duration_s is not None:
        table.add_row("duration", f"{outcome.duration_s:.2f}s")
    console.print(table)
    if outcome.run_dir:
        console.print(f"run directory: {outcome.run_dir}", soft_wrap=True, highlight=False)
    if outcome.error:
        from rich.markup import escape

        console.print(f"[red]error:[/red] {escape(_escaped(outcome.error))}", soft_wrap=True, markup=True)


def run_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    """``run_evaluation``'s keyword arguments from the parsed ``run`` flags (JSON flags parsed, the API key
    read)."""
    import msgspec.inspect as mi

    from .run_options import RUN_OPTIONS

    kwargs: dict[str, Any] = {}
    for opt in RUN_OPTIONS:
        if not opt.flags or not hasattr(a, opt.dest):  # a command with a subset of them (evaluate)
            continue
        value = getattr(a, opt.dest)
        if isinstance(opt.type, mi.DictType):
            value = _json_obj(opt.flags[0], value)
        kwargs[opt.name] = value
    if hasattr(a, "model_api_key"):
        kwargs["model_api_key"] = _api_key_arg(a)
    kwargs["enable_analysis"] = _analysis_arg(a.enable_analysis)
    return kwargs


def _cmd_run(a: argparse.Namespace) -> int:
    from .api import run_evaluation

    outcome = run_evaluation(**run_kwargs(a))
    _print_outcome(outcome)
    return EXIT_OK if outcome.ok else EXIT_FAILED


def _cmd_evaluate(a: argparse.Namespace) -> int:
    from .api import run_evaluation
    from .benchmarks.selection import SELECTION_ALIASES, SELECTION_PARAM
    from .harnesses.predictions import load_predictions, model_names

    path = str(Path(a.predictions).expanduser().resolve())
    predictions = load_predictions(path)
    kwargs = run_kwargs(a)
    bench_params = dict(kwargs.get("benchmark_params") or {})
    if not any(name in bench_params for name in (SELECTION_PARAM, *SELECTION_ALIASES)):
        bench_params[SELECTION_PARAM] = list(predictions)  # the file's instances, as the official harness runs
    names = model_names(predictions)
    kwargs["benchmark_params"] = bench_params
    outcome = run_evaluation(**kwargs, harness="predictions", harness_params={"file": path},
                             model=names[0] if len(names) == 1 else "predictions")
    _print_outcome(outcome)
    return EXIT_OK if outcome.ok else EXIT_FAILED


#: environment variable the model API key is read from when no flag gives it.
API_KEY_ENV = "MODEL_API_KEY"
_MAX_KEY_FILE_BYTES = 64 * 1024


def _api_key_arg(a: argparse.Namespace) -> str | None:
    """The model API key: ``--model-api-key-file``, ``--model-api-key`` (warned: argv is world-readable) or
    ``MODEL_API_KEY``. The variable is removed from our environment (and wiped from the block
    ``/proc/<pid>/environ`` shows) so processes we start do not inherit it and a local agent cannot read it
    there; with a key, the process is made non-dumpable so agents of the same user cannot read its memory."""
    from_env = take_secret(API_KEY_ENV)
    if a.model_api_key is not None and a.model_api_key_file is not None:
        raise ConfigError("Give the model API key once: `--model-api-key` or `--model-api-key-file`, not both.",
                          field="--model-api-key-file")
    if a.model_api_key_file is not None:
        key: str | None = _read_key_file(a.model_api_key_file)
    elif a.model_api_key is not None:
        print("warning: --model-api-key on the command line is visible to every process on this machine "
              f"(/proc/<pid>/cmdline); use {API_KEY_ENV} or --model-api-key-file instead.", file=sys.stderr)
        key = a.model_api_key
    else:
        key = from_env or None
    if key:
        deny_process_inspection()
    return key


def _read_key_file(path: str) -> str:
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"--model-api-key-file: cannot read {path!r}: {exc.strerror or exc}.",
                          field="--model-api-key-file") from None
    if len(raw) > _MAX_KEY_FILE_BYTES:
        raise ConfigError(f"--model-api-key-file: {path!r} is larger than {_MAX_KEY_FILE_BYTES} bytes; expected "
                          "a file holding only the key.", field="--model-api-key-file")
    try:
        key = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise ConfigError(f"--model-api-key-file: {path!r} is not UTF-8 text.", field="--model-api-key-file") from None
    if not key or any(c in key for c in "\r\n\0"):
        raise ConfigError(f"--model-api-key-file: {path!r} must hold the key alone on one line (it is "
                          f"{'empty' if not key else 'several lines'}).", field="--model-api-key-file")
    return key


def _analysis_arg(value: str | bool) -> bool | list[Any]:
    if not isinstance(value, str):  # the flag left out: its default, False
        return False
    if value.strip().lower() in ("all", "true"):
        return True
    return [v.strip() for v in value.split(",") if v.strip()]


def _stdout_closed() -> int:
    """The reader of our stdout went away (``| head``): stop quietly."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _cmd_report(a: argparse.Namespace) -> int:
    from .report import write_report

    out = a.out
    if out is None:
        out = str(Path(a.run_dir) / "report.html") if a.format == "html" else "-"
    try:
        written = write_report(a.run_dir, a.format, out, trajectories=not a.no_trajectories, max_chars=a.max_chars)
        sys.stdout.flush()
    except BrokenPipeError:
        return _stdout_closed()
    if written is not None:
        print(f"report written to {written}", file=sys.stderr)
    return 0


def _cmd_compare(a: argparse.Namespace) -> int:
    from .compare import compare_runs, write_json, write_text

    cmp = compare_runs(a.run_dirs)
    try:
        if a.format == "json":
            write_json(cmp, sys.stdout)
        else:
            write_text(cmp, sys.stdout, max_tasks=a.max_tasks)
        sys.stdout.flush()
    except BrokenPipeError:
        return _stdout_closed()
    return 0


def _cmd_launch(a: argparse.Namespace) -> int:
    from .api import launch
    from .specs import parse_orchestration

    raw = load_spec_file(a.spec)
    if a.progress and isinstance(raw, dict):
        raw["progress"] = a.progress
    # a spec file is checked whole before anything runs: a misspelt or mistyped field in any request is exit 2,
    # not hours of the other requests followed by a failed one (the SDK's launch() runs the valid ones)
    result = launch(parse_orchestration(raw))
    for o in result.outcomes:
        _print_outcome(o)
    print(f"launch {result.status} in {result.duration_s:.2f}s")
    return EXIT_OK if result.status == "completed" else EXIT_FAILED


def _cmd_list(a: argparse.Namespace) -> int:
    from .registry import Registries

    regs = Registries(a.recipe_dir or [])
    registry = regs[LIST_KINDS[a.kind]]  # type: ignore[index]
    for name in registry.names():
        if registry.kind == "benchmark":  # with what it measures
            try:
                dimension = registry.resolve(name).dimension
            except ConfigError as exc:  # a third party's entry that does not load: listed, with why
                dimension = f"(cannot load: {exc})"
            print(f"{name}\t{dimension}")
        else:
            print(name)
    return 0


def _read_run_json(path: Path) -> dict[str, Any]:
    """A run directory's JSON file as a dict; a ConfigError naming the file if it is unreadable or corrupt."""
    try:
        doc = json.loads(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"Cannot read {str(path)!r}: {exc.strerror or exc}.", field="run_dir") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{str(path)!r} is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}): "
                          f"the file is corrupt or was cut short (disk full, or the run was killed while "
                          f"writing it).", field="run_dir") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{str(path)!r} is not valid JSON (not UTF-8 text: {exc.reason}): the file is corrupt.",
                          field="run_dir") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{str(path)!r} is not a run summary: expected a JSON object, got "
                          f"{type(doc).__name__}.", field="run_dir")
    return doc


def _escaped(value: Any) -> Any:
    """``value`` with control characters in every string (keys too) shown as ``\\xNN``: run text from task ids
    and errors must not drive the terminal."""
    from .report import escape_controls

    if isinstance(value, str):
        return escape_controls(value)
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    return value


def _dict_field(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def _cmd_show(a: argparse.Namespace) -> int:
    import time

    from rich.console import Console
    from rich.table import Table

    run_dir = Path(a.run_dir)
    summary_path = run_dir / "summary.json"
    info_path = run_dir / "run_info.json"
    if not summary_path.is_file() and not info_path.is_file():
        raise ConfigError(f"{a.run_dir!r} is not a run directory (no summary.json or run_info.json).",
                          field="run_dir")
    from .rundata import run_liveness

    in_progress = not summary_path.is_file()
    doc = _escaped(_read_run_json(info_path if in_progress else summary_path))
    status = doc.get("status")
    _, stale = run_liveness(status if isinstance(status, str) else None, doc)
    console = Console()
    table = Table(title=f"{doc.get('benchmark')} / {doc.get('harness')} / {doc.get('model')} "
                        f"({doc.get('run_id')}): {'stale' if stale else status}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in _dict_field(doc, "metrics").items():
        table.add_row(k, f"{v:.4f}" if isinstance(v, float) else str(v))
    for k, v in _dict_field(doc, "counts").items():
        table.add_row(f"count: {k}", str(v))
    for k, v in _dict_field(doc, "errors_by_kind").items():
        table.add_row(f"error: {k}", str(v))
    console.print(table)
    if in_progress:
        stamp = doc.get("updated_at") or doc.get("started_at")
        when = (f", last updated {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(stamp))}"
                if isinstance(stamp, (int, float)) else "")
        pid = doc.get("pid")
        owner = f"its process {pid}" if isinstance(pid, int) else "the process that ran it"
        why = (f"run_info.json says running, but {owner} is gone: the run was killed before it could finish"
               if stale else "the run is in progress, or stopped before writing it")
        console.print(f"no summary.json yet ({why}): showing run_info.json{when}.", soft_wrap=True, highlight=False,
                      markup=False)
        if doc.get("error"):
            console.print(f"error: {doc['error']}", soft_wrap=True, highlight=False, markup=False)
    cats = _dict_field(doc, "by_category")
    if cats:
        ct = Table(title="by category")
        ct.add_column("category")
        rows = {c: m for c, m in cats.items() if isinstance(m, dict)}
        keys = sorted({k for m in rows.values() for k in m if not k.endswith("_ci")})  # intervals: see report
        for k in keys:
            ct.add_column(k, justify="right")
        for c, m in rows.items():
            ct.add_row(c, *[f"{m[k]:.3f}" if isinstance(m.get(k), float) else str(m.get(k, "")) for k in keys])
        console.print(ct)
    return 0


def _cmd_cleanup(a: argparse.Namespace) -> int:
    import asyncio

    from .environments.docker.sweep import sweep_orphans

    report = asyncio.run(sweep_orphans(run_id=a.run_id, only_dead=not a.all))
    print(f"removed {len(report.containers)} container(s) and {len(report.networks)} network(s)")
    skipped = {"their run is still alive": report.skipped_alive, "kept by keep_environment": report.skipped_kept,
               "they belong to another host": report.skipped_foreign}
    for why, n in skipped.items():
        if n:
            print(f"left {n}: {why} (--all removes them too)")
    for err in report.errors:
        print(f"error: {err}", file=sys.stderr)
    return 1 if report.errors else 0


def _cmd_view(a: argparse.Namespace) -> int:
    from .viewer.server import run_viewer

    return run_viewer(a.path, host=a.host, port=a.port, open_browser=not a.no_open)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``agentcompass`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve-scripted"]:
        from .models.scripted.server import serve_scripted_main

        return serve_scripted_main(argv[1:])
    if argv[:2] == ["images", "build-base"]:
        from .environments.docker.images import build_base_main

        return build_base_main(argv[2:])
    args = build_parser().parse_args(argv)
    handlers = {"run": _cmd_run, "evaluate": _cmd_evaluate, "rescore": _cmd_rescore, "launch": _cmd_launch,
                "list": _cmd_list, "show": _cmd_show, "cleanup": _cmd_cleanup, "view": _cmd_view,
                "report": _cmd_report, "compare": _cmd_compare}
    try:
        return handlers[args.command](args)
    except AgentCompassError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
