"""Docker containers for sandboxes: creating them with a spec's limits, labelling, removing them.

A sandbox's container is made from ``spec.image`` (default ``termgym/base:bookworm``, see
:mod:`termgym.sandbox.images`) with ``--network none`` unless ``spec.network``, memory (no swap),
pids, CPU share and rlimits from ``spec.limits``, ``spec.ro_binds`` as read-only volumes (and, when
given a :class:`~termgym.sandbox.docker.hosttree.HostTree`, its host directories read-write), ``--init``
so orphans are reaped, ``no-new-privileges``, and labels that mark it as termgym's (``termgym=1``,
the session id, the creating host and pid) so ``termgym gc`` (:mod:`termgym.sandbox.docker.gc`)
can find what a crashed run left behind. Its main process only sleeps.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import uuid
from pathlib import Path

from termgym.sandbox.base import BackendUnavailable, Limits, SandboxError, SandboxSpec, read_only_binds
from termgym.sandbox.cgroups import process_start_ticks
from termgym.sandbox.docker.hosttree import HostTree
from termgym.sandbox.images import DEFAULT_BASE_IMAGE, docker_client

LABEL = "termgym"
LABEL_SESSION = "termgym.session"
LABEL_HOST = "termgym.host"
LABEL_PID = "termgym.pid"
LABEL_PID_START = "termgym.pid_start"
LABEL_POOL = "termgym.pool"
LABEL_TREE = "termgym.tree"  # the host directory bound into the container (termgym gc removes it too)

#: One id per Python process, so a run's containers can be told apart from another run's.
SESSION_ID = uuid.uuid4().hex[:12]

# Environment for commands: no pagers, no progress bars (the agent sees plain text). PATH comes
# from the image, which may have its own (a virtualenv, a toolchain).
COMMAND_ENV = {
    "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat",
    "MANPAGER": "cat", "PIP_PROGRESS_BAR": "off", "TQDM_DISABLE": "1", "PYTHONDONTWRITEBYTECODE": "1",
}

_clients: dict[str | None, object] = {}
_clients_lock = threading.Lock()


#: Seconds an engine API call may take before it fails. The SDK's 60 s is too short for an engine
#: busy with hundreds of concurrent sandboxes on a small machine: a slow answer beats a failed episode.
API_TIMEOUT = 600


def get_client(docker_host: str | None = None):
    """A shared Docker SDK client per engine address (``None``: ``DOCKER_HOST`` or the local socket)."""
    key = docker_host or os.environ.get("DOCKER_HOST")
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = docker_client(docker_host)
            client.api.timeout = API_TIMEOUT
        return client


#: The cgroup termgym's containers are made under when the engine is on this machine with the
#: cgroupfs driver (see :func:`cgroup_parent`).
CGROUP_PARENT = "termgym-docker"
#: CPU weight per container: that of one process (cgroup v1 ``cpu.shares``, v2 ``cpu.weight``).
CGROUP_V1_SHARES, CGROUP_V2_WEIGHT = 1024, 100
_parents: dict[int, Path | None] = {}


def cgroup_parent(client) -> str | None:
    """The cgroup parent for this engine's containers (weighted by :func:`reweigh_parent`); None: Docker's own.

    Docker puts every container under one ``docker`` cgroup whose CPU weight is that of a single
    process: on a busy machine all sandboxes *together* then get the CPU time of one process (with
    the load at 80, 64 SWE-SYNTH graders ran so slowly that only 21 of 64 finished their tests in
    time, while the local backend's processes, each competing at full weight, passed 64 of 64).
    Under :data:`CGROUP_PARENT`, weighted as one process per container, each container competes
    like a process. Only with the cgroupfs driver on this machine, as root; else Docker's default.
    """
    key = id(client)
    if key not in _parents:
        group = None
        from termgym.sandbox.docker.hosttree import engine_is_local

        try:
            info = client.info() if engine_is_local(client) else {}
            if info.get("CgroupDriver") == "cgroupfs":
                v2 = str(info.get("CgroupVersion", "1")) == "2"
                group = Path("/sys/fs/cgroup") / CGROUP_PARENT if v2 else Path("/sys/fs/cgroup/cpu") / CGROUP_PARENT
                group.mkdir(exist_ok=True)
                _write_weight(group, 1)
        except Exception:  # noqa: BLE001 - no such controller, not allowed: Docker's default parent
            group = None
        _parents[key] = group
    return "/" + CGROUP_PARENT if _parents[key] is not None else None


def reweigh_parent(client) -> None:
    """Set the parent's CPU weight to one process per container under it (every process's containers
    count: the child cgroups are listed). Called when a container starts and when one is disposed of."""
    group = _parents.get(id(client))
    if group is None:
        return
    with contextlib.suppress(OSError):
        _write_weight(group, sum(1 for entry in os.scandir(group) if entry.is_dir()))


def _write_weight(group: Path, containers: int) -> None:
    n = max(1, containers)
    if (group / "cpu.weight").exists():
        (group / "cpu.weight").write_text(str(min(10000, n * CGROUP_V2_WEIGHT)))
    else:
        (group / "cpu.shares").write_text(str(min(262144, n * CGROUP_V1_SHARES)))


def container_labels(*, pool: bool = False, tree: str | None = None) -> dict[str, str]:
    """Labels for a container this process creates (``tree``: its bound host directory)."""
    labels = {
        LABEL: "1",
        LABEL_SESSION: SESSION_ID,
        LABEL_HOST: socket.gethostname(),
        LABEL_PID: str(os.getpid()),
        LABEL_PID_START: process_start_ticks(os.getpid()),
    }
    if pool:
        labels[LABEL_POOL] = "1"
    if tree:
        labels[LABEL_TREE] = tree
    return labels


def pool_key(spec: SandboxSpec) -> tuple:
    """What makes two specs' containers interchangeable before start: image, limits, network."""
    binds = tuple(read_only_binds(spec))  # mounts are fixed when a container is created
    return (spec.image or DEFAULT_BASE_IMAGE, spec.limits, bool(spec.network), binds)


def create_container(client, spec: SandboxSpec, *, pool: bool = False, tree: HostTree | None = None) -> str:
    """Create and start a container for ``spec`` (without files or setup); return its id.

    Pool containers get no workdir and only :data:`COMMAND_ENV` (the shell's exec brings the
    spec's). ``tree``: host directories bound read-write at their sandbox paths
    (:mod:`~termgym.sandbox.docker.hosttree`).
    """
    import docker.errors
    import docker.types

    image = spec.image or DEFAULT_BASE_IMAGE
    lim: Limits = spec.limits
    ulimits = []
    if lim.cpu_seconds:
        ulimits.append(docker.types.Ulimit(name="cpu", soft=int(lim.cpu_seconds), hard=int(lim.cpu_seconds)))
    if lim.file_size_mb:
        size = int(lim.file_size_mb) * 1024 * 1024
        ulimits.append(docker.types.Ulimit(name="fsize", soft=size, hard=size))
    if lim.open_files:
        ulimits.append(docker.types.Ulimit(name="nofile", soft=int(lim.open_files), hard=int(lim.open_files)))
    host: dict = dict(
        init=True,
        network_mode="bridge" if spec.network else "none",
        security_opt=["no-new-privileges"],
        ulimits=ulimits,
        # The main process is `sleep infinity`: nothing to log, so no log file and copier per container.
        log_config=docker.types.LogConfig(type="none"),
    )
    binds = {host_dir: {"bind": dest, "mode": "ro"} for host_dir, dest in read_only_binds(spec)}
    if tree is not None:
        binds.update(tree.binds())
    if binds:
        host["binds"] = binds
    parent = cgroup_parent(client)
    if parent:
        host["cgroup_parent"] = parent
    if lim.memory_mb:
        host["mem_limit"] = f"{int(lim.memory_mb)}m"
        host["memswap_limit"] = f"{int(lim.memory_mb)}m"  # no swap: a hog is OOM-killed, not slowed
    if lim.pids:
        host["pids_limit"] = int(lim.pids)
    if lim.cpus:
        host["nano_cpus"] = int(lim.cpus * 1e9)
    if lim.storage_mb:
        host["storage_opt"] = {"size": f"{int(lim.storage_mb)}M"}
    config: dict = dict(
        command=["sleep", "infinity"],
        name=f"termgym-{SESSION_ID}-{secrets.token_hex(4)}",
        hostname="sandbox",
        labels=container_labels(pool=pool, tree=str(tree.path) if tree is not None else None),
        stdin_open=False,
        environment=dict(COMMAND_ENV) if pool else {**COMMAND_ENV, **spec.env},
    )
    if not pool:
        config["working_dir"] = spec.workdir
    api = client.api

    def create() -> str:
        # The low-level API: the models' create() inspects the new container (one more round trip
        # to the engine per sandbox) only to hand back an object this function does not need.
        return api.create_container(image, host_config=api.create_host_config(**host), **config)["Id"]

    try:
        # create + start rather than run: run() would try to pull a missing image from a registry.
        try:
            container_id = create()
        except docker.errors.APIError as exc:
            # storage_opt needs overlay2 on xfs with pquota; the limit is documented as best effort.
            if "storage_opt" not in host or "storage" not in str(exc).lower() or isinstance(
                exc, docker.errors.ImageNotFound
            ):
                raise
            host.pop("storage_opt")
            container_id = create()
        try:
            api.start(container_id)
        except BaseException:
            remove_container(client, container_id)
            raise
        if parent:
            reweigh_parent(client)
    except docker.errors.ImageNotFound as exc:
        raise BackendUnavailable(
            f"image {image!r} is not on the Docker host. Build termgym's base image with "
            f"`termgym images build-base`, build the task's Dockerfile (termgym.sandbox.images.build_image), "
            f"or `docker load` the image. ({exc.explanation})"
        ) from exc
    except docker.errors.APIError as exc:
        raise SandboxError(f"docker could not start a container from {image!r}: {exc.explanation or exc}") from exc
    return container_id


_image_runtimes: dict[str, str] = {}


def image_runtime(client, image: str) -> str:
    """What records call the system of containers made from ``image`` (cached per image name).

    termgym's base image carries the runtime version it was imported from; a task's own image is
    named as ``image:<name>@<short id>``.
    """
    cached = _image_runtimes.get(image)
    if cached is None:
        from termgym.sandbox.images import LABEL_KIND, LABEL_RECIPE

        try:
            found = client.images.get(image)
        except Exception:
            return f"image:{image}"
        labels = found.labels or {}
        if labels.get(LABEL_KIND) == "base" and labels.get(LABEL_RECIPE):
            cached = labels[LABEL_RECIPE]
        else:
            cached = f"image:{image}@{found.short_id.split(':')[-1]}"
        _image_runtimes[image] = cached
    return cached


def remove_container(client, container_id: str) -> None:
    """Remove a container and everything running in it; a missing container is fine."""
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound):
        try:
            client.api.remove_container(container_id, force=True, v=True)
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                raise


def container_host_pid(client, container_id: str) -> int | None:
    """The pid of the container's init on this machine, or None when the engine runs elsewhere.

    The engine reports a pid in its own pid namespace; it is ours only if that process's cgroup
    names the container (true for a local engine whatever DOCKER_HOST spells it as).
    """
    info = client.api.inspect_container(container_id)
    pid = int(info.get("State", {}).get("Pid") or 0)
    if not pid:
        return None
    try:
        cgroups = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    return pid if info["Id"] in cgroups else None

