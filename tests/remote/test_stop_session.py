"""``stop_session`` kills what is left of a session before it reaps the leader, and never signals a
leader reaped already.

A local cluster's node is ``ray start --block`` in a session of its own; stopping it kills the
whole session by its group id, which is the leader's pid. Once the leader is reaped that number is
free, and the next ``setsid`` process on the machine may take it as its own group id: a ``killpg``
then kills a stranger. These tests keep a session member alive after its leader exited, check
that the group is killed while the exited leader still holds the id, and give a reaped leader's
pid to a stranger (``/proc/sys/kernel/ns_last_pid``, root only) that must survive. The sabotage
kills by the stale group id the way the old ``Popen.wait``-then-``killpg`` order could, and the
stranger dies: the placement is real.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from termgym.remote.local_cluster import stop_session

NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")


def _state(pid: int) -> str | None:
    """The process's state letter (``Z`` for a zombie), or None once nothing holds ``pid``."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _dead(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while _state(pid) not in (None, "Z"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _leader_with_a_leftover() -> tuple[subprocess.Popen, int]:
    """A session leader that has exited (not reaped) and a ``sleep`` it left in its session."""
    proc = subprocess.Popen(["sh", "-c", "sleep 600 & echo $!"], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    leftover = int(proc.stdout.readline())
    proc.stdout.close()
    while os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        time.sleep(0.01)
    assert os.getpgid(leftover) == proc.pid
    return proc, leftover


def test_the_session_is_killed_while_its_exited_leader_still_holds_the_group_id(monkeypatch):
    proc, leftover = _leader_with_a_leftover()
    seen = []
    real_killpg = os.killpg

    def killpg(pgid, sig):
        seen.append((pgid, _state(proc.pid)))  # the leader must be a zombie still: its id reserved
        real_killpg(pgid, sig)

    monkeypatch.setattr(os, "killpg", killpg)
    try:
        stop_session(proc, grace=5.0)
    finally:
        monkeypatch.undo()
        if not _dead(leftover, 0):
            os.kill(leftover, signal.SIGKILL)
    assert seen == [(proc.pid, "Z")], seen
    assert _dead(leftover), "the session's leftover process is still running"
    assert proc.returncode == 0 and _state(proc.pid) is None  # reaped at the end


def test_a_running_leader_gets_sigterm_then_its_session_is_killed():
    proc = subprocess.Popen(["sh", "-c", "trap 'exit 3' TERM; sleep 600 & echo $!; while :; do sleep 0.05; done"],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    leftover = int(proc.stdout.readline())
    proc.stdout.close()
    stop_session(proc, grace=10.0)
    assert proc.returncode == 3  # it exited on the SIGTERM, within the grace
    assert _dead(leftover)


@pytest.fixture
def reaped_pid():
    """The pid (and group id) of a session leader that has exited and been reaped, and a stranger
    that now holds that number as its own session and group."""
    if os.geteuid() != 0 or not os.access(NS_LAST_PID, os.W_OK):
        pytest.skip("placing a process at a chosen pid needs root (/proc/sys/kernel/ns_last_pid)")
    proc = subprocess.Popen(["true"], start_new_session=True)
    proc.wait()
    stranger = None
    for _ in range(200):
        NS_LAST_PID.write_text(str(proc.pid - 1))
        candidate = subprocess.Popen(["sleep", "600"], start_new_session=True)
        if candidate.pid == proc.pid:
            stranger = candidate
            break
        candidate.kill()
        candidate.wait()
    if stranger is None:
        pytest.fail(f"could not start a process at pid {proc.pid}")
    assert os.getpgid(stranger.pid) == proc.pid
    yield proc, stranger
    stranger.kill()
    stranger.wait()


def test_a_reaped_leader_gets_no_signal_and_the_stranger_at_its_id_lives(reaped_pid):
    proc, stranger = reaped_pid
    stop_session(proc, grace=1.0)
    time.sleep(0.3)
    assert stranger.poll() is None, "stop_session killed the process that took the reaped leader's id"


def test_sabotage_killing_by_the_stale_group_id_kills_the_stranger(reaped_pid):
    proc, stranger = reaped_pid
    os.killpg(proc.pid, signal.SIGKILL)  # what a kill after the reap does
    assert stranger.wait(timeout=5) == -signal.SIGKILL
