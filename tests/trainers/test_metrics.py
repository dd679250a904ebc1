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


def test_rows_without_episode_fields_are_ignored():
    assert episode_metrics([{}, None, {"turn_scores": [1.0]}]) == {}


def test_rollout_and_update_time():
    metrics = timing_metrics({"gen": 30.0, "update_actor": 50.0, "step": 100.0})
    assert metrics == {"termgym/time/rollout_s": 30.0, "termgym/time/update_s": 50.0, "termgym/time/rollout_share": 0.3}
