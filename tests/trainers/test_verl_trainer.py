"""veRL's own v1 trainer for several steps on CPU: rollouts in real sandboxes, updates, metrics, resume.

Runs ``verl.trainer.main_ppo.run_ppo`` with ``TaskRunnerV1`` — the entry point
``trainers/verl/train_grpo.sh`` launches — over the GRPO recipe with the CPU changes of
:mod:`trainers.verl.cpu_trainer`: 3 steps, then a relaunch that resumes from the step-3 checkpoint
and takes step 4. Real: Ray, veRL's dataloader (``RLHFDataset``), ``AgentLoopManagerTQ`` /
``AgentLoopWorkerTQ`` running ``TermgymAgentLoop`` with ProcessReward over bubblewrap sandboxes,
TransferQueue, the sync ``ReplayBuffer``, the actor worker (``ActorRolloutRefWorker`` with veRL's
FSDP2 engine, LoRA, gloo), and between one rollout and the next every function of
``PPOTrainer._step_once`` and ``fit``: ``replay_buffer.sample``, ``_balance_batch``,
``_compute_old_log_prob``, ``_compute_ref_log_prob`` (adapter disabled), ``_compute_advantage``
(``termgym_turn_grpo``), ``_update_actor``, ``_save_checkpoint``, ``on_step_end`` →
``CheckpointEngineManager.update_weights`` (naive backend: the actor pushes its weights into the
rollout), ``_compute_metrics`` (+ termgym's episode metrics), ``Tracking.log`` and, on relaunch,
``_load_checkpoint``. Substituted, because it needs a GPU: the vLLM rollout server, replaced by
:mod:`trainers.verl.hf_rollout` (HF ``generate`` behind veRL's replica/server protocol); and veRL's
device layer, answered for the CPU by :mod:`trainers.verl.cpu_platform` (veRL 0.9.1 has no CPU
platform).
"""

from __future__ import annotations

import math
import shutil

import pytest

pytest.importorskip("verl")
# two launches of veRL's trainer: ~7-8 minutes on a loaded 2-core machine, mostly Ray and worker start-up
pytestmark = [pytest.mark.verl, pytest.mark.slow, pytest.mark.timeout(1500)]

import torch  # noqa: E402

from termgym.wrappers.rewards import OUTCOME_EVENTS  # noqa: E402
from trainers.verl.cpu_trainer import read_metrics, run  # noqa: E402

EPISODE_KEYS = ["termgym/success_rate", "termgym/format_errors/mean", "termgym/format_error_rate", "termgym/turns/mean",
                "termgym/tokens/mean", "termgym/time/rollout_s", "termgym/time/update_s", "termgym/time/rollout_share"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap (bwrap) is required: the episodes run in real sandboxes")
    try:
        import transfer_queue  # noqa: F401
    except ModuleNotFoundError:
        pytest.fail("veRL's v1 trainer needs TransferQueue: pip install -e '.[verl]' (it brings TransferQueue>=0.1.10)")
    out = tmp_path_factory.mktemp("verl-cpu-trainer")
    first = read_metrics(run(out, steps=3, log_name="first.jsonl"))
    resumed = read_metrics(run(out, steps=4, log_name="resumed.jsonl"))
    return out, first, resumed


def test_three_steps_then_a_resume_that_continues(trained):
    out, first, resumed = trained
    assert sorted(first) == [1, 2, 3]
    assert sorted(resumed) == [4]  # the relaunch loaded global_step_3 and went on from there
    ckpt = out / "checkpoints"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "4"
    before = torch.load(ckpt / "global_step_3" / "actor" / "model_world_size_1_rank_0.pt", weights_only=False)
    after = torch.load(ckpt / "global_step_4" / "actor" / "model_world_size_1_rank_0.pt", weights_only=False)
    lora = [name for name in before if "lora_" in name]
    assert lora and any(not torch.equal(_full(before[n]), _full(after[n])) for n in lora)


def test_every_step_updates_the_actor_from_termgym_rollouts(trained):
    _, first, resumed = trained
    for step, metrics in {**first, **resumed}.items():
        assert math.isfinite(metrics["actor/pg_loss"]), step
        assert metrics["training/global_step"] == step
        # 2 groups x 4 rollouts per step, each generated with the weights of the step before
        assert metrics["termgym/episodes"] == 8
        assert metrics["training/off_policy/trajectory_staleness/max"] == 0
        assert metrics["timing_s/gen"] > 0 and metrics["timing_s/update_actor"] > 0


def test_episode_metrics_reach_verls_logger(trained):
    _, first, resumed = trained
    steps = {**first, **resumed}
    for step, metrics in steps.items():
        missing = [key for key in EPISODE_KEYS if key not in metrics]
        assert not missing, (step, missing)
        reasons = {k: v for k, v in metrics.items() if k.startswith("termgym/end_reason/")}
        assert reasons and sum(reasons.values()) == pytest.approx(1.0), (step, reasons)
        assert 0.0 <= metrics["termgym/success_rate"] <= 1.0
        if metrics["termgym/success_rate"] > 0:  # a group of the scripted task: solved in its sandbox
            assert metrics["termgym/end_reason/submitted"] > 0
        # ProcessReward is on: every episode, cut ones included, ends with exactly one outcome event
        outcomes = sum(metrics.get(f"termgym/reward_events/{name}", 0.0) for name in OUTCOME_EVENTS)
        assert outcomes == pytest.approx(1.0), (step, {k: v for k, v in metrics.items() if "reward_events" in k})
        # the default ("progress") table's outcome event: target-test credit, settled once per episode
        assert metrics["termgym/reward_events/target_tests"] == pytest.approx(1.0), step
    # the smoke suite's task 0 is answered by scripted turns (trainers/verl/smoke_suite.py), the others
    # by the random model: over four steps both successes and failures occur
    assert any(m["termgym/success_rate"] > 0 for m in steps.values())
    assert any(m["termgym/success_rate"] < 1 for m in steps.values())


def _full(tensor):
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
