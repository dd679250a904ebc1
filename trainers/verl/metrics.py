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
* ``return/mean`` — the env's episode return (sum of its step rewards, from the agent loop);
  veRL's ``critic/score/mean`` must equal it (:func:`signal_metrics`);
* ``trained_tokens/mean`` vs ``response_tokens/mean`` — tokens the loss sees (the trainer's
  ``response_mask``) vs all response tokens (observations included): fewer when observations are masked;
* ``groups_with_signal`` — share of groups (rollouts of one prompt) whose episode returns differ;
* ``reward_misplaced`` — share of episodes whose per-turn rewards, as the advantage estimator reads
  them from ``token_level_rewards`` and ``response_mask``, differ from the env's step rewards;
* ``infra_failures`` — tries lost to the infrastructure this step (a crashed sandbox, a lost Ray
  sandbox node; each such episode was played again from scratch); ``episodes_retried`` — their share;
* ``time/rollout_s``, ``time/update_s``, ``time/rollout_share`` — wall clock of the step spent
  waiting for rollouts vs in the actor update (veRL's ``timing_s/gen`` and ``timing_s/update_actor``);
* credit, where episodes are recorded (the agent loop's ``trajectory_dir``, :func:`credit_metrics`):
  ``credit_checked`` — share of trajectories matched to their episode's record by its id;
  ``reward_not_own_episode`` — share of those whose reward (the sum of ``rm_scores``, what veRL
  trains on) is not their own episode's return; ``actions_not_own_tokens`` — share whose env did
  not run exactly the decoding of the trajectory's own response tokens, turn for turn.
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
        "infra_failures": float(sum(len(e.get("infra_failures") or ()) for e in episodes)),
        "episodes_retried": sum(bool(e.get("infra_failures")) for e in episodes) / n,
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


def signal_metrics(extra_fields: Sequence[Mapping[str, Any]], response_masks: Sequence[Any],
                   token_level_rewards: Sequence[Any], groups: Sequence[Any] | None = None) -> dict[str, float]:
    """What the trainer trains on, next to what the env gave (see the module doc): per-row 1-D tensors;
    ``groups`` (each row's prompt uid) adds ``groups_with_signal``, the share of groups whose
    episode returns differ (without one, GRPO has nothing to learn from)."""
    import torch

    from trainers.verl.advantage import turn_rewards

    if not extra_fields:
        return {}
    returns, trained, lengths, misplaced = [], [], [], []
    for fields, mask, rewards in zip(extra_fields, response_masks, token_level_rewards, strict=True):
        mask = torch.as_tensor(mask).float().reshape(1, -1)
        rewards = torch.as_tensor(rewards).float().reshape(1, -1)
        env_scores = [float(r) for r in fields.get("turn_scores") or ()]
        returns.append(sum(env_scores))
        trained.append(float(mask.sum()))
        lengths.append(float(mask.shape[-1]))
        seen, n_turns = turn_rewards(rewards, mask)
        seen = seen[0, : int(n_turns[0])].tolist()
        # the estimator's view must match the env's step rewards turn for turn (a reward placed by the
        # loop's closing Truncate step joins the last turn's score)
        misplaced.append(len(seen) != len(env_scores) or any(abs(a - b) > 1e-5 for a, b in zip(seen, env_scores)))
    metrics = {PREFIX + "return/mean": float(np.mean(returns)), PREFIX + "trained_tokens/mean": float(np.mean(trained)),
               PREFIX + "response_tokens/mean": float(np.mean(lengths)),
               PREFIX + "reward_misplaced": float(np.mean(misplaced))}
    if groups is not None:
        by_group: dict[Any, list[float]] = {}
        for group, value in zip(groups, returns, strict=True):
            by_group.setdefault(group, []).append(value)
        varied = [max(v) - min(v) > 1e-9 for v in by_group.values()]
        metrics[PREFIX + "groups_with_signal"] = float(np.mean(varied)) if varied else 0.0
    return metrics


def credit_metrics(extra_fields: Sequence[Mapping[str, Any]], responses: Sequence[Any], response_masks: Sequence[Any],
                   rm_scores: Sequence[Any], tokenizer) -> dict[str, float]:
    """Whether each trajectory of the batch is credited with its own episode (per-row 1-D tensors).

    A row names its episode by the id of the env's record (``extra_fields["record"]``, written by the
    agent loop); the record itself is written by the env's recorder (``RecordEpisodes``), apart from
    the tensors veRL trains on. Per matched row: its reward, the sum of its ``rm_scores``, must be
    the record's return; and the assistant messages the env ran (the record's ``messages``) must be
    the decodings of the row's own response tokens, one per run of ``response_mask`` 1s. Per-step
    aggregates cannot see this: a reward handed to another episode of the batch leaves every mean as it was.
    """
    import torch

    from termgym.wrappers.recording import read_episodes
    from trainers.verl.agent_loop import decode_turn

    if not extra_fields:
        return {}
    files: dict[str, dict[str, Mapping[str, Any]]] = {}
    not_own, not_tokens = [], []
    for fields, ids, mask, scores in zip(extra_fields, responses, response_masks, rm_scores, strict=True):
        ref = fields.get("record") if isinstance(fields, Mapping) else None
        if not ref or not ref.get("path") or not ref.get("episode_id"):
            continue
        path = str(ref["path"])
        if path not in files:
            try:
                files[path] = {str(r.get("episode_id")): r for r in read_episodes(path, skip_invalid=True)}
            except FileNotFoundError:
                files[path] = {}
        record = files[path].get(str(ref["episode_id"]))
        if record is None:
            continue
        reward = float(torch.as_tensor(scores).float().sum())
        not_own.append(abs(reward - float(record.get("return") or 0.0)) > 1e-4)
        executed = [m.get("content") for m in record.get("messages") or () if m.get("role") == "assistant"]
        turns = [decode_turn(tokenizer, run) for run in _token_runs(ids, mask)]
        not_tokens.append(turns != executed)
    metrics = {PREFIX + "credit_checked": len(not_own) / len(extra_fields)}
    if not_own:
        metrics[PREFIX + "reward_not_own_episode"] = float(np.mean(not_own))
        metrics[PREFIX + "actions_not_own_tokens"] = float(np.mean(not_tokens))
    return metrics


def _token_runs(ids: Any, mask: Any) -> list[list[int]]:
    """The runs of consecutive response tokens with mask 1: one per assistant turn (observations between are 0)."""
    import torch

    ids, mask = torch.as_tensor(ids).reshape(-1).tolist(), torch.as_tensor(mask).reshape(-1).tolist()
    runs: list[list[int]] = []
    previous = 0
    for token, bit in zip(ids, mask, strict=False):
        if bit:
            if not previous:
                runs.append([])
            runs[-1].append(int(token))
        previous = bit
    return runs


def timing_metrics(timing_raw: Mapping[str, float]) -> dict[str, float]:
    """Rollout vs update wall clock of one step, from veRL's ``timing_raw``."""
    rollout, update = float(timing_raw.get("gen", 0.0)), float(timing_raw.get("update_actor", 0.0))
    step = float(timing_raw.get("step", 0.0)) or rollout + update
    return {PREFIX + "time/rollout_s": rollout, PREFIX + "time/update_s": update,
            PREFIX + "time/rollout_share": rollout / step if step > 0 else 0.0}


def _trainer_class():
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    class TermgymSyncTrainer(PPOTrainerSync):
        """veRL's synchronous v1 trainer, plus termgym's episode metrics in every step's metrics (and the
        turn anchors for ``termgym_turn_grouping=anchor``)."""

        def _build_replay_buffer(self):
            # Everything but the metrics is veRL's "sync" trainer, which veRL recognises by this name.
            self.trainer_mode = "sync"
            return super()._build_replay_buffer()

        def _compute_advantage(self, batch, metrics):
            # veRL hands an estimator tensors and uids only: with anchor grouping, termgym_turn_grpo gets
            # each row's turn anchors (the agent loop's extra_fields, in the batch's row order) here.
            from trainers.verl import advantage

            algorithm = self.config.algorithm
            if algorithm.get("termgym_turn_grouping", "turn_index") != "anchor":
                return super()._compute_advantage(batch, metrics)
            import transfer_queue as tq

            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
            advantage._BATCH_ANCHORS = [list(f.get("turn_anchors") or []) for f in data.pop("extra_fields").tolist()]
            try:
                return super()._compute_advantage(batch, metrics)
            finally:
                advantage._BATCH_ANCHORS = None

        def _compute_metrics(self, batch, metrics, timing_raw, global_steps, epoch):
            import transfer_queue as tq

            super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                                   select_fields=["extra_fields", "response_mask", "rm_scores", "responses"])
            fields = data.pop("extra_fields").tolist()
            padding = [bool(tag.get("is_padding", False)) for tag in batch.tags]
            keep = [not pad for pad in padding]
            fields = [f for f, k in zip(fields, keep, strict=True) if k]
            metrics.update(episode_metrics(fields))
            masks = [m for m, k in zip(_rows(data["response_mask"]), keep, strict=True) if k]
            rewards = [r for r, k in zip(_rows(data["rm_scores"]), keep, strict=True) if k]
            responses = [r for r, k in zip(_rows(data["responses"]), keep, strict=True) if k]
            uids = [key.rsplit("_", 2)[0] for key, k in zip(batch.keys, keep, strict=True) if k]
            metrics.update(signal_metrics(fields, masks, rewards, uids))
            metrics.update(credit_metrics(fields, responses, masks, rewards, self.tokenizer))
            metrics.update(timing_metrics(timing_raw))

    TermgymSyncTrainer.__qualname__ = "TermgymSyncTrainer"
    return TermgymSyncTrainer


def _rows(tensor) -> list:
    """One 1-D tensor per sample, from a nested (jagged) tensor as TransferQueue returns it."""
    if getattr(tensor, "is_nested", False):
        return list(tensor.unbind())
    return list(tensor)


def register() -> None:
    """Register :class:`TermgymSyncTrainer` as ``trainer.v1.trainer_mode=termgym_sync`` (idempotent)."""
    try:
        from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, register_trainer
    except ModuleNotFoundError as exc:  # veRL's v1 trainer imports TransferQueue at module level
        raise ModuleNotFoundError(f"veRL's v1 trainer cannot be imported ({exc}); install termgym's [verl] extra "
                                  "(it brings TransferQueue>=0.1.10) or verl[vllm]==0.9.1 on GPU machines") from exc

    if TRAINER_MODE not in TRAINER_REGISTRY:
        register_trainer(TRAINER_MODE)(_trainer_class())
