"""Deliberately broken variants of the training signal, for tests that prove the checks catch them.

Nothing here is for training. Each sabotage is a real component put where the working one goes,
so veRL runs it exactly as it runs the real one:

* ``flipped_sign`` — the ``termgym_turn_grpo`` advantages negated (estimator
  ``termgym_sabotage_flipped``: select it with ``algorithm.adv_estimator``);
* ``mask_all_ones`` — the agent loop's ``response_mask`` all 1: observation tokens trained on;
* ``reward_zeroed`` — no reward reaches the trainer: ``rm_scores`` all 0;
* ``reward_shifted`` — each turn's reward placed on the previous turn's last token (the first
  turn's stays);
* ``reward_shuffled`` — each episode paid the return of another episode of the same step (the one
  that finished just before it; the step's first keeps its own), placed on its last turn and
  written into its ``turn_scores`` too, so every per-step mean and per-row placement still agrees;
* ``action_replaced`` — the env handed a random other action in place of each turn the policy
  wrote (another of the rollout's ``termgym_choices``; without choices, the turn's characters
  shuffled), the tokens the trainer sees left as the policy wrote them.

The agent-loop ones are applied by :class:`ScheduledSabotageLoop`, one per training step
(its ``schedule``: :data:`SCHEDULE`, or :data:`SHUFFLED_FIRST` for :class:`ShuffledFirstStepLoop`),
so one trainer launch shows several.

veRL looks the estimator up in its TaskRunner process: runs that use it set Ray's
``worker_process_setup_hook`` to :func:`setup_cpu_worker` (the CPU hook, plus this registration).
"""

from __future__ import annotations

import json
import random
from typing import Any

import gymnasium as gym
import torch
from verl.trainer.ppo import core_algos

from trainers.verl.advantage import compute_turn_grpo_advantage
from trainers.verl.agent_loop import TermgymAgentLoop, TermgymAgentLoopOutput

FLIPPED_ESTIMATOR = "termgym_sabotage_flipped"
SABOTAGES = ("flipped_sign", "mask_all_ones", "reward_zeroed", "reward_shifted", "reward_shuffled", "action_replaced")
#: Sabotages that act across a step's episodes (``reward_shuffled``) or on the env (``action_replaced``),
#: in :class:`ScheduledSabotageLoop`; the other agent-loop ones change one output's tensors (:func:`apply_to_output`).
LOOP_SABOTAGES = ("reward_shuffled", "action_replaced")


def flipped_sign_advantage(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``termgym_turn_grpo`` with its sign flipped: the policy is pushed away from what earned reward."""
    advantages, returns = compute_turn_grpo_advantage(*args, **kwargs)
    return -advantages, -returns


#: The no-signal baseline's estimator: ``termgym_turn_grpo`` on the batch's returns permuted across its rows.
SHUFFLED_ESTIMATOR = "termgym_baseline_shuffled"
_BASELINE_RNG = torch.Generator().manual_seed(0)


def shuffled_credit_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, *args: Any,
                              **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``termgym_turn_grpo`` after a random permutation of the whole batch's returns: each row is paid
    another row's return, on its last response token. Where a step's batch is complete (veRL's
    trainer, after every rollout), so the credit carries no information about what a row did: the
    no-signal baseline of the learning benchmarks (single-turn runs: a return moves as one number)."""
    returns = token_level_rewards.sum(-1)
    permutation = torch.randperm(len(returns), generator=_BASELINE_RNG)
    last = response_mask.cumsum(-1).argmax(-1)  # each row's last response token
    shuffled = torch.zeros_like(token_level_rewards)
    shuffled[torch.arange(len(returns)), last] = returns[permutation]
    return compute_turn_grpo_advantage(shuffled, response_mask, *args, **kwargs)


#: The Hydra override that runs :func:`setup_cpu_worker` in Ray's workers (where veRL looks estimators up).
WORKER_HOOK_OVERRIDE = f"ray_kwargs.ray_init.runtime_env.worker_process_setup_hook={__name__}.setup_cpu_worker"
#: The overrides of a no-signal baseline run: :data:`SHUFFLED_ESTIMATOR` in place of the recipe's estimator.
SHUFFLED_OVERRIDES = (WORKER_HOOK_OVERRIDE, f"algorithm.adv_estimator={SHUFFLED_ESTIMATOR}")


def register_sabotage_estimator() -> None:
    """Register :data:`FLIPPED_ESTIMATOR` and :data:`SHUFFLED_ESTIMATOR` with veRL (idempotent)."""
    for name, estimator in ((FLIPPED_ESTIMATOR, flipped_sign_advantage), (SHUFFLED_ESTIMATOR, shuffled_credit_advantage)):
        if name not in core_algos.ADV_ESTIMATOR_REGISTRY:
            core_algos.register_adv_est(name)(estimator)


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
    elif sabotage not in (None, "", "none", *LOOP_SABOTAGES):
        raise ValueError(f"unknown agent-loop sabotage {sabotage!r}; one of {SABOTAGES[1:]}")
    return output


class ReplacedAction(gym.Wrapper):
    """Hands the env a random other action in place of each assistant turn (``action_replaced``).

    The replacement is another of ``choices`` when the turn is one of them (else a random one), or,
    without choices, the turn's own characters shuffled. Token data riding on the message
    (``extra``) is kept: only what the env runs changes.
    """

    def __init__(self, env: gym.Env, choices: list[str], seed: int = 0) -> None:
        super().__init__(env)
        self.choices = list(choices)
        self.rng = random.Random(seed)

    def step(self, action: Any):
        if isinstance(action, dict) and action.get("role", "assistant") == "assistant" and action.get("content"):
            action = {**action, "content": self._other(action["content"])}
        elif isinstance(action, str) and action:
            action = self._other(action)
        return self.env.step(action)

    def _other(self, text: str) -> str:
        others = [c for c in self.choices if c != text]
        if others:
            return self.rng.choice(others)
        shuffled = list(text)
        self.rng.shuffle(shuffled)
        return "".join(shuffled)


#: Per agent-loop worker process: global step -> the return of that step's episode that finished last
#: (``reward_shuffled`` pays it to the next one).
_LAST_RETURN: dict[int, float] = {}


def shuffled_turn_scores(step: int, turn_scores: list[float]) -> list[float]:
    """``reward_shuffled``: the return of the episode of ``step`` that finished just before this one, on
    the last turn (zeros before it); the step's first episode keeps its own. Remembers this episode's
    return for the next one.

    The step's returns are paid out rotated by one in finishing order: every return but the last
    finisher's is paid to someone, and wherever two episodes in a row earned differently one of them
    is paid wrongly. (Drawing a random earlier return instead could pay a whole step the same value:
    every red answer of a batch paid a green's 0 when the greens finished first.)"""
    own = float(sum(turn_scores))
    paid = _LAST_RETURN.get(step, own)
    _LAST_RETURN[step] = own
    return [0.0] * (len(turn_scores) - 1) + [paid] if turn_scores else []


#: Global step -> the sabotage :class:`ScheduledSabotageLoop` applies in it: steps 1-3 are left intact
#: (the learning test's curve), then one sabotage per step.
INTACT_STEPS = 3
SCHEDULE = {INTACT_STEPS + 1: "mask_all_ones", INTACT_STEPS + 2: "reward_zeroed", INTACT_STEPS + 3: "reward_shifted",
            INTACT_STEPS + 4: "action_replaced"}
#: :class:`ShuffledFirstStepLoop`'s schedule: the first step's rewards shuffled, then intact. A shuffle is
#: visible only where returns differ, so it goes where the policy is still near chance (after the two-turn
#: run's intact steps nearly every episode earns 1 and a shuffle would change nothing); the learning test
#: puts it in the two-turn sign-flipped run, whose first step earns ~0.3.
SHUFFLED_FIRST = {1: "reward_shuffled"}


class ScheduledSabotageLoop(TermgymAgentLoop):
    """``TermgymAgentLoop`` that applies ``schedule``'s sabotage (:data:`SCHEDULE`) of the episode's global step.

    One trainer launch then shows every agent-loop sabotage, each in a step of its own, after
    intact steps: the per-step checks say which one each sabotage breaks.
    """

    schedule: dict[int, str] = SCHEDULE

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> TermgymAgentLoopOutput:
        from trainers.verl.agent_loop import _global_step

        step = _global_step(kwargs)
        sabotage = self.schedule.get(step, "none")
        output = await super().run(sampling_params, **kwargs)
        fields = {**output.extra_fields, "sabotage": sabotage}
        dump = output.model_dump(exclude_unset=True)
        if sabotage == "reward_shuffled":
            fields["turn_scores"] = shuffled_turn_scores(step, list(fields.get("turn_scores") or []))
            dump["reward_score"] = float(sum(fields["turn_scores"]))
        return _SabotagedOutput(**{**dump, "extra_fields": fields})

    def _make_env(self, env_id: str, extra_info: dict[str, Any], global_step: int = -1):
        env = super()._make_env(env_id, extra_info, global_step)
        if self.schedule.get(global_step) == "action_replaced":
            from trainers.verl.hf_rollout import CHOICES_KEY

            choices = (getattr(self.rollout_config, "custom", None) or {}).get(CHOICES_KEY) or []
            env = ReplacedAction(env, json.loads(choices) if isinstance(choices, str) else list(choices),
                                 seed=random.randrange(2**31))
        return env


class ShuffledFirstStepLoop(ScheduledSabotageLoop):
    """:class:`ScheduledSabotageLoop` on :data:`SHUFFLED_FIRST`: the first step's rewards shuffled, then intact."""

    schedule = SHUFFLED_FIRST


SCHEDULED_LOOP = f"{__name__}.ScheduledSabotageLoop"
SHUFFLED_FIRST_LOOP = f"{__name__}.ShuffledFirstStepLoop"
