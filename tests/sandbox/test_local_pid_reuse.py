"""A local sandbox kills its init and shell through pidfds, never through a pid it kept.

When a sandbox's shell exits (``exit``, a crash, the OOM killer) its init exits with it and both
pids are free: the kernel gives them to later forks. The sandbox still kills "its init" when it
closes or starts a new shell, and "its shell" on an abort. By pid, that SIGKILL reaches whatever
holds the number by then: on a CI machine (pid_max 32,768, two test lanes forking) a Ray raylet
or a test runner of the other lane. These tests give the freed pids to strangers on purpose
(``/proc/sys/kernel/ns_last_pid``, root only) and check that closing, restarting and aborting the
sandbox leave them alive, while the sandbox itself still works. ``test_sabotage_...`` kills by the
kept pid the way the sandbox did before, and the stranger dies: the placement is real.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from termgym.sandbox import SandboxSpec, make_sandbox
from termgym.sandbox.local import bwrap_path

NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")

try:
    bwrap_path()
except Exception as exc:  # noqa: BLE001 - the reason is the skip message
    pytest.skip(f"needs bubblewrap: {exc}", allow_module_level=True)
if os.geteuid() != 0 or not os.access(NS_LAST_PID, os.W_OK):
    pytest.skip("placing a process at a chosen pid needs root (/proc/sys/kernel/ns_last_pid)", allow_module_level=True)


def _stranger_at(pid: int, tries: int = 200) -> subprocess.Popen:
    """A process of nobody's sandbox that holds ``pid`` (another fork on the machine can take the
    number first, for a moment or for good: wait and try again)."""
    for _ in range(tries):
        if Path(f"/proc/{pid}").exists():  # the sandbox's own were gone (_gone): someone else's fork
            time.sleep(0.05)
            continue
        NS_LAST_PID.write_text(str(pid - 1))
        proc = subprocess.Popen(["sleep", "600"])
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    raise AssertionError(f"could not start a process at pid {pid} in {tries} tries (another process held it, "
                         "or other forks took it first each time)")


def _gone(pid: int, within: float = 10.0) -> None:
    """Wait until nothing holds ``pid`` (the sandbox's monitor reaps its init)."""
    deadline = time.monotonic() + within
    while Path(f"/proc/{pid}").exists():
        assert time.monotonic() < deadline, f"pid {pid} is still held"
        time.sleep(0.01)


def _exit_codes(procs: list[subprocess.Popen], wait: float = 0.5) -> list[int | None]:
    """Each process's exit code, None while it runs, after ``wait`` s (a SIGKILL is not instant)."""
    time.sleep(wait)
    return [p.poll() for p in procs]


def _crash_shell(sandbox) -> tuple[int, int]:
    """Kill the sandbox's shell from outside (its init exits with it); return their freed pids."""
    init, shell = sandbox._init_pid, sandbox._shell()
    assert init and shell, (init, shell)
    os.kill(shell, signal.SIGKILL)
    _gone(shell)
    _gone(init)
    return init, shell


@pytest.fixture
def sandbox():
    box = make_sandbox("local", SandboxSpec(), mode="persistent")
    box.start()
    assert box.exec("echo up").output.strip() == "up"
    yield box
    box.close()


@pytest.fixture
def strangers():
    made: list[subprocess.Popen] = []
    yield made
    for proc in made:
        proc.kill()
        proc.wait()


def test_closing_a_sandbox_whose_init_is_gone_leaves_the_init_pid_s_new_owner_alone(sandbox, strangers):
    init, shell = _crash_shell(sandbox)
    strangers += [_stranger_at(init), _stranger_at(shell)]
    sandbox.close()
    assert _exit_codes(strangers) == [None, None]


def test_a_new_shell_after_the_old_one_died_leaves_the_freed_pids_alone(sandbox, strangers):
    init, shell = _crash_shell(sandbox)
    strangers += [_stranger_at(init), _stranger_at(shell)]
    result = sandbox.exec("echo back")  # the shell is gone: the sandbox starts a new one
    assert "back" in result.output and result.restarted
    assert _exit_codes(strangers) == [None, None]


def test_an_abort_after_the_shell_died_leaves_the_freed_pids_alone(sandbox, strangers):
    init, shell = _crash_shell(sandbox)
    strangers += [_stranger_at(init), _stranger_at(shell)]
    sandbox.abort()  # kills "the shell" and every process of the sandbox, then starts a new shell
    assert sandbox.exec("echo again").output.strip() == "again"
    assert _exit_codes(strangers) == [None, None]


def test_sabotage_a_kill_by_the_kept_pid_reaches_the_stranger(sandbox, strangers):
    init, _ = _crash_shell(sandbox)
    strangers.append(_stranger_at(init))
    os.kill(sandbox._init_pid, signal.SIGKILL)  # what _kill_all did before it held a pidfd
    assert strangers[0].wait(timeout=5) == -signal.SIGKILL
