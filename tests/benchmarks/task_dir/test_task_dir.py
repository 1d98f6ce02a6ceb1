"""Task-directory benchmarks (Harbor format): the bundled tasks with the oracle and an empty agent in docker,
the tests and solution never in the agent's container, a task folder written here run as ``task_dir``, and
``terminal_bench`` / ``skillsbench`` downloaded from a local stand-in of the dataset repository's tarball."""

from __future__ import annotations

import io
import json
import tarfile
import time
import tomllib
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import pytest

import agentcompass
from agentcompass._errors import ConfigError
from agentcompass.benchmarks.task_dir.benchmark import (
    BundledTaskDir,
    SkillsBench,
    TaskDir,
    TerminalBench,
    find_tasks,
    reward_of,
)
from agentcompass.benchmarks.task_dir.source import MANIFEST, TasksDownloadError, download
from agentcompass.environments.docker.upload import check_member_names
from agentcompass.harnesses.base import Harness
from agentcompass.interfaces import ComponentContext, HarnessResult, Resources
from agentcompass.report import write_report
from tests.environments.conftest import (  # noqa: F401 - fixtures used by name
    _sweep_session_leftovers,
    base_image,
    docker_available,
    docker_run_id,
)

from ...standins.file_host import FileHost

BUNDLED = Path(agentcompass.__file__).parent / "benchmarks" / "task_dir" / "data"
TESTS_MARKER = "agentcompass-tests-marker"
SOLUTION_MARKER = "agentcompass-solution-marker"
#: the shell agent's one command in the probe: everything it can find of the tests or the solution
PROBE = ("for p in /tests /solution /logs/verifier; do [ -e $p ] && echo FOUND $p; done; "
         "grep -rlI --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -e agentcompass-tests-mark[e]r "
         "-e agentcompass-solution-mark[e]r / 2>/dev/null | sed 's/^/FOUND /'; echo SCAN-DONE")


class SolutionSeer(Harness):
    """A harness that is not the oracle: answers with what it was handed of the solution."""

    needs_environment: ClassVar[bool] = False

    async def run(self, task: Any, env: Any, model: Any, ctx: Any, log: Any) -> HarnessResult:
        return HarnessResult(final_answer=f"solution={ctx.solution!r}")


def _ctx(tmp_path: Path, **kw: Any) -> ComponentContext:
    return ComponentContext(run_id="t", data_dir=str(tmp_path / "data"), environment="docker", **kw)


def _details(run_dir: str) -> dict[str, Any]:
    return {p.stem: json.loads(p.read_bytes()) for p in (Path(run_dir) / "details").glob("*.json")}


def write_task(root: Path, name: str, *, reward: str = "1", solution: str = "echo ok > /app/done.txt\n",
               check: str = "/app/done.txt") -> None:
    """A small Harbor-format task at ``root/name``: the reward is ``reward`` when ``check`` exists, else 0."""
    d = root / name
    (d / "environment").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "solution").mkdir()
    (d / "instruction.md").write_text(f"Task {name}: create {check}.\n")
    (d / "task.toml").write_text('version = "1.0"\n\n[metadata]\ncategory = "standin"\n\n[verifier]\n'
                                 'timeout_sec = 60.0\n\n[agent]\ntimeout_sec = 120.0\n')
    (d / "environment" / "Dockerfile").write_text("FROM agentcompass/base:debian-bookworm\nWORKDIR /app\n")
    (d / "tests" / "test.sh").write_text(f"#!/bin/bash\nmkdir -p /logs/verifier\nif [ -f {check} ]; then "
                                         f"echo {reward} > /logs/verifier/reward.txt; else echo 0 > "
                                         f"/logs/verifier/reward.txt; fi\n")
    (d / "solution" / "solve.sh").write_text(f"#!/bin/bash\n{solution}")


def tarball(root: Path, top: str) -> bytes:
    """``root`` as a GitHub-style .tar.gz (everything under one top folder ``top``)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(root, arcname=top)
    return buf.getvalue()


# ----------------------------------------------------------------------------- without docker


def test_bundled_tasks_are_read_with_their_config() -> None:
    tasks = {t.task_id: t for t in find_tasks(BUNDLED)}
    assert sorted(tasks) == ["fix-calc", "git-release", "hello-file", "sales-report", "word-stats"]
    assert tasks["hello-file"].workdir == "/app" and tasks["hello-file"].recipe is not None
    assert tasks["hello-file"].image.startswith("agentcompass/task-dir:hello-file-")
    assert tasks["sales-report"].verifier_env == {"REPORT": "/app/report.csv"}
    assert tasks["fix-calc"].agent_timeout == 600.0 and tasks["fix-calc"].verifier_timeout == 60.0
    assert tasks["word-stats"].category == "data-processing"
    for t in tasks.values():  # every task has a marked test and solution (the absence probe looks for them)
        assert TESTS_MARKER in (t.root / "tests" / "test.sh").read_text()
        assert SOLUTION_MARKER in (t.root / "solution" / "solve.sh").read_text()


def test_what_the_agent_gets_holds_nothing_of_tests_or_solution(tmp_path: Path) -> None:
    bench = BundledTaskDir({}, _ctx(tmp_path))
    for spec in bench.load_tasks():
        prepared = msgspec.json.encode(bench.prepare(spec.public())).decode()
        assert TESTS_MARKER not in prepared and SOLUTION_MARKER not in prepared
        assert "/tests" not in prepared and "solution" not in prepared
        solution = bench.reference_solution(spec)  # only the engine asks, and only for an oracle harness
        assert solution is not None and SOLUTION_MARKER.encode() in solution.files["solve.sh"]


def test_oracle_is_declared_on_the_bases() -> None:
    from agentcompass.benchmarks.shell_tasks.benchmark import ShellTasks
    from agentcompass.harnesses.none import NoneHarness
    from agentcompass.harnesses.oracle import Oracle
    from agentcompass.harnesses.shell_agent import ShellAgent

    assert Oracle.oracle and not ShellAgent.oracle and not NoneHarness.oracle
    assert ShellTasks.dimension == "coding" and SkillsBench.dimension == "productivity"
    with pytest.raises(TypeError, match="dimension"):
        type("Bad", (TaskDir,), {"dimension": "vibes"})


def test_list_benchmarks_shows_each_dimension(capsys: pytest.CaptureFixture[str]) -> None:
    from agentcompass.cli import main

    assert main(["list", "benchmarks"]) == 0
    rows = dict(line.split("\t") for line in capsys.readouterr().out.splitlines())
    assert rows["terminal_bench"] == "coding" and rows["skillsbench"] == "productivity"
    assert rows["task_dir"] == "coding" and rows["shell_tasks"] == "coding"


@pytest.mark.parametrize(("txt", "js", "want"), [
    ("1\n", None, 1.0), ("0.25", None, 0.25), ("", '{"reward": 0.5}', 0.5), ("", '{"a": 1, "b": 0}', 0.5),
    ("", "0.75", 0.75)])
def test_reward_files_are_read(txt: str, js: str | None, want: float) -> None:
    assert reward_of(txt, js) == want


@pytest.mark.parametrize(("txt", "js"), [("", None), ("1.5", None), ("nan", None), ("", '{"x": "y"}')])
def test_a_missing_or_out_of_range_reward_is_refused(txt: str, js: str | None) -> None:
    with pytest.raises(ValueError):
        reward_of(txt, js)


def test_task_dir_without_a_folder_names_what_to_provide(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"give `path`, or put the task folders in .*task_dir"):
        TaskDir({}, _ctx(tmp_path))
    with pytest.raises(ConfigError, match="use environment 'docker'"):
        TaskDir({"path": str(BUNDLED)}, ComponentContext(environment="local"))


@pytest.mark.parametrize("cls", [TerminalBench, SkillsBench])
def test_offline_without_a_local_copy_fails_fast_naming_what_to_provide(tmp_path: Path, cls: type[TaskDir]) -> None:
    started = time.monotonic()
    # nothing listens on port 1 of 127.0.0.1: the download fails at once, as it does with no network
    with pytest.raises(ConfigError) as err:
        cls({"url": "http://127.0.0.1:1/tasks.tar.gz"}, _ctx(tmp_path))
    assert time.monotonic() - started < 15
    text = str(err.value)
    assert "`path`" in text and cls.repository in text and "git clone" in text  # type: ignore[attr-defined]
    assert err.value.field == "benchmark.params.path"
    with pytest.raises(ConfigError, match="downloading is off"):
        cls({"download": False}, _ctx(tmp_path))
    assert not list((tmp_path / "data").rglob("*.partial-*"))


def test_download_is_cached_atomically_and_reused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_task(repo, "task-a")
    write_task(repo, "task-b")
    (repo / "README.md").write_text("not a task\n")
    with FileHost() as host:
        host.files["/laude-institute/terminal-bench-2/tar.gz/main"] = tarball(repo, "terminal-bench-2-main")
        url = host.url + "/laude-institute/terminal-bench-2/tar.gz/main"
        bench = TerminalBench({"url": url}, _ctx(tmp_path))
        assert [t.task_id for t in bench.load_tasks()] == ["task-a", "task-b"]
        again = TerminalBench({"url": url, "download": False}, _ctx(tmp_path))
        assert len(host.requests) == 1  # the second found the cache
    assert [t.task_id for t in again.load_tasks()] == ["task-a", "task-b"]
    assert bench.source.kind == "download" and bench.source.repo == url
    (folder,) = [p.parent for p in (tmp_path / "data" / "terminal_bench").glob(f"*/{MANIFEST}")]
    assert (folder / "task-a" / "tests" / "test.sh").is_file()


@pytest.mark.parametrize("workdir", ["/", "/logs", "/logs/verifier/x", "/tests", "/tests/sub", "/logs/../tests"])
def test_a_workdir_holding_or_under_the_verifiers_folders_is_refused(tmp_path: Path, workdir: str) -> None:
    write_task(tmp_path, "bad")
    (tmp_path / "bad" / "environment" / "Dockerfile").write_text(f"FROM agentcompass/base:debian-bookworm\n"
                                                                 f"WORKDIR {workdir}\n")
    with pytest.raises(ConfigError, match=r"WORKDIR .* is refused"):
        TaskDir({"path": str(tmp_path)}, _ctx(tmp_path))


@pytest.mark.parametrize(("table", "want"), [
    ("cpus = 2\nmemory_mb = 1024\nstorage_mb = 4096\n", Resources(cpus=2.0, memory_bytes=1 << 30)),
    ('memory = "2G"\n', Resources(memory_bytes=2 << 30)),
    ("cpus = 0.5\n", Resources(cpus=0.5)),
    ("storage_mb = 4096\n", None),
    ("", None),
])
def test_a_tasks_cpus_and_memory_reach_what_its_environments_are_opened_with(
        tmp_path: Path, table: str, want: Resources | None) -> None:
    write_task(tmp_path, "t")
    with (tmp_path / "t" / "task.toml").open("a") as f:
        f.write("\n[environment]\n" + table)
    bench = TaskDir({"path": str(tmp_path)}, _ctx(tmp_path))
    [spec] = bench.load_tasks()
    assert bench.prepare(spec.public()).resources == want
    assert {k: spec.metadata[k] for k in ("cpus", "memory_mb", "storage_mb") if k in spec.metadata} == \
        {k: v for k, v in tomllib.loads(table).items() if k != "memory"}


@pytest.mark.parametrize(("table", "named"), [
    ("cpus = 0\n", "cpus"), ('cpus = "two"\n', "cpus"), ("memory_mb = -1\n", "memory_mb"),
    ("memory_mb = 1\n", "memory"), ('memory = "lots"\n', "memory"), ("memory_mb = true\n", "memory_mb"),
])
def test_bad_resources_in_task_toml_are_refused_naming_the_key(tmp_path: Path, table: str, named: str) -> None:
    write_task(tmp_path, "t")
    with (tmp_path / "t" / "task.toml").open("a") as f:
        f.write("\n[environment]\n" + table)
    with pytest.raises(ConfigError, match=rf"task 't': \[environment\] {named}"):
        TaskDir({"path": str(tmp_path)}, _ctx(tmp_path))


def test_the_bundled_tasks_ask_for_what_their_task_toml_says() -> None:
    bench = BundledTaskDir({}, ComponentContext(run_id="t"))
    prepared = {s.task_id: bench.prepare(s.public()) for s in bench.load_tasks()}
    assert prepared["hello-file"].resources == Resources(cpus=1.0, memory_bytes=512 << 20)


def _tar_of(*members: tuple[str, str, str]) -> bytes:
    """A tar of (kind, name, link target or content) members, kind ``file``, ``sym`` or ``hard``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for kind, name, arg in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(arg)
                tar.addfile(info, io.BytesIO(arg.encode()))
                continue
            info.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
            info.linkname = arg
            tar.addfile(info)
    return buf.getvalue()


@pytest.mark.parametrize("members", [
    [("sym", "here", "."), ("file", "here/verifier/reward.txt", "1")],
    [("sym", "./here", "."), ("file", "./here/x", "1")],
    [("sym", "logs", "/logs"), ("file", "logs/verifier/reward.txt", "1")],
    [("hard", "hl", "../etc/passwd")],
    [("hard", "hl", "/etc/passwd")],
], ids=["beneath-a-link", "beneath-a-dotted-link", "beneath-an-absolute-link", "hard-climbs", "hard-absolute"])
def test_the_docker_archive_check_refuses_links_leaving_the_target(members: list[tuple[str, str, str]]) -> None:
    with pytest.raises(ConfigError, match="link"):
        check_member_names(_tar_of(*members))


def test_the_docker_archive_check_keeps_links_nothing_is_written_through() -> None:
    # symlinks land in the container as links (a workspace's virtualenv has absolute ones)
    check_member_names(_tar_of(("file", "a.txt", "x"), ("sym", "b", "a.txt"), ("sym", "sub/c", "../a.txt"),
                                ("hard", "d", "a.txt"), ("sym", "logs", "/logs"), ("sym", "up", "../.."),
                                ("sym", "venv/bin/python", "/usr/bin/python3")))


def test_a_trickling_download_ends_at_its_deadline(tmp_path: Path) -> None:
    with FileHost() as host:
        host.files["/slow.tar.gz"] = b"x" * 200
        host.drip["/slow.tar.gz"] = 0.3  # a byte every 0.3 s: never a 30 s pause, 60 s for the whole
        started = time.monotonic()
        with pytest.raises(TasksDownloadError, match="deadline"):
            download(host.url + "/slow.tar.gz", tmp_path / "cache", deadline=2.0)
        assert time.monotonic() - started < 10
    assert not (tmp_path / "cache").exists() and not list(tmp_path.glob(".partial-*"))


def test_a_cancelled_download_stops_without_waiting_for_bytes(tmp_path: Path) -> None:
    import threading

    cancelled = threading.Event()
    with FileHost() as host:
        host.files["/stuck.tar.gz"] = b"x" * 200
        host.stall_after["/stuck.tar.gz"] = 10
        threading.Timer(0.5, cancelled.set).start()
        started = time.monotonic()
        with pytest.raises(TasksDownloadError, match="cancelled"):
            download(host.url + "/stuck.tar.gz", tmp_path / "cache", cancelled=cancelled)
        assert time.monotonic() - started < 10


def test_the_urls_credentials_and_query_never_reach_disk_or_logs(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    repo = tmp_path / "repo"
    write_task(repo, "task-a")
    with FileHost() as host:
        host.files["/tb.tar.gz?token=qsecret-123"] = tarball(repo, "tb-main")
        url = host.url.replace("http://", "http://someone:pw-secret-456@") + "/tb.tar.gz?token=qsecret-123"
        with caplog.at_level("DEBUG"):
            bench = TerminalBench({"url": url}, _ctx(tmp_path))
    assert [t.task_id for t in bench.load_tasks()] == ["task-a"]
    assert bench.source.repo == host.url + "/tb.tar.gz?<redacted>"
    assert {"pw-secret-456", "token=qsecret-123"} <= set(bench.secrets())  # the engine masks them everywhere
    on_disk = b"".join(p.read_bytes() for p in (tmp_path / "data").rglob(MANIFEST))
    for secret in ("pw-secret-456", "qsecret-123", "someone"):
        assert secret not in caplog.text and secret.encode() not in on_disk
    again = TerminalBench({"url": url, "download": False}, _ctx(tmp_path))  # the cache is still found
    assert [t.task_id for t in again.load_tasks()] == ["task-a"]


# ----------------------------------------------------------------------------- docker


def _run(benchmark: str, harness: str, tmp_path: Path, run_id: str, **kw: Any) -> Any:
    out = agentcompass.run_evaluation(benchmark, harness, "scripted", "docker", run_id=run_id,
                                      results_dir=str(tmp_path / "results"), progress="none", task_concurrency=2,
                                      data_dir=str(tmp_path / "data"), **kw)
    return out


@pytest.mark.timeout(1800)
def test_bundled_tasks_pass_with_the_oracle_and_fail_with_an_empty_agent(tmp_path: Path, base_image: str,  # noqa: F811
                                                                          docker_run_id: str) -> None:  # noqa: F811
    out = _run("task_dir_local", "oracle", tmp_path, docker_run_id)
    assert not out.errors_by_kind, _details(out.paths.run_dir)
    assert out.metrics["graded_tasks"] == 5 and out.metrics["pass@1"] == 1.0 and out.metrics["mean_score"] == 1.0
    summary = json.loads((Path(out.paths.run_dir) / "summary.json").read_bytes())
    assert summary["dimension"] == "coding" and "by_dimension" not in summary  # compare groups runs by it
    report = tmp_path / "report.md"
    write_report(out.paths.run_dir, "md", report)
    assert "| dimension | coding |" in report.read_text()
    # an agent that submits at once: graded, and nothing earns any reward (partial-credit tasks included)
    empty = _run("task_dir_local", "shell_agent", tmp_path, docker_run_id + "-empty", overwrite=True,
                 model_params={"script": [{"match": "", "turns": ["<submit></submit>"]}], "bundled": False})
    assert not empty.errors_by_kind, _details(empty.paths.run_dir)
    assert empty.metrics["graded_tasks"] == 5 and empty.metrics["pass@1"] == 0.0
    assert empty.metrics["mean_score"] == 0.0


@pytest.mark.timeout(1800)
def test_tests_and_solution_are_absent_from_the_agents_container(tmp_path: Path, base_image: str,  # noqa: F811
                                                                 docker_run_id: str) -> None:  # noqa: F811
    script = [{"match": "", "turns": [f"```bash\n{PROBE}\n```", "<submit></submit>"]}]
    out = _run("task_dir_local", "shell_agent", tmp_path, docker_run_id,
               benchmark_params={"sample_ids": ["hello-file", "git-release"]},
               model_params={"script": script, "bundled": False})
    assert not out.errors_by_kind and out.metrics["graded_tasks"] == 2
    for task_id, detail in _details(out.paths.run_dir).items():
        steps = detail["attempts"]["1"]["trajectory"]["steps"]
        observed = "\n".join(s.get("observation") or "" for s in steps)
        assert "SCAN-DONE" in observed, (task_id, observed)
        assert "FOUND" not in observed and "marker" not in observed, (task_id, observed)
        # the verifier did run the tests (it wrote a reward and found no greeting / repository)
        assert detail["attempts"]["1"]["extra"]["reward"] == 0.0
    # the control: the same probe does see a /tests folder and a marked file that the image itself holds
    root = tmp_path / "data" / "task_dir"
    write_task(root, "planted")
    (root / "planted" / "environment" / "Dockerfile").write_text(
        "FROM agentcompass/base:debian-bookworm\nWORKDIR /app\n"
        "RUN mkdir -p /tests && echo 'agentcompass-tests-marker planted' > /tests/planted.txt\n")
    control = _run("task_dir", "shell_agent", tmp_path, docker_run_id + "-control",
                   model_params={"script": script, "bundled": False})
    steps = _details(control.paths.run_dir)["planted"]["attempts"]["1"]["trajectory"]["steps"]
    observed = "\n".join(s.get("observation") or "" for s in steps)
    assert "FOUND /tests" in observed and "FOUND /tests/planted.txt" in observed, observed


@pytest.mark.timeout(1800)
def test_a_harness_that_is_not_the_oracle_is_never_handed_the_solution(tmp_path: Path, base_image: str,  # noqa: F811
                                                                       docker_run_id: str) -> None:  # noqa: F811
    out = _run("task_dir_local", f"{__name__}:SolutionSeer", tmp_path, docker_run_id,
               benchmark_params={"sample_ids": ["hello-file"]})
    assert not out.errors_by_kind, _details(out.paths.run_dir)
    detail = _details(out.paths.run_dir)["hello-file"]["attempts"]["1"]
    assert detail["final_answer"] == "solution=None" and detail["score"] == 0.0


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.timeout(1800)
def test_a_task_folder_written_here_runs_as_task_dir(tmp_path: Path, base_image: str,  # noqa: F811
                                                     docker_run_id: str) -> None:  # noqa: F811
    """Two tasks written out by hand, the way Terminal-Bench 2.0 tasks look: not by ``write_task``."""
    root = tmp_path / "data" / "task_dir"
    # 1: a Dockerfile with WORKDIR /workspace, a Python test file run by test.sh, [verifier] env, reward.json
    t = root / "text" / "count-words"
    _write(t / "instruction.md", "Count the words of /workspace/words.txt into /workspace/count.txt.\n")
    _write(t / "task.toml", 'version = "1.0"\n[metadata]\nauthor_name = "someone else"\ncategory = "text"\n'
                            '[verifier]\ntimeout_sec = 90.0\n[verifier.env]\nEXPECTED = "4"\n'
                            '[agent]\ntimeout_sec = 200.0\n[environment]\ncpus = 1\nmemory_mb = 1024\n')
    _write(t / "environment" / "Dockerfile", "FROM agentcompass/base:debian-bookworm\nRUN mkdir -p /workspace\n"
                                             "WORKDIR /workspace\nCOPY words.txt /workspace/words.txt\n")
    _write(t / "environment" / "words.txt", "one two\nthree four\n")
    _write(t / "tests" / "test.sh", '#!/usr/bin/env bash\nset -u\necho "memory limit $(cat /sys/fs/cgroup/memory.max '
                                    '2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"\n'
                                    'python3 -I /tests/test_outputs.py\n')
    _write(t / "tests" / "test_outputs.py", '''import json
import os
from pathlib import Path


def test_count_exists():
    return Path("/workspace/count.txt").is_file()


def test_count_is_right():
    return test_count_exists() and Path("/workspace/count.txt").read_text().strip() == os.environ["EXPECTED"]


results = {name: float(fn()) for name, fn in sorted(globals().items()) if name.startswith("test_")}
Path("/logs/verifier/reward.json").write_text(json.dumps(results))
''')
    _write(t / "solution" / "solve.sh", "#!/usr/bin/env bash\nwc -w < /workspace/words.txt | tr -d ' ' "
                                        "> /workspace/count.txt\n")
    # 2: a prebuilt image (no environment/ at all), the default /app, a reward.json of {"reward": ...}
    u = root / "prebuilt"
    _write(u / "instruction.md", "Write ok to /app/out.txt.\n")
    _write(u / "task.toml", '[environment]\ndocker_image = "agentcompass/base:debian-bookworm"\n')
    _write(u / "tests" / "test.sh", "#!/bin/sh\nmkdir -p /logs/verifier\nif grep -qx ok /app/out.txt; then r=1; "
                                    "else r=0; fi\nprintf '{\"reward\": %s}' $r > /logs/verifier/reward.json\n")
    _write(u / "solution" / "solve.sh", "#!/bin/sh\nmkdir -p /app && echo ok > /app/out.txt\n")
    tasks = {t.task_id: t for t in find_tasks(root)}
    assert tasks["text/count-words"].workdir == "/workspace" and tasks["prebuilt"].recipe is None
    out = _run("task_dir", "oracle", tmp_path, docker_run_id)
    assert not out.errors_by_kind, _details(out.paths.run_dir)
    assert out.metrics["graded_tasks"] == 2 and out.metrics["pass@1"] == 1.0
    details = {d["task_id"]: d["attempts"]["1"] for d in _details(out.paths.run_dir).values()}
    assert details["text/count-words"]["score"] == 1.0 and details["prebuilt"]["score"] == 1.0
    # the task's memory_mb became its containers' limit (the verifier's here); the other task asked for none
    assert f"memory limit {1024 << 20}\n" in details["text/count-words"]["extra"]["test_output"]
    # and the empty agent earns nothing on either
    empty = _run("task_dir", "shell_agent", tmp_path, docker_run_id + "-empty",
                 model_params={"script": [{"match": "", "turns": ["<submit></submit>"]}], "bundled": False})
    assert not empty.errors_by_kind and empty.metrics["mean_score"] == 0.0, _details(empty.paths.run_dir)


CALC_CHEAT = """import os, sys
try:
    open("/logs/verifier/reward.txt", "w").write("1")
except OSError:
    pass
print(1)
sys.stdout.flush()
os._exit(0)
"""
#: shadows the grader's ``import json`` when /app (its working directory) is on Python's path
JSON_CHEAT = 'print(\'{"reward": 1}\')\nraise SystemExit(0)\n'


@pytest.mark.timeout(1800)
def test_cheats_on_the_bundled_tasks_score_zero(tmp_path: Path, base_image: str,  # noqa: F811
                                               docker_run_id: str) -> None:  # noqa: F811
    script = [
        {"match": "parse_duration", "turns": [f"```bash\ncat > /app/calc.py <<'EOF'\n{CALC_CHEAT}EOF\n```",
                                              "<submit></submit>"]},
        {"match": "stats.json", "turns": [f"```bash\ncat > /app/json.py <<'EOF'\n{JSON_CHEAT}EOF\n"
                                          f"cp /app/json.py /app/stats.json\n```", "<submit></submit>"]},
    ]
    out = _run("task_dir_local", "shell_agent", tmp_path, docker_run_id,
               benchmark_params={"sample_ids": ["fix-calc", "word-stats"]},
               model_params={"script": script, "bundled": False})
    assert not out.errors_by_kind, _details(out.paths.run_dir)
    details = {d["task_id"]: d["attempts"]["1"] for d in _details(out.paths.run_dir).values()}
    for task_id in ("fix-calc", "word-stats"):
        observed = "\n".join(s.get("observation") or "" for s in details[task_id]["trajectory"]["steps"])
        assert details[task_id]["score"] == 0.0, (task_id, observed, details[task_id]["extra"])


def _hostile(root: Path, name: str, *, test: str, solution: str = "true\n", dockerfile: str = "",
             verifier_timeout: float = 60.0, agent_timeout: float = 120.0) -> None:
    write_task(root, name, solution=solution)
    (root / name / "tests" / "test.sh").write_text(f"#!/bin/bash\nmkdir -p /logs/verifier\n{test}")
    (root / name / "task.toml").write_text(f"[verifier]\ntimeout_sec = {verifier_timeout}\n"
                                           f"[agent]\ntimeout_sec = {agent_timeout}\n")
    if dockerfile:
        (root / name / "environment" / "Dockerfile").write_text(
            f"FROM agentcompass/base:debian-bookworm\nWORKDIR /app\n{dockerfile}")


@pytest.mark.timeout(1800)
def test_the_verifier_distrusts_what_the_agent_could_have_left(tmp_path: Path, base_image: str,  # noqa: F811
                                                                docker_run_id: str) -> None:  # noqa: F811
    root = tmp_path / "data" / "task_dir"
    # the agent's code (run by the tests) writes a reward, then hangs or gets itself killed
    _hostile(root, "hang", test="echo 1 > /logs/verifier/reward.txt\nsleep 600\n", verifier_timeout=5)
    _hostile(root, "killed", test="echo 1 > /logs/verifier/reward.txt\nkill -KILL $$\n")
    # what the agent deleted stays deleted
    _hostile(root, "junk", dockerfile="RUN echo junk > /app/junk.txt\n", solution="rm /app/junk.txt\n",
             test="if [ -e /app/keep.txt ] && [ ! -e /app/junk.txt ]; then echo 1; else echo 0; fi "
                  "> /logs/verifier/reward.txt\n")
    (root / "junk" / "environment" / "Dockerfile").write_text(
        "FROM agentcompass/base:debian-bookworm\nWORKDIR /app\nRUN echo junk > /app/junk.txt && echo k > "
        "/app/keep.txt\n")
    # a link to the verifier's reward folder, and a reward planted through it in the agent's container: the
    # verifier's /logs/verifier is made afresh after the workspace lands, so nothing planted counts
    _hostile(root, "planted", test="true\n",
             solution="mkdir -p /logs/verifier && ln -s /logs /app/logs && echo 1 > /app/logs/verifier/reward.txt\n")
    # a workspace over the archive caps is not graded against the image's originals
    _hostile(root, "truncated", solution="head -c 3000000 /dev/zero > /app/big.bin\n",
             test="echo 1 > /logs/verifier/reward.txt\n")
    out = _run("task_dir", "oracle", tmp_path, docker_run_id,
               environment_params={"archive_file_limit_bytes": 1_000_000})
    details = {d["task_id"]: d["attempts"]["1"] for d in _details(out.paths.run_dir).values()}
    assert details["hang"]["score"] == 0.0 and "timed out" in details["hang"]["extra"]["reward_error"], details
    assert details["hang"]["extra"]["timed_out"] is True
    assert details["killed"]["score"] == 0.0 and "died (exit 137)" in details["killed"]["extra"]["reward_error"]
    assert details["junk"]["score"] == 1.0, details["junk"]
    assert details["planted"]["status"] == "completed" and details["planted"]["score"] == 0.0, details["planted"]
    assert details["truncated"]["status"] == "eval_error", details["truncated"]
    assert "not taken whole" in details["truncated"]["error"] and "big.bin" in details["truncated"]["error"]


@pytest.mark.timeout(1800)
def test_a_hostile_reward_file_is_the_attempts_failure_not_an_engine_error(tmp_path: Path, base_image: str,  # noqa: F811
                                                                           docker_run_id: str) -> None:  # noqa: F811
    root = tmp_path / "data" / "task_dir"
    # the verifier's output is hostile (the agent's code runs in it): a reward.json nested 100,000 deep, and one
    # of 300 MB (sparse), are graded as failures with the reason, never an eval_error
    _hostile(root, "deep", test="python3 -c \"print('[' * 100000 + ']' * 100000)\" > /logs/verifier/reward.json\n")
    _hostile(root, "huge", test="python3 -c \"open('/logs/verifier/reward.json', 'wb').truncate(300 << 20)\"\n")
    _hostile(root, "harbor", test="echo '{\"reward\": 1.0, \"details\": {\"passed\": 3}}' > "
                                  "/logs/verifier/reward.json\n")
    out = _run("task_dir", "oracle", tmp_path, docker_run_id)
    details = {d["task_id"]: d["attempts"]["1"] for d in _details(out.paths.run_dir).values()}
    assert not out.errors_by_kind, details
    assert details["deep"]["status"] == "completed" and details["deep"]["score"] == 0.0, details["deep"]
    assert "nested too deeply" in details["deep"]["extra"]["reward_error"]
    assert details["huge"]["status"] == "completed" and details["huge"]["score"] == 0.0, details["huge"]
    assert "reward.json is larger than" in details["huge"]["extra"]["reward_error"]
    assert details["harbor"]["score"] == 1.0, details["harbor"]


@pytest.mark.timeout(1800)
def test_the_tasks_agent_timeout_bounds_the_attempt(tmp_path: Path, base_image: str,  # noqa: F811
                                                     docker_run_id: str) -> None:  # noqa: F811
    root = tmp_path / "data" / "task_dir"
    _hostile(root, "budget", test="echo 0 > /logs/verifier/reward.txt\n", agent_timeout=5)
    script = [{"match": "", "turns": ["```bash\nsleep 300\n```", "<submit></submit>"]}]
    out = _run("task_dir", "shell_agent", tmp_path, docker_run_id,
               model_params={"script": script, "bundled": False}, harness_params={"agent_timeout": 600})
    attempt = _details(out.paths.run_dir)["budget"]["attempts"]["1"]
    assert attempt["error_kind"] == "agent_timeout", attempt
    assert attempt["meta"]["agent_timeout_from"] == "task" and attempt["meta"]["agent_timeout_s"] == 5.0
    assert attempt["meta"]["agent_s"] < 60 and attempt["score"] == 0.0  # graded, not waited out


@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("cls", "top", "under"), [(TerminalBench, "terminal-bench-2-main", ""),
                                                    (SkillsBench, "skillsbench-main", "tasks/")])
def test_downloaded_from_a_standin_cached_and_run_with_the_oracle(tmp_path: Path, base_image: str,  # noqa: F811
                                                                  docker_run_id: str, cls: Any, top: str,  # noqa: F811
                                                                  under: str) -> None:
    repo = tmp_path / "repo"
    write_task(repo / under, "first-task")
    write_task(repo / under, "second-task", solution="mkdir -p /app/out && echo 2 > /app/out/two\n",
               check="/app/out/two")
    (repo / "README.md").write_text("dataset readme\n")
    path = f"/{cls.repository}/tar.gz/main?token=tok-secret-789"
    with FileHost() as host:
        host.files[path] = tarball(repo, top)
        out = _run(cls.name, "oracle", tmp_path, docker_run_id, benchmark_params={"url": host.url + path})
        assert host.requests == [path]
    for written in Path(out.paths.run_dir).rglob("*"):  # params.json, the logs, the details: all masked
        if written.is_file():
            assert b"tok-secret-789" not in written.read_bytes(), written
    assert not out.errors_by_kind, _details(out.paths.run_dir)
    assert out.metrics["graded_tasks"] == 2 and out.metrics["pass@1"] == 1.0
    assert sorted(d["task_id"] for d in _details(out.paths.run_dir).values()) == [f"{under}first-task",
                                                                             f"{under}second-task"]
    assert list((tmp_path / "data" / cls.name).glob(f"*/{MANIFEST}"))
