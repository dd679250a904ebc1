"""The device scaling script (run by the lead on a lent many-core host) works end to end here, small."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_one_core_point_on_the_hosts_usr_writes_the_json(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "TERMGYM_RUNTIME": "host", "OUT": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.device_scaling", "--cores", "1,64", "--seconds", "2",
                           "--concurrency", "4", "--raw-seconds", "1"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "device_scaling.json").read_text())
    assert report["runtime"] == "host" and report["machine"]["cores"] >= 1
    (row,) = [p for p in report["points"] if p["cores"] == 1]
    assert row["drivers"] == 1 and row["passed"] > 0 and row["errors"] == 0 and row["efficiency_vs_1_core"] == 1.0
    raw = row["raw_bwrap"]  # the bare-bubblewrap baseline beside the episodes
    assert raw["spawned"] > 0 and raw["failed"] == 0 and raw["sandboxes_per_s"] > 0
    if report["machine"]["cores"] < 64:
        assert report["skipped_core_counts"] == [64]


def test_bad_core_counts_are_a_clear_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "benchmarks.device_scaling", "--out", str(tmp_path), "--cores", "1,x"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--cores must be comma-separated integers, not '1,x'" in proc.stderr


def test_a_driver_ready_after_the_common_start_still_measures_its_seconds():
    # A loaded host (CI's two lanes) warmed a driver up past the common start; it used to count
    # nothing at all because its window had already closed.
    from benchmarks.device_scaling import point

    row = point(1, 2, 1.0, lead=-30.0)
    assert row["passed"] > 0 and row["errors"] == 0 and row["late_start"] is True
