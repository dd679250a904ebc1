"""The termgym_turn_grpo estimator: the hand-made cases of docs/training.md, veRL's GRPO at weight 0,
a loop-by-loop reference, veRL's dispatch, and clear errors for bad settings."""

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
    charge_clawback,
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


def episodes(*rows: list[float]):
    """One group of episodes from per-turn rewards: each turn is two model tokens then one observation
    token, its reward on its last model token (as the agent loop places it)."""
    length = 3 * max(len(r) for r in rows)
    mask = torch.zeros(len(rows), length)
    rewards = torch.zeros(len(rows), length)
    for i, row in enumerate(rows):
        for k, reward in enumerate(row):
            mask[i, 3 * k : 3 * k + 2] = 1
            rewards[i, 3 * k + 1] = reward
    return rewards, mask, np.array(["g"] * len(rows), dtype=object)


def per_turn(advantages: torch.Tensor, rows) -> list[list[float]]:
    """The advantage of each turn (its first token; every token of a turn has the same value)."""
    return [[round(advantages[i, 3 * k].item(), 4) for k in range(len(row))] for i, row in enumerate(rows)]


def advantage(rows, **config):
    rewards, mask, index = episodes(*rows)
    values, _ = compute_turn_grpo_advantage(rewards, mask, index, config=_config(**config))
    assert torch.equal(values * (1 - mask), torch.zeros_like(values))  # observations get nothing
    return per_turn(values, rows)


def test_turns_are_runs_of_model_tokens():
    assert turn_ids(MASK).tolist() == [[1, 1, 1, 1, 2, 2, 2], [1, 1, 1, 1, 2, 2, 2]]
    rewards, n_turns = turn_rewards(REWARDS, MASK)
    assert n_turns.tolist() == [2, 2]
    assert rewards[0].tolist() == pytest.approx([0.1, 1.0]) and rewards[1].tolist() == pytest.approx([-0.05, 0.0])


def test_identical_rollouts_get_zero_everywhere():
    rows = [[0.03, 0.03, 0.03, 1.0]] * 4
    assert advantage(rows) == [[0.0] * 4] * 4


def test_one_winner_is_grpo_not_a_rescaled_grpo():
    # outcome only: returns 1, 0, 0, 0 (mean 0.25, std 0.5). Every turn is reached by the whole group, so the
    # turn term is 0 and each turn gets GRPO's 1.5 / -0.5 (the earlier estimator gave 1.5x that).
    rows = [[0, 1.0], [0, 0], [0, 0], [0, 0]]
    assert advantage(rows) == [[1.5, 1.5], [-0.5, -0.5], [-0.5, -0.5], [-0.5, -0.5]]


def test_different_lengths_compare_a_turn_among_those_that_reached_it():
    # two episodes end after one turn (0), two take a second turn, one of them wins. Episode term:
    # 1.5 / -0.5 (mean 0.25, std 0.5). Turn 2 (C and D only): baseline 0.5, so C's turn 2 is
    # ((1 - 0.5) - 0.75) / 0.5 = -0.5 and D's ((0 - 0.5) + 0.25) / 0.5 = -0.5; x w = 0.5
    rows = [[0.0], [0.0], [0, 1.0], [0, 0]]
    assert advantage(rows) == [[-0.5], [-0.5], [1.5, 1.25], [-0.5, -0.75]]


def test_a_process_reward_at_one_turn_is_not_credited_to_the_turns_after_it():
    # all fail; episode 0 earned 0.2 at turn 2. Returns 0.2, 0, 0, 0: mean 0.05, std 0.1 (= the floor).
    # Turns 1-2 of episode 0: return-to-go 0.2 against 0: GRPO's 1.5. Turn 3 came after the reward:
    # return-to-go 0 like everyone's, so at w = 1 it gets 0; at w = 0.5 half the episode term.
    rows = [[0, 0.2, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]]
    assert advantage(rows, termgym_turn_weight=1.0)[0] == [1.5, 1.5, 0.0]
    assert advantage(rows)[0] == [1.5, 1.5, 0.75]
    assert advantage(rows)[1] == [-0.5, -0.5, -0.25]


def test_noise_in_shaping_stays_small():
    # a 0.001 difference in shaping: the earlier per-turn std normalisation made it +-1.06; the std floor
    # (0.1) keeps it 0.001-sized: 0.00075 / 0.1
    rows = [[0.001, 0, 1.0], [0, 0, 1.0], [0, 0, 1.0], [0, 0, 1.0]]
    values = advantage(rows)
    assert max(abs(v) for row in values for v in row) < 0.01
    assert values[0][0] == pytest.approx(0.0075, abs=1e-4)


def test_clawback_is_charged_to_the_turn_that_earned_it():
    # episode 0 earned 0.03 of shaping at turn 1, clawed back on its last turn: same return (0) as the group.
    paid_then_clawed = [0.03, 0, 0, -0.03]
    charged = charge_clawback(paid_then_clawed, [0.03, 0, 0, 0], clawback_turn=3, clawback=-0.03)
    assert charged == pytest.approx([0.0, 0, 0, 0])
    assert advantage([charged, [0] * 4, [0] * 4, [0] * 4]) == [[0.0] * 4] * 4
    # left on the last turn, it would cost turns 2-4 (return-to-go -0.03 vs baseline -0.0075, / floor 0.1, x w)
    assert advantage([paid_then_clawed, [0] * 4, [0] * 4, [0] * 4])[0] == [0.0, -0.1125, -0.1125, -0.1125]


def test_clawback_is_split_by_what_each_turn_earned():
    assert charge_clawback([0.1, 0.3, -0.2], [0.1, 0.3, 0], 2, -0.2) == pytest.approx([0.05, 0.15, 0.0])
    assert charge_clawback([0.5, 1.0], [0, 0], 1, 0.0) == [0.5, 1.0]  # nothing paid: nothing moves
    with pytest.raises(ValueError, match="one entry per turn"):
        charge_clawback([0.1], [0.1, 0.2], 0, -0.1)


def test_anchor_grouping_compares_turns_from_the_same_state():
    # episode 0: state p, then s1, then s2 (rewards 0.5, 0, 0); episode 1 reaches s2 in one step (0, 1).
    # Returns 0.5 and 1: mean 0.75, std 0.3536. By turn index, episode 0's turn 2 (from s1) is compared
    # with episode 1's turn 2 (from s2); by anchor state, the s2 turns are compared with each other.
    rows = [[0.5, 0, 0], [0, 1.0]]
    rewards, mask, index = episodes(*rows)
    anchors = [["p", "s1", "s2"], ["p", "s2"]]
    by_index, _ = compute_turn_grpo_advantage(rewards, mask, index, config=_config(termgym_turn_weight=1.0))
    by_anchor, _ = compute_turn_grpo_advantage(rewards, mask, index, anchors=anchors,
                                               config=_config(termgym_turn_weight=1.0,
                                                              termgym_turn_grouping="anchor"))
    assert per_turn(by_index, rows) == [[-0.7071, -1.4142, -0.7071], [0.7071, 1.4142]]
    assert per_turn(by_anchor, rows) == [[-0.7071, -0.7071, -1.4142], [0.7071, 1.4142]]


def test_a_lone_sample_gets_its_raw_return():
    # veRL's GRPO keeps a single-sample group's score as it is (mean 0, std 1)
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
def test_weight_zero_without_floor_is_verls_grpo(norm):
    rewards, mask, index = _random_batch(1)
    ours, _ = compute_turn_grpo_advantage(rewards, mask, index, config=_config(
        termgym_turn_weight=0.0, termgym_std_floor=0.0, norm_adv_by_std_in_grpo=norm))
    theirs, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, index, norm_adv_by_std_in_grpo=norm)
    assert torch.allclose(ours, theirs, atol=1e-6, rtol=0)


def _reference(rewards, mask, index, weight, gamma, floor):
    """A slow, loop-by-loop statement of the module docstring (turn-index grouping)."""
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
        mean = sum(group_totals) / len(group_totals) if len(members) > 1 else 0.0
        scale = max(_std(group_totals), floor) + EPS if len(members) > 1 else 1 + EPS
        deviation = totals[i] - mean
        for k, ((s, e), g) in enumerate(zip(*turns[i], strict=True)):
            values = [turns[j][1][k] for j in members if len(turns[j][1]) > k]
            term = 0.0
            if len(values) > 1:
                term = ((g - sum(values) / len(values)) - deviation) / scale
            out[i, s : e + 1] = deviation / scale + weight * term
    return out


def test_random_batches_match_the_reference():
    for seed in range(3):
        rewards, mask, index = _random_batch(seed)
        ours, _ = compute_turn_grpo_advantage(rewards, mask, index, config=_config(
            termgym_turn_weight=0.7, termgym_turn_gamma=0.9, termgym_std_floor=0.5))
        assert torch.allclose(ours, _reference(rewards, mask, index, 0.7, 0.9, 0.5), atol=1e-4)


def test_registered_with_verl_and_dispatched_by_its_trainer():
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    assert core_algos.get_adv_estimator_fn(ESTIMATOR_NAME) is compute_turn_grpo_advantage
    data = DataProto.from_dict(tensors={"token_level_rewards": REWARDS, "response_mask": MASK},
                               non_tensors={"uid": INDEX})
    data = compute_advantage(data, adv_estimator=ESTIMATOR_NAME, config=_config(termgym_turn_weight=0.5))
    expected, _ = compute_turn_grpo_advantage(REWARDS, MASK, INDEX, config=_config(termgym_turn_weight=0.5))
    assert torch.allclose(data.batch["advantages"], expected)


@pytest.mark.parametrize(("setting", "message"), [
    ({"termgym_turn_gamma": 2.0}, "termgym_turn_gamma"),
    ({"termgym_std_floor": -1.0}, "termgym_std_floor"),
    ({"termgym_turn_grouping": "state"}, "termgym_turn_grouping must be one of"),
    ({"termgym_turn_grouping": "anchor"}, "one list of turn anchors per row"),
])
def test_bad_settings_are_rejected(setting, message):
    with pytest.raises(ValueError, match=message):
        compute_turn_grpo_advantage(REWARDS, MASK, INDEX, config=_config(**setting))


def test_anchors_shorter_than_the_turns_are_rejected():
    with pytest.raises(ValueError, match="row 0 has 1 turn anchors"):
        compute_turn_grpo_advantage(REWARDS, MASK, INDEX, anchors=[["p"], ["p", "q"]],
                                    config=_config(termgym_turn_grouping="anchor"))
