"""``termgym_turn_grpo``: GRPO's episode advantage, with turn-level credit from returns-to-go.

Select it with ``algorithm.adv_estimator=termgym_turn_grpo``; tune it with
``+algorithm.termgym_turn_weight=w`` (default 0.5), ``+algorithm.termgym_turn_gamma=g`` (1.0),
``+algorithm.termgym_std_floor=f`` (0.1) and ``+algorithm.termgym_turn_grouping`` (``turn_index``,
the default, or ``anchor``). The agent loop puts each env step's reward on the last token of the
turn that earned it (``reward_placement: per_turn``; a clawback is charged back to the turns whose
shaping it takes back), so a row of ``token_level_rewards`` carries per-turn rewards
``r_1..r_K`` summing to the episode return ``R``.

For sample ``i`` of group ``g`` (same prompt) and its assistant turn ``k`` (a maximal run of
``response_mask == 1``)::

    s_g   = max(std_g R, f)                                   (1 when norm_adv_by_std_in_grpo is off)
    A_i   = (R_i - mean_g R) / (s_g + eps)                    episode term (GRPO, std floored)
    G_ik  = sum_{j>=k} g^(j-k) r_ij                           return-to-go from turn k
    b_ik  = mean of G over C_ik                               C_ik: the comparison set of turn k
    T_ik  = ((G_ik - b_ik) - (R_i - mean_g R)) / (s_g + eps)  0 where |C_ik| < 2
    adv   = A_i + w * T_ik   on every model token of turn k;  observation tokens get 0

``C_ik`` is the turns of the same index ``k`` in the group (``turn_index``), or, with
``anchor``, every turn of the group that started from the same state — the same observation
before it (GiGPO's anchor states; the agent loop hashes each turn's preceding observation into
``extra_fields["turn_anchors"]``). What the terms do:

* ``w = 0`` is GRPO (and exactly veRL's ``grpo`` with ``f = 0``); ``w = 1`` (with ``g = 1``)
  credits turn ``k`` only with what came at or after it, against the baseline of comparable turns
  — rewards earned before turn ``k`` are not turn ``k``'s doing. ``w`` in between mixes the two.
* The turn term is measured *relative to the episode term*: with outcome-only rewards every turn
  reached by the whole group has ``G_ik = R_i`` and ``b_ik = mean_g R``, so ``T_ik = 0`` and the
  estimator is GRPO, not a rescaled GRPO.
* One scale per group, the group's episode-return std with a floor ``f``: a difference of 0.001
  in shaping stays a 0.001/f-sized advantage instead of being blown up to a success's size (a
  per-turn std made it ±1); a success against failures keeps GRPO's size.

With ``norm_adv_by_std_in_grpo`` off, ``s_g = 1``. veRL calls the estimator in its trainer
process, so this module must be imported there: the launch config sets Ray's
``worker_process_setup_hook`` to :func:`register_estimators`. The math, with worked cases, is in
docs/training.md ("The turn-level advantage").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos

ESTIMATOR_NAME = "termgym_turn_grpo"
DEFAULT_TURN_WEIGHT = 0.5
DEFAULT_TURN_GAMMA = 1.0
DEFAULT_STD_FLOOR = 0.1
GROUPINGS = ("turn_index", "anchor")


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


def comparison_baselines(returns: torch.Tensor, valid: torch.Tensor, index: np.ndarray,
                         anchors: Sequence[Sequence[Any]] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Baseline ``b_ik`` and comparison-set size ``|C_ik|`` per (row, turn): ``(bs, turns)`` each.

    Without ``anchors`` the comparison set of turn ``k`` is the group's rows that reached turn ``k``;
    with ``anchors`` (per row, one hashable key per turn) it is every turn of the group, at any
    index, with the same key.
    """
    baseline = torch.zeros_like(returns)
    count = torch.zeros_like(returns)
    groups: dict[Any, list[int]] = {}
    for row, group in enumerate(index):
        groups.setdefault(group, []).append(row)
    for rows in groups.values():
        cells: dict[Any, list[tuple[int, int]]] = {}
        for row in rows:
            for k in range(returns.shape[1]):
                if valid[row, k]:
                    key = (k,) if anchors is None else ("anchor", _anchor(anchors, row, k))
                    cells.setdefault(key, []).append((row, k))
        for members in cells.values():
            values = torch.stack([returns[r, k] for r, k in members])
            for r, k in members:
                baseline[r, k] = values.mean()
                count[r, k] = len(members)
    return baseline, count


def _anchor(anchors: Sequence[Sequence[Any]], row: int, k: int) -> Any:
    keys = anchors[row]
    if k >= len(keys):
        raise ValueError(f"anchor grouping: row {row} has {len(keys)} turn anchors but at least {k + 1} turns; the "
                         "agent loop writes one anchor per assistant turn (extra_fields['turn_anchors'])")
    return keys[k]


def group_scales(episode_returns: torch.Tensor, index: np.ndarray, *, floor: float, norm_by_std: bool) -> torch.Tensor:
    """``s_g`` per row: the group's episode-return std (unbiased, as GRPO), at least ``floor``; 1 without std."""
    scales = torch.ones_like(episode_returns)
    if not norm_by_std:
        return scales
    groups: dict[Any, list[int]] = {}
    for row, group in enumerate(index):
        groups.setdefault(group, []).append(row)
    for rows in groups.values():
        if len(rows) < 2:
            continue  # a lone row keeps scale 1 (GRPO's std for a group of one)
        std = episode_returns[rows].std()
        scales[rows] = torch.clamp(std, min=floor) if floor > 0 else std
    return scales


def group_means(values: torch.Tensor, index: np.ndarray) -> torch.Tensor:
    """The mean of ``values`` over each row's group; a lone row's mean is 0, as in veRL's GRPO."""
    means = torch.zeros_like(values)
    groups: dict[Any, list[int]] = {}
    for row, group in enumerate(index):
        groups.setdefault(group, []).append(row)
    for rows in groups.values():
        means[rows] = values[rows].mean() if len(rows) > 1 else 0.0
    return means


#: Anchor keys for the batch being processed, set by the trainer around veRL's advantage call
#: (veRL hands an estimator tensors and uids only): see ``trainers.verl.metrics``.
_BATCH_ANCHORS: list[Sequence[Any]] | None = None


def compute_turn_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    config: Any = None,
    anchors: Sequence[Sequence[Any]] | None = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages (and returns, the same tensor, as veRL's GRPO gives) — see the module docstring."""
    config = config if config is not None else {}
    weight = float(config.get("termgym_turn_weight", DEFAULT_TURN_WEIGHT))
    gamma = float(config.get("termgym_turn_gamma", DEFAULT_TURN_GAMMA))
    floor = float(config.get("termgym_std_floor", DEFAULT_STD_FLOOR))
    grouping = str(config.get("termgym_turn_grouping", "turn_index"))
    norm_by_std = bool(config.get("norm_adv_by_std_in_grpo", True))
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"algorithm.termgym_turn_gamma must be within 0..1, got {gamma}")
    if floor < 0:
        raise ValueError(f"algorithm.termgym_std_floor must be >= 0, got {floor}")
    if grouping not in GROUPINGS:
        raise ValueError(f"algorithm.termgym_turn_grouping must be one of {GROUPINGS}, got {grouping!r}")
    if grouping == "anchor":
        anchors = anchors if anchors is not None else _BATCH_ANCHORS
        if anchors is None or len(anchors) != token_level_rewards.shape[0]:
            raise ValueError("algorithm.termgym_turn_grouping=anchor needs one list of turn anchors per row "
                             f"(got {None if anchors is None else len(anchors)} for {token_level_rewards.shape[0]} "
                             "rows): run with trainer.v1.trainer_mode=termgym_sync, which passes them")
    else:
        anchors = None

    with torch.no_grad():
        rewards, n_turns = turn_rewards(token_level_rewards, response_mask)
        episode_returns = rewards.sum(-1)
        scale = group_scales(episode_returns, index, floor=floor, norm_by_std=norm_by_std)
        scale = scale + epsilon if norm_by_std else scale
        deviation = episode_returns - group_means(episode_returns, index)
        episode = deviation / scale
        advantages = episode[:, None] * response_mask
        if weight != 0.0:
            returns = turn_returns(rewards, n_turns, gamma)
            valid = torch.arange(returns.shape[1], device=returns.device)[None, :] < n_turns[:, None]
            baseline, count = comparison_baselines(returns, valid, index, anchors)
            turn_term = ((returns - baseline) - deviation[:, None]) / scale[:, None]
            turn_term = torch.where(count >= 2, turn_term, torch.zeros_like(turn_term)) * valid
            # Token t of turn k (ids are 1-based; 0 = before any turn) takes turn k's value.
            padded = torch.nn.functional.pad(turn_term, (1, 0))
            advantages = advantages + weight * torch.gather(padded, 1, turn_ids(response_mask)) * response_mask
    return advantages, advantages


def charge_clawback(turn_scores: Sequence[float], positive_shaping: Sequence[float], clawback_turn: int,
                    clawback: float) -> list[float]:
    """Move a clawback (a negative reward on turn ``clawback_turn``) onto the turns whose shaping it takes back.

    Turn ``k`` is charged ``clawback * positive_shaping[k] / sum(positive_shaping)``; the total is
    unchanged, so the episode return is the same, but the turns after the shaping no longer pay for it.
    """
    if len(turn_scores) != len(positive_shaping):
        raise ValueError(f"turn_scores ({len(turn_scores)}) and positive_shaping ({len(positive_shaping)}) "
                         "must have one entry per turn")
    paid = sum(p for p in positive_shaping if p > 0)
    scores = [float(s) for s in turn_scores]
    if clawback == 0 or paid <= 0:
        return scores
    scores[clawback_turn] -= clawback
    for k, earned in enumerate(positive_shaping):
        if earned > 0:
            scores[k] += clawback * earned / paid
    return scores


def register_estimators() -> None:
    """Register ``termgym_turn_grpo`` with veRL (idempotent; used as Ray's worker setup hook)."""
    registered = core_algos.ADV_ESTIMATOR_REGISTRY.get(ESTIMATOR_NAME)
    if registered is None:
        core_algos.register_adv_est(ESTIMATOR_NAME)(compute_turn_grpo_advantage)
    elif registered is not compute_turn_grpo_advantage and registered.__qualname__ != compute_turn_grpo_advantage.__qualname__:
        raise ValueError(f"advantage estimator {ESTIMATOR_NAME!r} is already registered to {registered!r}")


register_estimators()
