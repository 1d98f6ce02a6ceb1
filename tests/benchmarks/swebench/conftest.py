"""The docker fixtures (base image, labelled run ids with leak checks) shared with tests/environments, and the
host-Python condition of ``swebench_local`` image builds."""

import sys

import pytest

from agentcompass.benchmarks.swebench.local_instances import IMAGE_PYTHON
from tests.environments.conftest import base_image, docker_available, docker_run_id  # noqa: F401

#: swebench_local copies pytest from the host into images running Debian's CPython 3.11 (docs/swebench.md),
#: so its images are built only on a 3.11 host; elsewhere it must refuse with a clear error (tested too).
needs_host_py311 = pytest.mark.skipif(
    sys.implementation.name != "cpython" or sys.version_info[:2] != IMAGE_PYTHON,
    reason="swebench_local images copy pytest from a CPython 3.11 host")
