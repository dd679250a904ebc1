"""A sandbox's cgroup is removed even when its last processes take seconds to leave it (a loaded
host: 200 episodes closing at once beside a training run left cgroups behind when removal gave up
after one second)."""

from __future__ import annotations

import threading
import time

from termgym.sandbox.cgroups import remove_cgroup


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
