"""A self-made SWE-bench Pro instance in the official shape, for the docker tests: a tiny Python repo at
``/app`` (one deterministic git commit) in an image built from the base image, a ``run_script.sh`` and a
``parser.py`` laid out as ``run_scripts/<id>/`` and a Dockerfile ``ENV`` line under ``dockerfiles/`` (the run
script refuses to run without it, so the entry script's re-export is exercised), and its dataset row."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

IID = "instance_octo__calc-0123456789abcdef0123456789abcdef01234567-vnan"
REPO = "octo/calc"
IMAGE_REPOSITORY = "agentcompass-test/swebench-pro"
F2P = "tests/test_calc.py::CalcTest::test_add"
P2P = "tests/test_calc.py::CalcTest::test_sub"

FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n",
    "tests/__init__.py": "",
    "tests/test_calc.py": (
        "import unittest\n\nfrom calc import add, sub\n\n\n"
        "class CalcTest(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
        "    def test_sub(self):\n        self.assertEqual(sub(5, 3), 2)\n"),
}

GOLD_PATCH = "\n".join([
    "diff --git a/calc.py b/calc.py", "--- a/calc.py", "+++ b/calc.py", "@@ -1,5 +1,5 @@",
    " def add(a, b):", "-    return a - b", "+    return a + b", " ", " ", " def sub(a, b):", ""])

# Leaves the bug, and while the tests import it tries every way to fake the result: a result json where the
# official evaluator reads it, a parser that does nothing, and a `python` that writes an all-PASSED result.
FORGED = json.dumps({"tests": [{"name": F2P, "status": "PASSED"}, {"name": P2P, "status": "PASSED"}]})
_FORGE_CODE = f"""import os
import sys

_FORGED = {FORGED!r}
_SHIM = "#!/bin/sh\\nprintf '%s' '" + _FORGED + "' > \\"$4\\"\\n"
for _path, _text in (("/workspace/output.json", _FORGED), ("/workspace/parser.py", "pass\\n"),
                     ("/usr/local/bin/python", _SHIM), ("/tmp/output.json", _FORGED)):
    try:
        if os.path.islink(_path):
            os.remove(_path)
        with open(_path, "w") as _f:
            _f.write(_text)
        os.chmod(_path, 0o755)
    except OSError:
        pass
print("FORGE-ATTEMPTED", file=sys.stderr)


""".splitlines()
# never import the patched calc.py on the host: it writes to /usr/local/bin and /tmp
FORGE_PATCH = "\n".join([
    "diff --git a/calc.py b/calc.py", "--- a/calc.py", "+++ b/calc.py", f"@@ -1,3 +1,{3 + len(_FORGE_CODE)} @@",
    *(f"+{line}" for line in _FORGE_CODE), " def add(a, b):", "     return a - b", " ", ""])

RUN_SCRIPT = """#!/bin/bash
### COMMON SETUP; DO NOT MODIFY ###
set -e

# --- CONFIGURE THIS SECTION ---
run_all_tests() {
  python -m unittest discover -v -s tests -t . 2>&1
}

run_selected_tests() {
  local test_files=("$@")
  test "$PRO_GREETING" = hello  # set by the instance Dockerfile's ENV line
  python -m unittest -v "${test_files[@]}" 2>&1
}
# --- END CONFIGURATION SECTION ---

### COMMON EXECUTION; DO NOT MODIFY ###
if [ $# -eq 0 ]; then
  run_all_tests
  exit $?
fi
if [[ "$1" == *","* ]]; then
  IFS=',' read -r -a TEST_FILES <<< "$1"
else
  TEST_FILES=("$@")
fi
run_selected_tests "${TEST_FILES[@]}"
"""

# the official parsers' interface: parser.py STDOUT STDERR OUTPUT_JSON -> {"tests": [{"name", "status"}]}
PARSER = '''"""Parse unittest -v output into the SWE-bench Pro result json."""

import dataclasses
import json
import re
import sys
from enum import Enum
from pathlib import Path


class TestStatus(Enum):
    PASSED = 1
    FAILED = 2
    SKIPPED = 3
    ERROR = 4


@dataclasses.dataclass
class TestResult:
    name: str
    status: TestStatus


LINE = re.compile(r"^(\\w+) \\(([\\w.]+)\\) \\.\\.\\. (ok|FAIL|ERROR|skipped.*)$", re.MULTILINE)
STATUS = {"ok": TestStatus.PASSED, "FAIL": TestStatus.FAILED, "ERROR": TestStatus.ERROR}


def parse_test_output(stdout_content, stderr_content):
    results = []
    for test, dotted, word in LINE.findall(stdout_content + "\\n" + stderr_content):
        module, cls = dotted.rsplit(".", 2)[:2]
        name = module.replace(".", "/") + ".py::" + cls + "::" + test
        results.append(TestResult(name, STATUS.get(word, TestStatus.SKIPPED)))
    return results


def main(stdout_path, stderr_path, output_path):
    results = parse_test_output(Path(stdout_path).read_text(), Path(stderr_path).read_text())
    with open(output_path, "w") as f:
        json.dump({"tests": [{"name": r.name, "status": r.status.name} for r in results]}, f, indent=2)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: parser.py STDOUT STDERR OUTPUT")
    main(*sys.argv[1:])
'''

_COMMIT_ENV = {"GIT_AUTHOR_NAME": "pro", "GIT_AUTHOR_EMAIL": "pro@agentcompass.invalid",
               "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000", "GIT_COMMITTER_NAME": "pro",
               "GIT_COMMITTER_EMAIL": "pro@agentcompass.invalid", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
               "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
_COMMIT_SCRIPT = "git init -q -b main && git add -A && git commit -q --no-verify --no-gpg-sign -m base && " \
                 "git rev-parse HEAD"


def write_repo(dest: Path) -> None:
    for rel, text in FILES.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o644)


def base_commit() -> str:
    """The repo's one commit hash (the same in the image: it depends on the tree and the fixed identity)."""
    with tempfile.TemporaryDirectory() as d:
        write_repo(Path(d))
        env = {**os.environ, **_COMMIT_ENV}
        return subprocess.run(["bash", "-c", _COMMIT_SCRIPT], cwd=d, env=env, capture_output=True, text=True,
                              check=True, timeout=60).stdout.strip()


def dockerfile(base_image: str) -> str:
    env = " ".join(f"{k}={json.dumps(v)}" for k, v in _COMMIT_ENV.items())
    return f"""FROM {base_image}
LABEL agentcompass.image="swebench-pro-test"
COPY repo/ /app/
RUN set -eu; ln -sf /usr/bin/python3 /usr/local/bin/python; cd /app; export {env}; {_COMMIT_SCRIPT}; \\
    git config --system --add safe.directory /app; \\
    git config --system user.name pro; git config --system user.email pro@agentcompass.invalid
WORKDIR /app
ENTRYPOINT ["/bin/bash"]
"""


def build_context(base_image: str, dest: Path) -> str:
    """Write the image's build context into ``dest``; its content tag (the hash of the context)."""
    write_repo(dest / "repo")
    (dest / "Dockerfile").write_text(dockerfile(base_image))
    h = hashlib.sha256(dockerfile(base_image).encode())
    for rel, text in sorted(FILES.items()):
        h.update(f"{rel}\0{text}\0".encode())
    return h.hexdigest()[:16]


def scripts_dir(dest: Path) -> Path:
    """The run scripts folder (the repository's layout)."""
    d = dest / "run_scripts" / IID
    d.mkdir(parents=True)
    (d / "run_script.sh").write_text(RUN_SCRIPT)
    (d / "parser.py").write_text(PARSER)
    base = dest / "dockerfiles" / "base_dockerfile" / IID
    base.mkdir(parents=True)
    (base / "Dockerfile").write_text("FROM debian\nWORKDIR /app\n")
    inst = dest / "dockerfiles" / "instance_dockerfile" / IID
    inst.mkdir(parents=True)
    (inst / "Dockerfile").write_text("FROM base_octo__calc\nENV PRO_GREETING=hello\nRUN true\n")
    return dest


def row(tag: str) -> dict[str, Any]:
    """The dataset row, as the Hub stores it (list columns as Python list literals)."""
    commit = base_commit()
    return {
        "instance_id": IID, "repo": REPO, "base_commit": commit, "patch": GOLD_PATCH, "test_patch": "",
        "problem_statement": "add() subtracts instead of adding.", "requirements": "- add(a, b) returns a + b",
        "interface": "No new interfaces are introduced.", "repo_language": "python",
        "fail_to_pass": repr([F2P]), "pass_to_pass": repr([P2P]),
        "selected_test_files_to_run": repr(["tests/test_calc.py"]),
        "before_repo_set_cmd": f"git reset --hard {commit}\ngit clean -fd\ngit checkout {commit} -- tests/test_calc.py",
        "dockerhub_tag": tag,
    }
