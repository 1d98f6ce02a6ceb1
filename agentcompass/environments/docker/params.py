"""The ``docker`` provider's params (``DockerParams``) and the checks of their values it shares.

What each param means is in docs/environments.md; ``DockerProvider.__init__`` turns them into its settings.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from ..._validate import Count, Seconds, Size, size_bytes
from .._tar import ArchiveParams

_MAX_PRESTART = 64


def param_field(key: str) -> str:
    """The field a ConfigError about param ``key`` names."""
    return f"environment.params.{key}"


def parse_memory(value: Any, key: str = "memory") -> int:
    """``"2g"``, ``"512m"``, ``"1.5GiB"`` or an int of bytes -> bytes (powers of 1024); ``key`` names the
    param in the error."""
    return size_bytes(value, param_field(key), label=f"environment docker: {key}")


_MAX_CPUS = 4096.0
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
#: a tmpfs mount point: an absolute path without the ``,`` and ``:`` of docker's mount syntax
MountPoint = Annotated[str, msgspec.Meta(pattern=r"^/[^,:]*$", description="an absolute path without ',' or ':'")]
Platform = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9_]+(/[a-zA-Z0-9_.-]+){0,2}$",
                                       description="os[/arch[/variant]] (e.g. linux/amd64)")]


class DockerParams(ArchiveParams, frozen=True):
    """``docker`` params: the image and resource limits of each container, the daemon to use and how long
    to wait for it, and the archive caps (see docs/environments.md). ``pids`` is ``pids_limit``'s short name."""

    image: NonEmpty | None = None
    cpus: Annotated[float, msgspec.Meta(gt=0, le=_MAX_CPUS)] | None = None
    memory: Size | None = None
    pids_limit: Count | None = None
    pids: Count | None = None
    user: NonEmpty | None = None
    workdir: NonEmpty | None = None
    docker_host: NonEmpty | None = None
    open_timeout: Seconds = 120.0
    exec_default_timeout: Seconds = 600.0
    close_timeout: Seconds = 30.0
    daemon_timeout: Seconds = 60.0
    init: bool = True
    build_context: NonEmpty | None = None
    dockerfile: NonEmpty | None = None
    pull_timeout: Seconds | None = None
    pull_inactivity_timeout: Seconds = 120.0
    pull_retries: Annotated[int, msgspec.Meta(ge=0, le=100)] = 3
    platform: Platform | None = None
    build_timeout: Seconds = 1800.0
    output_limit_bytes: Annotated[int, msgspec.Meta(ge=64)] = 1 << 20
    forwarder_image: NonEmpty | None = None
    #: connections the host-side model relay (``model``/``allowlist`` policies; ``ray_docker``: the relay the
    #: nodes reach the coordinator's gateway through) pipes at once; more are closed as they arrive
    relay_max_connections: Annotated[int, msgspec.Meta(ge=1, le=65536)] = 1024
    disk_limit: Size | None = None
    tmpfs: dict[MountPoint, Size] | None = None
    #: containers started ahead of need per container shape (0: none); see docker_prestart
    prestart: Annotated[int, msgspec.Meta(ge=0, le=_MAX_PRESTART)] = 2



__all__ = ["DockerParams", "MountPoint", "NonEmpty", "Platform", "param_field", "parse_memory"]
