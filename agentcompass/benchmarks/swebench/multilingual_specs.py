"""The non-Python SWE-bench repos (SWE-bench Multilingual, and the JavaScript repos of SWE-bench Multimodal):
their language, log parser and per-version test commands, and the eval script that runs an instance's tests.

The table (``multilingual_specs.json``) holds, per repo, what the official harness uses at eval time: the
test command(s) of each version (a version is usually the PR number), the ``build`` commands run after the
test patch, and the container capabilities (``cap_add``) the tests need. Install steps are not there: they are
baked into the official images. There are no test directives: each version's command already names its tests
(``go test -v ./pkg -run "^TestX"``), except for Automattic/wp-calypso, whose commands are derived from the
test patch's files (``calypso_test_cmds``).

The eval script follows the official ``make_eval_script_list_common`` (and its JavaScript variant): reset the
test patch's files to the base commit, download the test patch's image assets (JavaScript), apply the test
patch with ``git apply --verbose --reject``, run the build commands, then the test commands between the
start/end markers, and reset the test files again; ``set -x`` as there, so the log has the same shape. It
differs in two documented ways (docs/swebench.md): files the test patch creates are removed on each reset,
and git is told the repo is safe per call instead of through the global config.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Mapping
from importlib import resources
from typing import Any

import msgspec

from agentcompass._errors import ConfigError
from agentcompass.benchmarks.swebench.test_specs import (
    DEFAULT_REPO_DIR,
    END_TEST_OUTPUT,
    START_TEST_OUTPUT,
    patch_files,
)

#: the file the table is read from, next to this module
TABLE_FILE = "multilingual_specs.json"
#: the heredoc delimiter of the test patch (a longer one is chosen when the patch contains this line)
HEREDOC_DELIMITER = "EOF_114329324912"
CALYPSO = "Automattic/wp-calypso"
#: calypso versions whose jest config is ``test/<pkg>/jest.config.js`` / ``.json`` (else ``npm run test-<pkg>``)
_CALYPSO_JEST_JS = frozenset({"10.10.0", "10.12.0", "10.13.0", "10.14.0", "10.15.2", "10.16.3"})
_CALYPSO_JEST_JSON = frozenset({"6.11.5", "8.9.1", "8.9.3", "8.9.4", "8.11.0", "8.11.2", "10.4.1", "10.5.0",
                                "10.6.0", "10.9.0"})
_SNAPSHOT = re.compile(r"__snapshots__/(.*).js.snap$")


class VersionSpec(msgspec.Struct, frozen=True):
    """What the official harness runs for one repo version at eval time."""

    test_cmd: tuple[str, ...]
    build: tuple[str, ...] = ()
    cap_add: tuple[str, ...] = ()


class RepoInfo(msgspec.Struct, frozen=True):
    """A non-Python repo: its language (e.g. ``TypeScript``), the official language key of its images
    (``ext``: c, go, java, js, php, rb, rs), its log parser's name and its versions."""

    language: str
    ext: str
    parser: str
    versions: dict[str, VersionSpec]


class _Group(msgspec.Struct, frozen=True):
    versions: list[str]
    test_cmd: list[str]
    build: list[str] = []
    cap_add: list[str] = []


class _Repo(msgspec.Struct, frozen=True):
    language: str
    ext: str
    parser: str
    specs: list[_Group]


@functools.cache
def repo_table() -> dict[str, RepoInfo]:
    """Every non-Python repo of the official harness, by ``owner/name``."""
    raw = resources.files(__package__ or "agentcompass.benchmarks.swebench").joinpath(TABLE_FILE).read_bytes()
    table = msgspec.json.decode(raw, type=dict[str, dict[str, _Repo]])["repos"]
    out: dict[str, RepoInfo] = {}
    for repo, r in table.items():
        versions = {v: VersionSpec(tuple(g.test_cmd), tuple(g.build), tuple(g.cap_add))
                    for g in r.specs for v in g.versions}
        out[repo] = RepoInfo(r.language, r.ext, r.parser, versions)
    return out


def is_multilingual(repo: str) -> bool:
    """Whether ``repo`` is one of the non-Python repos of the table."""
    return repo in repo_table()


def repo_info(repo: str) -> RepoInfo:
    """The table's entry for ``repo``; a ConfigError naming the known repos otherwise."""
    info = repo_table().get(repo)
    if info is None:
        raise ConfigError(f"repo: {repo!r} is not a SWE-bench Multilingual repo (known: "
                          f"{', '.join(sorted(repo_table()))})", field="repo")
    return info


def version_spec(repo: str, version: str) -> VersionSpec:
    """The eval-time spec of ``repo`` at ``version``; a ConfigError naming the known versions otherwise."""
    info = repo_info(repo)
    spec = info.versions.get(str(version))
    if spec is None:
        raise ConfigError(f"version: {repo} has no version {version!r} (known: {', '.join(info.versions)})",
                          field="version")
    return spec


def calypso_test_cmds(test_patch: str, version: str) -> list[str]:
    """The test commands of a wp-calypso instance, one per file of its test patch (snapshots run their
    directory; ``client/`` and ``packages/`` files run with that package's jest config, ``test/e2e`` files
    with the e2e runner; other files run nothing)."""
    cmds: list[str] = []
    for f in patch_files(test_patch):
        path = f.path
        if _SNAPSHOT.search(path):
            path = "/".join(path.split("/")[:-2])
        if path.startswith(("client", "packages")):
            pkg = path.split("/")[0]
            if version in _CALYPSO_JEST_JS:
                cmds.append(f"./node_modules/.bin/jest --verbose -c=test/{pkg}/jest.config.js {shlex.quote(path)}")
            elif version in _CALYPSO_JEST_JSON:
                cmds.append(f"./node_modules/.bin/jest --verbose -c=test/{pkg}/jest.config.json "
                            f"{shlex.quote(path)}")
            else:
                cmds.append(f"npm run test-{pkg} --verbose {shlex.quote(path)}")
        elif path.startswith("test/e2e"):
            cmds += ["cd test/e2e", f"NODE_CONFIG_ENV=test npm run test {shlex.quote(path)}", "cd ../.."]
    return cmds


def get_test_cmds(instance: Mapping[str, Any]) -> list[str]:
    """The instance's own ``test_cmd`` (a string or a list) if it has one, else the official commands of
    its repo and version."""
    own = instance.get("test_cmd")
    if own:
        if isinstance(own, str):
            return [own]
        if isinstance(own, list) and all(isinstance(c, str) for c in own):
            return list(own)
        raise ConfigError("test_cmd must be a string or a list of strings", field="test_cmd")
    repo, version = str(instance.get("repo", "")), str(instance.get("version", ""))
    if repo == CALYPSO:
        return calypso_test_cmds(str(instance.get("test_patch") or ""), version)
    return list(version_spec(repo, version).test_cmd)


def image_asset_commands(instance: Mapping[str, Any]) -> list[str]:
    """Commands that download the test patch's image assets (SWE-bench Multimodal's ``image_assets``)."""
    assets = instance.get("image_assets") or {}
    if isinstance(assets, str):
        try:
            assets = json.loads(assets)
        except json.JSONDecodeError:
            raise ConfigError("image_assets is a string but not JSON", field="image_assets") from None
    if not isinstance(assets, dict):
        raise ConfigError("image_assets must be an object with a test_patch list", field="image_assets")
    cmds: list[str] = []
    for asset in assets.get("test_patch") or []:
        path, url = str(asset["path"]), str(asset["url"])
        folder = path.rsplit("/", 1)[0] if "/" in path else "."
        cmds += [f"mkdir -p {shlex.quote(folder)}", f"curl -o {shlex.quote(path)} {shlex.quote(url)}",
                 f"chmod 777 {shlex.quote(path)}"]
    return cmds


def _delimiter(body: str) -> str:
    delim, n, lines = HEREDOC_DELIMITER, 0, set(body.split("\n"))
    while delim in lines:
        n += 1
        delim = f"{HEREDOC_DELIMITER}_{n}"
    return delim


def make_eval_script(instance: Mapping[str, Any], *, repo_dir: str = DEFAULT_REPO_DIR) -> str:
    """The bash eval script of a non-Python instance (see the module doc): its output between the
    ``START_TEST_OUTPUT`` and ``END_TEST_OUTPUT`` markers is the test log. The build commands are the
    instance's own ``build`` (a list) if it has one, else its repo version's."""
    base_commit = str(instance.get("base_commit") or "")
    if not base_commit:
        raise ConfigError("instance has no base_commit", field="base_commit")
    test_patch = str(instance.get("test_patch") or "")
    cmds = get_test_cmds(instance)
    if "build" in instance:
        build = instance["build"]
        if not isinstance(build, list) or not all(isinstance(c, str) for c in build):
            raise ConfigError("build must be a list of commands", field="build")
    else:
        repo = str(instance.get("repo", ""))
        build = list(version_spec(repo, str(instance.get("version", ""))).build) if is_multilingual(repo) else []
    files = patch_files(test_patch)
    existing = [f.old_path for f in files if f.old_path is not None]
    created = [f.path for f in files if f.old_path is None or f.path != f.old_path]
    repo_q = shlex.quote(repo_dir)
    git = f"git -c safe.directory={repo_q}"
    reset = [f"{git} checkout {shlex.quote(base_commit)} {' '.join(map(shlex.quote, existing))}"] if existing \
        else ['echo "No test files to reset"']
    if created:
        reset.append(f"rm -f -- {' '.join(map(shlex.quote, created))}")
    body = test_patch if test_patch.endswith("\n") else test_patch + "\n"
    delim = _delimiter(body)
    lines = [
        "#!/bin/bash",
        "set -uxo pipefail",  # no -e: the test files are reset whatever the tests do
        "exec 2>&1",
        f"cd {repo_q}",
        *reset,
        *image_asset_commands(instance),
        f"{git} apply --verbose --reject - <<'{delim}'\n{body}{delim}",
        *build,
        f": '{START_TEST_OUTPUT}'",
        *cmds,
        f": '{END_TEST_OUTPUT}'",
        *reset,
    ]
    return "\n".join(lines) + "\n"


__all__ = ["CALYPSO", "RepoInfo", "VersionSpec", "calypso_test_cmds", "get_test_cmds", "image_asset_commands",
           "is_multilingual", "make_eval_script", "repo_info", "repo_table", "version_spec"]
