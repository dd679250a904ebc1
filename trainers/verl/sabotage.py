"""Deliberately broken variants of the training signal, for tests that prove the checks catch them.

Nothing here is for training. Each sabotage is a real component put where the working one goes,
so veRL runs it exactly as it runs the real one:

* ``flipped_sign`` — the ``termgym_turn_grpo`` advantages negated (estimator
  ``termgym_sabotage_flipped``: select it with ``algorithm.adv_estimator``);
* ``mask_all_ones`` — the agent loop's ``response_mask`` all 1: observation tokens trained on;
* ``reward_zeroed`` — no reward reaches the trainer: ``rm_scores`` all 0;
* ``reward_shifted`` — each turn's reward placed on the previous turn's last token (the first
  turn's stays).

The last three are applied by :class:`ScheduledSabotageLoop`, one per training step
(:data:`SCHEDULE`), so one trainer launch shows them all.

veRL looks the estimator up in its TaskRunner process: runs that use it set Ray's
``worker_process_setup_hook`` to :func:`setup_cpu_worker` (the CPU hook, plus this registration).
"""

from __future__ import annotations

from typing import Any

import torch
from verl.trainer.ppo import core_algos

from trainers.verl.advantage import compute_turn_grpo_advantage
from trainers.verl.agent_loop import TermgymAgentLoop, TermgymAgentLoopOutput

FLIPPED_ESTIMATOR = "termgym_sabotage_flipped"
SABOTAGES = ("flipped_sign", "mask_all_ones", "reward_zeroed", "reward_shifted")


def flipped_sign_advantage(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``termgym_turn_grpo`` with its sign flipped: the policy is pushed away from what earned reward."""
    advantages, returns = compute_turn_grpo_advantage(*args, **kwargs)
    return -advantages, -returns


def register_sabotage_estimator() -> None:
    """Register :data:`FLIPPED_ESTIMATOR` with veRL (idempotent)."""
    if FLIPPED_ESTIMATOR not in core_algos.ADV_ESTIMATOR_REGISTRY:
        core_algos.register_adv_est(FLIPPED_ESTIMATOR)(flipped_sign_advantage)


def setup_cpu_worker() -> None:
    """The CPU worker hook (:func:`trainers.verl.hf_rollout.setup_cpu_worker`) plus the sabotage estimator."""
    from trainers.verl.hf_rollout import setup_cpu_worker as setup

    setup()
    register_sabotage_estimator()


class _SabotagedOutput(TermgymAgentLoopOutput):
    def as_dict(self) -> dict[str, Any]:
        return apply_to_output(super().as_dict(), self.extra_fields.get("sabotage"), self.extra_fields)


def apply_to_output(output: dict[str, Any], sabotage: str | None, extra_fields: dict[str, Any]) -> dict[str, Any]:
    """One agent-loop sabotage applied to ``AgentLoopOutput.as_dict()``'s tensors (``None``: unchanged)."""
    if sabotage == "mask_all_ones":
        output["response_mask"] = torch.ones_like(output["response_mask"])
    elif sabotage == "reward_zeroed" and "rm_scores" in output:
        output["rm_scores"] = torch.zeros_like(output["rm_scores"])
    elif sabotage == "reward_shifted" and "rm_scores" in output:
        positions = extra_fields.get("turn_end_positions") or []
        scores = extra_fields.get("turn_scores") or []
        shifted = torch.zeros_like(output["rm_scores"])
        for k, score in enumerate(scores):
            shifted[positions[max(k - 1, 0)]] += float(score)
        output["rm_scores"] = shifted
    elif sabotage not in (None, "", "none"):
        raise ValueError(f"unknown agent-loop sabotage {sabotage!r}; one of {SABOTAGES[1:]}")
    return output


#: Global step -> the sabotage :class:`ScheduledSabotageLoop` applies in it: steps 1-3 are left intact
#: (the learning test's curve), then one sabotage per step.
INTACT_STEPS = 3
SCHEDULE = {INTACT_STEPS + 1: "mask_all_ones", INTACT_STEPS + 2: "reward_zeroed", INTACT_STEPS + 3: "reward_shifted"}


class ScheduledSabotageLoop(TermgymAgentLoop):
    """``TermgymAgentLoop`` that applies :data:`SCHEDULE`'s sabotage of the episode's global step.

    One trainer launch then shows every agent-loop sabotage, each in a step of its own, after
    intact steps: the per-step checks say which one each sabotage breaks.
    """

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> TermgymAgentLoopOutput:
        from trainers.verl.agent_loop import _global_step

        output = await super().run(sampling_params, **kwargs)
        fields = {**output.extra_fields, "sabotage": SCHEDULE.get(_global_step(kwargs), "none")}
        return _SabotagedOutput(**{**output.model_dump(exclude_unset=True), "extra_fields": fields})


SCHEDULED_LOOP = f"{__name__}.ScheduledSabotageLoop"
