"""``termgym gc`` on local sandboxes: what a process killed outright (SIGKILL, a lost Ray node) left behind.

A child process starts a real bubblewrap sandbox with a command running in it and is SIGKILLed: its
sandbox directory (and cgroups, where used) stay. ``termgym gc`` finds the owner gone and removes them;
a sandbox whose owner lives, and a directory with no owner record, are left alone.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from termgym.sandbox import SandboxSpec, make_sandbox
from termgym.sandbox.local import sandbox_parent_dir
from termgym.sandbox.local_gc import OWNER_FILE, find_local_leftovers

if shutil.which("bwrap") is None:
    pytest.skip("local sandboxes need bubblewrap", allow_module_level=True)

CHILD = """
import sys, time
from termgym.sandbox import SandboxSpec, make_sandbox
box = make_sandbox("local", SandboxSpec())
box.start()
box.exec("sleep 300 > /dev/null 2>&1 &")
print(box.host_dir, flush=True)
time.sleep(600)
"""


def _parents() -> list[str]:
    return [sandbox_parent_dir() or tempfile.gettempdir()]


def _gc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "termgym.cli", "gc", "--backend", "local", *args],
                          capture_output=True, text=True, timeout=120)


def test_a_killed_processs_sandbox_is_removed_and_a_live_ones_is_not():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    live = make_sandbox("local", SandboxSpec())
    live.start()
    try:
        left = Path(child.stdout.readline().strip())
        owner = json.loads((left / OWNER_FILE).read_text())
        assert owner["pid"] == child.pid
        assert not [x for x in find_local_leftovers(_parents()) if x.path in (str(left), str(live.host_dir))]
        child.send_signal(signal.SIGKILL)  # no cleanup runs
        child.wait()
        time.sleep(0.2)
        assert left.is_dir()
        (found,) = [x for x in find_local_leftovers(_parents()) if x.path == str(left)]
        assert found.reason == f"its process {child.pid} is gone"
        dry = _gc("--dry-run")
        assert f"would remove {left} (local sandbox" in dry.stdout and left.is_dir()
        result = _gc()
        assert result.returncode == 0, result.stderr
        assert f"removed {left} (local sandbox" in result.stdout and f"its process {child.pid} is gone" in result.stdout
        assert not left.exists()
        assert all(not Path(cg).exists() for cg in owner["cgroups"])  # its processes killed, its cgroups gone
        assert live.host_dir.is_dir() and str(live.host_dir) not in result.stdout  # the live one stays
        assert live.exec("echo still here").output.strip() == "still here"
    finally:
        if child.poll() is None:
            child.kill()
        live.close()


def test_a_directory_without_an_owner_record_is_taken_only_by_age():
    stray = Path(tempfile.mkdtemp(prefix="termgym-local-", dir=_parents()[0]))
    try:
        os.utime(stray, (time.time() - 3600, time.time() - 3600))
        assert str(stray) not in [x.path for x in find_local_leftovers(_parents())]
        (old,) = [x for x in find_local_leftovers(_parents(), older_than=600) if x.path == str(stray)]
        assert old.reason == "older than 600s (no owner record)"
    finally:
        shutil.rmtree(stray, ignore_errors=True)
