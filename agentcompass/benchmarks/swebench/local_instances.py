"""The bundled offline SWE-bench instances (``swebench_local``) and the Docker build recipe of their images.

Each instance is a real bug fix from a small pure-Python project, taken from two consecutive sdists on PyPI:
the older release is the base tree (``local_data/repos/<instance_id>.tar.gz``), the fix is the gold
``patch`` and the test added with it the ``test_patch``. The image is ``agentcompass/base:debian-bookworm``
plus the base tree in ``/testbed`` as a git repo of one deterministic commit (its hash is the row's
``base_commit``), the instance's ``pythonpath`` dirs on ``sys.path`` (what ``pip install -e .`` would give),
and pytest with its pure-Python dependencies copied from this host, so building needs no network.
Nothing of the gold patch or the test patch is in the image.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from ..._errors import ConfigError, EnvironmentError_

IMAGE_REPOSITORY = "agentcompass/swebench-local"
BASE_IMAGE = "agentcompass/base:debian-bookworm"
#: the image's Python (Debian bookworm's python3); pytest is copied from a host of the same minor version
IMAGE_PYTHON = (3, 11)
IMAGE_SITE_PACKAGES = "/usr/local/lib/python3.11/dist-packages"
TESTBED = "/testbed"
#: bumped whenever the Dockerfile or the setup script change meaning (it is part of the context hash)
RECIPE_VERSION = "2"

#: the fixed identity and date of the one commit, so its hash is the same wherever the image is built
COMMIT_ENV = {
    "GIT_AUTHOR_NAME": "SWE-bench local",
    "GIT_AUTHOR_EMAIL": "swebench-local@agentcompass.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "SWE-bench local",
    "GIT_COMMITTER_EMAIL": "swebench-local@agentcompass.invalid",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
}
COMMIT_MESSAGE = "base commit"

#: ``bash setup_repo.sh REPO_TARBALL DEST``: unpack the tree into DEST and make its one commit; prints the hash.
#: Global and system git config are ignored so the hash depends on the tree alone (the unit tests run it on the
#: host and compare with ``base_commit``).
SETUP_REPO_SCRIPT = "#!/bin/bash\nset -euo pipefail\n" + "".join(
    f"export {k}={json.dumps(v)}\n" for k, v in COMMIT_ENV.items()) + f"""\
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
mkdir -p "$2"
tar -xzf "$1" -C "$2" --no-same-owner
cd "$2"
git init -q -b main
git add -A
git commit -q --no-verify --no-gpg-sign -m {json.dumps(COMMIT_MESSAGE)}
test "$(git rev-list --count HEAD)" = 1
git rev-parse HEAD
"""

#: fields every bundled row has, with their types
FIELDS: dict[str, type | tuple[type, ...]] = {
    "instance_id": str, "repo": str, "base_commit": str, "problem_statement": str, "patch": str,
    "test_patch": str, "FAIL_TO_PASS": list, "PASS_TO_PASS": list, "version": str,
    "environment_setup_commit": str, "created_at": str, "hints_text": str, "test_cmd": str, "log_parser": str,
    "source": str, "pythonpath": list,
}

_DATA_PACKAGE = "agentcompass.benchmarks.swebench"
_DATA_DIR = "local_data"
_TAG_BAD = re.compile(r"[^A-Za-z0-9_.-]")
_NATIVE_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")


def _data_dir() -> Any:
    return resources.files(_DATA_PACKAGE).joinpath(_DATA_DIR)


def load_local_instances() -> list[dict[str, Any]]:
    """The bundled instances, one dict per row of ``instances.jsonl`` (SWE-bench fields plus ``test_cmd``,
    ``log_parser``, ``source`` and ``pythonpath``)."""
    text = _data_dir().joinpath("instances.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def repo_tarball(instance_id: str) -> bytes:
    """The base tree of ``instance_id`` (a .tar.gz of files at the repository root, no .git)."""
    path = _data_dir().joinpath("repos", f"{instance_id}.tar.gz")
    if not path.is_file():
        known = ", ".join(i["instance_id"] for i in load_local_instances())
        raise ConfigError(f"instance_id: no bundled repo for {instance_id!r} (bundled: {known})",
                          field="instance_id")
    data: bytes = path.read_bytes()
    return data


def safe_tag(instance_id: str) -> str:
    """``instance_id`` as a Docker tag: ``[A-Za-z0-9_.-]``, not starting with ``.`` or ``-``, <= 115 chars
    (room for the recipe hash ``recipe`` appends; Docker allows 128)."""
    tag = _TAG_BAD.sub("-", instance_id).lstrip(".-")
    if not tag:
        raise ConfigError(f"instance_id: {instance_id!r} has no character usable in an image tag",
                          field="instance_id")
    if len(tag) > 115:
        tag = tag[:102] + "-" + hashlib.sha256(instance_id.encode()).hexdigest()[:12]
    return tag


def image_name(instance_id: str) -> str:
    """The local image of ``instance_id``: ``agentcompass/swebench-local:<safe id>``."""
    return f"{IMAGE_REPOSITORY}:{safe_tag(instance_id)}"


# ----------------------------------------------------------------------------- pytest from the host


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pytest_distributions() -> list[importlib.metadata.Distribution]:
    """pytest and every distribution it needs on Linux CPython 3.11, as installed on this host.

    Raises EnvironmentError_ when the host is not CPython 3.11, when pytest (or one of its dependencies)
    is missing, or when one of them is not pure Python.
    """
    if sys.implementation.name != "cpython" or sys.version_info[:2] != IMAGE_PYTHON:
        have = f"{sys.implementation.name} {sys.version_info[0]}.{sys.version_info[1]}"
        raise EnvironmentError_(
            f"swebench_local copies pytest from this host into images that run CPython "
            f"{IMAGE_PYTHON[0]}.{IMAGE_PYTHON[1]}, but this host runs {have}: run AgentCompass on CPython "
            f"{IMAGE_PYTHON[0]}.{IMAGE_PYTHON[1]} with `pip install pytest`")
    try:
        from packaging.requirements import Requirement  # a dependency of pytest itself
    except ImportError:
        raise EnvironmentError_("swebench_local needs pytest on this host: pip install pytest") from None
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = ["pytest"]
    while todo:
        name = _canonical(todo.pop())
        if name in found:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise EnvironmentError_(f"swebench_local needs {name} on this host (for pytest in the images): "
                                    f"pip install {name}") from None
        found[name] = dist
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return [found[k] for k in sorted(found)]


def _copy_distribution(dist: importlib.metadata.Distribution, site: Path) -> None:
    name = dist.metadata["Name"]
    files = dist.files
    if not files:
        raise EnvironmentError_(f"{name} on this host has no file list (RECORD): reinstall it with "
                                f"`pip install --force-reinstall {name}`")
    for rel in files:
        parts = Path(rel).parts
        if not parts or parts[0] == ".." or Path(rel).is_absolute() or "__pycache__" in parts:
            continue  # console scripts and byte code
        if str(rel).endswith(_NATIVE_SUFFIXES):
            raise EnvironmentError_(f"{name} {dist.version} on this host is not pure Python ({rel}); "
                                    f"swebench_local copies it into the images: `pip install --force-reinstall "
                                    f"--no-binary {name} {name}` or use a host with its pure-Python wheel")
        src = Path(str(dist.locate_file(rel)))
        if not src.is_file():
            continue
        dest = site.joinpath(*parts)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)


def _write_console_scripts(dists: list[importlib.metadata.Distribution], bin_dir: Path) -> None:
    """The distributions' console scripts (``pytest``, ``py.test``...) as small launchers for the image."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for dist in dists:
        for ep in dist.entry_points.select(group="console_scripts"):
            head = ep.attr.split(".")[0]
            path = bin_dir / ep.name
            path.write_text(f"#!/usr/bin/python3\nimport sys\nfrom {ep.module} import {head}\n"
                            f"sys.exit({ep.attr}())\n", encoding="utf-8")
            path.chmod(0o755)


# ----------------------------------------------------------------------------- build context


def _pythonpath(instance: dict[str, Any]) -> list[str]:
    dirs = instance.get("pythonpath") or ["."]
    out = []
    for d in dirs:
        if not isinstance(d, str) or d.startswith("/") or ".." in Path(d).parts or "\n" in d:
            raise ConfigError(f"pythonpath: {d!r} must be a relative directory inside the repository",
                              field="pythonpath")
        out.append(os.path.normpath(f"{TESTBED}/{d}"))
    return out


def dockerfile(instance: dict[str, Any], recipe_hash: str = "") -> str:
    """The Dockerfile of ``instance``'s image (its context: ``site-packages/``, ``bin/``, ``repo.tar.gz``,
    ``setup_repo.sh``)."""
    iid = str(instance["instance_id"])
    pth = "\\n".join(_pythonpath(instance))
    labels = [f"agentcompass.image={json.dumps('swebench-local')}",
              f"agentcompass.benchmarks.swebench.instance_id={json.dumps(iid)}"]
    if recipe_hash:
        labels.append(f"agentcompass.recipe_hash={json.dumps(recipe_hash)}")
    return f"""\
FROM {BASE_IMAGE}
LABEL {" ".join(labels)}
COPY site-packages/ {IMAGE_SITE_PACKAGES}/
COPY bin/ /usr/local/bin/
COPY repo.tar.gz setup_repo.sh /tmp/swebench-setup/
RUN set -eu; \\
    test "$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "{IMAGE_PYTHON[0]}.{IMAGE_PYTHON[1]}"; \\
    bash /tmp/swebench-setup/setup_repo.sh /tmp/swebench-setup/repo.tar.gz {TESTBED}; \\
    rm -rf /tmp/swebench-setup; \\
    printf '{pth}\\n' > {IMAGE_SITE_PACKAGES}/agentcompass-testbed.pth; \\
    git config --global user.name "SWE-bench local"; \\
    git config --global user.email swebench-local@agentcompass.invalid; \\
    git config --global --add safe.directory {TESTBED}; \\
    python3 -m compileall -q {IMAGE_SITE_PACKAGES} >/dev/null; \\
    pytest --version >/dev/null
WORKDIR {TESTBED}
"""


def recipe_hash(instance: dict[str, Any]) -> str:
    """A content hash of everything the build context holds (the tree, the Dockerfile, the setup script,
    the pytest distributions by name and version)."""
    h = hashlib.sha256()
    for part in (RECIPE_VERSION, dockerfile(instance), SETUP_REPO_SCRIPT,
                 *(f"{d.metadata['Name']}=={d.version}" for d in pytest_distributions())):
        h.update(part.encode())
        h.update(b"\0")
    h.update(hashlib.sha256(repo_tarball(str(instance["instance_id"]))).digest())
    return h.hexdigest()


def prepare_build_context(instance: dict[str, Any], dest_dir: str | os.PathLike[str]) -> None:
    """Write the Docker build context of ``instance``'s image into ``dest_dir`` (created if missing):
    ``Dockerfile``, ``repo.tar.gz`` (the base tree), ``setup_repo.sh``, ``site-packages/`` (pytest and
    its dependencies from this host) and ``bin/`` (their console scripts)."""
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    dists = pytest_distributions()
    site = dest / "site-packages"
    if site.exists():
        shutil.rmtree(site)
    site.mkdir()
    for dist in dists:
        _copy_distribution(dist, site)
    if (dest / "bin").exists():
        shutil.rmtree(dest / "bin")
    _write_console_scripts(dists, dest / "bin")
    (dest / "repo.tar.gz").write_bytes(repo_tarball(str(instance["instance_id"])))
    (dest / "setup_repo.sh").write_text(SETUP_REPO_SCRIPT, encoding="utf-8")
    (dest / "Dockerfile").write_text(dockerfile(instance, recipe_hash(instance)), encoding="utf-8")


def cached_context(cache: Path, instance_id: str, digest: str, prepare: Callable[[Path], None]) -> Path:
    """The build context ``<cache>/<tag>-<digest[:16]>``, prepared by ``prepare`` once: written to a temporary
    directory and renamed into place, so concurrent writers and later calls find it whole."""
    context = cache / f"{safe_tag(instance_id)}-{digest[:16]}"
    if not (context / "Dockerfile").is_file():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{safe_tag(instance_id)}-", dir=cache))
        try:
            prepare(tmp)
            try:
                os.rename(tmp, context)
            except OSError:
                if not (context / "Dockerfile").is_file():  # not a concurrent writer that got there first
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return context


def recipe(instance: dict[str, Any], cache_dir: str | os.PathLike[str]) -> tuple[str, str]:
    """``(image name with the recipe hash in its tag, build context dir)`` of ``instance``. The context is
    prepared once under ``cache_dir`` in a directory named by its content hash (written to a temporary
    directory and renamed into place), so a later call with the same content reuses it."""
    iid = str(instance["instance_id"])
    digest = recipe_hash(instance)
    context = cached_context(Path(cache_dir), iid, digest, lambda tmp: prepare_build_context(instance, tmp))
    # The tag carries the recipe's hash: a changed recipe (new data, another pytest) builds a new image
    # instead of silently reusing a stale one.
    return f"{image_name(iid)}-{digest[:12]}", str(context)
