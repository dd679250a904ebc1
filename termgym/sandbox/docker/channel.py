"""The exec channel: a ``docker exec`` whose stdin we write and whose output we read on one socket.

Both long-lived processes of a Docker sandbox, its shell and its supervisor, run on one of these.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Mapping


def wait_readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` is readable within ``timeout`` seconds (``poll``: unlike ``select``, any fd
    number works, and hundreds of concurrent sandboxes hold descriptors past 1024)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(max(0, int(timeout * 1000))))


def read_past_headers(response, sock) -> bytes:
    """Output the exec wrote that the HTTP client already read past the upgrade reply's headers.

    The reply to ``exec_start`` is parsed through a buffered reader; when the process writes
    before that happens (a loaded machine, a process that speaks first) its first bytes land in
    that reader's buffer, not on the socket we read from then on, and would be lost. Taken
    without blocking: bytes already buffered, or ``b""``.
    """
    http = getattr(response, "_response", None)  # docker-py keeps the reply on the raw socket object
    reader = getattr(getattr(getattr(http, "raw", None), "_fp", None), "fp", None)
    if reader is None or not hasattr(reader, "read1"):
        return b""
    previous = sock.gettimeout()
    try:
        sock.settimeout(0)  # nothing buffered: the one raw read read1 may do must not block
        data = reader.read1(1 << 16) or b""
    except (BlockingIOError, OSError, ValueError):
        data = b""
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(previous)
    return bytes(data)


class ExecChannel:
    """A ``docker exec`` whose stdin we write and whose (demultiplexed) output we read."""

    def __init__(self, api, container_id: str, argv: list[str], environment: Mapping[str, str] | None = None):
        self.exec_id = api.exec_create(container_id, argv, stdin=True, stdout=True, stderr=True,
                                       environment=dict(environment or {}))["Id"]
        self._response = api.exec_start(self.exec_id, socket=True)
        self._sock = getattr(self._response, "_sock", self._response)
        self._raw = bytearray(read_past_headers(self._response, self._sock))
        self.eof = False

    def send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            self.eof = True
            raise EOFError(str(exc)) from exc

    def recv(self, timeout: float) -> bytes | None:
        """Output bytes (stdout and stderr alike), ``None`` on timeout, ``b""`` at end of stream."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            payload = self._take_frames()
            if payload:
                return payload
            if self.eof:
                return b""
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self._sock.settimeout(remaining)
            try:
                chunk = self._sock.recv(1 << 16)
            except TimeoutError:
                return None
            except OSError:
                chunk = b""
            if not chunk:
                self.eof = True
            self._raw += chunk

    def gone(self) -> bool:
        """Whether the other end has closed the stream (checked without blocking or consuming output)."""
        if self.eof:
            return True
        try:
            if wait_readable(self._sock.fileno(), 0) and not self._sock.recv(1, socket.MSG_PEEK):
                self.eof = True
        except (OSError, ValueError):
            self.eof = True
        return self.eof

    def _take_frames(self) -> bytes:
        # Docker's multiplexed stream: 8-byte header (stream id, 3 zero bytes, big-endian size).
        out = bytearray()
        while len(self._raw) >= 8:
            size = int.from_bytes(self._raw[4:8], "big")
            if len(self._raw) < 8 + size:
                break
            out += self._raw[8 : 8 + size]
            del self._raw[: 8 + size]
        return bytes(out)

    def read_line(self, prefix: bytes, timeout: float) -> tuple[bytes, bytes]:
        """Read until a line starting with ``prefix``; return (text before it, rest of that line)."""
        deadline = time.monotonic() + timeout
        buf = bytearray()
        while True:
            start = buf.find(prefix)
            if start >= 0 and (start == 0 or buf[start - 1 : start] == b"\n"):
                end = buf.find(b"\n", start)
                if end >= 0:
                    return bytes(buf[:start]), bytes(buf[start + len(prefix) : end])
            chunk = self.recv(deadline - time.monotonic())
            if chunk is None:
                raise TimeoutError(f"no {prefix!r} line within {timeout:g}s; got {bytes(buf[-500:])!r}")
            if chunk == b"":
                raise EOFError(f"stream ended before {prefix!r}; got {bytes(buf[-500:])!r}")
            buf += chunk

    def close(self) -> None:
        for closer in (getattr(self._sock, "close", None), getattr(self._response, "close", None)):
            with contextlib.suppress(Exception):
                if closer:
                    closer()
        self.eof = True

