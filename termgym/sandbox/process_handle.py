"""A process of this machine held by a pidfd, so that a signal reaches that process or nobody.

A pid is only a number. Once its process has exited and been reaped, the kernel hands the number
to a later fork (after 32,768 forks where ``pid_max`` has its default of small machines, and a test
run forks far more). A pid kept to be killed later (a sandbox's init or shell, killed when the
sandbox closes or restarts, perhaps long after the shell exited) can then name a stranger of any
user: a Ray raylet, a test runner. A pidfd (Linux 5.3) names the process itself: once it has
exited, a signal through it fails instead of reaching whoever holds the number now.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from dataclasses import dataclass


@dataclass
class ProcessHandle:
    """A pidfd of one process (see the module doc)."""

    pid: int
    fd: int

    def kill(self, wait: float = 0.0) -> bool:
        """SIGKILL the process, if it is still running; True once it has exited within ``wait``
        seconds (0: whether it has exited already). A pid namespace's init exits only after every
        other process in it has, so for an init True means the namespace is empty."""
        try:
            signal.pidfd_send_signal(self.fd, signal.SIGKILL)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return self.exited(wait)

    def exited(self, wait: float = 0.0) -> bool:
        """Whether the process has exited, waiting up to ``wait`` seconds for it (a pidfd polls
        readable from then on). ``poll``, not ``select``: a busy process holds pidfds numbered
        past select's limit of 1024."""
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        try:
            return bool(poller.poll(max(0, int(wait * 1000))))
        except OSError:
            return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def hold(pid: int, pidns: str | None = None) -> ProcessHandle | None:
    """A handle on the process that has ``pid`` now, or None if there is none (or pidfds are not
    supported). With ``pidns`` (a ``/proc/PID/ns/pid`` link), also None when that process is in
    another pid namespace: the number has passed to a stranger already."""
    try:
        fd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None
    handle = ProcessHandle(pid, fd)
    if pidns is not None:
        # Read after the pidfd is open: the fd's process is the one read here, or it has died.
        try:
            same = os.readlink(f"/proc/{pid}/ns/pid") == pidns
        except OSError:
            same = False
        if not same:
            handle.close()
            return None
    return handle
