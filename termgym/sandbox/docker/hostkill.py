"""Killing a container's processes from this machine, through the container's cgroups.

When the engine runs on this machine (the container's init is a process here, see
:func:`~termgym.sandbox.docker.removal.open_init`) and this process may write cgroups (root), a
Docker sandbox kills the way the local backend does: the container's freezer cgroup is frozen,
every process in the container's cgroup except its init, its main process and those spared (the
shell) gets SIGKILL from here, the group thaws, and the call returns once each one has exited.

Nothing inside the container takes part. The agent runs as root there and could kill, trace or
starve a process of ours in the container (a supervisor exec); it cannot reach the host's view
of its cgroup, and a frozen fork bomb cannot outrun the kill. It also spares every sandbox the
supervisor exec the engine would otherwise start (an exec cost the engine about 33 ms of CPU on a
2-core machine, a whole container about 200 ms; see ``docs/benchmarks.md``). Where the engine is elsewhere, or the cgroups cannot be found or
written, the sandbox uses the supervisor (:data:`~termgym.sandbox.docker.ready.SUPERVISOR`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from termgym.sandbox.cgroups import child_pids, frozen, process_start_ticks, send_kill, wait_exited

if TYPE_CHECKING:
    from termgym.sandbox.process_handle import ProcessHandle

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class ContainerCgroups:
    """Where a container's processes are listed (``procs``: a ``cgroup.procs`` file) and frozen."""

    procs: Path
    freezer: Path


def container_cgroups(pid: int, root: Path = CGROUP_ROOT) -> ContainerCgroups | None:
    """The cgroups of the container whose init is host ``pid`` (``/proc/<pid>/cgroup``), or None.

    cgroup v1: the ``pids`` group lists the processes (every process of the container is in it),
    the ``freezer`` group freezes them. cgroup v2 (the unified line ``0::<path>``, where it has the
    controllers): one directory does both. None when neither can be written here.
    """
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    v1: dict[str, Path] = {}
    unified: Path | None = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        rel = path.lstrip("/")
        if not controllers:
            unified = root / rel if (root / "cgroup.controllers").exists() else None
            continue
        for name in controllers.split(","):
            for mount in (root / name, root / controllers):
                if (mount / rel / "cgroup.procs").exists():
                    v1[name] = mount / rel
                    break
    if "pids" in v1 and "freezer" in v1:
        found = ContainerCgroups(v1["pids"] / "cgroup.procs", v1["freezer"])
    elif unified is not None and (unified / "cgroup.freeze").exists():
        found = ContainerCgroups(unified / "cgroup.procs", unified)
    else:
        return None
    control = found.freezer / ("freezer.state" if (found.freezer / "freezer.state").exists() else "cgroup.freeze")
    if not (os.access(control, os.W_OK) and os.access(found.procs, os.R_OK)):
        return None
    return found


def ns_pid(host_pid: int) -> int | None:
    """``host_pid``'s pid in its innermost pid namespace (the container's), or None if it is gone."""
    try:
        for line in Path(f"/proc/{host_pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError):
        return None
    return None


def oldest_child(pid: int) -> int | None:
    """The child of ``pid`` that started first (the container's main process, for its init)."""
    started = {child: process_start_ticks(child) for child in child_pids(pid) or ()}
    alive = [(int(ticks), child) for child, ticks in started.items() if ticks]
    return min(alive)[1] if alive else None


class HostKiller:
    """Kills a container's processes from this machine (see the module docstring).

    ``init``: the host pid of the container's init; ``main``: its main process (the init's first
    child), spared like the init, since the container ends with either.
    """

    def __init__(self, cgroups: ContainerCgroups, init: int, main: int | None) -> None:
        self.cgroups = cgroups
        self.keep = {init} | ({main} if main else set())

    def kill(self, spare: AbstractSet[int] = frozenset()) -> bool:
        """Kill every process of the container but the init, the main process and ``spare`` (pids in
        the container's namespace); return once each has exited. False when the container's cgroup
        is gone (the container stopped): the caller must start it again."""
        killed: list[int] = []
        with frozen(self.cgroups.freezer):
            try:
                pids = [int(p) for p in self.cgroups.procs.read_text().split()]
            except OSError:
                return False
            for pid in pids:
                if pid in self.keep:
                    continue
                inner = ns_pid(pid)
                if inner is not None and inner in spare:
                    continue
                killed.append(pid)
            send_kill(killed)
        wait_exited(killed)
        return True


def host_killer(init: ProcessHandle | None) -> HostKiller | None:
    """A :class:`HostKiller` for the container whose init ``init`` holds (None: the engine is
    elsewhere), or None (no cgroups here to use: the sandbox then kills through its supervisor)."""
    if init is None:
        return None
    init_pid = init.pid
    cgroups = container_cgroups(init_pid)
    if cgroups is None:
        return None
    # The init forks the main process right after it starts; until then there is nothing to spare
    # and a kill would end the container with its main process.
    deadline = time.monotonic() + 2.0
    main = oldest_child(init_pid)
    while main is None and time.monotonic() < deadline:
        time.sleep(0.002)
        main = oldest_child(init_pid)
    return HostKiller(cgroups, init_pid, main) if main is not None else None
