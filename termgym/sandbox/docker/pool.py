"""A warm pool of started Docker containers, so a sandbox's ``start()`` need not wait for ``docker run``.

Containers are interchangeable when their image, limits and network setting agree
(:func:`termgym.sandbox.docker.container.pool_key`); workdir, files, env and setup commands are applied after
a container is taken. The pool keeps up to ``size`` ready containers per key, refilling in a
background thread after each take; the first request for a key is a miss (the caller starts its
own container) and starts filling. A taken container belongs to its sandbox, which removes it on
``close()``: containers are never reused across episodes.

>>> pool = WarmPool(size=4)
>>> pool.warm(SandboxSpec())                  # optional: fill now instead of on first use
>>> with DockerSandbox(spec, pool=pool) as sb: ...
>>> pool.close()                              # removes the containers still waiting
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections import deque

from termgym.sandbox.base import SandboxSpec
from termgym.sandbox.docker.container import create_container, get_client, pool_key, remove_container


class WarmPool:
    """Keeps ``size`` started containers per (image, limits, network) ready to be taken."""

    def __init__(self, size: int = 2, *, docker_host: str | None = None, client=None) -> None:
        if not isinstance(size, int) or size < 0:
            raise ValueError(f"WarmPool size must be a non-negative int, got {size!r}")
        self.size = size
        self.docker_host = docker_host
        self._client = client
        self._lock = threading.Lock()
        self._ready: dict[tuple, deque[str]] = {}
        self._specs: dict[tuple, SandboxSpec] = {}
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

    def acquire(self, spec: SandboxSpec) -> str | None:
        """Take a ready container for ``spec`` (its id), or None; either way a refill starts."""
        key = pool_key(spec)
        with self._lock:
            if self.closed or self.size == 0:
                return None
            self._specs.setdefault(key, _bare_spec(spec))
            ready = self._ready.setdefault(key, deque())
            container_id = ready.popleft() if ready else None
            if container_id:
                self.hits += 1
            else:
                self.misses += 1
        self._refill(key)
        return container_id

    def warm(self, spec: SandboxSpec, wait: bool = True, timeout: float = 120.0) -> None:
        """Start filling the pool for ``spec`` now; with ``wait``, return once it is full."""
        key = pool_key(spec)
        with self._lock:
            self._specs.setdefault(key, _bare_spec(spec))
            self._ready.setdefault(key, deque())
        thread = self._refill(key)
        if wait and thread is not None:
            thread.join(timeout)

    def ready_count(self, spec: SandboxSpec | None = None) -> int:
        """Containers waiting for ``spec``'s key (or in total)."""
        with self._lock:
            if spec is not None:
                return len(self._ready.get(pool_key(spec), ()))
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
        spec = self._specs[key]
        while True:
            with self._lock:
                if self.closed or len(self._ready[key]) >= self.size:
                    return
            try:
                container_id = create_container(self.client, spec, pool=True)
            except Exception as exc:  # noqa: BLE001 - a failed refill only costs warm starts
                self.errors = [*self.errors[-9:], f"{type(exc).__name__}: {exc}"]
                return
            with self._lock:
                if not self.closed:
                    self._ready[key].append(container_id)
                    continue
            remove_container(self.client, container_id)  # closed while we were creating it
            return

    def close(self) -> None:
        """Stop refilling and remove every container still waiting. Idempotent."""
        with self._lock:  # a second call finds nothing waiting and no filler to join
            self.closed = True
            waiting = [cid for q in self._ready.values() for cid in q]
            self._ready.clear()
            threads = list(self._filling.values())
            self._filling.clear()
        for thread in threads:
            thread.join(timeout=60)
        for container_id in waiting:
            with contextlib.suppress(Exception):
                remove_container(self.client, container_id)

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _bare_spec(spec: SandboxSpec) -> SandboxSpec:
    """The part of a spec a pool container is made from (nothing task-specific)."""
    return SandboxSpec(image=spec.image, network=spec.network, limits=spec.limits)


_shared: dict[tuple[str | None, int], WarmPool] = {}
_shared_lock = threading.Lock()


def shared_pool(size: int, docker_host: str | None = None) -> WarmPool:
    """The process-wide pool of ``size`` for an engine (``sandbox_options={"pool_size": N}``)."""
    with _shared_lock:
        pool = _shared.get((docker_host, size))
        if pool is None or pool.closed:
            pool = _shared[(docker_host, size)] = WarmPool(size, docker_host=docker_host)
        return pool


@atexit.register
def close_shared_pools() -> None:
    """Remove the waiting containers of every shared pool (also run at interpreter exit)."""
    with _shared_lock:
        pools = list(_shared.values())
        _shared.clear()
    for pool in pools:
        with contextlib.suppress(Exception):
            pool.close()
