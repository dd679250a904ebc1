"""A container made ready for a sandbox: started, its host directories bound, its execs waiting.

:func:`prepare` does everything a sandbox's start needs before the task's files: creates and
starts the container (with the workdir and ``/tmp`` bound from the host where it can, see
:mod:`~termgym.sandbox.docker.hosttree`), starts the sandbox shell (which then waits for its token
on stdin, before it enters the workdir), and where the engine is on this machine opens a pidfd of
the container's init and finds its cgroups, through which the host kills
(:mod:`~termgym.sandbox.docker.hostkill`); elsewhere it starts the supervisor instead. The warm pool (:mod:`~termgym.sandbox.docker.pool`) does this ahead of time, so
a sandbox taken from it only copies the task's tree in on the host and sends the shell its token:
one socket round trip.

The supervisor (for an engine elsewhere) is a bash loop that kills on request every process in the
container except the init, the main process, itself and those listed (the shell), using builtins
only, so it works even when a fork bomb has used up the pids limit.
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from termgym.sandbox.base import Mode, SandboxError, SandboxSpec
from termgym.sandbox.docker.channel import ExecChannel
from termgym.sandbox.docker.container import COMMAND_ENV, create_container
from termgym.sandbox.docker.hostkill import HostKiller, host_killer
from termgym.sandbox.docker.hosttree import HostTree, bindable_paths, engine_is_local
from termgym.sandbox.docker.removal import dispose, open_init
from termgym.sandbox.images import DEFAULT_BASE_IMAGE
from termgym.sandbox.process_handle import ProcessHandle
from termgym.sandbox.shell import shell_argv

# The supervisor. At start it spares pid 1, the oldest child of pid 1 (the container's main
# process: the earliest start time, so an orphan the agent left to pid 1 is never spared, however
# late the supervisor starts) and itself; each request line "K <pid>..." kills every other process
# not listed, in passes until none is left (a fork bomb refills between passes); "A <shell>" kills
# that shell first (so it runs nothing more of its command line), then every other process.
# Builtins only: it must not need a new pid. It says READY only after a first line on stdin: output
# an exec writes before its attach has been read can sit in the HTTP client's buffer (the reply to
# the upgrade request) instead of on the socket we read, and a READY lost there cost a 120 s wait.
SUPERVISOR = r"""
exec 2>/dev/null
__main= __first=
for __d in /proc/[0-9]*; do
  read -r __s <"$__d/stat" || continue
  __r=${__s##*) }; set -- $__r
  if [ "$2" = 1 ] && { [ -z "$__first" ] || [ "${20}" -lt "$__first" ]; }; then
    __main=${__d#/proc/} __first=${20}
  fi
done
__keep=" 1 $$ $__main "
read -r __go || exit 0
printf 'READY %d\n' "$$"
while read -r __op __args; do
  if [ "$__op" = A ]; then kill -9 $__args; __args=; fi
  __spare="$__keep $__args "
  __n=1 __passes=0
  while [ "$__n" -gt 0 ] && [ "$__passes" -lt 200 ]; do
    __n=0 __passes=$((__passes + 1))
    for __d in /proc/[0-9]*; do
      __p=${__d#/proc/}
      case "$__spare" in *" $__p "*) continue ;; esac
      read -r __s <"$__d/stat" || continue
      __r=${__s##*) }; set -- $__r
      [ "$1" = Z ] && continue
      kill -9 "$__p" && __n=$((__n + 1))
    done
  done
  printf 'DONE %d\n' "$__passes"
done
"""

#: Threads that run the independent API calls of a start side by side.
STARTER = ThreadPoolExecutor(max_workers=64, thread_name_prefix="termgym-docker-start")
#: Containers made ready at once per process. Hundreds of episodes resetting together would
#: otherwise swamp the engine (every start slower, execs timing out); queued here, each start
#: takes its usual time and the engine stays busy.
START_SLOTS = max(4, os.cpu_count() or 1)
_slots = threading.BoundedSemaphore(START_SLOTS)


#: Seconds the supervisor has to say READY (a machine at a load of 70 has taken over 30).
SUPERVISOR_START_TIMEOUT = 120.0


def start_supervisor(api, container_id: str) -> tuple[ExecChannel, int]:
    """Start the supervisor exec; return its channel and pid (in the container)."""
    channel = ExecChannel(api, container_id, ["bash", "--noprofile", "--norc", "-c", SUPERVISOR, "termgym-supervisor"])
    try:
        channel.send(b"GO\n")  # only now may it write: nothing of it can be left in the upgrade reply's buffer
        _, pid = channel.read_line(b"READY ", timeout=SUPERVISOR_START_TIMEOUT)
    except (TimeoutError, EOFError) as exc:
        channel.close()
        raise SandboxError(f"the sandbox supervisor did not start (does the image have bash?): {exc}") from exc
    return channel, int(pid)


def close_supervisor(supervisor: Future | None) -> None:
    """Close a supervisor started in the background, now or as soon as its start ends."""
    if supervisor is None:
        return

    def close(done: Future) -> None:
        with contextlib.suppress(Exception):
            done.result()[0].close()

    supervisor.add_done_callback(close)


def supervisor_result(supervisor: Future | None, timeout: float = SUPERVISOR_START_TIMEOUT) -> tuple[ExecChannel, int] | None:
    """The started supervisor's ``(channel, pid)``, waiting for its start; None if it failed."""
    if supervisor is None:
        return None
    try:
        return supervisor.result(timeout)
    except Exception:  # noqa: BLE001 - the caller starts another (or restarts the container)
        return None


def pids_threshold(spec: SandboxSpec) -> int | None:
    """Process count at which the sandbox counts as full (a few below the pids limit)."""
    pids = spec.limits.pids
    return max(int(pids) - 3, 1) if pids else None


def open_shell_exec(api, container_id: str, spec: SandboxSpec, mode: Mode) -> ExecChannel:
    """Start a sandbox shell exec; it waits for its token on stdin (see :mod:`termgym.sandbox.shell`)."""
    return ExecChannel(api, container_id, shell_argv(mode, spec.workdir, full_at=pids_threshold(spec)),
                       {**COMMAND_ENV, **spec.env})


def bound_paths(client, spec: SandboxSpec) -> list[str]:
    """The sandbox paths of ``spec`` to bind from the host: its workdir and ``/tmp`` where the engine
    is on this machine and the image leaves them empty (else none)."""
    if not engine_is_local(client):
        return []
    return bindable_paths(client, spec.image or DEFAULT_BASE_IMAGE, [spec.workdir, "/tmp"])


@dataclass
class ReadyContainer:
    """A started container and what :func:`prepare` made for it (None where it made nothing)."""

    id: str
    tree: HostTree | None = None
    init: ProcessHandle | None = None
    supervisor: Future | None = None  # of (channel, pid): started beside the rest, waited for when needed
    killer: HostKiller | None = None  # kills from this machine instead (no supervisor is started)
    shell: ExecChannel | None = None  # a sandbox shell waiting for its token

    def discard(self, client) -> None:
        """Close its execs and dispose of the container (killed now, removed in the background)."""
        if self.shell is not None:
            self.shell.close()
        close_supervisor(self.supervisor)
        self.shell = self.supervisor = None
        dispose(client, self.id, init=self.init, tree=self.tree)
        self.init = None


def prepare(client, spec: SandboxSpec, mode: Mode, *, pool: bool = False) -> ReadyContainer:
    """Create and start a container for ``spec`` with its supervisor and a waiting shell (see the module doc).

    On failure everything made so far is disposed of and the error raised. At most
    :data:`START_SLOTS` run at once.
    """
    with _slots:
        return _prepare(client, spec, mode, pool=pool)


def _prepare(client, spec: SandboxSpec, mode: Mode, *, pool: bool) -> ReadyContainer:
    bound = bound_paths(client, spec)
    tree = HostTree(bound) if bound else None
    try:
        container_id = create_container(client, spec, pool=pool, tree=tree)
    except BaseException:
        if tree is not None:
            tree.remove()
        raise
    ready = ReadyContainer(container_id, tree)
    try:
        # Independent API round trips: side by side. A supervisor is started only where the host
        # cannot kill through the container's cgroups (see hostkill), and is not waited for: a
        # sandbox needs it only to kill, and waits for it then (an engine under load can take long
        # to start an exec, and most sandboxes never kill anything).
        local = engine_is_local(client)
        init = STARTER.submit(open_init, client, container_id) if local else None
        if not local:
            ready.supervisor = STARTER.submit(start_supervisor, client.api, container_id)
        try:
            ready.shell = open_shell_exec(client.api, container_id, spec, mode)
        finally:
            if init is not None:
                ready.init = init.result()  # never raises: None when the pid cannot be had
        if local:
            ready.killer = host_killer(ready.init)
            if ready.killer is None:
                ready.supervisor = STARTER.submit(start_supervisor, client.api, container_id)
    except BaseException:
        with contextlib.suppress(Exception):
            ready.discard(client)
        raise
    return ready
