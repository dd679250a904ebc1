"""Disposing of a sandbox's container: killed at once, removed in the background, retried.

``close()`` must leave nothing running, but need not wait for the engine to tear the container
down. So :func:`dispose` kills first — on this machine by signalling the container's init through a
pidfd (the kernel then kills every process of its pid namespace; no API round trip), otherwise
with the engine's ``kill`` — and hands the removal (and the container's host directories) to a few
background threads. An engine error on removal (a 500 ``unable to remove filesystem … unlinkat``
under load) is retried with growing delays; a container that still cannot be removed is left, dead,
for ``termgym gc`` (which removes dead termgym containers whoever made them), and recorded in
:data:`failed_removals`. It never reaches the episode.

At interpreter exit the pending removals are finished (for up to :data:`EXIT_WAIT` seconds);
anything disposed of after that is removed synchronously.
"""

from __future__ import annotations

import atexit
import contextlib
import queue
import threading
import time

from termgym.sandbox.docker.hosttree import HostTree
from termgym.sandbox.process_handle import ProcessHandle, hold

#: Seconds between removal attempts after a failure (then the container is left to ``termgym gc``).
RETRY_DELAYS: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
#: Background removal threads.
WORKERS = 4
#: Seconds the exit handler waits for pending removals.
EXIT_WAIT = 60.0


def open_init(client, container_id: str) -> ProcessHandle | None:
    """A pidfd of the container's init when the engine runs on this machine, else None."""
    from termgym.sandbox.docker.container import container_host_pid

    try:
        pid = container_host_pid(client, container_id)
    except Exception:  # noqa: BLE001 - without it, close() asks the engine to kill
        return None
    if pid is None:
        return None
    init = hold(pid)
    if init is None:
        return None
    try:  # the pid could have been reused between the engine's answer and pidfd_open
        with open(f"/proc/{pid}/cgroup") as fh:
            if container_id not in fh.read():
                raise OSError("pid reused")
    except OSError:
        init.close()
        return None
    return init


#: ``(container id, last error)`` of removals that failed every retry (``termgym gc`` removes them).
failed_removals: list[tuple[str, str]] = []

_queue: queue.Queue = queue.Queue()
_workers: list[threading.Thread] = []
_lock = threading.Lock()
_pending = 0
_idle = threading.Condition(_lock)
_exiting = False


def dispose(client, container_id: str | None, *, init: ProcessHandle | None = None,
            tree: HostTree | None = None) -> None:
    """Kill a container now; remove it and its host directories in the background (see the module doc)."""
    killed = False
    if init is not None:
        try:
            killed = init.kill(wait=5.0)
        except Exception:  # noqa: BLE001 - a close must not fail an episode: the engine kills instead
            killed = False
        init.close()
    if container_id is not None and not killed:
        import docker.errors

        with contextlib.suppress(docker.errors.APIError):
            client.api.kill(container_id)  # a container that is already gone or stopped is fine
    from termgym.sandbox.docker.container import reweigh_parent

    reweigh_parent(client)  # a killed container's cgroup goes once it is removed; counted until then
    job = (client, container_id, tree)
    if _exiting:
        _remove(*job)
        return
    global _pending
    with _lock:
        _pending += 1
        if len(_workers) < WORKERS:
            thread = threading.Thread(target=_work, name="termgym-docker-remove", daemon=True)
            _workers.append(thread)
            thread.start()
    _queue.put(job)


def wait_for_removals(timeout: float = 60.0) -> bool:
    """Block until every removal handed to the background has been tried; True if none is pending."""
    deadline = time.monotonic() + timeout
    with _lock:
        while _pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            _idle.wait(remaining)
    return True


def _work() -> None:
    global _pending
    while True:
        job = _queue.get()
        try:
            _remove(*job)
        finally:
            with _lock:
                _pending -= 1
                if not _pending:
                    _idle.notify_all()


def _remove(client, container_id: str | None, tree: HostTree | None) -> None:
    from termgym.sandbox.docker.container import remove_container

    try:
        if container_id is not None:
            error = ""
            for delay in (*RETRY_DELAYS, None):
                try:
                    remove_container(client, container_id)
                    error = ""
                    break
                except Exception as exc:  # noqa: BLE001 - the engine's 500s are retried, then left to gc
                    error = f"{type(exc).__name__}: {exc}"
                if delay is None or _exiting:
                    break
                time.sleep(delay)
            if error:
                with _lock:
                    failed_removals.append((container_id, error))
                    del failed_removals[:-100]
    finally:
        if tree is not None:
            tree.remove()  # the container is dead (killed before the job was queued)
        from termgym.sandbox.docker.container import reweigh_parent

        reweigh_parent(client)


@atexit.register
def _finish_at_exit() -> None:
    """Wait for pending removals (each tried once more, no delays); containers disposed of after
    this are removed synchronously. Registered before the pool module's handler (the pool imports
    this module), so it runs after the shared pools have been emptied."""
    global _exiting
    _exiting = True  # no more retries with delays; what is disposed of from now on is removed at once
    wait_for_removals(EXIT_WAIT)
