"""A warm pool of ready containers, so a sandbox's ``start()`` waits for neither ``docker run`` nor ``docker exec``.

Each pool container is made ready ahead of time (:func:`~termgym.sandbox.docker.ready.prepare`):
started, its workdir and ``/tmp`` bound from host directories where the engine is on this machine,
its supervisor running and a sandbox shell waiting for its token. Taking one leaves a sandbox's
start with copying the task's tree in on the host and one socket round trip to the shell.

Containers are interchangeable when their image, limits, network, read-only binds and (where it
is bound from the host) workdir agree (:func:`ready_key`); files, setup commands, env and mode are
applied after a container is taken (a shell opened for another env or mode is replaced by a new
exec). The pool keeps up to ``size`` ready containers per key, refilling in a background thread
after each take; the first request for a key is a miss (the caller starts its own container) and
starts filling (the process-wide pool: the second). A taken container belongs to its sandbox, which disposes of it on ``close()``:
containers are never reused across episodes.

Every :class:`~termgym.sandbox.docker.sandbox.DockerSandbox` uses the process-wide pool of
:data:`DEFAULT_POOL_SIZE` per engine unless given ``pool=`` or ``pool_size=`` (0: none).

>>> pool = WarmPool(size=4)
>>> pool.warm(SandboxSpec())                  # optional: fill now instead of on first use
>>> with DockerSandbox(spec, pool=pool) as sb: ...
>>> pool.close()                              # removes the containers still waiting
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections import deque

from termgym.sandbox.base import Mode, SandboxSpec
from termgym.sandbox.docker.container import get_client, pool_key
from termgym.sandbox.docker.ready import ReadyContainer, bound_paths, prepare, supervisor_result

#: Ready containers per key in the process-wide pool a sandbox uses by default.
DEFAULT_POOL_SIZE = 2


def ready_key(client, spec: SandboxSpec) -> tuple:
    """What makes two specs' ready containers interchangeable: :func:`pool_key`, and the workdir
    when it is bound from the host (a mount is fixed when the container is created)."""
    workdir = spec.workdir if spec.workdir in bound_paths(client, spec) else None
    return (*pool_key(spec), workdir)


def shell_key(spec: SandboxSpec, mode: Mode) -> tuple:
    """What a waiting shell was started for: its mode, workdir, pids limit and environment."""
    return (mode, spec.workdir, spec.limits.pids, tuple(sorted(spec.env.items())))


class WarmPool:
    """Keeps ``size`` ready containers per :func:`ready_key` to be taken (see the module docstring).

    ``fill_after``: how many times a key must be asked for before the pool fills for it (1: at the
    first miss). The process-wide default pool waits for a second request, so a key used once (a
    one-off sandbox, a test) costs no waiting containers, while an episode loop (its agent's and its
    grader's sandbox share a key) has them from its second sandbox on.
    """

    def __init__(self, size: int = 2, *, docker_host: str | None = None, client=None, fill_after: int = 1) -> None:
        if not isinstance(size, int) or size < 0:
            raise ValueError(f"WarmPool size must be a non-negative int, got {size!r}")
        if not isinstance(fill_after, int) or fill_after < 1:
            raise ValueError(f"WarmPool fill_after must be a positive int, got {fill_after!r}")
        self.size = size
        self.fill_after = fill_after
        self._asked: dict[tuple, int] = {}
        self.docker_host = docker_host
        self._client = client
        self._lock = threading.Lock()
        self._ready: dict[tuple, deque[tuple[tuple, ReadyContainer]]] = {}
        self._specs: dict[tuple, tuple[SandboxSpec, Mode]] = {}
        self._filling: dict[tuple, threading.Thread] = {}
        self.closed = False
        self.hits = 0
        self.misses = 0
        self.errors: list[str] = []  # last refill failures, for diagnostics

    @property
    def client(self):
        if self._client is None:
            self._client = get_client(self.docker_host)
        return self._client

    def acquire(self, spec: SandboxSpec, mode: Mode = "persistent") -> ReadyContainer | None:
        """Take a ready container for ``spec`` (None if none waits); either way a refill starts.

        A waiting shell opened for another mode or env is closed (the sandbox opens its own).
        """
        key = ready_key(self.client, spec)
        taken: tuple[tuple, ReadyContainer] | None = None
        dead: list[ReadyContainer] = []
        with self._lock:
            if self.closed or self.size == 0:
                return None
            self._specs.setdefault(key, (_bare_spec(spec), mode))
            ready = self._ready.setdefault(key, deque())
            while ready and taken is None:
                candidate = ready.popleft()
                if _alive(candidate[1]):
                    taken = candidate
                else:
                    dead.append(candidate[1])
            if taken is not None:
                self.hits += 1
            else:
                self.misses += 1
            self._asked[key] = asked = self._asked.get(key, 0) + 1
        for container in dead:
            with contextlib.suppress(Exception):
                container.discard(self.client)
        if asked >= self.fill_after:
            self._refill(key)
        if taken is None:
            return None
        opened_for, container = taken
        if opened_for != shell_key(spec, mode) and container.shell is not None:
            container.shell.close()
            container.shell = None
        return container

    def warm(self, spec: SandboxSpec, wait: bool = True, timeout: float = 120.0, mode: Mode = "persistent") -> None:
        """Start filling the pool for ``spec`` now; with ``wait``, return once it is full."""
        key = ready_key(self.client, spec)
        with self._lock:
            self._specs.setdefault(key, (_bare_spec(spec), mode))
            self._ready.setdefault(key, deque())
        thread = self._refill(key)
        if wait and thread is not None:
            thread.join(timeout)

    def ready_count(self, spec: SandboxSpec | None = None) -> int:
        """Containers waiting for ``spec``'s key (or in total)."""
        key = ready_key(self.client, spec) if spec is not None else None
        with self._lock:
            if key is not None:
                return len(self._ready.get(key, ()))
            return sum(len(q) for q in self._ready.values())

    def _refill(self, key: tuple) -> threading.Thread | None:
        with self._lock:
            if self.closed:
                return None
            running = self._filling.get(key)
            if running is not None and running.is_alive():
                return running
            thread = threading.Thread(target=self._fill, args=(key,), name="termgym-pool-fill", daemon=True)
            self._filling[key] = thread
            thread.start()
            return thread

    def _fill(self, key: tuple) -> None:
        spec, mode = self._specs[key]
        while True:
            with self._lock:
                if self.closed or len(self._ready[key]) >= self.size:
                    return
            try:
                container = prepare(self.client, spec, mode, pool=True)
            except Exception as exc:  # noqa: BLE001 - a failed refill only costs warm starts
                self.errors = [*self.errors[-9:], f"{type(exc).__name__}: {exc}"]
                return
            with self._lock:
                if not self.closed:
                    self._ready[key].append((shell_key(spec, mode), container))
                    continue
            container.discard(self.client)  # closed while we were making it
            return

    def close(self) -> None:
        """Stop refilling and dispose of every container still waiting. Idempotent."""
        with self._lock:  # a second call finds nothing waiting and no filler to join
            self.closed = True
            threads = list(self._filling.values())
            self._filling.clear()
        for thread in threads:
            thread.join(timeout=60)
        with self._lock:
            waiting = [container for q in self._ready.values() for _, container in q]
            self._ready.clear()
        for container in waiting:
            with contextlib.suppress(Exception):
                container.discard(self.client)

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _alive(container: ReadyContainer) -> bool:
    """Whether a waiting container's execs are still there (an engine restart ends them)."""
    if container.shell is not None and container.shell.gone():
        return False
    supervisor = container.supervisor
    if supervisor is not None and supervisor.done():
        started = supervisor_result(supervisor, 0)
        return started is not None and not started[0].gone()
    return True


def _bare_spec(spec: SandboxSpec) -> SandboxSpec:
    """The part of a spec a pool container is made from (nothing task-specific)."""
    return SandboxSpec(image=spec.image, network=spec.network, limits=spec.limits, workdir=spec.workdir,
                       env=dict(spec.env), ro_binds=dict(spec.ro_binds))


_shared: dict[tuple[str | None, int], WarmPool] = {}
_shared_lock = threading.Lock()


def shared_pool(size: int, docker_host: str | None = None) -> WarmPool:
    """The process-wide pool of ``size`` for an engine (``sandbox_options={"pool_size": N}``; fills
    for a key at its second request). Keyed by the engine actually meant: ``docker_host``, else
    ``DOCKER_HOST`` as set now, so a sandbox never gets a container from another engine's pool."""
    docker_host = docker_host or os.environ.get("DOCKER_HOST") or None
    with _shared_lock:
        pool = _shared.get((docker_host, size))
        if pool is None or pool.closed:
            pool = _shared[(docker_host, size)] = WarmPool(size, docker_host=docker_host, fill_after=2)
        return pool


@atexit.register
def close_shared_pools() -> None:
    """Dispose of the waiting containers of every shared pool (also run at interpreter exit)."""
    with _shared_lock:
        pools = list(_shared.values())
        _shared.clear()
    for pool in pools:
        with contextlib.suppress(Exception):
            pool.close()
