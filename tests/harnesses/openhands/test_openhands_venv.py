"""The openhands harness's venv, built by the runtime pip installer against a local package index serving
stand-in wheels of OpenHands and its tools' dependencies (the real install is in test_openhands.py, slow):
concurrent callers build it once, a failure names the package and leaves nothing half-built."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from agentcompass._errors import EnvironmentError_
from agentcompass.harnesses.openhands import venv
from tests.pypi_index import SimpleIndex

pytestmark = pytest.mark.timeout(300)
VERSION = "0.0.1"
WHEELS = [("openhands-sdk", VERSION, "openhands/sdk/__init__.py"), ("binaryornot", "0.6.0", "binaryornot/__init__.py"),
          ("cachetools", "5.0.0", "cachetools/__init__.py"), ("libtmux", "0.53.0", "libtmux/__init__.py"),
          ("func-timeout", "4.3.5", "func_timeout/__init__.py")]


async def test_the_venv_is_built_once_and_a_failed_build_leaves_nothing(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    root = venv.venv_dir(str(tmp_path), VERSION, "test")
    with SimpleIndex() as index:
        for name, version, module in WHEELS:
            index.add_wheel(name, version, {module: "OK = True\n"})
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
        monkeypatch.setenv("PIP_COMPILE", "0")  # as CI sets it: the venv's bytecode is compiled all the same
        python = sys.executable
        with pytest.raises(EnvironmentError_) as err:  # openhands-tools is not on the index yet
            await venv.ensure_venv(python, root, VERSION, auto_install=True, timeout_s=240)
        assert f"openhands-tools=={VERSION}" in str(err.value) and "failed (pip exit 1)" in str(err.value)
        assert f"No matching distribution found for openhands-tools=={VERSION}" in str(err.value)
        assert sorted(p.name for p in root.parent.iterdir()) == [f"{root.name}.lock"]

        index.add_wheel("openhands-tools", VERSION, {"openhands/tools/__init__.py": "OK = True\n"})
        built = await asyncio.gather(*(venv.ensure_venv(python, root, VERSION, auto_install=True, timeout_s=240)
                                       for _ in range(2)))
        assert built == [venv.venv_python(root)] * 2 and venv.is_ready(root)
        assert index.downloads["openhands-sdk"] == 2 and index.downloads["openhands-tools"] == 1
    # the bridge runs with PYTHONDONTWRITEBYTECODE: what it imports is compiled once, here
    for module in ("openhands/sdk/__init__.py", "openhands/tools/__init__.py", "libtmux/__init__.py"):
        [source] = root.glob(f"lib/python*/site-packages/{module}")
        assert list((source.parent / "__pycache__").glob("__init__.*.pyc")), module
    probe = await asyncio.create_subprocess_exec(str(built[0]), "-c", "import openhands.sdk, openhands.tools, "
                                                 "binaryornot, libtmux; print('ok')", stdout=asyncio.subprocess.PIPE)
    out, _ = await probe.communicate()
    assert out.strip() == b"ok"
