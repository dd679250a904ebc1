"""A sandbox's cgroup is removed even when its last processes take seconds to leave it (a loaded
host: 200 episodes closing at once beside a training run left cgroups behind when removal gave up
after one second), and removing it kills its processes, never a stranger that a stale
``cgroup.procs`` list names (a listed process exits and its pid passes to another before the kill)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid

import pytest

from termgym.sandbox.cgroups import CGROUP_ROOT, kill_members, remove_cgroup, send_kill


def _slow_cgroup(tmp_path, busy_for: float):
    """A directory that, like a cgroup whose last process is still exiting, cannot be removed for
    ``busy_for`` seconds (its ``cgroup.procs`` lists nothing, so nothing is signalled)."""
    cg = tmp_path / "termgym-cg"
    cg.mkdir()
    (cg / "cgroup.procs").write_text("")
    threading.Timer(busy_for, (cg / "cgroup.procs").unlink).start()
    return cg


def test_a_cgroup_busy_for_seconds_is_still_removed(tmp_path):
    cg = _slow_cgroup(tmp_path, 2.5)
    started = time.monotonic()
    remove_cgroup(cg)
    assert not cg.exists() and 2.0 < time.monotonic() - started < 10


def test_sabotage_giving_up_after_one_second_leaves_it_behind(tmp_path):
    cg = _slow_cgroup(tmp_path, 2.5)
    remove_cgroup(cg, timeout=1.0)  # the old limit
    assert cg.exists()
    time.sleep(2)  # let the timer finish before tmp_path goes


def _stale_list(tmp_path, pid: int):
    """A directory whose ``cgroup.procs`` names ``pid``, a process that is in no such cgroup: what a
    list read just before its process exited and the pid was reused looks like."""
    cg = tmp_path / "termgym" / "stale"
    cg.mkdir(parents=True)
    (cg / "cgroup.procs").write_text(f"{pid}\n")
    return cg


@pytest.fixture
def stranger():
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_stale_list_does_not_reach_a_process_outside_the_cgroup(tmp_path, stranger):
    cg = _stale_list(tmp_path, stranger.pid)
    assert kill_members(cg, [stranger.pid]) == []
    threading.Timer(0.3, (cg / "cgroup.procs").unlink).start()
    remove_cgroup(cg, timeout=5.0)
    assert not cg.exists()
    time.sleep(0.2)
    assert stranger.poll() is None, "removing the cgroup killed a process that is not in it"


def test_sabotage_killing_the_listed_pids_kills_the_stranger(tmp_path, stranger):
    cg = _stale_list(tmp_path, stranger.pid)
    send_kill(int(p) for p in (cg / "cgroup.procs").read_text().split())  # the list trusted as read
    assert stranger.wait(timeout=5) == -signal.SIGKILL


def test_the_processes_of_a_real_cgroup_are_killed_and_it_is_removed():
    parent = CGROUP_ROOT / "pids" / "termgym"
    if os.geteuid() != 0 or not (CGROUP_ROOT / "pids").is_dir():
        pytest.skip("needs root and a cgroup v1 pids hierarchy")
    cg = parent / f"test-{uuid.uuid4().hex[:8]}"
    cg.mkdir(parents=True)
    proc = subprocess.Popen(["sleep", "600"])
    try:
        (cg / "cgroup.procs").write_text(str(proc.pid))
        assert kill_members(cg, []) == []
        remove_cgroup(cg, timeout=5.0)
        assert proc.wait(timeout=5) == -signal.SIGKILL and not cg.exists()
    finally:
        proc.kill()
        proc.wait()
        if cg.exists():
            cg.rmdir()
