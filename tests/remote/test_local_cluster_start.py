"""Starting a local cluster when a node's ``ray start`` gives up (a raylet that missed Ray's 30 s
registration window on a loaded machine): the node is started again, in a fresh temp dir.

``ray`` here is a stand-in on ``PATH`` that behaves like ``ray start --block`` as far as the cluster
sees it (a log line, then it blocks), and exits the way Ray does for the attempts a test names: a
loaded machine cannot be made to order.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from termgym.remote import local_cluster as lc

FAKE_RAY = """#!/bin/bash
for arg in "$@"; do case "$arg" in --temp-dir=*) dir="${arg#--temp-dir=}" ;; esac; done
echo "$(basename "$dir")" >> "$FAKE_RAY_CALLS"
for fail in $FAKE_RAY_FAIL; do
  if [ "$(basename "$dir")" = "$fail" ]; then
    echo "Exception: The current node timed out during startup."
    exit 1
  fi
done
echo "Ray runtime started. --block: this command will now block forever until terminated."
exec sleep 600
"""


@pytest.fixture
def fake_ray(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "ray"
    script.write_text(FAKE_RAY)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    calls = tmp_path / "calls"
    calls.touch()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_RAY_CALLS", str(calls))
    return calls


def _started_dirs(calls: Path) -> list[str]:
    return calls.read_text().split()


def test_a_worker_whose_ray_start_exits_is_started_again_in_a_fresh_temp_dir(fake_ray, monkeypatch):
    monkeypatch.setenv("FAKE_RAY_FAIL", "w1 head")
    with lc.local_cluster(workers=2, start_timeout=30) as cluster:
        assert [n.proc.poll() for n in (cluster.head, *cluster.workers)] == [None, None, None]
        assert [n.name for n in cluster.workers] == ["w1", "w2"]
        assert cluster.workers[0].temp_dir.name == "w1.2"
        assert cluster.head.temp_dir.name == "head.2"
        assert "will now block forever" in cluster.workers[0].log.read_text()
    assert sorted(_started_dirs(fake_ray)) == ["head", "head.2", "w1", "w1.2", "w2"]


def test_a_node_that_never_starts_is_an_error_that_shows_its_last_log(fake_ray, monkeypatch):
    monkeypatch.setenv("FAKE_RAY_FAIL", "w2 w2.2 w2.3")
    with pytest.raises(RuntimeError, match=r"w2: ray start exited with 1:\n.*timed out during startup"):
        with lc.local_cluster(workers=2, start_timeout=30):
            pass
    assert _started_dirs(fake_ray).count("w2") + _started_dirs(fake_ray).count("w2.2") == 2
    assert len([d for d in _started_dirs(fake_ray) if d.startswith("w2")]) == lc.START_ATTEMPTS
