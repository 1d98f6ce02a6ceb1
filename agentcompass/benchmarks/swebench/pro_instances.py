"""SWE-bench Pro instances and the run step of their evaluation, as the official evaluator
(``swe_bench_pro_eval.py`` of scaleapi/SWE-bench_Pro-os) builds it.

A row of ``ScaleAI/SWE-bench_Pro`` has the SWE-bench fields plus ``requirements``, ``interface``,
``repo_language``, ``before_repo_set_cmd``, ``selected_test_files_to_run`` and ``dockerhub_tag``; its test
lists (``fail_to_pass``, ``pass_to_pass``, ``selected_test_files_to_run``) are Python list literals. The repo
lives at ``/app`` in the instance image ``jefzda/sweap-images:<dockerhub_tag>``.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Iterable
from typing import Any

from ..._errors import ConfigError

#: the repository inside every SWE-bench Pro image
APP_DIR = "/app"
#: where the official evaluator puts the patch, the run script and the logs in the container
WORKSPACE = "/workspace"
DEFAULT_IMAGE_REPOSITORY = "jefzda/sweap-images"
#: the fields every row needs (as the Hub dataset names them)
REQUIRED_FIELDS = ("instance_id", "repo", "base_commit", "problem_statement", "patch", "fail_to_pass",
                   "pass_to_pass", "selected_test_files_to_run")
#: list fields: the Hub stores them as Python list literals (the official evaluator ``eval``s them)
LIST_FIELDS = ("fail_to_pass", "pass_to_pass", "selected_test_files_to_run")
_TEXT_FIELDS = ("requirements", "interface", "repo_language", "before_repo_set_cmd", "dockerhub_tag", "test_patch",
                "base_dockerfile", "instance_dockerfile")
_MAX_TAG = 128
_DIFF_SECTION = re.compile(r"(?=^diff --git )", re.MULTILINE)
_BINARY = re.compile(r"^(Binary files .* differ|GIT binary patch)$", re.MULTILINE)


def _as_list(value: Any, field: str, where: str, iid: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        try:  # the Hub's form: a Python list literal (read as data, never evaluated as code)
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                raise ConfigError(f"{where}: {field} of {iid!r} is a string but not a list literal",
                                  field=field) from None
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {field} of {iid!r} must be a list of strings", field=field)
    return value


def normalize_pro_instance(row: dict[str, Any], where: str) -> dict[str, Any]:
    """Check one SWE-bench Pro row: the list fields become lists, missing text fields empty strings (as the
    official evaluator's ``fillna("")``), and ``FAIL_TO_PASS``/``PASS_TO_PASS`` mirror the lower-case ones."""
    out = dict(row)
    for upper in ("FAIL_TO_PASS", "PASS_TO_PASS"):  # some exports use the SWE-bench spelling
        if upper.lower() not in out and upper in out:
            out[upper.lower()] = out[upper]
    missing = [f for f in REQUIRED_FIELDS if f not in out]
    if missing:
        raise ConfigError(f"{where}: instance {row.get('instance_id', '?')!r} lacks the SWE-bench Pro field(s) "
                          f"{', '.join(missing)} (required: {', '.join(REQUIRED_FIELDS)})", field="data_dir")
    iid = str(out["instance_id"])
    for f in ("instance_id", "repo", "base_commit", "patch", "problem_statement"):
        if not isinstance(out[f], str):
            raise ConfigError(f"{where}: field {f} of {iid!r} must be a string", field="data_dir")
    if not re.fullmatch(r"[0-9a-fA-F]{7,64}", out["base_commit"]):
        raise ConfigError(f"{where}: base_commit of {iid!r} is not a git commit hash", field="data_dir")
    if out["repo"].count("/") != 1:
        raise ConfigError(f"{where}: repo of {iid!r} must be owner/name", field="data_dir")
    for f in LIST_FIELDS:
        out[f] = _as_list(out[f], f, where, iid)
    for f in _TEXT_FIELDS:
        value = out.get(f)
        out[f] = value if isinstance(value, str) else ""
    out["FAIL_TO_PASS"], out["PASS_TO_PASS"] = out["fail_to_pass"], out["pass_to_pass"]
    return out


def problem_statement(instance: dict[str, Any]) -> str:
    """The task as the official scaffolds pose it: the issue, then its requirements and new interfaces."""
    return (f"{instance['problem_statement']}\n\nRequirements:\n{instance.get('requirements') or ''}\n\n"
            f"New interfaces introduced:\n{instance.get('interface') or ''}")


def image_tag(instance: dict[str, Any]) -> str:
    """The instance's Docker Hub tag: the row's ``dockerhub_tag``, else the official naming
    (``<owner>.<name>-<id without instance_ and -vnan>``, lower-cased owner/name, at most 128 chars)."""
    tag = str(instance.get("dockerhub_tag") or "")
    if tag:
        return tag
    iid = str(instance["instance_id"])
    repo = str(instance["repo"]).lower()
    owner, name = repo.split("/", 1)
    rest = iid.removeprefix("instance_")
    if iid == "instance_element-hq__element-web-ec0f940ef0e8e3b61078f145f34dc40d1938e6c5-vnan":
        pass  # the one image published under its full repo name and id
    else:
        if "element-hq" in repo and "element-web" in repo:
            name = "element"
        rest = rest.removesuffix("-vnan")
    return f"{owner}.{name}-{rest}"[:_MAX_TAG]


def image_name(instance: dict[str, Any], repository: str = DEFAULT_IMAGE_REPOSITORY) -> str:
    """``<repository>:<tag>`` of the instance's image."""
    return f"{repository}:{image_tag(instance)}"


def strip_binary_hunks(patch: str) -> str:
    """The patch without the per-file sections that carry binary diffs (the official evaluator drops them:
    ``git apply`` would refuse the whole patch otherwise)."""
    if not patch:
        return patch
    kept = [s for s in _DIFF_SECTION.split(patch) if s.strip() and not _BINARY.search(s)]
    return "".join(kept)


def env_exports(dockerfiles: Iterable[str]) -> list[str]:
    """The ``ENV`` lines of the instance's base and instance Dockerfiles as ``export`` lines (the official
    entry script re-exports them, word for word, before the run)."""
    out: list[str] = []
    for text in dockerfiles:
        for line in text.split("\n"):
            line = line.strip()
            if line.startswith("ENV"):
                out.append("export" + line[len("ENV"):])
    return out


def entry_script(instance: dict[str, Any], exports: Iterable[str] = (), workspace: str = WORKSPACE) -> str:
    """The bash script of the run step: re-export the image's ENV, reset ``/app`` to the base commit, apply
    ``<workspace>/patch.diff`` (a failure does not stop the run, as in the official script), run the last
    line of ``before_repo_set_cmd``, then ``run_script.sh`` with the selected test files joined by commas,
    its stdout and stderr to ``<workspace>/stdout.log`` / ``stderr.log``. Its exit code is the run script's.
    The parser is not run here: see ``benchmarks/swebench/pro.py``."""
    base = instance["base_commit"]
    before = (instance.get("before_repo_set_cmd") or "").strip().split("\n")[-1]
    selected = ",".join(instance["selected_test_files_to_run"])
    ws = shlex.quote(workspace)
    lines = [*exports,
             "# apply patch",
             f"cd {APP_DIR}",
             f"git reset --hard {base}",
             f"git checkout {base}",
             f"git apply -v {ws}/patch.diff",
             before,
             "# run the tests, stdout and stderr to separate files",
             # unquoted on purpose: the official script splits the joined list the same way
             f"bash {ws}/run_script.sh {selected} > {ws}/stdout.log 2> {ws}/stderr.log"]
    return "\n".join(lines) + "\n"


__all__ = ["APP_DIR", "DEFAULT_IMAGE_REPOSITORY", "LIST_FIELDS", "REQUIRED_FIELDS", "WORKSPACE", "entry_script",
           "env_exports", "image_name", "image_tag", "normalize_pro_instance", "problem_statement",
           "strip_binary_hunks"]
