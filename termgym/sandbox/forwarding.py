"""Reaching host services from a sandbox that has no network.

A sandbox made with ``--unshare-net`` has a private network namespace holding only ``lo``: it
cannot reach the host, and the host's loopback servers cannot be reached from it. For each
:class:`~termgym.sandbox.base.ServicePort` a :class:`PortForwarder` opens a listening socket
*inside* the sandbox's namespace, on a loopback address of its own (``127.77.0.1``,
``127.77.0.2``, …: the whole ``127/8`` belongs to ``lo``, so no address needs configuring and
several host names can share port 80), and relays every connection to ``target_host:target_port``
in the host's namespace. Nothing else crosses: the sandbox gets exactly the listed ports.

How the socket gets there: a short-lived helper thread ``setns()``es into ``/proc/<pid>/ns/net``
(Linux switches namespaces per thread), brings ``lo`` up if it is down, creates and binds the
sockets, and leaves. A socket stays in the namespace it was created in, so the relay (one asyncio
loop thread shared by all forwarders in the process) accepts on it from the host namespace and
connects outwards from there. This needs ``CAP_SYS_ADMIN`` (termgym's local backend runs as root).

The caller maps host names to the returned addresses (the local backend appends them to the
sandbox's ``/etc/hosts``); :func:`plan_addresses` gives the same mapping before anything starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import os
import socket
import struct
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future

from termgym.sandbox.base import SandboxError, ServicePort

CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
#: Sandbox-side addresses are 127.77.<i // 250>.<i % 250 + 1>: well away from 127.0.0.1.
_ADDRESS_BASE = (127, 77)
_RELAY_CHUNK = 64 * 1024


def plan_addresses(services: Sequence[ServicePort]) -> dict[str, str]:
    """The sandbox-side IP for each distinct host name in ``services``, in first-seen order.

    Deterministic, so a backend may write ``/etc/hosts`` before the forwarder starts.
    """
    addresses: dict[str, str] = {}
    for service in services:
        if service.hostname not in addresses:
            i = len(addresses)
            if i >= 250 * 250:
                raise ValueError("too many distinct service host names for one sandbox (limit 62500)")
            addresses[service.hostname] = f"{_ADDRESS_BASE[0]}.{_ADDRESS_BASE[1]}.{i // 250}.{i % 250 + 1}"
    return addresses


def _validate(services: Sequence[ServicePort]) -> None:
    seen: set[tuple[str, int]] = set()
    for i, service in enumerate(services):
        where = f"services[{i}] ({service!r})"
        if not isinstance(service, ServicePort):
            raise TypeError(f"{where}: expected a ServicePort, got {type(service).__name__}")
        if not service.hostname or any(c.isspace() for c in service.hostname):
            raise ValueError(f"{where}: hostname must be a non-empty name without spaces")
        for name in ("port", "target_port"):
            value = getattr(service, name)
            if not isinstance(value, int) or not 0 < value < 65536:
                raise ValueError(f"{where}: {name} must be a TCP port 1..65535, got {value!r}")
        if (service.hostname, service.port) in seen:
            raise ValueError(f"{where}: {service.hostname}:{service.port} is listed twice")
        seen.add((service.hostname, service.port))


# -- the namespace switch -------------------------------------------------------------------------

_libc = None


def _setns(fd: int, nstype: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if _libc.setns(fd, nstype) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def _lo_flags(s: socket.socket) -> int:
    return struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, struct.pack("16sH14x", b"lo", 0)))[1]


def _ensure_lo_up(wait: float) -> None:
    """Make sure ``lo`` is up in the calling thread's namespace.

    bubblewrap configures ``lo`` itself, just after it reports the child's pid: racing it (bringing
    ``lo`` up first) makes its own setup fail and the sandbox die. So wait up to ``wait`` seconds
    for someone else to do it, then do it ourselves (``unshare --net`` leaves ``lo`` down).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        deadline = time.monotonic() + wait
        while not _lo_flags(s) & _IFF_UP:
            if time.monotonic() >= deadline:
                flags = _lo_flags(s)
                fcntl.ioctl(s.fileno(), _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))
                return
            time.sleep(0.002)


def _listen_in_netns(netns_pid: int, binds: list[tuple[str, int]], lo_wait: float) -> list[socket.socket]:
    """Create listening sockets inside the network namespace of ``netns_pid``.

    Runs on a fresh thread so that a failure to switch back can never leave a pool thread (or the
    main thread) in the sandbox's namespace; the thread ends either way.
    """
    result: Future[list[socket.socket]] = Future()

    def work() -> None:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            target = os.open(f"/proc/{netns_pid}/ns/net", os.O_RDONLY)
        except OSError as exc:
            os.close(own)
            result.set_exception(SandboxError(f"cannot open the network namespace of pid {netns_pid}: {exc}"))
            return
        sockets: list[socket.socket] = []
        try:
            if os.stat(f"/proc/{netns_pid}/ns/net").st_ino == os.fstat(own).st_ino:
                raise SandboxError(
                    f"pid {netns_pid} shares the host's network namespace; forwarding into it would "
                    "expose the services on the host (start the sandbox with --unshare-net)")
            _setns(target, CLONE_NEWNET)
            try:
                _ensure_lo_up(lo_wait)
                for host, port in binds:
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    sockets.append(s)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((host, port))
                    s.listen(128)
                    s.setblocking(False)
            finally:
                _setns(own, CLONE_NEWNET)
            result.set_result(sockets)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
            for s in sockets:
                s.close()
            if isinstance(exc, OSError) and not isinstance(exc, SandboxError):
                hint = " (setns needs CAP_SYS_ADMIN: run as root)" if exc.errno == errno.EPERM else ""
                exc = SandboxError(f"cannot open service ports in the sandbox of pid {netns_pid}: {exc}{hint}")
            result.set_exception(exc)
        finally:
            os.close(target)
            os.close(own)

    thread = threading.Thread(target=work, name="termgym-netns", daemon=True)
    thread.start()
    thread.join()
    return result.result()


# -- the relay loop ---------------------------------------------------------------------------------

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def start_loop_thread(name: str) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    """A new asyncio loop running forever in a daemon thread called ``name``; returns once it runs.

    Stop it with ``loop.call_soon_threadsafe(loop.stop)`` and join the thread.
    """
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    ready.wait()
    return loop, thread


def _relay_loop() -> asyncio.AbstractEventLoop:
    """The process-wide asyncio loop that relays forwarded connections (started on first use)."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            _loop, _ = start_loop_thread("termgym-forwarder")
        return _loop


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_RELAY_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # half-close: HTTP/1.0 clients send, then wait for the reply
    except (ConnectionError, OSError):
        pass


class PortForwarder:
    """Relays a sandbox's service ports to host services (see the module docstring).

    >>> fwd = PortForwarder()
    >>> fwd.start(sandbox_pid, [ServicePort("books.test", 80, "127.0.0.1", 8123)])
    {'books.test': '127.77.0.1'}
    >>> fwd.close()
    """

    def __init__(self, *, lo_wait: float = 1.0) -> None:
        self.lo_wait = lo_wait  # seconds to wait for the sandbox to bring its loopback up itself
        self._servers: list[asyncio.base_events.Server] = []
        self._conns: set[asyncio.StreamWriter] = set()
        self.addresses: dict[str, str] = {}
        self.closed = False

    def start(self, netns_pid: int, services: Sequence[ServicePort]) -> dict[str, str]:
        """Open every service port inside the namespace of ``netns_pid``; return hostname -> IP.

        Raises :class:`SandboxError` if the namespace cannot be entered or a port cannot be bound;
        nothing is left open then.
        """
        if self._servers:
            raise SandboxError("this PortForwarder is already started; make one per sandbox")
        services = list(services)
        _validate(services)
        addresses = plan_addresses(services)
        sockets = _listen_in_netns(netns_pid, [(addresses[s.hostname], s.port) for s in services], self.lo_wait)
        loop = _relay_loop()

        async def serve_all() -> list[asyncio.base_events.Server]:
            servers = []
            for sock, service in zip(sockets, services, strict=True):
                handler = self._handler(service.target_host, service.target_port)
                servers.append(await asyncio.start_server(handler, sock=sock))
            return servers

        try:
            self._servers = asyncio.run_coroutine_threadsafe(serve_all(), loop).result(timeout=30)
        except BaseException:
            for sock in sockets:
                sock.close()
            raise
        self.addresses = addresses
        return dict(addresses)

    def _handler(self, target_host: str, target_port: int):
        async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._conns.add(writer)
            upstream_writer = None
            try:
                try:
                    up_reader, upstream_writer = await asyncio.open_connection(target_host, target_port)
                except OSError:
                    return  # the service is down: the sandbox sees the connection close
                self._conns.add(upstream_writer)
                await asyncio.gather(_pipe(reader, upstream_writer), _pipe(up_reader, writer))
            finally:
                for w in (writer, upstream_writer):
                    if w is not None:
                        self._conns.discard(w)
                        with contextlib.suppress(Exception):
                            w.close()

        return relay

    def close(self) -> None:
        """Stop listening and drop every relayed connection. Idempotent."""
        if self.closed:
            return
        self.closed = True
        if not self._servers:
            return
        servers, self._servers = self._servers, []

        async def shutdown() -> None:
            for server in servers:
                server.close()
            for w in list(self._conns):
                with contextlib.suppress(Exception):
                    w.close()
            self._conns.clear()

        loop = _relay_loop()
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)

    def __enter__(self) -> PortForwarder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["PortForwarder", "plan_addresses"]
