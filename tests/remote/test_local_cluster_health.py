"""How the local cluster's head tells a lost node from a slow one (:data:`FAST_HEALTH_CHECKS`).

A raylet stopped with SIGSTOP for 2.5 s stands for one starved on a loaded machine: it must keep
its place. A killed raylet must be declared dead within seconds (the remote tests kill one mid-run).
With the 300 ms check timeout used before, the stalled node was declared dead and its raylet exited
on hearing so; when that node was the head, the test driver attached to it exited with status 1 and
printed nothing, and a CI lane ended so (session 36). The last test keeps that setting as the
sabotage: it must lose the stalled node, or this file proves nothing.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from termgym.remote.local_cluster import FAST_HEALTH_CHECKS, Node, local_cluster

ray = pytest.importorskip("ray", reason="needs Ray: pip install 'termgym[eval]'")

pytestmark = pytest.mark.slow

STALL = 2.5  # seconds: eight missed 300 ms checks
CHECKS_START = 6.0  # seconds after a node registers before Ray checks it (health_check_initial_delay_ms: 5 s)


def _alive(node: Node) -> bool:
    return any(n["Alive"] for n in ray.nodes() if n["NodeID"] == node.node_id)


def _stall(node: Node, seconds: float) -> None:
    raylet = node.raylet_pid()
    os.kill(raylet, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(raylet, signal.SIGCONT)


def _wait_dead(node: Node, within: float) -> float | None:
    """Seconds until the cluster declares ``node`` dead, or None if it is still alive after ``within``."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        if not _alive(node):
            return time.monotonic() - started
        time.sleep(0.05)
    return None


def _stall_then_kill(health_checks: dict) -> tuple[bool, float | None]:
    """Whether a worker stalled for :data:`STALL` s stays alive; then how long its death takes to see."""
    with local_cluster(workers=1, health_checks=health_checks) as cluster:
        with cluster.driver_env():
            ray.init(**cluster.init_options(), configure_logging=False, log_to_driver=False)
            try:
                cluster.identify()
                worker = cluster.workers[0]
                time.sleep(CHECKS_START)
                _stall(worker, STALL)
                survived = _wait_dead(worker, within=2.0) is None
                if not survived:
                    return False, None
                os.kill(worker.raylet_pid(), signal.SIGKILL)
                return True, _wait_dead(worker, within=30.0)
            finally:
                ray.shutdown()


def test_a_stalled_node_keeps_its_place_and_a_killed_one_is_dead_within_seconds():
    survived, seen_dead_after = _stall_then_kill(FAST_HEALTH_CHECKS)
    assert survived, f"a raylet stalled for {STALL} s was declared dead"
    assert seen_dead_after is not None and seen_dead_after < 5.0, seen_dead_after


def test_sabotage_a_300_ms_check_timeout_loses_the_stalled_node():
    survived, _ = _stall_then_kill({**FAST_HEALTH_CHECKS, "health_check_timeout_ms": 300})
    assert not survived, "with a 300 ms timeout the stalled node should have been declared dead"
