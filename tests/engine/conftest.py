"""The docker fixtures (base images, labelled run ids with leak checks) for the engine's docker-backed tests."""

from tests.environments.conftest import busybox_image, docker_available, docker_run_id  # noqa: F401
