"""`termgym eval --ray-address`: episodes spread over a local Ray cluster that the test starts."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="needs Ray: pip install 'termgym[eval]'")

from termgym.remote.local_cluster import stop_session  # noqa: E402

HERE = Path(__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ray_env(temp_dir: str) -> dict[str, str]:
    # A HOME of our own: Ray keeps state in ~/.ray (an auth token another Ray user on the machine
    # generated there would otherwise switch our cluster to token authentication).
    home = Path(temp_dir) / "home"
    home.mkdir(exist_ok=True)
    return {**os.environ, "HOME": str(home), "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def _start_cluster(temp_dir: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    log = Path(temp_dir) / f"ray-start-{port}.log"
    with log.open("w") as handle:
        proc = subprocess.Popen(
            ["ray", "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
             "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}"],
            stdout=handle, stderr=subprocess.STDOUT, start_new_session=True, env=_ray_env(temp_dir))
    deadline = time.monotonic() + 240
    while "will now block forever" not in log.read_text():
        if proc.poll() is not None:
            raise RuntimeError(f"ray start exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            _stop(proc)
            raise RuntimeError("Ray did not start in 240 s:\n" + log.read_text()[-3000:])
        time.sleep(0.5)
    return proc, f"127.0.0.1:{port}"


def _stop(proc: subprocess.Popen) -> None:
    # `ray start --block` stops its raylet and GCS on SIGTERM; what is left of its session is
    # killed before it is reaped (see stop_session)
    stop_session(proc, grace=90.0)


@pytest.fixture
def ray_cluster():
    """A one-node Ray cluster of our own (own port, temp dir and HOME: other Ray users are untouched)."""
    temp_dir = tempfile.mkdtemp(prefix="tgray", dir="/tmp")  # short: Ray's socket paths have a length limit
    try:
        proc, address = _start_cluster(temp_dir)
    except RuntimeError as first:
        # On a loaded shared machine one of Ray's many ports is occasionally taken: try once more.
        try:
            proc, address = _start_cluster(temp_dir)
        except RuntimeError as second:
            raise RuntimeError(f"{first}\n--- second try ---\n{second}") from None
    try:
        yield address, _ray_env(temp_dir)
    finally:
        _stop(proc)
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.slow
def test_eval_spreads_episodes_over_a_ray_cluster(tmp_path, ray_cluster, scripted):
    address, env = ray_cluster
    out = tmp_path / "run"
    tasks = ["right-1", "right-2", "wrong-answer", "bad-format", "explore"]
    with scripted.ScriptedModel() as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "termgym.cli", "eval", scripted.ENV_ID, "--import", "scripted_model",
             "--agent", "openai", "--base-url", server.base_url, "--model", "scripted-1",
             "--task-ids", ",".join(tasks), "-n", "4", "--ray-address", address,
             "--ray-cpus-per-episode", "0.5", "-o", str(out), "--quiet", "--json"],
            env={**env, "PYTHONPATH": str(HERE)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stdout, stderr = proc.communicate(timeout=400)
    assert proc.returncode == 0, stdout + stderr
    summary = json.loads(stdout)
    assert (summary["episodes"], summary["solved"], summary["format_errors"]) == (5, 4, 2)
    episodes = [json.loads(p.read_text()) for p in (out / "episodes").glob("*.json")]
    for episode in episodes:
        expected = scripted.EXPECTED[episode["task_id"]]
        assert (episode["status"], episode["passed"], episode["end_reason"]) == expected
    # The episodes ran in Ray worker processes, not in the eval process.
    worker_pids = {int(re.fullmatch(r".+:(\d+)", e["worker"]).group(1)) for e in episodes}
    assert proc.pid not in worker_pids and os.getpid() not in worker_pids
