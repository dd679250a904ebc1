"""Episode metrics in veRL's logged metrics: what a person watching a termgym run looks at.

veRL's v1 trainer logs data, timing and throughput metrics per step, but nothing about the
episodes behind them. :class:`TermgymSyncTrainer` is veRL's synchronous v1 trainer
(``PPOTrainerSync``) plus :func:`episode_metrics` over the step's ``extra_fields`` (written by
:class:`~trainers.verl.agent_loop.TermgymAgentLoop`), so they reach every logger veRL drives
(console, W&B, file...). Select it with ``trainer.v1.trainer_mode=termgym_sync`` (the recipe does);
:func:`register` makes it known in veRL's processes (the recipe's Ray worker setup hook).

Keys (all under ``termgym/``):

* ``success_rate`` — share of episodes whose grade passed; ``score/mean`` — mean grade score;
* ``end_reason/<reason>`` — share of episodes that ended that way (``submitted``, ``max_steps``,
  ``turn_truncated``, ``response_budget``...);
* ``format_errors/mean``, ``format_error_rate`` — per episode, and per assistant turn;
* ``turns/mean|max`` — assistant turns per episode; ``tokens/mean|max`` — model tokens per
  episode; ``response_tokens/mean`` — model + observation tokens;
* ``reward_events/<event>`` — mean count per episode of each process-reward event (when
  ``termgym.wrappers.rewards:ProcessReward`` is on);
* ``time/rollout_s``, ``time/update_s``, ``time/rollout_share`` — wall clock of the step spent
  waiting for rollouts vs in the actor update (veRL's ``timing_s/gen`` and ``timing_s/update_actor``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

PREFIX = "termgym/"
TRAINER_MODE = "termgym_sync"


def episode_metrics(extra_fields: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Aggregate the agent loop's per-episode ``extra_fields`` into flat metrics (see the module doc)."""
    episodes = [e for e in extra_fields if isinstance(e, Mapping) and "end_reason" in e]
    if not episodes:
        return {}
    n = len(episodes)
    grades = [e.get("grade") or {} for e in episodes]
    turns = np.array([int(e.get("assistant_turns", 0)) for e in episodes], dtype=float)
    errors = np.array([int(e.get("format_errors", 0)) for e in episodes], dtype=float)
    tokens = np.array([int(e.get("model_tokens", 0)) for e in episodes], dtype=float)
    metrics = {
        "success_rate": float(np.mean([bool(g.get("passed")) for g in grades])),
        "score/mean": float(np.mean([float(g.get("score") or 0.0) for g in grades])),
        "format_errors/mean": float(errors.mean()),
        "format_error_rate": float(errors.sum() / max(turns.sum(), 1.0)),
        "turns/mean": float(turns.mean()),
        "turns/max": float(turns.max()),
        "tokens/mean": float(tokens.mean()),
        "tokens/max": float(tokens.max()),
        "episodes": float(n),
    }
    for reason in sorted({str(e["end_reason"]) for e in episodes}):
        metrics[f"end_reason/{reason}"] = sum(str(e["end_reason"]) == reason for e in episodes) / n
    events: dict[str, float] = {}
    for e in episodes:
        for name, count in (e.get("reward_events") or {}).items():
            events[name] = events.get(name, 0.0) + float(count)
    for name in sorted(events):
        metrics[f"reward_events/{name}"] = events[name] / n
    return {PREFIX + key: value for key, value in metrics.items()}


def timing_metrics(timing_raw: Mapping[str, float]) -> dict[str, float]:
    """Rollout vs update wall clock of one step, from veRL's ``timing_raw``."""
    rollout, update = float(timing_raw.get("gen", 0.0)), float(timing_raw.get("update_actor", 0.0))
    step = float(timing_raw.get("step", 0.0)) or rollout + update
    return {PREFIX + "time/rollout_s": rollout, PREFIX + "time/update_s": update,
            PREFIX + "time/rollout_share": rollout / step if step > 0 else 0.0}


def _trainer_class():
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    class TermgymSyncTrainer(PPOTrainerSync):
        """veRL's synchronous v1 trainer, plus termgym's episode metrics in every step's metrics."""

        def _build_replay_buffer(self):
            # Everything but the metrics is veRL's "sync" trainer, which veRL recognises by this name.
            self.trainer_mode = "sync"
            return super()._build_replay_buffer()

        def _compute_metrics(self, batch, metrics, timing_raw, global_steps, epoch):
            import transfer_queue as tq

            super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
            fields = data.pop("extra_fields").tolist()
            padding = [bool(tag.get("is_padding", False)) for tag in batch.tags]
            metrics.update(episode_metrics([f for f, pad in zip(fields, padding, strict=True) if not pad]))
            metrics.update(timing_metrics(timing_raw))

    TermgymSyncTrainer.__qualname__ = "TermgymSyncTrainer"
    return TermgymSyncTrainer


def register() -> None:
    """Register :class:`TermgymSyncTrainer` as ``trainer.v1.trainer_mode=termgym_sync`` (idempotent)."""
    try:
        from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer
    except ModuleNotFoundError as exc:  # veRL's v1 trainer imports TransferQueue at module level
        raise ModuleNotFoundError(f"veRL's v1 trainer cannot be imported ({exc}); install termgym's [verl] extra "
                                  "(it brings TransferQueue>=0.1.10) or verl[vllm]==0.9.1 on GPU machines") from exc

    if TRAINER_MODE not in TRAINER_REGISTRY:
        register_trainer(TRAINER_MODE)(_trainer_class())
