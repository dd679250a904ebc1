"""The remote-step benchmark (``python -m benchmarks.ray_step``) runs end to end, quick, and says what it measured."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_run_writes_local_and_remote_rows_side_by_side(tmp_path):
    pytest.importorskip("ray", reason="the benchmark needs Ray: pip install 'termgym[eval]'")
    if shutil.which("bwrap") is None:
        pytest.skip("the benchmark runs sandboxes: it needs bubblewrap")
    env = {**os.environ, "HOME": str(tmp_path), "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.ray_step", "--quick", "--out", str(tmp_path)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "ray_step.json").read_text())
    (cluster,) = report["clusters"].values()  # quick: Ray's default niceness only
    rows = cluster["rows"]
    for name in ("termgym local env.step", "termgym RayEnv.step (actor over loopback)", "raw Ray actor call (no-op)"):
        assert rows[name]["n"] == 100 and rows[name]["median_ms"] > 0, name
    remote, local = rows["termgym RayEnv.step (actor over loopback)"], rows["termgym local env.step"]
    assert cluster["added_ms"] == pytest.approx(remote["median_ms"] - local["median_ms"], abs=1e-3)
    assert cluster["ratio"] == pytest.approx(remote["median_ms"] / local["median_ms"], rel=1e-3)
    assert cluster["goal"] == {"added_ms_at_most": 2.0, "met": cluster["added_ms"] <= 2.0}
    assert "added by the actor:" in proc.stdout and report["machine"]["cores"] == os.cpu_count()
