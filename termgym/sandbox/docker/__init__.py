"""The Docker backend: one container per sandbox, driven through the Docker SDK for Python.

One module per concept:

* :mod:`~termgym.sandbox.docker.container` — creating a container from a spec (image, limits,
  network, read-only binds, labels), removing it, the shared SDK client per engine;
* :mod:`~termgym.sandbox.docker.hosttree` — the workdir and ``/tmp`` as host directories bound
  into the container (engine on this machine), and file access to them that follows no symlink;
* :mod:`~termgym.sandbox.docker.ready` — a container made ready: started, supervisor and shell
  execs waiting;
* :mod:`~termgym.sandbox.docker.channel` — the exec channel, a ``docker exec`` on a socket;
* :mod:`~termgym.sandbox.docker.archive` — copying files in and out as tar archives;
* :mod:`~termgym.sandbox.docker.sandbox` — :class:`DockerSandbox`, its shell and supervisor;
* :mod:`~termgym.sandbox.docker.pool` — :class:`WarmPool`, ready containers waiting to be taken;
* :mod:`~termgym.sandbox.docker.removal` — killing a container at ``close()`` and removing it in
  the background, with retries;
* :mod:`~termgym.sandbox.docker.gc` — finding and removing what a crashed run (or a failed
  removal) left behind.

``DOCKER_HOST`` (or ``docker_host=``) selects the engine, so sandboxes may live on another machine.
The names below are the backend's public surface; import them from here.
"""

from __future__ import annotations

from termgym.sandbox.docker.container import (
    COMMAND_ENV,
    LABEL,
    LABEL_HOST,
    LABEL_PID,
    LABEL_PID_START,
    LABEL_POOL,
    LABEL_SESSION,
    LABEL_TREE,
    SESSION_ID,
    container_host_pid,
    container_labels,
    create_container,
    get_client,
    image_runtime,
    pool_key,
    remove_container,
)
from termgym.sandbox.docker.gc import Leftover, collect_garbage, find_leftovers
from termgym.sandbox.docker.hosttree import HostTree
from termgym.sandbox.docker.pool import DEFAULT_POOL_SIZE, WarmPool, close_shared_pools, shared_pool
from termgym.sandbox.docker.removal import failed_removals, wait_for_removals
from termgym.sandbox.docker.sandbox import DockerSandbox

__all__ = [
    "COMMAND_ENV",
    "LABEL",
    "LABEL_HOST",
    "LABEL_PID",
    "LABEL_PID_START",
    "LABEL_POOL",
    "LABEL_SESSION",
    "LABEL_TREE",
    "SESSION_ID",
    "DEFAULT_POOL_SIZE",
    "DockerSandbox",
    "HostTree",
    "Leftover",
    "WarmPool",
    "close_shared_pools",
    "collect_garbage",
    "container_host_pid",
    "container_labels",
    "create_container",
    "failed_removals",
    "find_leftovers",
    "get_client",
    "image_runtime",
    "pool_key",
    "remove_container",
    "shared_pool",
    "wait_for_removals",
]
