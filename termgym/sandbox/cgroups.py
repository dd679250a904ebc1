"""Process-control helpers over cgroups, shared by the backends that kill from this machine.

Both the local backend (its own cgroups per sandbox) and the Docker backend with an engine on
this machine (the container's cgroups, see :mod:`~termgym.sandbox.docker.hostkill`) stop a
sandbox's processes the same way: freeze the group so nothing forks between two reads, SIGKILL
from here, thaw, and wait until each victim has exited.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from termgym.sandbox.process_handle import hold

#: Where the cgroup v1 hierarchies are mounted.
CGROUP_ROOT = Path("/sys/fs/cgroup")


def process_start_ticks(pid: int) -> str:
    """The start time of ``pid`` in clock ticks since boot ("" if unknown): tells pid reuse apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def child_pids(pid: int) -> list[int] | None:
    """The children of ``pid``'s main thread as ``/proc`` lists them; None when ``pid`` is gone."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return None


def has_exited(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie, or gone already)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


@contextlib.contextmanager
def frozen(freezer: Path | None) -> Iterator[None]:
    """Freeze every process of a freezer cgroup for the duration (no-op without one).

    ``freezer`` is a cgroup v1 freezer directory (``freezer.state``) or a cgroup v2 directory
    (``cgroup.freeze``). Waits up to a second for the group to report frozen (a process in an
    uninterruptible sleep can hold it in FREEZING); thaws whatever happens.
    """
    if freezer is None:
        yield
        return
    v1 = (freezer / "freezer.state").exists()
    control = freezer / ("freezer.state" if v1 else "cgroup.freeze")
    try:
        control.write_text("FROZEN" if v1 else "1")
        # Most groups report frozen within a millisecond: poll finely first, then every 5 ms.
        delay, deadline = 0.0002, time.monotonic() + 1.0
        while not _is_frozen(freezer, v1) and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(delay * 2, 0.005)
        yield
    finally:
        with contextlib.suppress(OSError):
            control.write_text("THAWED" if v1 else "0")


def _is_frozen(freezer: Path, v1: bool) -> bool:
    try:
        if v1:
            return (freezer / "freezer.state").read_text().strip() == "FROZEN"
        return "frozen 1" in (freezer / "cgroup.events").read_text()
    except OSError:
        return True  # the group is gone: nothing left to wait for


def send_kill(pids: Iterable[int]) -> None:
    """SIGKILL each of ``pids``; those already gone (or not ours to signal) are skipped."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def in_cgroup(pid: int, cg: Path) -> bool:
    """Whether the process that holds ``pid`` now is in cgroup ``cg`` (a cgroup directory of any
    hierarchy), as the kernel says in ``/proc/PID/cgroup``."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return False
    where = str(cg)
    for line in lines:
        path = line.split(":", 2)[-1]
        if path not in ("", "/") and where.endswith(path):
            return True
    return False


def kill_members(cg: Path, pids: Iterable[int]) -> list[int]:
    """SIGKILL each of ``pids`` that is a process of cgroup ``cg`` when it is signalled; return those.

    A list read from ``cgroup.procs`` is stale the moment it is read: a listed process may exit and
    its pid pass to a stranger before the kill (``termgym gc`` removes cgroups whose processes are
    still running). So each pid is held by a pidfd first, then checked to be in ``cg`` (the process
    the pidfd holds is the one that holds the pid until it is reaped), and killed through the
    pidfd: a signal reaches that process or nobody."""
    killed = []
    for pid in pids:
        handle = hold(pid)
        if handle is None:
            continue
        try:
            if in_cgroup(pid, cg):
                handle.kill()
                killed.append(pid)
        finally:
            handle.close()
    return killed


def wait_exited(pids: Iterable[int], timeout: float = 2.0) -> None:
    """Return once each of ``pids`` has exited (see :func:`has_exited`) or ``timeout`` passed."""
    left = set(pids)
    deadline = time.monotonic() + timeout
    delay = 0.0002  # a SIGKILLed process is usually gone within a millisecond
    while left and time.monotonic() < deadline:
        left = {pid for pid in left if not has_exited(pid)}
        if left:
            time.sleep(delay)
            delay = min(delay * 2, 0.002)


#: How long :func:`remove_cgroup` keeps trying: a SIGKILLed process leaves its cgroup within
#: milliseconds on an idle host, but a loaded one (200 episodes closing at once beside a training
#: run) took over a second, and a cgroup given up on then stays behind.
REMOVE_SECONDS = 15.0


def remove_cgroup(cg: Path, timeout: float = REMOVE_SECONDS) -> None:
    """Kill what runs in cgroup ``cg`` (:func:`kill_members`) and remove it (retrying while its last
    processes exit)."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            procs = (cg / "cgroup.procs").read_text().split()
        except FileNotFoundError:  # gone already, or never a cgroup: rmdir says which
            procs = []
        except OSError:
            return
        kill_members(cg, (int(pid) for pid in procs if pid.isdigit()))
        try:
            cg.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
