"""The termgym_turn_grpo estimator: hand-computed batches, veRL's GRPO at weight 0, veRL's dispatch."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("verl")
pytestmark = pytest.mark.verl

import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402

from trainers.verl.advantage import (  # noqa: E402
    ESTIMATOR_NAME,
    compute_turn_grpo_advantage,
    turn_ids,
    turn_rewards,
)

EPS = 1e-6

# Two samples of one prompt. Sample 0: turns on tokens 0-1 and 4-5 (2-3 an observation, 6 padding),
# rewards 0.1 and 1.0. Sample 1: turns on tokens 0-2 and 4, rewards -0.05 and 0.
MASK = torch.tensor([[1, 1, 0, 0, 1, 1, 0], [1, 1, 1, 0, 1, 0, 0]], dtype=torch.float32)
REWARDS = torch.tensor([[0, 0.1, 0, 0, 0, 1.0, 0], [0, 0, -0.05, 0, 0.0, 0, 0]], dtype=torch.float32)
INDEX = np.array(["a", "a"], dtype=object)


def _config(**kwargs):
    return OmegaConf.create({"norm_adv_by_std_in_grpo": True, **kwargs})


def _std(values):
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def test_turns_are_runs_of_model_tokens():
    assert turn_ids(MASK).tolist() == [[1, 1, 1, 1, 2, 2, 2], [1, 1, 1, 1, 2, 2, 2]]
    rewards, n_turns = turn_rewards(REWARDS, MASK)
    assert n_turns.tolist() == [2, 2]
    assert rewards[0].tolist() == pytest.approx([0.1, 1.0]) and rewards[1].tolist() == pytest.approx([-0.05, 0.0])


def test_hand_computed_batch():
    advantages, returns = compute_turn_grpo_advantage(REWARDS, MASK, INDEX, config=_config(termgym_turn_weight=0.5))
    # episode term: returns 1.1 and -0.05, mean 0.525, sample std 0.575 * sqrt(2)
    episode = [0.575 / (0.575 * math.sqrt(2) + EPS), -0.575 / (0.575 * math.sqrt(2) + EPS)]
    # turn term, per turn index: turn 1 compares returns-to-go 1.1 with -0.05, turn 2 compares 1.0 with 0.0
    turn1 = [0.575 / (0.575 * math.sqrt(2) + EPS), -0.575 / (0.575 * math.sqrt(2) + EPS)]
    turn2 = [0.5 / (0.5 * math.sqrt(2) + EPS), -0.5 / (0.5 * math.sqrt(2) + EPS)]
    expected = [
        [episode[0] + 0.5 * turn1[0]] * 2 + [0, 0] + [episode[0] + 0.5 * turn2[0]] * 2 + [0],
        [episode[1] + 0.5 * turn1[1]] * 3 + [0] + [episode[1] + 0.5 * turn2[1]] + [0, 0],
    ]
    assert advantages.tolist()[0] == pytest.approx(expected[0], abs=1e-5)
    assert advantages.tolist()[1] == pytest.approx(expected[1], abs=1e-5)
    assert torch.equal(advantages, returns)


def test_identical_rollouts_get_zero_advantage_everywhere():
    # the case: four identical rollouts, per-turn rewards 0.03, 0.03, 0.03, 1.0 (each turn two
    # model tokens, then one observation token)
    mask = torch.tensor([[1, 1, 0] * 4] * 4, dtype=torch.float32)
    row = [0, 0.03, 0, 0, 0.03, 0, 0, 0.03, 0, 0, 1.0, 0]
    rewards = torch.tensor([row] * 4)
    advantages, _ = compute_turn_grpo_advantage(rewards, mask, np.array(["g"] * 4, dtype=object),
                                                config=_config(termgym_turn_weight=0.5))
    assert advantages.abs().max().item() == 0.0


def test_a_turn_only_some_samples_reached_is_compared_among_them():
    # sample 0: rewards 0.1, 1.0 (two turns); sample 1: 0.0 (one turn). Turn 1 compares 1.1 with 0.0;
    # turn 2 is reached by sample 0 alone, so it has no comparison and gets the episode term only.
    mask = torch.tensor([[1, 0, 1], [1, 0, 0]], dtype=torch.float32)
    rewards = torch.tensor([[0.1, 0, 1.0], [0.0, 0, 0]])
    advantages, _ = compute_turn_grpo_advantage(rewards, mask, np.array(["g", "g"], dtype=object),
                                                config=_config(termgym_turn_weight=0.5))
    half = 0.55 / (0.55 * math.sqrt(2) + EPS)  # (1.1 - 0.55) / sample std of {1.1, 0.0}
    assert advantages[0].tolist() == pytest.approx([half + 0.5 * half, 0, half], abs=1e-5)
    assert advantages[1].tolist() == pytest.approx([-half - 0.5 * half, 0, 0], abs=1e-5)


def test_discount_and_no_std_normalisation():
    config = _config(termgym_turn_weight=1.0, termgym_turn_gamma=0.5, norm_adv_by_std_in_grpo=False)
    advantages, _ = compute_turn_grpo_advantage(REWARDS, MASK, INDEX, config=config)
    episode = [1.1 - 0.525, -0.05 - 0.525]
    turn1 = [0.1 + 0.5 * 1.0, -0.05 + 0.5 * 0.0]  # returns-to-go at turn 1, mean 0.275
    turn2 = [1.0, 0.0]  # at turn 2, mean 0.5
    assert advantages[0, 0].item() == pytest.approx(episode[0] + turn1[0] - 0.275, abs=1e-6)
    assert advantages[0, 5].item() == pytest.approx(episode[0] + turn2[0] - 0.5, abs=1e-6)
    assert advantages[1, 1].item() == pytest.approx(episode[1] + turn1[1] - 0.275, abs=1e-6)
    assert advantages[1, 4].item() == pytest.approx(episode[1] + turn2[1] - 0.5, abs=1e-6)


def test_a_lone_sample_gets_its_raw_return_and_no_turn_term():
    # veRL's GRPO keeps a single-sample group's score as it is (mean 0, std 1); its turns have
    # nothing to be compared with
    mask = torch.tensor([[1, 0, 1, 1]], dtype=torch.float32)
    rewards = torch.tensor([[0.2, 0, 0, 0.6]])
    advantages, _ = compute_turn_grpo_advantage(rewards, mask, np.array(["solo"], dtype=object),
                                                config=_config(termgym_turn_weight=0.5))
    assert advantages[0].tolist() == pytest.approx([0.8, 0, 0.8, 0.8], abs=1e-5)


def test_a_reward_on_an_observation_token_counts_for_the_turn_before_it():
    rewards = torch.tensor([[0, 0, 0.3, 0, 0, 1.0, 0], [0, 0, -0.05, 0, 0.0, 0, 0]])
    turn_level, _ = turn_rewards(rewards, MASK)
    assert turn_level[0].tolist() == pytest.approx([0.3, 1.0])


def _random_batch(seed: int, groups: int = 4, per_group: int = 5, length: int = 40):
    generator = torch.Generator().manual_seed(seed)
    mask = (torch.rand(groups * per_group, length, generator=generator) > 0.35).float()
    mask[:, 0] = 1
    rewards = torch.randn(groups * per_group, length, generator=generator) * (torch.rand(
        groups * per_group, length, generator=generator) > 0.8)
    index = np.array([f"g{i // per_group}" for i in range(groups * per_group)], dtype=object)
    return rewards * mask, mask, index


@pytest.mark.parametrize("norm", [True, False])
def test_weight_zero_is_verls_grpo(norm):
    rewards, mask, index = _random_batch(1)
    ours, _ = compute_turn_grpo_advantage(rewards, mask, index, config=_config(termgym_turn_weight=0.0,
                                                                                norm_adv_by_std_in_grpo=norm))
    theirs, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, index, norm_adv_by_std_in_grpo=norm)
    assert torch.allclose(ours, theirs, atol=0, rtol=0)


def _reference(rewards, mask, index, weight, gamma):
    """A slow, loop-by-loop statement of the module docstring."""
    bs, length = mask.shape
    turns = []
    for i in range(bs):
        spans, start = [], None
        for t in range(length):
            if mask[i, t] and start is None:
                start = t
            if start is not None and (t + 1 == length or not mask[i, t + 1]):
                spans.append((start, t))
                start = None
        ends = [s for s, _ in spans[1:]] + [length]
        r = [float(rewards[i, s:e].sum()) for (s, _), e in zip(spans, ends, strict=True)]
        g, running = [0.0] * len(r), 0.0
        for k in range(len(r) - 1, -1, -1):
            running = r[k] + gamma * running
            g[k] = running
        turns.append((spans, g))
    totals = [float(rewards[i].sum()) for i in range(bs)]
    out = torch.zeros(bs, length)
    for i in range(bs):
        members = [j for j in range(bs) if index[j] == index[i]]
        group_totals = [totals[j] for j in members]
        mean = sum(group_totals) / len(group_totals)
        episode = (totals[i] - mean) / (_std(group_totals) + EPS) if len(members) > 1 else totals[i]
        for k, ((s, e), g) in enumerate(zip(*turns[i], strict=True)):
            values = [turns[j][1][k] for j in members if len(turns[j][1]) > k]
            term = 0.0
            if len(values) > 1:
                term = (g - sum(values) / len(values)) / (_std(values) + EPS)
            out[i, s : e + 1] = episode + weight * term
    return out


def test_random_batches_match_the_reference():
    for seed in range(3):
        rewards, mask, index = _random_batch(seed)
        ours, _ = compute_turn_grpo_advantage(rewards, mask, index,
                                              config=_config(termgym_turn_weight=0.7, termgym_turn_gamma=0.9))
        assert torch.allclose(ours, _reference(rewards, mask, index, 0.7, 0.9), atol=1e-4)


def test_registered_with_verl_and_dispatched_by_its_trainer():
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    assert core_algos.get_adv_estimator_fn(ESTIMATOR_NAME) is compute_turn_grpo_advantage
    data = DataProto.from_dict(tensors={"token_level_rewards": REWARDS, "response_mask": MASK},
                               non_tensors={"uid": INDEX})
    data = compute_advantage(data, adv_estimator=ESTIMATOR_NAME, config=_config(termgym_turn_weight=0.5))
    expected, _ = compute_turn_grpo_advantage(REWARDS, MASK, INDEX, config=_config(termgym_turn_weight=0.5))
    assert torch.allclose(data.batch["advantages"], expected)


def test_bad_gamma_is_rejected():
    with pytest.raises(ValueError, match="termgym_turn_gamma"):
        compute_turn_grpo_advantage(REWARDS, MASK, INDEX, config=_config(termgym_turn_gamma=2.0))
