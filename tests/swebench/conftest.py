"""The docker fixtures (base image, labelled run ids with leak checks) shared with tests/environments."""

from tests.environments.conftest import base_image, docker_available, docker_run_id  # noqa: F401
