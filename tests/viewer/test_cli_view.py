"""``agentcompass view`` as a user runs it: a subprocess that prints its URL and serves the API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.conftest import REPO

from .conftest import REAL_KEY


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_view_prints_a_loopback_url_and_serves_the_runs(real_results: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "agentcompass.cli", "view", str(real_results), "--no-open"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = next(w for w in line.split() if w.startswith("http://"))
        assert url.startswith("http://127.0.0.1:") and "1 run " in line
        with urllib.request.urlopen(url + "api/runs", timeout=10) as r:
            runs = json.loads(r.read())["runs"]
        assert [r["key"] for r in runs] == [REAL_KEY]
    finally:
        proc.terminate()
        proc.wait(10)


def test_view_of_a_missing_path_is_an_error_naming_the_path(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "agentcompass.cli", "view", str(tmp_path / "nope"), "--no-open"],
                         capture_output=True, text=True, env=_env(), timeout=60)
    assert res.returncode == 2
    assert "`path`" in res.stderr and "nope" in res.stderr
