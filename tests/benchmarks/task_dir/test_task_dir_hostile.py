"""Hostile task folders (issue 27): links leaving a task folder, huge files, out-of-range or deeply nested
``task.toml`` values, a ``WORKDIR`` that is not a plain absolute path, link loops in a dataset, and a verifier
that writes a deeply nested or huge ``reward.json``. Each is refused when the benchmark loads, naming the task
and the file or field; a hostile reward is the attempt's failure, never an engine error."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.task_dir.benchmark import TaskDir, find_tasks, reward_of
from agentcompass.interfaces import ComponentContext

SECRET = "host-secret-marker"


def _ctx(tmp_path: Path) -> ComponentContext:
    return ComponentContext(run_id="t", data_dir=str(tmp_path / "data"), environment="docker")


def write_task(root: Path, name: str) -> Path:
    """A small valid Harbor-format task at ``root/name``."""
    d = root / name
    for sub in ("environment", "tests", "solution"):
        (d / sub).mkdir(parents=True)
    (d / "instruction.md").write_text(f"Task {name}: create /app/done.txt.\n")
    (d / "task.toml").write_text('[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 120.0\n')
    (d / "environment" / "Dockerfile").write_text("FROM agentcompass/base:debian-bookworm\nWORKDIR /app\n")
    (d / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (d / "solution" / "solve.sh").write_text("#!/bin/bash\necho ok > /app/done.txt\n")
    return d


def _load(root: Path, tmp_path: Path) -> TaskDir:
    return TaskDir({"path": str(root)}, _ctx(tmp_path))


def _secret(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.txt").write_text(SECRET)
    return outside


# ----------------------------------------------------------------------------- links leaving the folder


@pytest.mark.parametrize("target", ["secret", "/etc/passwd"])
def test_an_instruction_linked_outside_the_task_is_refused_naming_task_and_file(tmp_path: Path, target: str) -> None:
    root = tmp_path / "tasks"
    d = write_task(root, "t1")
    (d / "instruction.md").unlink()
    (d / "instruction.md").symlink_to(_secret(tmp_path) / "secret.txt" if target == "secret" else target)
    with pytest.raises(ConfigError, match=r"task 't1': instruction.md .*leads outside the task folder") as err:
        _load(root, tmp_path)
    assert SECRET not in str(err.value)


@pytest.mark.parametrize("where", ["solution/data.txt", "tests/fixture.txt", "environment/vendor.txt",
                                   "solution/linked-dir", "environment/Dockerfile", "task.toml"])
def test_a_shipped_file_linked_outside_the_task_is_refused_naming_it(tmp_path: Path, where: str) -> None:
    root = tmp_path / "tasks"
    d = write_task(root, "t1")
    outside = _secret(tmp_path)
    link = d / where
    if link.exists():
        link.unlink()
    link.symlink_to(outside if where.endswith("-dir") else outside / "secret.txt")
    with pytest.raises(ConfigError, match=rf"task 't1': {where} .*leads outside the task folder"):
        _load(root, tmp_path)


def test_links_inside_the_task_folder_are_followed(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    d = write_task(root, "t1")
    (d / "docs").mkdir()
    (d / "docs" / "prompt.md").write_text("The prompt, kept in docs/.\n")
    (d / "instruction.md").unlink()
    (d / "instruction.md").symlink_to("docs/prompt.md")
    (d / "solution" / "helper.sh").symlink_to("solve.sh")
    bench = _load(root, tmp_path)
    [spec] = bench.load_tasks()
    assert spec.input["instruction"] == "The prompt, kept in docs/.\n"
    solution = bench.reference_solution(spec)
    assert solution is not None and solution.files["helper.sh"] == solution.files["solve.sh"]


# ----------------------------------------------------------------------------- sizes


def _sparse(path: Path, size: int) -> None:
    with path.open("wb") as f:
        f.truncate(size)


@pytest.mark.parametrize(("where", "cap"), [("instruction.md", "MAX_INSTRUCTION_BYTES"),
                                            ("tests/big.bin", "MAX_FILE_BYTES"),
                                            ("solution/big.bin", "MAX_FILE_BYTES"),
                                            ("environment/big.bin", "MAX_FILE_BYTES")])
def test_a_huge_task_file_is_refused_naming_it_and_the_cap(tmp_path: Path, where: str, cap: str) -> None:
    root = tmp_path / "tasks"
    d = write_task(root, "t1")
    _sparse(d / where, 300 << 20)  # sparse: no disk used, but read whole it is 300 MB of memory
    with pytest.raises(ConfigError, match=rf"task 't1': {where} is larger than (\d+) bytes") as err:
        _load(root, tmp_path)
    from agentcompass.benchmarks.task_dir import files as task_dir_files
    assert f"larger than {getattr(task_dir_files, cap)} bytes" in str(err.value)


def test_the_tests_are_shipped_from_a_spooled_archive_not_memory(tmp_path: Path) -> None:
    from agentcompass.benchmarks.task_dir.files import tree_archive

    d = write_task(tmp_path, "t1")
    (d / "tests" / "data").mkdir()
    (d / "tests" / "data" / "fixture.txt").write_text("fixture\n")
    with tree_archive(d, "tests", "t1") as archive:
        assert archive.size > 0 and archive.file.fileno() >= 0
        with tarfile.open(fileobj=archive.rewind(), mode="r:") as tf:
            names = sorted(tf.getnames())
            fixture = tf.extractfile("data/fixture.txt")
            assert fixture is not None and fixture.read() == b"fixture\n"
    assert names == ["data", "data/fixture.txt", "test.sh"]


# ----------------------------------------------------------------------------- task.toml bounds


def _with_toml(tmp_path: Path, text: str) -> Path:
    root = tmp_path / "tasks"
    d = write_task(root, "t1")
    (d / "task.toml").write_text(text)
    return root


@pytest.mark.parametrize(("toml", "field"), [
    ("[agent]\ntimeout_sec = 1e300\n", r"\[agent\] timeout_sec"),
    ("[agent]\ntimeout_sec = inf\n", r"\[agent\] timeout_sec"),
    ("[agent]\ntimeout_sec = nan\n", r"\[agent\] timeout_sec"),
    ("[agent]\ntimeout_sec = -5\n", r"\[agent\] timeout_sec"),
    ("[verifier]\ntimeout_sec = 1e300\n", r"\[verifier\] timeout_sec"),
    ("[environment]\ncpus = 1e300\n", r"\[environment\] cpus"),
    ("[environment]\ncpus = nan\n", r"\[environment\] cpus"),
    ("[environment]\nmemory_mb = 1e300\n", r"\[environment\] memory_mb"),
    ('[environment]\nmemory = "99999999t"\n', r"\[environment\] memory"),
    ("[environment]\nstorage_mb = 1e300\n", r"\[environment\] storage_mb"),
    ("[environment]\nstorage_mb = -1\n", r"\[environment\] storage_mb"),
])
def test_out_of_range_numbers_in_task_toml_are_refused_naming_the_field(tmp_path: Path, toml: str,
                                                                         field: str) -> None:
    with pytest.raises(ConfigError, match=rf"task 't1': {field} in task.toml must be"):
        _load(_with_toml(tmp_path, toml), tmp_path)


@pytest.mark.parametrize("name", ["A B", "1X", "A=B", "", "PATH\nX"])
def test_verifier_env_names_that_are_not_identifiers_are_refused(tmp_path: Path, name: str) -> None:
    toml = '[verifier]\n[verifier.env]\n"' + name.replace("\n", "\\n") + '" = "x"\n'
    with pytest.raises(ConfigError, match=r"task 't1': \[verifier\] env in task.toml: .* is not a variable name"):
        _load(_with_toml(tmp_path, toml), tmp_path)


@pytest.mark.parametrize("toml", [
    "[metadata]\nx = " + "[" * 5000 + "]" * 5000 + "\n",
    "[metadata]\nx = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n",
    "[" + ".".join(["a"] * 5000) + "]\n",
    "[metadata]\nx = " + "[" * 200 + "]" * 200 + "\n",
])
def test_a_deeply_nested_task_toml_is_refused(tmp_path: Path, toml: str) -> None:
    with pytest.raises(ConfigError, match=r"task 't1': task.toml is nested deeper than"):
        _load(_with_toml(tmp_path, toml), tmp_path)


def test_brackets_inside_toml_strings_are_not_nesting(tmp_path: Path) -> None:
    toml = ('[metadata]\nnote = "' + "[" * 300 + '"\nlit = \'' + "{" * 300 + "'\nml = \"\"\"\n" + "[" * 300
            + '\n"""\n# ' + "[" * 300 + "\ntags = [[1, 2], [3]]\n")
    bench = _load(_with_toml(tmp_path, toml), tmp_path)
    [spec] = bench.load_tasks()
    assert spec.metadata["note"] == "[" * 300 and spec.metadata["tags"] == [[1, 2], [3]]


@pytest.mark.parametrize("workdir", ["//tests", "//logs/verifier", "app", "/app/./x", "/app/../app", "/$HOME",
                                     "/app//x"])
def test_a_workdir_that_is_not_a_plain_absolute_path_is_refused(tmp_path: Path, workdir: str) -> None:
    root = tmp_path / "tasks"
    d = write_task(root, "t1")
    (d / "environment" / "Dockerfile").write_text(f"FROM agentcompass/base:debian-bookworm\nWORKDIR {workdir}\n")
    with pytest.raises(ConfigError, match=r"task 't1': environment/Dockerfile WORKDIR .* is refused"):
        _load(root, tmp_path)


# ----------------------------------------------------------------------------- link loops


def test_a_link_to_an_ancestor_lists_each_task_once(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    write_task(root, "t1")
    write_task(root / "group", "t2")
    (root / "group" / "back").symlink_to(root)          # a folder linked to an ancestor
    (root / "group" / "again").symlink_to("../group")   # and to itself
    assert [t.task_id for t in find_tasks(root)] == ["group/t2", "t1"]


def test_two_folders_linked_to_each_other_list_each_task_once(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    write_task(root / "a", "ta")
    write_task(root / "b", "tb")
    (root / "a" / "to-b").symlink_to("../b")
    (root / "b" / "to-a").symlink_to("../a")
    (root / "x").symlink_to("y")
    (root / "y").symlink_to("x")  # a loop of links (ELOOP)
    assert [t.task_id for t in find_tasks(root)] == ["a/ta", "b/tb"]


# ----------------------------------------------------------------------------- the verifier's reward


def test_a_deeply_nested_reward_json_is_a_failure_with_a_reason() -> None:
    with pytest.raises(ValueError, match="reward.json is nested too deeply"):
        reward_of("", "[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="reward.json is nested too deeply"):
        reward_of("", '{"reward": 1, "details": ' + "[" * 100_000 + "]" * 100_000 + "}")


def test_a_huge_reward_file_is_a_failure_with_a_reason() -> None:
    with pytest.raises(ValueError, match=r"reward.json is larger than \d+ bytes"):
        reward_of("", '{"reward": 1, "pad": "' + "x" * (2 << 20) + '"}')
    with pytest.raises(ValueError, match=r"reward.txt is larger than \d+ bytes"):
        reward_of("1" + " " * (2 << 20), None)


@pytest.mark.parametrize(("js", "want"), [
    ('{"reward": 0.5, "details": {"passed": 3, "log": "ok"}}', 0.5),   # Harbor: the "reward" key
    ('{"a": 1, "b": 0, "note": "text", "flag": true}', 0.5),           # numbers only (Harbor drops the rest)
])
def test_harbor_reward_json_is_still_read(js: str, want: float) -> None:
    assert reward_of("", js) == want


def test_hostile_reward_files_in_a_container_are_read_bounded(tmp_path: Path) -> None:
    """What the verifier container holds is read through the environment's capped archive, never whole."""
    import asyncio

    from agentcompass.benchmarks.task_dir.benchmark import read_reward_file
    from agentcompass.environments._tar import ArchiveLimits, SpooledArchive, write_tree

    class Box:
        async def get_archive_file(self, path: str) -> SpooledArchive:
            archive = SpooledArchive()
            await asyncio.to_thread(write_tree, tmp_path / path.lstrip("/"), archive, ArchiveLimits())
            return archive

    (tmp_path / "r").mkdir()
    _sparse(tmp_path / "r" / "reward.json", 300 << 20)
    (tmp_path / "r" / "reward.txt").write_text("0.5\n")
    os.symlink("/etc/passwd", tmp_path / "r" / "link.txt")
    assert asyncio.run(read_reward_file(Box(), "/r/reward.txt")) == "0.5\n"
    assert asyncio.run(read_reward_file(Box(), "/r/none.txt")) is None
    with pytest.raises(ValueError, match=r"reward.json is larger than \d+ bytes"):
        asyncio.run(read_reward_file(Box(), "/r/reward.json"))
    with pytest.raises(ValueError, match="link.txt is not a regular file"):
        asyncio.run(read_reward_file(Box(), "/r/link.txt"))
