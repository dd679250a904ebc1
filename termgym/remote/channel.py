"""A direct TCP channel from a :class:`~termgym.remote.RayEnv` to its actor, for ``reset`` and ``step``.

Why not a Ray method call per step: a Ray actor call crosses several threads on each side (the
caller's, gRPC's, the actor's executor). With one per step, a step cost 3.6-4.3 ms more than a local
one on a busy 2-core box; over this channel, 0.3-0.4 ms (``python -m benchmarks.ray_step``,
docs/cluster.md). One socket between the env and its actor costs one wake-up each way.
Ray still places the actor, reports it dead, and carries everything else (``where``, ``close``).

Trust: the actor listens on its node's address for exactly one client, the env that asked for the
channel through Ray; that client proves it with a random 128-bit token that only travelled through
Ray (a sandbox with network access could reach the port, but not know the token). Frames are
pickles, as Ray's own are: both ends are termgym on the cluster, never the sandboxed code.
"""

from __future__ import annotations

import hmac
import pickle
import secrets
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

_LENGTH = struct.Struct("!Q")
TOKEN_BYTES = 16
#: How long a connecting client has to present the token.
HANDSHAKE_SECONDS = 10.0


def send_frame(sock: socket.socket, obj: Any) -> None:
    """Send ``obj`` as one frame: its length (8 bytes, network order), then its pickle."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_LENGTH.pack(len(data)) + data)


def recv_frame(sock: socket.socket) -> Any:
    """The next frame's object; ``EOFError`` when the other end closed the connection."""
    (length,) = _LENGTH.unpack(_recv_exact(sock, _LENGTH.size))
    return pickle.loads(_recv_exact(sock, length))


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the channel's other end closed it")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def serve(host: str, handle: Callable[[str, tuple], Any], methods: frozenset[str]) -> tuple[str, int, bytes]:
    """Listen on ``host`` for one client holding the returned token; serve its calls in a thread.

    Each request is ``(method, args)`` with ``method`` in ``methods``; the reply is ``("ok", value)``
    or ``("error", exception)``. Returns ``(host, port, token)`` for the client.
    """
    token = secrets.token_bytes(TOKEN_BYTES)
    server = socket.create_server((host, 0))
    threading.Thread(target=_serve, args=(server, token, handle, methods), daemon=True,
                     name="termgym-remote-channel").start()
    return host, server.getsockname()[1], token


def _serve(server: socket.socket, token: bytes, handle: Callable[[str, tuple], Any], methods: frozenset[str]) -> None:
    with server:
        while True:  # until the one client that knows the token has come and gone
            conn, _ = server.accept()
            with conn:
                conn.settimeout(HANDSHAKE_SECONDS)
                try:
                    if not hmac.compare_digest(_recv_exact(conn, TOKEN_BYTES), token):
                        continue
                except (OSError, EOFError):
                    continue
                conn.settimeout(None)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                _serve_client(conn, handle, methods)
                return


def _serve_client(conn: socket.socket, handle: Callable[[str, tuple], Any], methods: frozenset[str]) -> None:
    while True:
        try:
            method, args = recv_frame(conn)
        except (OSError, EOFError):
            return
        try:
            if method not in methods:
                raise ValueError(f"the channel serves {sorted(methods)}, not {method!r}")
            reply = ("ok", handle(method, args))
        except Exception as exc:
            reply = ("error", _portable(exc))
        try:
            send_frame(conn, reply)
        except OSError:
            return


def _portable(exc: Exception) -> Exception:
    """``exc`` if it survives a pickle round trip, else a RuntimeError that says what it was."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def connect(host: str, port: int, token: bytes, timeout: float = 30.0) -> socket.socket:
    """The client's end of a channel :func:`serve` opened."""
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(token)
    return sock
