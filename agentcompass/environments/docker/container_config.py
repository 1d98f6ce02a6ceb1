"""What a container is created with: its name, its ``agentcompass.*`` labels, its bind mounts and the create
body (``POST /containers/create``: image, keep-alive command, env, user, and the ``HostConfig`` of init, network,
mounts, CPU/memory/pids limits, disk limit and tmpfs mounts).

Containers run an init process and a do-nothing keep-alive command; every command is a separate exec. The
labels (run, task, role, owner pid and host) are what the sweep finds a dead run's containers by.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from ..._errors import ConfigError
from ...interfaces import EnvOpenSpec, Resources
from .api import LABEL_KEEP, LABEL_ROLE, LABEL_RUN_ID, LABEL_TASK_ID
from .storage import storage_opt

log = logging.getLogger("agentcompass.environments.docker.provider")

KEEPALIVE = ["tail", "-f", "/dev/null"]

_NAME_RE = re.compile(r"[^a-zA-Z0-9_.-]+")


def _safe_name(text: str, limit: int) -> str:
    return _NAME_RE.sub("_", text)[:limit].strip("_.-") or "x"


def container_name(spec: EnvOpenSpec) -> str:
    """A new container name for ``spec``: ``ac-<run>-<task>-<role initial>-<random>``, safe for the daemon."""
    return "-".join(["ac", _safe_name(spec.run_id, 20), _safe_name(spec.task_id, 40), spec.role[:1],
                     uuid.uuid4().hex[:10]])


def container_labels(spec: EnvOpenSpec, owner: dict[str, str]) -> dict[str, str]:
    """``spec.labels`` with the run, task, role and ``owner`` labels (and ``keep`` when it is kept)."""
    extra = spec.labels or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in extra.items()):
        raise ConfigError("labels: expected a mapping of str to str", field="labels")
    labels = {**extra, LABEL_RUN_ID: spec.run_id, LABEL_TASK_ID: spec.task_id, LABEL_ROLE: spec.role,
              **owner}
    if spec.keep:
        labels[LABEL_KEEP] = "1"
    return labels


def bind_mounts(spec: EnvOpenSpec, *, local_daemon: bool) -> tuple[tuple[str, str, bool], ...]:
    """``spec.mounts`` as (source, target, read_only); none for a daemon on another machine (its paths are
    not ours: the harness copies what it needs instead)."""
    if not spec.mounts:
        return ()
    if not local_daemon:
        log.info("docker_host is not local: mounts %s are not bound", [m.target for m in spec.mounts])
        return ()
    return tuple((m.source, m.target, m.read_only) for m in spec.mounts)


def container_config(env: dict[str, str], image: str, workdir: str, network: str, labels: dict[str, str],
                     binds: tuple[tuple[str, str, bool], ...], limits: Resources, *, init: bool, user: str | None,
                     pids_limit: int | None, disk_limit: int | None, tmpfs: dict[str, int]) -> dict[str, Any]:
    """The create body of a container of ``image`` on ``network``, under ``limits`` and the provider's
    ``init``, ``user``, ``pids_limit``, ``disk_limit`` and ``tmpfs`` params."""
    host: dict[str, Any] = {"Init": init, "NetworkMode": network}
    if binds:
        host["Mounts"] = [{"Type": "bind", "Source": src, "Target": dst, "ReadOnly": ro}
                          for src, dst, ro in binds]
    if limits.cpus is not None:
        host["NanoCpus"] = int(limits.cpus * 1e9)
    if limits.memory_bytes is not None:
        host["Memory"] = limits.memory_bytes
        host["MemorySwap"] = limits.memory_bytes  # no swap beyond the limit
    if pids_limit is not None:
        host["PidsLimit"] = pids_limit
    if disk_limit is not None:
        host["StorageOpt"] = storage_opt(disk_limit)
    if tmpfs:
        host["Tmpfs"] = {path: f"size={size}" for path, size in tmpfs.items()}
    return {
        "Image": image, "Entrypoint": KEEPALIVE, "Cmd": None, "WorkingDir": workdir,
        "Env": [f"{k}={v}" for k, v in env.items()], "Labels": labels,
        "User": user or "", "Tty": False, "OpenStdin": False, "AttachStdout": False,
        "AttachStderr": False, "HostConfig": host,
    }


__all__ = ["KEEPALIVE", "bind_mounts", "container_config", "container_labels", "container_name"]
