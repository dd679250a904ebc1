"""The credit checks see what the per-step checks cannot: a reward paid to the wrong episode, an action the
policy did not write.

Episodes are played by the real agent loop (``TermgymAgentLoop`` and the sabotage loops of
:mod:`trainers.verl.sabotage`) with the tiny model behind a token server, in real bubblewrap sandboxes,
each recorded by the env's recorder; :func:`trainers.verl.metrics.credit_metrics` then matches every
output (the tensors veRL would train on) to its episode's record by id, as the trainer does each step.
The turns are scripted, so the returns are known: every ReadPick task answers "red", so the red task
earns 1 and the green and blue ones 0.
"""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("verl")
pytestmark = pytest.mark.verl

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402

from trainers.verl import learning  # noqa: E402
from trainers.verl.agent_loop import TermgymAgentLoop  # noqa: E402
from trainers.verl.hf_rollout import CHOICES_KEY  # noqa: E402
from trainers.verl.metrics import credit_metrics, signal_metrics  # noqa: E402
from trainers.verl.sabotage import ScheduledSabotageLoop  # noqa: E402
from trainers.verl.tiny_model import TinyTokenServer, build_tiny_model, build_tiny_tokenizer  # noqa: E402

RED, GREEN, BLUE = learning.CHOICES
READ_TASKS = ["w0-red", "w0-green", "w0-blue", "w5-red", "w5-green", "w5-blue"]
#: prompt marker -> scripted turns (every ReadPick wording names answer.txt; PickTwice writes red, then blue)
SCRIPTS = {"In your last turn": [RED, BLUE], "answer.txt": [RED]}


class CreditSabotageLoop(ScheduledSabotageLoop):
    """The two credit sabotages, at steps of their own."""

    schedule = {1: "reward_shuffled", 2: "action_replaced"}


STEP_OF = {sabotage: step for step, sabotage in CreditSabotageLoop.schedule.items()}


@pytest.fixture(scope="module")
def server():
    tokenizer = build_tiny_tokenizer(extra_tokens=learning.CHOICES, words=learning.COLOURS)
    model = build_tiny_model(tokenizer, initializer_range=learning.INITIALIZER_RANGE)
    return TinyTokenServer(model, tokenizer, scripts=SCRIPTS, choices=learning.CHOICES)


def _play(server, trajectory_dir, env_id, task_ids, *, loop_class=TermgymAgentLoop, global_step=1):
    config = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 1024, "response_length": 256, "full_determinism": False,
                                          "custom": {CHOICES_KEY: json.dumps(list(learning.CHOICES))}}},
        "data": {"apply_chat_template_kwargs": {}},
    })

    async def play():
        loops = [loop_class(trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=server.tokenizer,
                            processor=None, dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data),
                            hf_model_type="qwen3", max_tokens_per_turn=4, import_modules=["trainers.verl.learning"],
                            trajectory_dir=str(trajectory_dir), log_sample_rate=1.0)
                 for _ in task_ids]  # veRL builds one loop per sample
        return await asyncio.gather(*[
            loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=[], global_steps=global_step,
                     extra_info={"env_id": env_id, "task_id": task_id})
            for loop, task_id in zip(loops, task_ids, strict=True)])

    return [output.as_dict() for output in asyncio.run(play())]


def _metrics(rows, tokenizer):
    """What the trainer logs for these rows: the per-step signal metrics, veRL's score, the credit metrics."""
    fields = [row["extra_fields"] for row in rows]
    masks, rewards = [row["response_mask"] for row in rows], [row["rm_scores"] for row in rows]
    metrics = signal_metrics(fields, masks, rewards)
    metrics["critic/score/mean"] = float(sum(float(r.sum()) for r in rewards) / len(rows))
    metrics.update(credit_metrics(fields, [row["responses"] for row in rows], masks, rewards, tokenizer))
    return metrics


def _failing(metrics):
    checks = {name: learning.STEP_CHECKS[name] for name in
              ("score = episode return", "rewards on their turns", "reward = own episode's return",
               "env ran the policy's tokens")}
    return set(learning.failing_checks(metrics, checks))


def test_intact_episodes_are_credited_to_themselves(server, tmp_path):
    read = _play(server, tmp_path, learning.READ_ID, READ_TASKS)
    two_turns = _play(server, tmp_path, learning.TWO_TURN_ID, ["pick0", "pick1"])
    assert [float(r["rm_scores"].sum()) for r in read] == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert [float(r["rm_scores"].sum()) for r in two_turns] == [1.0, 1.0]
    for rows in (read, two_turns):
        metrics = _metrics(rows, server.tokenizer)
        assert metrics["termgym/credit_checked"] == 1.0
        assert metrics["termgym/reward_not_own_episode"] == metrics["termgym/actions_not_own_tokens"] == 0.0
        assert _failing(metrics) == set()


def test_a_reward_paid_to_another_episode_fails_only_the_reward_check(server, tmp_path):
    rows = _play(server, tmp_path, learning.READ_ID, READ_TASKS, loop_class=CreditSabotageLoop,
                 global_step=STEP_OF["reward_shuffled"])
    metrics = _metrics(rows, server.tokenizer)
    # a shuffle keeps the batch's rewards, so the mean and each row's placement still agree (the
    # per-step checks pass, as they did in issue 44), but some row is paid another episode's return
    assert sorted(float(r["rm_scores"].sum()) for r in rows) != [0.0] * 6
    assert metrics["termgym/reward_not_own_episode"] > 0
    assert _failing(metrics) == {"reward = own episode's return"}


def test_a_shuffle_pays_someone_wrongly_whatever_order_the_episodes_finish_in():
    """Episodes finish in any order; the shuffle must still pay a wrong return and never zero a whole step."""
    import itertools

    from trainers.verl import sabotage

    returns = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    for offset, order in enumerate(itertools.permutations(range(len(returns)))):
        step = 10_000 + offset  # a step of its own: the shuffle remembers a step's earlier returns
        paid = {i: sabotage.shuffled_turn_scores(step, [returns[i]])[-1] for i in order}
        assert any(paid[i] != returns[i] for i in order), order
        assert sum(paid.values()) > 0, order


def test_an_action_the_policy_did_not_write_fails_only_the_token_check(server, tmp_path):
    rows = _play(server, tmp_path, learning.READ_ID, READ_TASKS, loop_class=CreditSabotageLoop,
                 global_step=STEP_OF["action_replaced"])
    metrics = _metrics(rows, server.tokenizer)
    # the env ran green or blue where the policy wrote red: the red tasks earn nothing for the right tokens
    assert float(rows[0]["rm_scores"].sum()) == float(rows[3]["rm_scores"].sum()) == 0.0
    assert metrics["termgym/actions_not_own_tokens"] == 1.0
    assert _failing(metrics) == {"env ran the policy's tokens"}


def test_a_trajectory_without_its_record_is_not_counted_as_checked(server, tmp_path):
    rows = _play(server, tmp_path, learning.READ_ID, READ_TASKS[:2])
    rows[1]["extra_fields"] = {**rows[1]["extra_fields"], "record": {**rows[1]["extra_fields"]["record"],
                                                                      "episode_id": "not-an-episode"}}
    metrics = _metrics(rows, server.tokenizer)
    assert metrics["termgym/credit_checked"] == 0.5
    assert _failing(metrics) == {"reward = own episode's return", "env ran the policy's tokens"}


def test_the_baseline_estimator_pays_the_batch_returns_permuted_on_each_rows_last_token(monkeypatch):
    """The no-signal baseline (``SHUFFLED_ESTIMATOR``): the whole batch's returns, permuted across rows,
    each on its row's last response token; the advantages are termgym_turn_grpo's of that."""
    import numpy as np
    import torch

    from trainers.verl import sabotage

    seen = []
    monkeypatch.setattr(sabotage, "compute_turn_grpo_advantage",
                        lambda rewards, mask, *a, **k: (seen.append(rewards.clone()) or rewards, rewards))
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]] * 4, dtype=torch.float32)
    last = [1, 2, 0, 3] * 4
    rewards = torch.zeros_like(mask)
    returns = [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    rewards[torch.arange(16), torch.tensor(last)] = torch.tensor(returns)
    moved = 0
    for _ in range(5):
        sabotage.shuffled_credit_advantage(rewards, mask, np.array(["g"] * 16))
        paid = seen[-1]
        assert sorted(paid.sum(-1).tolist()) == sorted(returns)  # the batch's returns, each paid once
        assert all(paid[row].nonzero().flatten().tolist() in ([], [last[row]]) for row in range(16))
        moved += int(paid.sum(-1).tolist() != returns)
    assert moved >= 4  # a permutation of 16 rows that leaves every return in place is rare
