"""What every trainer adapter needs from an episode: the env built the same way, and its outcome as metrics.

Trainers log flat ``name -> number`` dicts (ART's ``Trajectory.metrics``, tinker-cookbook's
``StepResult.metrics``). :func:`episode_metrics` turns the last step's ``info`` (grade, end reason,
process-reward summary) into such a dict with the same keys for every adapter, so curves from
different trainers can be compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

#: The reasons an episode ends (``info["end_reason"]``); each becomes a one-hot ``end/<reason>`` metric.
END_REASONS = ("submitted", "max_steps", "time_limit", "context_limit")


@dataclass(frozen=True)
class EnvRecipe:
    """How to build the env of one episode (picklable: trainers ship it to rollout workers).

    A recipe names an id and the ``gym.make`` keywords; how the env itself then runs is its
    :class:`termgym.config.EnvConfig`, split out of those keywords.

    Args:
        env_id: any registered termgym id (``termgym/SweSynth-v0``, ``termgym/Harbor-v0``, or one
            made with :func:`termgym.register_suite`).
        env_kwargs: keyword arguments for ``gym.make`` (``backend``, ``protocol``, ``max_steps``, ...).
        process_rewards: :class:`~termgym.wrappers.rewards.ProcessReward` options (``{}`` for the default
            table); ``None`` leaves the env's outcome-only reward.
    """

    env_id: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    process_rewards: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str) or not self.env_id:
            raise ValueError(f"EnvRecipe.env_id must be a registered env id, got {self.env_id!r}")
        if self.env_id not in gym.registry:
            raise ValueError(f"EnvRecipe.env_id {self.env_id!r} is not registered "
                             "(built-in ids: termgym/SweSynth-v0, termgym/LiveWeb-v0, termgym/Harbor-v0)")
        if not isinstance(self.env_kwargs, Mapping):
            raise TypeError(f"EnvRecipe.env_kwargs must be a mapping, got {type(self.env_kwargs).__name__}")
        if self.process_rewards is not None and not isinstance(self.process_rewards, Mapping):
            raise TypeError("EnvRecipe.process_rewards must be a mapping of ProcessReward options or None, "
                            f"got {type(self.process_rewards).__name__}")

    def make(self) -> gym.Env:
        """A fresh env (blocking: constructing an env starts nothing; ``reset`` starts the sandbox)."""
        env = gym.make(self.env_id, disable_env_checker=True, **dict(self.env_kwargs))
        if self.process_rewards is not None:
            from termgym.wrappers.rewards import ProcessReward

            env = ProcessReward(env, **dict(self.process_rewards))
        return env

    def task_ids(self, split: str | None = None) -> list[str]:
        """The task ids of the env's suite in ``split`` (the suite's default split when ``None``)."""
        env = gym.make(self.env_id, disable_env_checker=True, **dict(self.env_kwargs))
        try:
            suite = env.get_wrapper_attr("suite")
            return [str(t) for t in suite.task_ids(split if split is not None else env.get_wrapper_attr("split"))]
        finally:
            env.close()


def episode_metrics(final_info: Mapping[str, Any], *, steps: int, format_errors: int = 0) -> dict[str, float]:
    """Flat numeric metrics of a finished episode from its last step's ``info``.

    ``score``, ``passed``, ``steps``, ``format_errors``, ``end/<reason>`` (one-hot), the grade's
    numeric details as ``grade/<name>`` (e.g. SWE-SYNTH's ``pass_rate``), and with process rewards
    ``process/shaping``, ``process/outcome``, ``process/return`` and ``process/count/<event>``.
    """
    grade = final_info.get("grade") or {}
    metrics: dict[str, float] = {
        "score": float(grade.get("score", 0.0)),
        "passed": float(bool(grade.get("passed", False))),
        "steps": float(steps),
        "format_errors": float(format_errors),
        "grading_error": float(bool(grade.get("error"))),
    }
    reason = final_info.get("end_reason")
    for known in END_REASONS:
        metrics[f"end/{known}"] = float(reason == known)
    for name, value in (grade.get("details") or {}).items():
        number = _number(value)
        if number is not None:
            metrics[f"grade/{name}"] = number
    summary = final_info.get("process_reward")
    if isinstance(summary, Mapping):
        for key in ("shaping", "outcome", "return"):
            number = _number(summary.get(key))
            if number is not None:
                metrics[f"process/{key}"] = number
        from termgym.wrappers.rewards import EVENTS

        counts = summary.get("counts") or {}
        for event in EVENTS:  # every event, zeros included, so averages over a group mean the same thing
            metrics[f"process/count/{event}"] = float(counts.get(event, 0))
    return metrics


def finish_early(env: gym.Env, reason: str) -> tuple[float, dict[str, Any]]:
    """End ``env``'s running episode from outside (the trainer's token budget ran out) and grade it.

    The one way an episode ends early: a last ``step(Truncate(reason))`` through the whole wrapper
    stack, so a :class:`~termgym.wrappers.rewards.ProcessReward` settles it (outcome events,
    shaping clawback) and a recorder records it like any other last step. Returns ``(reward, info)``.
    """
    from termgym.env import Truncate

    _obs, reward, _terminated, _truncated, info = env.step(Truncate(reason))
    return float(reward), info


def _number(value: Any) -> float | None:
    """``value`` as a finite float when it is a number or a bool, else ``None`` (strings are not metrics)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(float(value)):
        return float(value)
    return None
