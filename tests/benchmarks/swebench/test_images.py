"""Official image names and the git history hygiene run in the agent's container."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agentcompass.benchmarks.swebench.images import history_hygiene_script, official_image


def test_official_image_name_replaces_double_underscore_and_lowercases() -> None:
    assert official_image("astropy__astropy-12907") == "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest"
    assert official_image("Django__Django-1", namespace="mirror.local/sb", tag="v2") == \
        "mirror.local/sb/sweb.eval.x86_64.django_1776_django-1:v2"


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "HOME": str(repo.parent), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()


def test_hygiene_leaves_no_commit_after_the_base_reachable(tmp_path: Path) -> None:
    repo = tmp_path / "testbed"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / "a.py").write_text("x = 2  # the fix\n")
    _git(repo, "commit", "-qam", "the fix")
    future = _git(repo, "rev-parse", "HEAD")
    _git(repo, "tag", "v2")
    _git(repo, "branch", "feature")
    _git(repo, "remote", "add", "origin", "https://example.invalid/repo.git")

    proc = subprocess.run(["bash", "-c", history_hygiene_script(base, str(repo))], capture_output=True, text=True,
                          env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin:/usr/local/bin"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert _git(repo, "rev-parse", "HEAD") == base
    assert _git(repo, "log", "--all", "--format=%H").split() == [base]
    assert _git(repo, "remote") == ""
    assert _git(repo, "tag") == ""
    gone = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", future], capture_output=True)
    assert gone.returncode != 0, "the fix commit is still in the object store"
    assert (repo / "a.py").read_text() == "x = 1\n"
