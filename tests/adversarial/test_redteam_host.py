"""Red-team probes of the host from inside a real SWE-SYNTH sandbox (local backend).

Routes ``test_host_leaks.py`` does not walk: the sandbox's PID 1 (its root, cwd, command line and
environment under ``/proc/1``), ``/proc/self/mountinfo``, ``/sys``, the shell's environment, and a
search of the whole visible file system for termgym's task data. The host's *paths* are visible in
``/proc/1/cmdline`` and ``mountinfo`` (bubblewrap's own arguments; a documented limit), but nothing
under them: each must lead to no host file, no task data and no secret.
"""

from __future__ import annotations

import pytest

from termgym.env import TerminalEnv
from termgym.tasks.swesynth import default_suite

TASK = "ledgerly-03e7642999"


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    env = TerminalEnv(default_suite("toy", cache_dir=tmp_path_factory.mktemp("cache")))
    try:
        env.reset(options={"task_id": TASK})
        yield env.sandbox
    finally:
        env.close()


def run(sandbox, command: str) -> str:
    return sandbox.exec(command, timeout=120).output


def test_pid_1_is_the_sandbox_not_the_host(sandbox):
    assert run(sandbox, "readlink /proc/1/root").strip() == "/"
    assert run(sandbox, "ls /proc/1/root/").split() == run(sandbox, "ls /").split()
    assert run(sandbox, "ls /proc/1/cwd/").split() == run(sandbox, "ls /app").split()
    # No process of the host is visible (a PID namespace of its own).
    comms = run(sandbox, "cat /proc/[0-9]*/comm 2>/dev/null").split()
    assert set(comms) <= {"bwrap", "bash", "cat", "sh"}, comms


def test_host_paths_named_in_proc_lead_nowhere(sandbox):
    named = set(run(sandbox, "tr '\\0' '\\n' < /proc/1/cmdline | grep '^/'").split())
    named |= set(run(sandbox, "awk '{print $4}' /proc/self/mountinfo").split())
    named |= {line.split("=", 1)[1] for line in run(sandbox, "tr '\\0' '\\n' < /proc/1/environ").split()
              if line.startswith("PWD=")}
    host_only = sorted(p for p in named if p.startswith(("/var/lib/termgym", "/work", "/home", "/root/.cache")))
    assert host_only, "expected bubblewrap's own arguments to name host paths"
    for path in host_only:
        assert run(sandbox, f"test -e {path} && echo EXISTS || echo absent").strip() == "absent", path


def test_no_task_data_or_secret_is_visible(sandbox):
    found = run(sandbox, "find / -xdev \\( -name 'fix.patch' -o -name '*.jsonl' -o -iname '*termgym*' "
                         "-o -name 'records*' \\) -not -path '/proc/*' 2>/dev/null | head")
    assert found.strip() == "", found
    assert "No such file" in run(sandbox, "ls /sys 2>&1")
    environment = run(sandbox, "env; tr '\\0' '\\n' < /proc/1/environ")
    assert "TERMGYM" not in environment and "KEY" not in environment.upper().replace("GIT_CONFIG_KEY_0", "")
    assert run(sandbox, "git -C /app log --all --oneline | wc -l").strip() == "1"  # one "Initial state" commit
