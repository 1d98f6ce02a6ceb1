"""Per-instance image names (the official SWE-bench naming) and the in-container git hygiene."""

from __future__ import annotations

#: the workspace of every SWE-bench image
TESTBED = "/testbed"


def official_image(instance_id: str, namespace: str = "swebench", arch: str = "x86_64", tag: str = "latest") -> str:
    """``<namespace>/sweb.eval.<arch>.<id with __ as _1776_>:<tag>``, lower-cased as Docker requires."""
    name = f"sweb.eval.{arch}.{instance_id.replace('__', '_1776_')}".lower()
    return f"{namespace}/{name}:{tag}" if namespace else f"{name}:{tag}"


def history_hygiene_script(base_commit: str, testbed: str = TESTBED) -> str:
    """A bash script that leaves only ``base_commit`` and its ancestors reachable in the repo: no remotes,
    no other branches or tags, no stash or reflog, unreachable objects pruned. So the agent can neither
    check out the fix nor read future commits. Exits non-zero if HEAD is not ``base_commit`` afterwards."""
    return f"""set -u
cd {testbed} || exit 3
git config --global --add safe.directory {testbed} >/dev/null 2>&1
git checkout -q --detach {base_commit} 2>/dev/null || git checkout -q {base_commit} || exit 4
for r in $(git remote); do git remote remove "$r"; done
git for-each-ref --format='%(refname)' refs/heads refs/tags refs/remotes refs/stash refs/notes refs/original \\
  | while read -r ref; do git update-ref -d "$ref"; done
git checkout -q -B main {base_commit} 2>/dev/null || true
git reflog expire --expire=now --all >/dev/null 2>&1
git gc --prune=now --quiet >/dev/null 2>&1 || true
test "$(git rev-parse HEAD)" = "{base_commit}" || exit 5
"""
