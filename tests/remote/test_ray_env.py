"""``gym.make(..., ray=...)``: episodes in Ray actors on sandbox nodes of a real three-node cluster.

The cluster (``conftest.py``) has a head without ``termgym_sandbox`` and two sandbox nodes with 2
slots each. The tests check that a remote episode returns exactly what a local one does, that
actors land only on sandbox nodes and never more than a node's slots, and that killing a sandbox
node's raylet mid-run is an infrastructure failure the evaluation harness retries on the other node,
with every episode recorded once.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import pytest

import termgym
from termgym.env import oracle_actions, terminal_env
from termgym.sandbox.base import SandboxError

ray = pytest.importorskip("ray", reason="needs Ray: pip install 'termgym[eval]'")

pytestmark = pytest.mark.slow

SANDBOX = {"resources": {"termgym_sandbox": 1}}
TOY_TASK = "ledgerly-080f8f80d8"


def play_locally(seed: int) -> tuple[list, gym.Env]:
    env = gym.make("termgym/SweSynth-v0", path="toy")
    returned = [env.reset(seed=seed, options={"task_id": TOY_TASK})]
    for action in oracle_actions(terminal_env(env)):
        returned.append(env.step(action))
    return returned, env


async def play_remotely(env: gym.Env, seed: int) -> list:
    returned = [await termgym.areset(env, seed=seed, options={"task_id": TOY_TASK})]
    for action in oracle_actions(terminal_env(env)):  # read from the driver's mirror of the task
        returned.append(await termgym.astep(env, action))
    return returned


def test_a_remote_episode_returns_exactly_what_a_local_one_does(driver):
    remote = gym.make("termgym/SweSynth-v0", path="toy", ray=SANDBOX)
    with ThreadPoolExecutor(1) as pool:  # the local episode plays while the remote one does
        local_run = pool.submit(play_locally, 7)
        try:
            remote_returns = asyncio.run(play_remotely(remote, seed=7))
        finally:
            local_returns, local = local_run.result()
    try:
        base = remote.unwrapped
        assert type(base).__name__ == "RayEnv" and base.remote_node["node_id"] in driver.worker_ids()
        assert remote_returns == local_returns  # observations, rewards, flags and infos, every step
        final_info = remote_returns[-1][-1]
        assert final_info["grade"]["passed"] is True and remote_returns[-1][1] == 1.0
        # what wrappers and agents read off the env matches too
        for name in ("messages", "steps", "commands", "done"):
            assert getattr(base, name) == getattr(local.unwrapped, name), name
        assert base.grade.to_dict() == local.unwrapped.grade.to_dict()
        assert base.task.task_id == TOY_TASK and base.observation_space == local.observation_space
        with pytest.raises(RuntimeError, match="call reset"):  # the env's own errors come back as they are
            remote.step("THOUGHT: late\n\n```bash\nls\n```")
    finally:
        remote.close()
        local.close()


def test_actors_go_only_to_sandbox_nodes_and_each_node_caps_its_slots(driver):
    from remote_tasks import ENV_ID

    envs = [gym.make(ENV_ID, ray={**SANDBOX, "start_timeout": 60}) for _ in range(4)]
    try:
        with ThreadPoolExecutor(len(envs)) as pool:  # the actors start side by side
            list(pool.map(lambda env: env.reset(seed=0), envs))
        placed = Counter(env.unwrapped.remote_node["node_id"] for env in envs)
        assert driver.head.node_id not in placed
        assert placed == Counter({worker.node_id: 2 for worker in driver.workers})  # 2 slots per sandbox node
        # every slot is taken: a fifth sandbox waits, and gives up with a message saying why
        fifth = gym.make(ENV_ID, ray={**SANDBOX, "start_timeout": 3})
        with pytest.raises(SandboxError, match=r"no Ray node gave this env's actor \{'termgym_sandbox': 1\}"):
            fifth.reset(seed=0)
        fifth.close()
    finally:
        for env in envs:
            env.close()


def _kill_raylet_during_a_step(node, killed: list[float]) -> None:
    """Once an episode's slow step (its ``sleep``) runs under ``node``'s raylet, kill the raylet."""
    when = node.kill_raylet_once("sleep", within=120, settle=0.5)
    if when is not None:
        killed.append(when)


def test_the_driver_is_connected_through_the_head_so_losing_a_sandbox_node_cannot_end_it(driver):
    """``LocalCluster.init_options`` names the head's raylet: a driver attached to a sandbox node's
    raylet would die with it (exit 1, no output) in the next test, which kills one. The sabotage:
    the same options naming worker w1's temp dir attach the driver to w1, so the option is what decides."""
    import remote_tasks

    assert ray.get_runtime_context().get_node_id() == driver.head.node_id
    ray.shutdown()
    try:
        ray.init(**{**driver.init_options(), "_temp_dir": str(driver.workers[0].temp_dir)},
                 configure_logging=False, log_to_driver=False)
        assert ray.get_runtime_context().get_node_id() == driver.workers[0].node_id
    finally:
        ray.shutdown()
        ray.init(**driver.init_options(), configure_logging=False, log_to_driver=False)
        remote_tasks.register()
    assert ray.get_runtime_context().get_node_id() == driver.head.node_id


def test_a_node_lost_mid_run_is_retried_on_the_other_node_and_recorded_once(driver, tmp_path):
    from remote_tasks import ENV_ID, TASKS

    from termgym.evaluation.runner import EvalConfig, run_evaluation

    doomed = driver.workers[0]
    killed: list[float] = []
    killer = threading.Thread(target=_kill_raylet_during_a_step, args=(doomed, killed), daemon=True)
    killer.start()
    config = EvalConfig(env_id=ENV_ID, output_dir=str(tmp_path / "run"), agent="oracle",
                        env_kwargs={"ray": SANDBOX}, concurrency=TASKS, infra_retries=2, infra_backoff=0.5,
                        progress="off")
    outcome = run_evaluation(config)
    killer.join(timeout=5)
    assert killed, "the test never saw a sandbox on the node it was to kill"

    results = outcome.results
    assert sorted(r.task_id for r in results) == [f"sleepy-{i}" for i in range(TASKS)]  # each once
    assert all(r.status == "completed" and r.passed for r in results), [r.to_dict() for r in results]
    retried = [r for r in results if r.infra_failures]
    assert retried, "no episode ran on the killed node"
    failures = [failure for result in retried for failure in result.infra_failures]
    described = [(f["type"], f["where"], f["message"][:200]) for f in failures]
    print("lost tries:", *described, sep="\n  ")  # shown with a failure's captured output
    # Every lost try is a SandboxLost: mid-step, or while resetting (the node's other episode, or a
    # retry that Ray placed on the node before it was declared dead).
    assert all(f["type"] == "SandboxLost" and f["where"] in ("env.step", "env.reset") for f in failures), described
    mid_step = [f for f in failures if f["where"] == "env.step"]
    assert mid_step and all(doomed.node_id[:12] in f["message"] for f in mid_step), described
    # the recording: one finished record per episode, and one abandoned record per try lost mid-episode
    # (a try lost before its reset returned had nothing to record)
    lines = (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    finished = Counter(r["task_id"] for r in records if r["end_reason"] != "abandoned")
    assert finished == Counter({f"sleepy-{i}": 1 for i in range(TASKS)})
    abandoned = Counter(r["task_id"] for r in records if r["end_reason"] == "abandoned")
    assert abandoned == Counter(r.task_id for r in retried for f in r.infra_failures if f["where"] == "env.step")
    alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert doomed.node_id not in alive and driver.workers[1].node_id in alive
