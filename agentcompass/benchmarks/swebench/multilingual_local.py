"""The bundled offline SWE-bench Multilingual instances (``swebench_multilingual`` with ``local: true``) and the
Docker build recipe of their images.

Each instance is a real-format bug fix in a small non-Python project whose source Debian packages (a Go library
from its ``golang-*-dev`` package): the base tree is ``multilingual_data/repos/<instance_id>.tar.gz``,
the fix the gold ``patch``, the test added with it the ``test_patch``. The image is
``agentcompass/base:debian-bookworm`` plus the language's Debian toolchain (installed with apt from the image's
Debian mirror), the base tree in ``/testbed`` as a git repo of one deterministic commit (its hash is the row's
``base_commit``), and the row's ``install`` commands run there (for Go: compiling the packages and their tests,
so the eval needs no compile cache warm-up). Go runs offline (``GOPROXY=off``): the projects need no modules.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from ..._errors import ConfigError
from .local_instances import BASE_IMAGE, SETUP_REPO_SCRIPT, TESTBED, cached_context, safe_tag

IMAGE_REPOSITORY = "agentcompass/swebench-multilingual-local"
#: bumped whenever the Dockerfile or the setup script change meaning (it is part of the context hash)
RECIPE_VERSION = "1"
#: language -> (Debian packages of its toolchain, environment of the image)
TOOLCHAINS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "Go": (("golang-go", "ca-certificates"), {"GOPROXY": "off", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local",
                                              "CGO_ENABLED": "0", "GOPATH": "/root/go"}),
}
#: fields every bundled row has, with their types
FIELDS: dict[str, type] = {
    "instance_id": str, "repo": str, "base_commit": str, "problem_statement": str, "patch": str,
    "test_patch": str, "FAIL_TO_PASS": list, "PASS_TO_PASS": list, "version": str,
    "environment_setup_commit": str, "created_at": str, "hints_text": str, "test_cmd": list, "log_parser": str,
    "language": str, "install": list, "source": str,
}

_DATA_PACKAGE = "agentcompass.benchmarks.swebench"
_DATA_DIR = "multilingual_data"


def _data_dir() -> Any:
    return resources.files(_DATA_PACKAGE).joinpath(_DATA_DIR)


def load_local_instances() -> list[dict[str, Any]]:
    """The bundled instances, one dict per row of ``instances.jsonl`` (SWE-bench fields plus ``test_cmd``,
    ``log_parser``, ``language``, ``install`` and ``source``)."""
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


def image_name(instance_id: str) -> str:
    """The local image of ``instance_id``: ``agentcompass/swebench-multilingual-local:<safe id>``."""
    return f"{IMAGE_REPOSITORY}:{safe_tag(instance_id)}"


def _toolchain(instance: dict[str, Any]) -> tuple[tuple[str, ...], dict[str, str]]:
    language = str(instance.get("language", ""))
    if language not in TOOLCHAINS:
        raise ConfigError(f"language: no toolchain recipe for {language!r} (known: {', '.join(TOOLCHAINS)})",
                          field="language")
    return TOOLCHAINS[language]


def dockerfile(instance: dict[str, Any], recipe_hash: str = "") -> str:
    """The Dockerfile of ``instance``'s image (its context: ``repo.tar.gz``, ``setup_repo.sh``). The toolchain
    comes first, so every instance of a language shares that layer."""
    iid = str(instance["instance_id"])
    packages, env = _toolchain(instance)
    install = [str(c) for c in instance.get("install") or []]
    labels = [f"agentcompass.image={json.dumps('swebench-multilingual-local')}",
              f"agentcompass.benchmarks.swebench.instance_id={json.dumps(iid)}"]
    if recipe_hash:
        labels.append(f"agentcompass.recipe_hash={json.dumps(recipe_hash)}")
    env_line = " ".join(f"{k}={json.dumps(v)}" for k, v in env.items())
    steps = "".join(f"    {cmd}; \\\n" for cmd in install)
    return f"""\
FROM {BASE_IMAGE}
RUN set -eu; export DEBIAN_FRONTEND=noninteractive; \\
    apt-get update -q; \\
    apt-get install -y -q --no-install-recommends {" ".join(packages)}; \\
    rm -rf /var/lib/apt/lists/*
ENV {env_line}
COPY repo.tar.gz setup_repo.sh /tmp/swebench-setup/
RUN set -eu; \\
    bash /tmp/swebench-setup/setup_repo.sh /tmp/swebench-setup/repo.tar.gz {TESTBED}; \\
    rm -rf /tmp/swebench-setup; \\
    git config --global user.name "SWE-bench local"; \\
    git config --global user.email swebench-local@agentcompass.invalid; \\
    git config --global --add safe.directory {TESTBED}; \\
    cd {TESTBED}; \\
{steps}    test -z "$(git status --porcelain)"
LABEL {" ".join(labels)}
WORKDIR {TESTBED}
"""


def recipe_hash(instance: dict[str, Any]) -> str:
    """A content hash of everything the build context holds (the tree, the Dockerfile, the setup script)."""
    h = hashlib.sha256()
    for part in (RECIPE_VERSION, dockerfile(instance), SETUP_REPO_SCRIPT):
        h.update(part.encode())
        h.update(b"\0")
    h.update(hashlib.sha256(repo_tarball(str(instance["instance_id"]))).digest())
    return h.hexdigest()


def prepare_build_context(instance: dict[str, Any], dest_dir: str | os.PathLike[str]) -> None:
    """Write the Docker build context of ``instance``'s image into ``dest_dir`` (created if missing)."""
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "repo.tar.gz").write_bytes(repo_tarball(str(instance["instance_id"])))
    (dest / "setup_repo.sh").write_text(SETUP_REPO_SCRIPT, encoding="utf-8")
    (dest / "Dockerfile").write_text(dockerfile(instance, recipe_hash(instance)), encoding="utf-8")


def recipe(instance: dict[str, Any], cache_dir: str | os.PathLike[str]) -> tuple[str, str]:
    """``(image name with the recipe hash in its tag, build context dir)`` of ``instance``, the context prepared
    once under ``cache_dir`` in a directory named by its content hash (written aside, then renamed)."""
    iid = str(instance["instance_id"])
    digest = recipe_hash(instance)
    context = cached_context(Path(cache_dir), iid, digest, lambda tmp: prepare_build_context(instance, tmp))
    return f"{image_name(iid)}-{digest[:12]}", str(context)
