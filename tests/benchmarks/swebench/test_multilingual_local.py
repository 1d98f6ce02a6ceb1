"""The bundled ``swebench_multilingual`` (``local``) instances and their image recipe, without Docker: the rows
are well-formed, the base tree rebuilds ``base_commit`` exactly, the gold and test patches apply to it (and are
not in it), and the recipe is cached by content and names its toolchain."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench.local_instances import SETUP_REPO_SCRIPT
from agentcompass.benchmarks.swebench.multilingual_local import (
    FIELDS,
    IMAGE_REPOSITORY,
    dockerfile,
    load_local_instances,
    recipe,
    repo_tarball,
)

INSTANCES = load_local_instances()
IDS = [i["instance_id"] for i in INSTANCES]
_GIT_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_NOSYSTEM": "1"}


def _base_tree(instance: dict[str, Any], tmp_path: Path) -> tuple[Path, str]:
    tarball = tmp_path / "repo.tar.gz"
    tarball.write_bytes(repo_tarball(instance["instance_id"]))
    repo = tmp_path / "testbed"
    proc = subprocess.run(["bash", "-c", SETUP_REPO_SCRIPT, "setup", str(tarball), str(repo)], capture_output=True,
                          text=True, env={**_GIT_ENV, "HOME": str(tmp_path)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return repo, proc.stdout.strip()


@pytest.mark.parametrize("instance", INSTANCES, ids=IDS)
def test_rows_have_every_field_with_its_type(instance: dict[str, Any]) -> None:
    for field, kind in FIELDS.items():
        assert isinstance(instance[field], kind), field
    assert instance["environment_setup_commit"] == instance["base_commit"]


@pytest.mark.parametrize("instance", INSTANCES, ids=IDS)
def test_base_tree_rebuilds_the_base_commit_and_both_patches_apply_to_it(instance: dict[str, Any],
                                                                         tmp_path: Path) -> None:
    repo, head = _base_tree(instance, tmp_path)
    assert head == instance["base_commit"]
    for field in ("patch", "test_patch"):
        check = subprocess.run(["git", "-C", str(repo), "apply", "--check", "-"], input=instance[field], text=True,
                               capture_output=True, env=_GIT_ENV, timeout=60)
        assert check.returncode == 0, (field, check.stderr)
        reverse = subprocess.run(["git", "-C", str(repo), "apply", "--check", "-R", "-"], input=instance[field],
                                 text=True, capture_output=True, env=_GIT_ENV, timeout=60)
        assert reverse.returncode != 0, f"the {field} is already in the base tree"


def test_recipe_is_cached_by_content_and_installs_the_toolchain(tmp_path: Path) -> None:
    inst = INSTANCES[0]
    image, context = recipe(inst, tmp_path)
    again, context2 = recipe(inst, tmp_path)
    assert (image, context) == (again, context2) and image.startswith(f"{IMAGE_REPOSITORY}:")
    text = (Path(context) / "Dockerfile").read_text()
    assert "apt-get install" in text and "golang-go" in text and "GOPROXY=\"off\"" in text
    assert sorted(p.name for p in Path(context).iterdir()) == ["Dockerfile", "repo.tar.gz", "setup_repo.sh"]
    assert inst["patch"] not in text and inst["test_patch"] not in text
    changed = {**inst, "install": [*inst["install"], "go vet ./..."]}
    assert recipe(changed, tmp_path)[0] != image  # another recipe, another tag


def test_a_language_without_a_toolchain_recipe_is_refused() -> None:
    with pytest.raises(ConfigError, match="no toolchain recipe for 'Cobol'") as err:
        dockerfile({**INSTANCES[0], "language": "Cobol"})
    assert err.value.field == "language"
