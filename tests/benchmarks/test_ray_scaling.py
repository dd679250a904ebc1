"""The one-node / two-node benchmark (``python -m benchmarks.ray_scaling``): its episodes and its rate.

The cluster run takes minutes (benchmarks/results_remote); here the same episodes are played on local
envs, which is what each remote env runs in its actor, and the rate is counted from what finished.
"""

from __future__ import annotations

import shutil

import gymnasium as gym
import pytest

from benchmarks import ray_scaling

if shutil.which("bwrap") is None:
    pytest.skip("the benchmark's episodes run sandboxes: they need bubblewrap", allow_module_level=True)


def test_a_round_plays_every_episode_to_a_passing_grade_and_counts_them():
    ray_scaling.register()
    envs = [gym.make(ray_scaling.ENV_ID) for _ in range(2)]
    try:
        episodes, seconds = ray_scaling.round_rate(envs, 2)
    finally:
        for env in envs:
            env.close()
    assert episodes == 4 and seconds > 0
    assert ray_scaling.SETTINGS["one node"] == {"bench_node_a": 1}  # only node A offers it


def test_work_that_did_not_run_fails_the_round(monkeypatch):
    """The sabotage: a work step that burns nothing is reported, not timed."""
    monkeypatch.setattr(ray_scaling, "WORK", "THOUGHT: skip.\n\n```bash\ntrue\n```")
    ray_scaling.register()
    env = gym.make(ray_scaling.ENV_ID)
    try:
        with pytest.raises(RuntimeError, match="the work step returned"):
            ray_scaling.round_rate([env], 1)
    finally:
        env.close()
