"""veRL's own trainer with every sandbox on the sandbox nodes of a real three-node Ray cluster, one node lost.

The cluster: a head that declares 16 CPUs and one (logical) GPU, where veRL's trainer, rollout and
agent-loop workers run, and two sandbox nodes with ``{"termgym_sandbox": 2}`` and no CPUs (so none of
veRL's workers lands there). The trainer (:func:`trainers.verl.cpu_trainer.run`, ``run_ppo`` on CPU)
joins the cluster (``ray_address``; in its own process, ``remote_tasks.train_pick``) and its samples ask for ``gym.make(..., ray=...)``: every episode
of the pick task (``remote_tasks.pick_suite``: one turn, a grader that sleeps 2 s) runs in an actor
on a sandbox node, and the agent-loop worker on the head records it. While step 1's episodes are
being graded the raylet of one sandbox node is killed: its episodes are lost mid-step, the agent
loop plays each again from scratch on the other node (``infra_retries``), and the step and the run
finish (one step: the loss, the replays and the update are all in it; a second step on the one node
left only adds minutes).

Checked: the step logged, with every trajectory matched to its own episode record (the credit
checks); per step exactly ``groups x n`` finished records, every one from a sandbox node, none from
the head; each lost try left an ``abandoned`` record on the killed node and was counted in
``termgym/infra_failures``. The sabotage (``infra_retries=0``) is the agent loop's own test
(``tests/trainers/test_agent_loop.py``): the same loss then fails the sample.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="needs Ray: pip install 'termgym[eval]'")
pytest.importorskip("verl")

from termgym.remote.local_cluster import local_cluster  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.verl]

STEPS, GROUPS, N = 1, 2, 4
HERE = Path(__file__).resolve().parent  # remote_tasks, imported on every node
REPO = HERE.parents[1]


@pytest.fixture(scope="module")
def training_cluster():
    with local_cluster(workers=2, worker_resources={"termgym_sandbox": 2}, head_cpus=16, head_gpus=1, worker_cpus=0,
                       object_store_bytes=300_000_000, pythonpath=[HERE, REPO]) as cluster:
        with cluster.driver_env():
            ray.init(**cluster.init_options(), configure_logging=False, log_to_driver=False)
            try:
                cluster.identify()
            finally:
                ray.shutdown()
            yield cluster


def _kill_raylet_while_grading(node, killed: list[float]) -> None:
    """Once a grader's ``sleep`` runs under ``node``'s raylet, kill the raylet (the node is lost)."""
    when = node.kill_raylet_once("sleep", within=600, settle=0.3)
    if when is not None:
        killed.append(when)


def test_verl_trains_with_every_sandbox_on_sandbox_nodes_and_survives_losing_one(training_cluster, tmp_path):
    from trainers.verl.cpu_trainer import read_metrics

    cluster = training_cluster
    doomed, survivor = cluster.workers
    killed: list[float] = []
    killer = threading.Thread(target=_kill_raylet_while_grading, args=(doomed, killed), daemon=True)
    killer.start()
    # The trainer in its own process (remote_tasks.train_pick): it sets process-wide state (veRL's
    # platform, environment variables) that must not leak into the tests after this one.
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, str(HERE / "remote_tasks.py"), str(out), cluster.address,
                           str(STEPS), str(GROUPS), str(N)], env=cluster.env, capture_output=True, text=True,
                          timeout=1200)
    killer.join(timeout=5)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-5000:])
    assert killed, "no episode was ever graded on the node the test was to kill"
    log = out / "metrics.jsonl"

    metrics = read_metrics(log)
    assert sorted(metrics) == list(range(1, STEPS + 1)), sorted(metrics)
    for step, m in metrics.items():
        assert m["termgym/episodes"] == GROUPS * N, (step, m["termgym/episodes"])
        # every trajectory veRL trained on is matched to its own episode's record, reward and tokens
        assert m["termgym/credit_checked"] == 1.0 and m["termgym/reward_not_own_episode"] == 0.0, (step, m)
        assert m["termgym/actions_not_own_tokens"] == 0.0, (step, m)
    assert sum(m["termgym/infra_failures"] for m in metrics.values()) >= 1

    records = [json.loads(line) for path in sorted((out / "episodes").rglob("step_*.jsonl"))
               for line in path.read_text().splitlines()]
    finished = [r for r in records if r["end_reason"] != "abandoned"]
    assert Counter(r["training_step"] for r in finished) == Counter({step: GROUPS * N for step in metrics})
    ran_on = Counter(r["sandbox_node"] for r in finished)
    assert set(ran_on) <= cluster.worker_ids(), (ran_on, cluster.head.node_id)  # none on the head, none local
    abandoned = [r for r in records if r["end_reason"] == "abandoned"]
    assert abandoned and {r["sandbox_node"] for r in abandoned} == {doomed.node_id}, abandoned
    assert ran_on[survivor.node_id] > 0
    print(f"finished episodes per sandbox node: {dict(ran_on)}; lost tries: {len(abandoned)} abandoned records, "
          f"{sum(m['termgym/infra_failures'] for m in metrics.values()):g} counted by the trainer")
