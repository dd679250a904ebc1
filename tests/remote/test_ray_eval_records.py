"""``termgym eval --ray-address`` assumes no shared file system: a worker returns its records.

:func:`~termgym.evaluation.ray_runner.ray_episode` is what each Ray task runs; called here
directly (no cluster), with a ``record_path`` only the driver may write, it must leave that path
alone and hand the records back, and :func:`~termgym.evaluation.ray_runner.keep_episode` must file
them where the result points.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

from termgym.evaluation.episode import EpisodeSpec
from termgym.evaluation.ray_runner import keep_episode, ray_episode
from termgym.evaluation.results import RunDir
from termgym.wrappers.recording import read_episodes


def test_a_ray_episode_returns_its_records_and_writes_nothing_where_the_driver_keeps_them(tmp_path):
    import remote_tasks

    remote_tasks.register()
    drivers_file = tmp_path / "on-the-driver" / "episodes.jsonl"
    spec = EpisodeSpec(env_spec=gym.spec(remote_tasks.ENV_ID), env_kwargs={}, task_id="sleepy-1", attempt=0,
                       seed=0, record_path=str(drivers_file), record_name="episodes.jsonl")

    returned = ray_episode(spec, "oracle", {}, [])

    assert not drivers_file.parent.exists()  # the worker never touched the driver's path
    (record,) = returned["records"]
    assert (record["task_id"], record["end_reason"]) == ("sleepy-1", "submitted")
    store = RunDir(tmp_path / "run")
    result = keep_episode(store, returned)
    assert result.passed and result.record == {"path": "episodes.jsonl", "episode_id": record["episode_id"], "try": 0}
    assert read_episodes(store.record_path) == [record]
    assert result.load_record(store.path) == record
    assert [r.key for r in store.episodes()] == [("sleepy-1", 0)]


def test_a_run_resumes_with_its_sandboxes_moved_to_ray_but_not_with_other_env_options(tmp_path):
    from termgym.evaluation.runner import RunMismatch, _reconcile

    store = RunDir(tmp_path / "run")
    record = {"env_id": "termgym/SweSynth-v0", "env_kwargs": {"path": "toy"}, "agent": "oracle",
              "agent_options": {}, "seed": 0, "task_ids": ["a"], "attempts": 1}
    store.write_config(record)
    _reconcile(store, {**record, "env_kwargs": {"path": "toy", "ray": {"resources": {"termgym_sandbox": 1}}}})
    with pytest.raises(RunMismatch, match="env_kwargs"):
        _reconcile(store, {**record, "env_kwargs": {"path": "toy", "max_steps": 3}})
