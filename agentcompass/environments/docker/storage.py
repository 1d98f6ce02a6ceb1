"""Whether the Docker daemon can cap a container's disk (``HostConfig.StorageOpt`` ``size``).

Only some storage drivers honour a per-container size: overlay2 on xfs mounted with ``pquota``, btrfs, zfs
and devicemapper. Others (fuse-overlayfs, vfs, overlay2 on ext4, ...) either reject the option or ignore it,
so a ``disk_limit`` on them is refused up front rather than silently not enforced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..._errors import ConfigError

#: drivers that take ``StorageOpt.size`` whatever their backing filesystem
SIZED_DRIVERS = ("btrfs", "zfs", "devicemapper")
_WORKS_WITH = "overlay2 on xfs mounted with the pquota option, btrfs, zfs or devicemapper"
FIELD = "environment.params.disk_limit"


def size_unsupported(info: Mapping[str, Any]) -> str | None:
    """None when the daemon described by ``info`` (``GET /info``) can cap a container's writable layer;
    otherwise the storage driver (and backing filesystem) that cannot."""
    driver = str(info.get("Driver") or "unknown")
    status = {str(k): str(v) for k, v in (info.get("DriverStatus") or []) if k is not None}
    if driver in SIZED_DRIVERS:
        return None
    if driver == "overlay2":
        backing = status.get("Backing Filesystem", "unknown")
        # xfs still needs the pquota mount option: the daemon refuses the create without it (see
        # ``refusal``), which the status here does not show.
        return None if backing == "xfs" else f"overlay2 on {backing}"
    return driver


def refusal(disk_limit: Any, driver: str) -> ConfigError:
    """The ConfigError for a ``disk_limit`` the daemon's storage driver cannot enforce."""
    return ConfigError(
        f"environment_params.disk_limit={disk_limit!r} cannot be enforced: the Docker daemon's storage driver "
        f"is {driver}, which cannot limit a container's disk. A disk limit works with {_WORKS_WITH}. Remove "
        "disk_limit (containers then share the host's disk) or use a daemon with such a driver.", field=FIELD)


def storage_opt(size_bytes: int) -> dict[str, str]:
    """``HostConfig.StorageOpt`` for a writable layer of at most ``size_bytes``."""
    return {"size": str(size_bytes)}
