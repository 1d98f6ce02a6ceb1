"""The bundled ``swebench_local`` instances and their image recipe, checked without Docker: the rows are
well-formed SWE-bench rows, the base trees rebuild ``base_commit`` exactly and hold nothing of the fix, and the
build context carries a working pytest and nothing of the patches."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from agentcompass.benchmarks.swebench.local_instances import (
    BASE_IMAGE,
    FIELDS,
    IMAGE_REPOSITORY,
    SETUP_REPO_SCRIPT,
    image_name,
    load_local_instances,
    prepare_build_context,
    pytest_distributions,
    recipe,
    repo_tarball,
    safe_tag,
)
from tests.benchmarks.swebench.conftest import needs_host_py311

INSTANCES = load_local_instances()
IDS = [i["instance_id"] for i in INSTANCES]
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)
_TEST_FILE = re.compile(r"(^|/)tests?/|(^|/)test_[^/]*\.py$|(^|/)conftest\.py$")
_GIT_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_NOSYSTEM": "1"}


def _files(patch: str) -> list[str]:
    pairs = _DIFF_FILE.findall(patch)
    assert pairs, "not a git diff"
    assert all(a == b for a, b in pairs)
    return [b for _, b in pairs]


def _git(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, text=True,
                          env={**_GIT_ENV, "HOME": str(repo.parent)}, timeout=60)


def _base_tree(instance: dict[str, Any], tmp_path: Path) -> Path:
    """The instance's repo as the image has it, made by the same setup script on this host."""
    tarball = tmp_path / "repo.tar.gz"
    tarball.write_bytes(repo_tarball(instance["instance_id"]))
    script = tmp_path / "setup_repo.sh"
    script.write_text(SETUP_REPO_SCRIPT)
    repo = tmp_path / "testbed"
    proc = subprocess.run(["bash", str(script), str(tarball), str(repo)], capture_output=True, text=True,
                          env={**_GIT_ENV, "HOME": str(tmp_path)}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return repo


def test_there_are_four_instances_from_three_projects() -> None:
    assert len(INSTANCES) >= 4
    assert len(set(IDS)) == len(IDS)
    assert len({i["repo"] for i in INSTANCES}) >= 3


@pytest.mark.parametrize("instance", INSTANCES, ids=IDS)
def test_row_has_every_swebench_field_with_its_type(instance: dict[str, Any]) -> None:
    for field, typ in FIELDS.items():
        assert isinstance(instance.get(field), typ), field
    owner, project = instance["repo"].split("/")
    assert re.fullmatch(rf"{re.escape(owner)}__{re.escape(project)}-\d+", instance["instance_id"])
    assert re.fullmatch(r"[0-9a-f]{40}", instance["base_commit"])
    assert instance["environment_setup_commit"] == instance["base_commit"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", instance["created_at"])
    assert instance["test_cmd"] == "pytest -rA -p no:cacheprovider" and instance["log_parser"] == "pytest"
    assert instance["hints_text"] == "" and len(instance["problem_statement"]) > 200
    assert re.fullmatch(r"[a-z0-9_.-]+-\d+(\.\d+)+", instance["source"])
    assert instance["FAIL_TO_PASS"] and not set(instance["FAIL_TO_PASS"]) & set(instance["PASS_TO_PASS"])
    for test in instance["FAIL_TO_PASS"] + instance["PASS_TO_PASS"]:
        assert isinstance(test, str) and "::" in test and " " not in test


@pytest.mark.parametrize("instance", INSTANCES, ids=IDS)
def test_gold_patch_touches_only_source_and_test_patch_only_tests(instance: dict[str, Any]) -> None:
    source, tests = _files(instance["patch"]), _files(instance["test_patch"])
    assert all(f.endswith(".py") and not _TEST_FILE.search(f) for f in source), source
    assert all(_TEST_FILE.search(f) for f in tests), tests
    # every graded test lives in a file the test patch touches (those are the files the eval runs)
    for test in instance["FAIL_TO_PASS"] + instance["PASS_TO_PASS"]:
        assert test.split("::")[0] in tests


@pytest.mark.parametrize("instance", INSTANCES, ids=IDS)
def test_problem_statement_does_not_quote_the_fix(instance: dict[str, Any]) -> None:
    added = [line[1:].strip() for line in instance["patch"].splitlines()
             if line.startswith("+") and not line.startswith("+++") and len(line.strip()) > 12]
    assert added
    assert not any(line in instance["problem_statement"] for line in added)


def test_tarballs_are_small_and_hold_only_the_tree() -> None:
    sizes = []
    for iid in IDS:
        data = repo_tarball(iid)
        sizes.append(len(data))
        assert len(data) < 200_000, iid
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            names = tar.getnames()
            assert all(m.isfile() or m.isdir() for m in tar.getmembers())
        assert names and not any(n.startswith(("/", "..")) or ".." in n.split("/") for n in names)
        assert not any(part in (".git", "__pycache__") for n in names for part in n.split("/"))
        assert not any(n.endswith((".pyc", ".patch", ".diff", ".orig", ".rej")) for n in names)
    assert sum(sizes) < 1_000_000


@pytest.mark.parametrize("instance", INSTANCES, ids=IDS)
def test_base_tree_rebuilds_base_commit_and_holds_nothing_of_the_fix(instance: dict[str, Any],
                                                                     tmp_path: Path) -> None:
    repo = _base_tree(instance, tmp_path)
    assert _git(repo, "rev-parse", "HEAD").stdout.strip() == instance["base_commit"]
    assert _git(repo, "rev-list", "--all", "--count").stdout.strip() == "1"
    assert _git(repo, "status", "--porcelain").stdout == ""
    for patch in (instance["patch"], instance["test_patch"]):
        assert _git(repo, "apply", "--check", "-", stdin=patch).returncode == 0
        # not already applied: the reverse does not apply
        assert _git(repo, "apply", "--check", "-R", "-", stdin=patch).returncode != 0
    # both together apply too (the grading order: test patch, then the model's patch)
    assert _git(repo, "apply", "-", stdin=instance["test_patch"]).returncode == 0
    assert _git(repo, "apply", "--check", "-", stdin=instance["patch"]).returncode == 0


def test_image_names_are_valid_docker_references() -> None:
    ref = re.compile(r"[a-z0-9]+(?:[._/-][a-z0-9]+)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
    for iid in IDS:
        assert image_name(iid) == f"{IMAGE_REPOSITORY}:{iid}" and ref.fullmatch(image_name(iid))
    assert ref.fullmatch(image_name("--Weird id/with:colons!" + "x" * 300))
    assert safe_tag("a/b:c") == "a-b-c"


@needs_host_py311
def test_pytest_distributions_are_pytest_and_its_dependencies() -> None:
    names = {d.metadata["Name"].lower() for d in pytest_distributions()}
    assert {"pytest", "pluggy", "iniconfig", "packaging"} <= names
    assert "pytest-asyncio" not in names and "agentcompass" not in names


@needs_host_py311
def test_build_context_copies_pytest_and_the_tree_but_nothing_of_the_patches(tmp_path: Path) -> None:
    instance = INSTANCES[0]
    ctx = tmp_path / "ctx"
    prepare_build_context(instance, ctx)
    dockerfile = (ctx / "Dockerfile").read_text()
    assert dockerfile.startswith(f"FROM {BASE_IMAGE}\n")
    copied = [src for line in dockerfile.splitlines() if line.startswith(("COPY", "ADD"))
              for src in line.split()[1:-1]]
    assert copied and set(copied) <= {"site-packages/", "bin/", "repo.tar.gz", "setup_repo.sh"}, copied
    assert not any(line.startswith("ADD") for line in dockerfile.splitlines())
    assert (ctx / "repo.tar.gz").read_bytes() == repo_tarball(instance["instance_id"])
    assert "WORKDIR /testbed" in dockerfile
    # nothing of the gold or test patch anywhere in the context's own files
    for name in ("Dockerfile", "setup_repo.sh"):
        text = (ctx / name).read_text()
        assert instance["patch"] not in text and instance["test_patch"] not in text
        assert "diff --git" not in text
    assert not [p for p in ctx.rglob("*") if p.suffix in (".patch", ".diff")]
    assert os.access(ctx / "bin" / "pytest", os.X_OK)

    # the copied site-packages alone run pytest (no site-packages of this host: -I -S)
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "test_ok.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    site = ctx / "site-packages"
    code = (f"import sys; sys.path.insert(0, {str(site)!r}); import pytest; "
            f"assert pytest.__file__.startswith({str(site)!r}), pytest.__file__; "
            f"sys.exit(pytest.main())")
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code, "-rA", "-p", "no:cacheprovider", "test_ok.py"],
                          cwd=tmp_path / "t", capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASSED test_ok.py::test_ok" in proc.stdout


@needs_host_py311
def test_recipe_prepares_the_context_once_per_content(tmp_path: Path) -> None:
    first, second = INSTANCES[0], INSTANCES[1]
    image, ctx = recipe(first, tmp_path)
    assert image.startswith(image_name(first["instance_id"]) + "-") and len(image.rsplit("-", 1)[1]) == 12
    dockerfile = Path(ctx) / "Dockerfile"
    stamp = dockerfile.stat().st_mtime_ns
    assert recipe(first, tmp_path) == (image, ctx)
    assert dockerfile.stat().st_mtime_ns == stamp
    other_image, other_ctx = recipe(second, tmp_path)
    assert other_image != image and other_ctx != ctx
    # only the two contexts remain: the temporary directories were renamed into place
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([Path(ctx).name, Path(other_ctx).name])


@pytest.mark.skipif(sys.version_info[:2] == (3, 11), reason="the refusal is for hosts other than CPython 3.11")
def test_on_another_python_the_image_build_is_refused_naming_the_python_to_use() -> None:
    from agentcompass._errors import EnvironmentError_
    from agentcompass.benchmarks.swebench.local_instances import pytest_distributions

    with pytest.raises(EnvironmentError_, match=r"run AgentCompass on CPython 3\.11"):
        pytest_distributions()
