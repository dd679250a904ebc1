"""A container made ready for a sandbox: started, its host directories bound, its execs waiting.

:func:`prepare` does everything a sandbox's start needs before the task's files: creates and
starts the container (with the workdir and ``/tmp`` bound from the host where it can, see
:mod:`~termgym.sandbox.docker.hosttree`), starts the supervisor, starts the sandbox shell (which
then waits for its token on stdin, before it enters the workdir) and opens a pidfd of the
container's init. The warm pool (:mod:`~termgym.sandbox.docker.pool`) does this ahead of time, so
a sandbox taken from it only copies the task's tree in on the host and sends the shell its token:
one socket round trip.

The supervisor is a bash loop that kills on request every process in the container except the
init, the main process, itself and those listed (the shell), using builtins only, so it works even
when a fork bomb has used up the pids limit.
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from termgym.sandbox.base import Mode, SandboxError, SandboxSpec
from termgym.sandbox.docker.channel import ExecChannel
from termgym.sandbox.docker.container import COMMAND_ENV, create_container
from termgym.sandbox.docker.hosttree import HostTree, bindable_paths, engine_is_local
from termgym.sandbox.docker.removal import InitHandle, dispose, open_init
from termgym.sandbox.images import DEFAULT_BASE_IMAGE
from termgym.sandbox.shell import shell_argv

# The supervisor. At start it spares pid 1, its children (the container's main process) and
# itself; each request line "K <pid>..." kills every other process not listed, in passes until
# none is left (a fork bomb refills between passes); "A <shell>" kills that shell first (so it
# runs nothing more of its command line), then every other process. Builtins only: it must not
# need a new pid.
SUPERVISOR = r"""
exec 2>/dev/null
__keep=" 1 $$ "
for __d in /proc/[0-9]*; do
  read -r __s <"$__d/stat" || continue
  __r=${__s##*) }; set -- $__r
  [ "$2" = 1 ] && __keep="$__keep${__d#/proc/} "
done
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
        _, pid = channel.read_line(b"READY ", timeout=SUPERVISOR_START_TIMEOUT)
    except (TimeoutError, EOFError) as exc:
        channel.close()
        raise SandboxError(f"the sandbox supervisor did not start (does the image have bash?): {exc}") from exc
    return channel, int(pid)


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
    init: InitHandle | None = None
    supervisor: ExecChannel | None = None
    supervisor_pid: int | None = None
    shell: ExecChannel | None = None  # a sandbox shell waiting for its token

    def discard(self, client) -> None:
        """Close its execs and dispose of the container (killed now, removed in the background)."""
        for channel in (self.shell, self.supervisor):
            if channel is not None:
                channel.close()
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
        # Independent API round trips: side by side.
        supervisor = STARTER.submit(start_supervisor, client.api, container_id)
        init = STARTER.submit(open_init, client, container_id) if engine_is_local(client) else None
        shell_error: BaseException | None = None
        try:
            ready.shell = open_shell_exec(client.api, container_id, spec, mode)
        except BaseException as exc:  # noqa: BLE001 - raised below, once the other two are collected
            shell_error = exc
        if init is not None:
            ready.init = init.result()  # never raises: None when the pid cannot be had
        ready.supervisor, ready.supervisor_pid = supervisor.result()
        if shell_error is not None:
            raise shell_error
    except BaseException:
        with contextlib.suppress(Exception):
            ready.discard(client)
        raise
    return ready
