"""``termgym_turn_grpo``: GRPO's episode advantage plus a weighted turn-level process-reward term.

Select it with ``algorithm.adv_estimator=termgym_turn_grpo``; tune it with
``+algorithm.termgym_turn_weight=w`` (default 0.5) and ``+algorithm.termgym_turn_gamma=g``
(default 1.0). The agent loop puts each env step's reward on the last token of the turn that
earned it (``reward_placement: per_turn``), so a row of ``token_level_rewards`` carries the
per-turn rewards ``r_1..r_K`` and sums to the episode return.

For a sample ``i`` in group ``g`` (same prompt) and its assistant turn ``k`` (a maximal run of
``response_mask == 1``):

* episode term ``A_i`` — veRL's GRPO on ``R_i = sum_k r_k``: ``(R_i - mean_g R) / (std_g R + eps)``
  (``std`` only when ``algorithm.norm_adv_by_std_in_grpo``);
* turn term ``T_ik`` — the discounted return-to-go ``G_ik = sum_{j>=k} g^(j-k) r_ij`` compared with
  the *same turn* of the other samples in the group: ``(G_ik - mean_{j: K_j>=k} G_jk) / (std + eps)``
  over the samples that reached turn ``k``; 0 where fewer than two samples did;
* every model token of turn ``k`` gets ``A_i + w * T_ik``; observation tokens get 0.

The baseline for a turn comes from comparable turns (the same turn index across the group), so
the estimator has no position bias: identical rollouts get 0 everywhere, whatever their per-turn
rewards (normalising over all turns of a group, as an earlier version did, pushed late turns down
only because less reward is left after them). This is the step-level group baseline of GiGPO
(Feng et al., 2025, "Group-in-Group Policy Optimization for LLM Agent Training", arXiv:2505.10978),
with "same turn index" standing in for GiGPO's "same environment state" anchor; combining it with
the episode-level GRPO term follows the turn-level credit assignment of MT-GRPO (Zeng et al., 2025,
"Reinforcing Multi-Turn Reasoning in LLM Agents via Turn-Level Credit Assignment", arXiv:2505.11821).

With ``w = 0`` this is exactly veRL's ``grpo`` estimator. The simple alternative needs no custom
estimator: ``reward_placement: final`` (or plain ``grpo``, which only looks at the row sums) folds
every process reward into the episode return.

veRL calls the estimator in its trainer process, so this module must be imported there: the
launch config sets Ray's ``worker_process_setup_hook`` to :func:`register_estimators`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos

ESTIMATOR_NAME = "termgym_turn_grpo"
DEFAULT_TURN_WEIGHT = 0.5
DEFAULT_TURN_GAMMA = 1.0


def turn_ids(response_mask: torch.Tensor) -> torch.Tensor:
    """1-based index of the assistant turn each token belongs to, or follows (0 before the first).

    A turn is a maximal run of ``response_mask == 1``; observation tokens after turn ``k`` map to
    ``k`` too, so a reward placed on them still counts for the turn that caused them.
    """
    mask = response_mask.long()
    previous = torch.nn.functional.pad(mask[:, :-1], (1, 0))
    starts = (mask == 1) & (previous == 0)
    return torch.cumsum(starts.long(), dim=-1)


def turn_rewards(token_level_rewards: torch.Tensor, response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-turn rewards ``(bs, max_turns)`` and the number of turns per row ``(bs,)``."""
    ids = turn_ids(response_mask)
    n_turns = ids.max(dim=-1).values if ids.numel() else torch.zeros(ids.shape[0], dtype=torch.long)
    width = int(n_turns.max().item()) + 1 if ids.numel() else 1
    sums = torch.zeros(ids.shape[0], width, dtype=token_level_rewards.dtype, device=token_level_rewards.device)
    sums.scatter_add_(1, ids, token_level_rewards)
    return sums[:, 1:], n_turns


def turn_returns(rewards: torch.Tensor, n_turns: torch.Tensor, gamma: float) -> torch.Tensor:
    """Discounted return-to-go per turn; positions past a row's last turn are 0."""
    returns = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[0], dtype=rewards.dtype, device=rewards.device)
    for k in range(rewards.shape[1] - 1, -1, -1):
        valid = (k < n_turns).to(rewards.dtype)
        running = (rewards[:, k] + gamma * running) * valid
        returns[:, k] = running
    return returns


def turn_baselined(returns: torch.Tensor, valid: torch.Tensor, index: np.ndarray, *, epsilon: float = 1e-6,
                   norm_by_std: bool = True) -> torch.Tensor:
    """Each turn's return-to-go minus the mean over the same turn of its group (÷ std): ``(bs, turns)``.

    Only samples that reached turn ``k`` (``valid[:, k]``) enter turn ``k``'s statistics; a turn
    reached by fewer than two samples of its group gets 0 (no comparison exists).
    """
    out = torch.zeros_like(returns)
    groups: dict[Any, list[int]] = {}
    for row, group in enumerate(index):
        groups.setdefault(group, []).append(row)
    for rows in groups.values():
        rows_t = torch.tensor(rows, device=returns.device)
        for k in range(returns.shape[1]):
            members = rows_t[valid[rows_t, k]]
            if members.numel() < 2:
                continue
            values = returns[members, k]
            centred = values - values.mean()
            if norm_by_std:
                centred = centred / (values.std() + epsilon)
            out[members, k] = centred
    return out


def compute_turn_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    config: Any = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages (and returns, the same tensor, as veRL's GRPO gives) — see the module docstring."""
    config = config if config is not None else {}
    weight = float(config.get("termgym_turn_weight", DEFAULT_TURN_WEIGHT))
    gamma = float(config.get("termgym_turn_gamma", DEFAULT_TURN_GAMMA))
    norm_by_std = bool(config.get("norm_adv_by_std_in_grpo", True))
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"algorithm.termgym_turn_gamma must be within 0..1, got {gamma}")

    episode, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=token_level_rewards,
        response_mask=response_mask,
        index=index,
        epsilon=epsilon,
        norm_adv_by_std_in_grpo=norm_by_std,
        config=config,
    )
    if weight == 0.0:
        return episode, episode

    with torch.no_grad():
        rewards, n_turns = turn_rewards(token_level_rewards, response_mask)
        returns = turn_returns(rewards, n_turns, gamma)
        valid = torch.arange(returns.shape[1], device=returns.device)[None, :] < n_turns[:, None]
        normalised = turn_baselined(returns, valid, index, epsilon=epsilon, norm_by_std=norm_by_std)
        # Token t of turn k (ids are 1-based; 0 = before any turn) takes turn k's value.
        ids = turn_ids(response_mask)
        padded = torch.nn.functional.pad(normalised, (1, 0))
        per_token = torch.gather(padded, 1, ids) * response_mask
        advantages = episode + weight * per_token
    return advantages, advantages


def register_estimators() -> None:
    """Register ``termgym_turn_grpo`` with veRL (idempotent; used as Ray's worker setup hook)."""
    registered = core_algos.ADV_ESTIMATOR_REGISTRY.get(ESTIMATOR_NAME)
    if registered is None:
        core_algos.register_adv_est(ESTIMATOR_NAME)(compute_turn_grpo_advantage)
    elif registered is not compute_turn_grpo_advantage and registered.__qualname__ != compute_turn_grpo_advantage.__qualname__:
        raise ValueError(f"advantage estimator {ESTIMATOR_NAME!r} is already registered to {registered!r}")


register_estimators()
