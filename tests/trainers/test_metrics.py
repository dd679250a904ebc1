"""termgym's episode metrics for veRL's logs, from the agent loop's extra_fields, checked by hand."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")
pytestmark = pytest.mark.verl

from trainers.verl.metrics import episode_metrics, timing_metrics  # noqa: E402


def _episode(end_reason, passed, turns, errors, tokens, events):
    return {"end_reason": end_reason, "grade": {"passed": passed, "score": 1.0 if passed else 0.25},
            "assistant_turns": turns, "format_errors": errors, "model_tokens": tokens, "reward_events": events}


def test_episode_metrics_by_hand():
    metrics = episode_metrics([
        _episode("submitted", True, 2, 0, 100, {"valid_command": 1, "all_tests_pass": 1}),
        _episode("max_steps", False, 4, 3, 300, {"invalid_format": 3, "partial_pass": 1}),
        _episode("turn_truncated", False, 1, 0, 48, {"partial_pass": 1}),
        _episode("submitted", True, 3, 1, 152, {"invalid_format": 1, "valid_command": 2, "all_tests_pass": 1}),
    ])
    assert metrics["termgym/success_rate"] == 0.5
    assert metrics["termgym/score/mean"] == pytest.approx(0.625)
    assert metrics["termgym/end_reason/submitted"] == 0.5
    assert metrics["termgym/end_reason/max_steps"] == metrics["termgym/end_reason/turn_truncated"] == 0.25
    assert metrics["termgym/format_errors/mean"] == 1.0 and metrics["termgym/format_error_rate"] == 0.4  # 4 / 10 turns
    assert (metrics["termgym/turns/mean"], metrics["termgym/turns/max"]) == (2.5, 4.0)
    assert (metrics["termgym/tokens/mean"], metrics["termgym/tokens/max"]) == (150.0, 300.0)
    assert metrics["termgym/reward_events/invalid_format"] == 1.0
    assert metrics["termgym/reward_events/valid_command"] == 0.75
    assert metrics["termgym/reward_events/all_tests_pass"] + metrics["termgym/reward_events/partial_pass"] == 1.0
    assert metrics["termgym/episodes"] == 4
    assert metrics["termgym/infra_failures"] == 0 and metrics["termgym/episodes_retried"] == 0


def test_tries_lost_to_the_infrastructure_are_counted():
    lost = {"type": "SandboxLost", "where": "env.step", "message": "the Ray actor ... is gone"}
    episodes = [_episode("submitted", True, 1, 0, 4, {}) for _ in range(4)]
    episodes[1]["infra_failures"] = [lost, lost]
    episodes[3]["infra_failures"] = [lost]
    metrics = episode_metrics(episodes)
    assert metrics["termgym/infra_failures"] == 3 and metrics["termgym/episodes_retried"] == 0.5


def test_rows_without_episode_fields_are_ignored():
    assert episode_metrics([{}, None, {"turn_scores": [1.0]}]) == {}


def test_rollout_and_update_time():
    metrics = timing_metrics({"gen": 30.0, "update_actor": 50.0, "step": 100.0})
    assert metrics == {"termgym/time/rollout_s": 30.0, "termgym/time/update_s": 50.0, "termgym/time/rollout_share": 0.3}


# --- the signal metrics and the checks on them, under each agent-loop sabotage (no trainer needed) ---

def _two_turn_row():
    """One episode as the agent loop hands it to veRL: turn 1 (tokens 0-1), an observation (2-3),
    turn 2 (4-5); the env's step rewards 0.1 and 1.0 on each turn's last token."""
    import torch

    from trainers.verl.agent_loop import per_turn_token_rewards

    fields = {"turn_scores": [0.1, 1.0], "turn_end_positions": [1, 5]}
    output = {"response_mask": torch.tensor([1, 1, 0, 0, 1, 1]),
              "rm_scores": per_turn_token_rewards(6, fields["turn_end_positions"], fields["turn_scores"])}
    return fields, output


def _step_metrics(fields, output, grad_norm=0.5):
    """What the trainer logs for a one-episode step: termgym's signal metrics and veRL's score."""
    from trainers.verl.metrics import signal_metrics

    metrics = signal_metrics([fields], [output["response_mask"]], [output["rm_scores"]], groups=["g"])
    metrics.update({"critic/score/mean": float(output["rm_scores"].sum()), "actor/grad_norm": grad_norm})
    metrics["termgym/groups_with_signal"] = 1.0  # as if the group's other episodes earned less
    return metrics


@pytest.mark.parametrize(("sabotage", "expected"), [
    (None, set()),
    ("mask_all_ones", {"observations masked", "rewards on their turns"}),
    ("reward_zeroed", {"score = episode return", "rewards on their turns", "update from the loss"}),
    ("reward_shifted", {"rewards on their turns"}),
])
def test_each_sabotage_fails_its_check(sabotage, expected):
    from trainers.verl import learning
    from trainers.verl import sabotage as sabotages

    fields, output = _two_turn_row()
    output = sabotages.apply_to_output(output, sabotage, fields)
    # with no reward the advantages are 0 and (weight decay 0, no KL) so is the gradient
    grad_norm = 0.0 if sabotage == "reward_zeroed" else 0.5
    # the credit checks need episode records, which this hand-made row has none of: they are checked on
    # played episodes in test_credit_checks.py
    checks = {name: check for name, check in learning.STEP_CHECKS.items() if name not in learning.CREDIT_CHECKS}
    failed = learning.failing_checks(_step_metrics(fields, output, grad_norm), checks)
    assert set(failed) == expected, failed


def test_signal_metrics_by_hand():
    fields, output = _two_turn_row()
    metrics = _step_metrics(fields, output)
    assert metrics["termgym/return/mean"] == pytest.approx(1.1)
    assert (metrics["termgym/trained_tokens/mean"], metrics["termgym/response_tokens/mean"]) == (4.0, 6.0)
    assert metrics["termgym/reward_misplaced"] == 0.0


def test_groups_with_signal_counts_groups_whose_returns_differ():
    import torch

    from trainers.verl.metrics import signal_metrics

    rows = [{"turn_scores": [r]} for r in (1.0, 0.0, 1.0, 1.0)]
    masks = [torch.ones(2)] * 4
    rewards = [torch.tensor([0.0, r["turn_scores"][0]]) for r in rows]
    metrics = signal_metrics(rows, masks, rewards, groups=["a", "a", "b", "b"])
    assert metrics["termgym/groups_with_signal"] == 0.5


def test_an_unknown_sabotage_is_named():
    from trainers.verl import sabotage as sabotages

    fields, output = _two_turn_row()
    with pytest.raises(ValueError, match="unknown agent-loop sabotage 'mask_some'"):
        sabotages.apply_to_output(output, "mask_some", fields)
