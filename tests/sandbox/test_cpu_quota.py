"""Every sandbox has a CPU quota (``Limits.cpus``, 1 CPU by default), local and Docker.

Busy loops left running in one sandbox must not take more than its quota from the machine, so they
cannot starve another episode's commands or grade. The usage is read from the sandbox's own cgroup
accounting (local: ``cpuacct.usage``; Docker: the engine's ``cpu_stats``, read from the same
cgroup) over wall time: a ratio the kernel enforces, not a host timing.

On a machine loaded by others the loops may get less than the quota anyway, and the bound proves
nothing. So the local tests give the sandbox's cpu cgroup (and its parent) a large CPU weight
(``cpu.shares``) for the few seconds they measure: its loops then get what they ask for, up to the
quota, and the sabotage (no quota) shows they would take more.
"""

from __future__ import annotations

import contextlib
import math
import time

import gymnasium as gym
import pytest

import termgym  # noqa: F401  (registers the envs)
from termgym.config import EnvConfig
from termgym.sandbox import Limits, SandboxSpec
from termgym.sandbox.base import DEFAULT_CPUS

HOGS = "for i in 1 2 3; do (while :; do :; done) >/dev/null 2>&1 & done; disown -a; echo started"


def cpu_seconds(sandbox) -> float:
    """CPU seconds the whole sandbox has used, from its cgroup accounting."""
    if sandbox.backend == "local":
        used = sandbox.cpu_seconds_used()
        assert used is not None, "the local sandbox has no CPU accounting cgroup on this host"
        return used
    from termgym.sandbox.docker import get_client

    stats = get_client().api.stats(sandbox.container_id, stream=False)
    return stats["cpu_stats"]["cpu_usage"]["total_usage"] / 1e9


@contextlib.contextmanager
def weighted(sandbox, shares: int = 262144):
    """The local sandbox's cpu cgroup and its parent weighted ``shares`` (restored afterwards)."""
    if sandbox.backend != "local":
        yield
        return
    groups = [sandbox._cpu_cgroup, sandbox._cpu_cgroup.parent]
    before = [(g / "cpu.shares").read_text() for g in groups]
    try:
        for group in groups:
            (group / "cpu.shares").write_text(str(shares))
        yield
    finally:
        for group, value in zip(groups, before, strict=True):
            (group / "cpu.shares").write_text(value)


def cpus_used_by_hogs(sandbox, seconds: float = 3.0) -> float:
    """Average CPUs three busy loops in ``sandbox`` use over ``seconds`` of wall time."""
    assert sandbox.exec(HOGS, timeout=20).output.strip() == "started"
    with weighted(sandbox):
        time.sleep(0.5)  # let the loops start
        t0, c0 = time.monotonic(), cpu_seconds(sandbox)
        time.sleep(seconds)
        t1, c1 = time.monotonic(), cpu_seconds(sandbox)
    return (c1 - c0) / (t1 - t0)


def test_a_busy_sandbox_stays_within_its_quota(make):
    limited = make(SandboxSpec(limits=Limits(cpus=0.5)))
    used = cpus_used_by_hogs(limited)
    assert 0.05 < used <= 0.5 * 1.15, f"three busy loops under a 0.5 CPU quota used {used:.2f} CPUs"
    if limited.backend == "local":
        throttled = limited.cpu_throttling()
        assert throttled["nr_throttled"] > 0 and throttled["throttled_time"] > 0, throttled


@pytest.mark.parametrize("backend", ["local"])
def test_without_the_quota_the_same_loops_take_more(make):
    """The sabotage of the test above: the same hogs, as heavily weighted, with no quota use clearly
    more than 0.5 CPU (local only: the weight that makes this hold on a loaded machine is the local
    sandbox's cgroup)."""
    unlimited = make(SandboxSpec(limits=Limits(cpus=None)))
    assert int((unlimited._cpu_cgroup / "cpu.cfs_quota_us").read_text()) == -1
    used = cpus_used_by_hogs(unlimited)
    assert used > 0.5 * 1.3, f"three unlimited busy loops used only {used:.2f} CPUs: the machine is too loaded"


def test_every_sandbox_has_a_quota_by_default(make):
    assert Limits().cpus == DEFAULT_CPUS == 1.0
    sandbox = make(SandboxSpec())
    if sandbox.backend == "local":
        quota = int((sandbox._cpu_cgroup / "cpu.cfs_quota_us").read_text())
        period = int((sandbox._cpu_cgroup / "cpu.cfs_period_us").read_text())
        assert quota / period == DEFAULT_CPUS
    else:
        from termgym.sandbox.docker import get_client

        assert get_client().api.inspect_container(sandbox.container_id)["HostConfig"]["NanoCpus"] == 1_000_000_000


@pytest.mark.parametrize("bad", [0, -1, 0.001, math.nan, math.inf, "1", True])
def test_an_invalid_quota_is_an_error_naming_the_option(bad):
    with pytest.raises(ValueError, match=r"Limits\.cpus must be a CPU quota of at least 0\.01"):
        Limits(cpus=bad)
    with pytest.raises(ValueError, match=r"EnvConfig\.cpus must be a CPU quota"):
        EnvConfig(cpus=bad)


def test_env_option_sets_the_agent_sandbox_quota():
    env = gym.make("termgym/SweSynth-v0", path="toy", cpus=0.5)
    try:
        env.reset(seed=0)
        sandbox = env.unwrapped.sandbox
        assert sandbox.spec.limits.cpus == 0.5
        assert int((sandbox._cpu_cgroup / "cpu.cfs_quota_us").read_text()) == 50_000
    finally:
        env.close()
    with pytest.raises(ValueError, match=r"EnvConfig\.cpus"):
        gym.make("termgym/SweSynth-v0", path="toy", cpus=-2)
