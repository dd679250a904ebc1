"""An exec's first output is never lost between the HTTP upgrade reply and the socket we read.

``exec_start(socket=True)`` parses the upgrade reply through a buffered reader; output the process
wrote before that parse can land in the reader's buffer rather than on the socket termgym reads
from then on. On a loaded machine that lost the supervisor's ``READY`` line about once in 170
starts (the grade then waited 120 s for it). Two defences, each tested: the channel takes what the
reader buffered (:func:`~termgym.sandbox.docker.channel.read_past_headers`), and the supervisor
speaks only after its first input line.
"""

from __future__ import annotations

import socket
import struct
import time
from types import SimpleNamespace

import pytest

from termgym.sandbox.docker.channel import ExecChannel, read_past_headers

UPGRADE_REPLY = b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n" \
                b"Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n"


def frame(payload: bytes, stream: int = 1) -> bytes:
    """One frame of Docker's multiplexed stream."""
    return struct.pack(">BxxxL", stream, len(payload)) + payload


def reply_parsed_like_docker_py(raw: socket.socket):
    """A real buffered reader over a real socket that has parsed the upgrade reply's headers,
    shaped as docker-py hands it over (``sock._response.raw._fp.fp``)."""
    reader = raw.makefile("rb")
    while reader.readline() not in (b"\r\n", b""):
        pass  # the headers; whatever followed them in the same read stays buffered
    return SimpleNamespace(raw=SimpleNamespace(_fp=SimpleNamespace(fp=reader))), reader


def test_output_buffered_past_the_headers_is_taken_not_lost():
    ours, engine = socket.socketpair()
    try:
        early = frame(b"READY 42\n")
        engine.sendall(UPGRADE_REPLY + early)  # the process spoke before the reply was parsed
        time.sleep(0.05)
        response, _ = reply_parsed_like_docker_py(ours)
        ours.settimeout(0.2)
        with pytest.raises(TimeoutError):
            ours.recv(100)  # the socket itself no longer holds it: reading only it loses the line
        assert read_past_headers(SimpleNamespace(_response=response), ours) == early
    finally:
        ours.close()
        engine.close()


def test_nothing_buffered_returns_at_once_and_later_output_stays_on_the_socket():
    ours, engine = socket.socketpair()
    try:
        engine.sendall(UPGRADE_REPLY)
        response, _ = reply_parsed_like_docker_py(ours)
        ours.settimeout(5.0)
        started = time.monotonic()
        assert read_past_headers(SimpleNamespace(_response=response), ours) == b""
        assert time.monotonic() - started < 1.0, "it must not block when nothing is there"
        assert ours.gettimeout() == 5.0  # the socket's timeout is put back
        engine.sendall(frame(b"later\n"))
        assert ours.recv(100) == frame(b"later\n")
    finally:
        ours.close()
        engine.close()


def test_a_socket_without_a_parsed_reply_gives_nothing():
    ours, engine = socket.socketpair()
    try:
        assert read_past_headers(ours, ours) == b""
        assert read_past_headers(SimpleNamespace(_response=None), ours) == b""
    finally:
        ours.close()
        engine.close()


@pytest.mark.docker
def test_the_supervisor_speaks_only_after_its_first_line(docker):
    """Started by hand, the supervisor writes nothing until it is sent a line; then READY."""
    from termgym.sandbox.base import SandboxSpec
    from termgym.sandbox.docker import DockerSandbox
    from termgym.sandbox.docker.ready import SUPERVISOR

    sandbox = DockerSandbox(SandboxSpec(), pool_size=0)
    try:
        sandbox.start()
        supervisor = ExecChannel(sandbox._client.api, sandbox.container_id,
                                 ["bash", "--noprofile", "--norc", "-c", SUPERVISOR, "termgym-supervisor"])
        try:
            assert supervisor.recv(1.5) is None, "the supervisor wrote before its first input line"
            supervisor.send(b"GO\n")
            _, pid = supervisor.read_line(b"READY ", timeout=60)
            assert int(pid) > 1
        finally:
            supervisor.close()
        assert sandbox.exec("echo still-here", timeout=60).output.strip() == "still-here"
    finally:
        sandbox.close()
