"""Eval with process rewards and episode recording, and replaying the recording with the replay agent."""

from __future__ import annotations

from termgym.evaluation import evaluate
from termgym.wrappers.recording import read_episodes

TASKS = "right-1,explore,bad-format,wrong-answer"


def test_process_rewards_recording_and_replay(tmp_path, scripted_server, scripted):
    run = tmp_path / "model"
    outcome = evaluate(scripted.ENV_ID, agent="openai", output_dir=run, task_ids=TASKS, progress=False,
                       process_rewards=True, record=True,
                       agent_options={"base_url": scripted_server.base_url, "model": "scripted-1",
                                      "logprobs": True, "timeout": 2.0})
    by_task = {r.task_id: r for r in outcome.results}
    # Reward events are recorded per step; the score stays the grade's.
    explore = by_task["explore"]
    assert explore.score == 1.0
    assert [e["event"] for e in explore.turns[0]["reward_events"]][:2] == ["valid_command", "command_success"]
    assert explore.total_reward > 1.0  # shaping on top of the outcome
    bad = by_task["bad-format"]
    assert any(e["event"] == "invalid_format" for e in bad.turns[0]["reward_events"])
    assert bad.turns[0]["reward"] < 0

    # The JSONL recording has every episode with the endpoint's logprobs.
    records = read_episodes(run / "episodes.jsonl")
    assert sorted(r["task_id"] for r in records) == sorted(TASKS.split(","))
    first_steps = [r["steps"][0] for r in records]
    assert all(step["extra"].get("logprobs") for step in first_steps)
    assert {r["metadata"]["model"] for r in records} == {"scripted-1"}
    # Each result is a summary that points at its record, the one full trajectory.
    for result in outcome.results:
        record = result.load_record()
        assert record["episode_id"] == result.record["episode_id"] and record["task_id"] == result.task_id
        assert record["grade"]["score"] == result.score and record["num_steps"] == result.steps

    # Replaying the recording reproduces every grade without the model.
    replay = evaluate(scripted.ENV_ID, agent="replay", output_dir=tmp_path / "replay", task_ids=TASKS,
                      agent_options={"source": str(run / "episodes.jsonl")}, progress=False)
    assert {r.task_id: (r.passed, r.steps) for r in replay.results} == \
        {t: (r.passed, r.steps) for t, r in by_task.items()}


def test_report_shows_reward_events(tmp_path, scripted):
    from termgym.evaluation import write_report

    run = tmp_path / "oracle"
    evaluate(scripted.ENV_ID, agent="oracle", output_dir=run, task_ids="explore", process_rewards=True,
             progress=False)
    page = write_report(run).read_text()
    assert "reward events: valid_command +0.010, command_success +0.020" in page



def test_a_result_without_a_recording_says_so(tmp_path, scripted):
    import pytest

    outcome = evaluate(scripted.ENV_ID, agent="nop", output_dir=tmp_path / "nop", task_ids="right-1", progress=False)
    [result] = outcome.results
    assert result.status == "completed" and result.record is None
    with pytest.raises(ValueError, match="was not recorded"):
        result.load_record()
