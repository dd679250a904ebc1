"""Eval with process rewards and episode recording, and replaying the recording with the replay agent."""

from __future__ import annotations

import json

import pytest

from termgym.cli import main
from termgym.evaluation import evaluate, write_report
from termgym.evaluation.results import RunDir
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
    explore_turns = outcome.run_dir.transcript(explore)["turns"]
    assert [e["event"] for e in explore_turns[0]["reward_events"]][:2] == ["valid_command", "command_success"]
    assert explore.total_reward > 1.0  # shaping on top of the outcome
    bad_turns = outcome.run_dir.transcript(by_task["bad-format"])["turns"]
    assert any(e["event"] == "invalid_format" for e in bad_turns[0]["reward_events"])
    assert bad_turns[0]["reward"] < 0

    # The JSONL recording has every episode with the endpoint's logprobs.
    records = read_episodes(run / "episodes.jsonl")
    assert sorted(r["task_id"] for r in records) == sorted(TASKS.split(","))
    first_steps = [r["steps"][0] for r in records]
    assert all(step["extra"].get("logprobs") for step in first_steps)
    assert {r["metadata"]["model"] for r in records} == {"scripted-1"}
    # Each result is a summary that points at its record, the one full trajectory.
    for result in outcome.results:
        record = result.load_record(run)
        assert record["episode_id"] == result.record["episode_id"] and record["task_id"] == result.task_id
        assert record["grade"]["score"] == result.score and record["num_steps"] == result.steps

    # Replaying the recording reproduces every grade without the model.
    replay = evaluate(scripted.ENV_ID, agent="replay", output_dir=tmp_path / "replay", task_ids=TASKS,
                      agent_options={"source": str(run / "episodes.jsonl")}, progress=False)
    assert {r.task_id: (r.passed, r.steps) for r in replay.results} == \
        {t: (r.passed, r.steps) for t, r in by_task.items()}


def test_report_shows_reward_events(tmp_path, scripted):
    run = tmp_path / "oracle"
    evaluate(scripted.ENV_ID, agent="oracle", output_dir=run, task_ids="explore", process_rewards=True,
             progress=False)
    page = write_report(run).read_text()
    assert "reward events: valid_command +0.010, command_success +0.020" in page



def test_a_result_file_holds_a_summary_and_a_reference_not_a_transcript(tmp_path, scripted):
    run = tmp_path / "nop"
    outcome = evaluate(scripted.ENV_ID, agent="nop", output_dir=run, task_ids="right-1", progress=False)
    [result] = outcome.results
    on_disk = json.loads((run / "episodes" / "right-1__a0.json").read_text())
    assert "messages" not in on_disk and "turns" not in on_disk
    assert on_disk["record"] == {"path": "episodes.jsonl", "episode_id": result.record["episode_id"], "try": 0}
    assert on_disk["steps"] == 1 and on_disk["status"] == "completed"
    # The reference is relative to the run directory: a moved run directory still reads.
    moved = tmp_path / "moved"
    run.rename(moved)
    record = RunDir(moved).episodes()[0].load_record(moved)
    assert record["task_id"] == "right-1" and record["num_steps"] == 1


def test_report_shows_the_transcript_read_from_the_record(tmp_path, scripted):
    run = tmp_path / "oracle"
    evaluate(scripted.ENV_ID, agent="oracle", output_dir=run, task_ids="explore", progress=False)
    # Mark the record's first observation: the page can only show it if it reads the record.
    path = run / "episodes.jsonl"
    [record] = read_episodes(path)
    record["messages"][1]["content"] += " MARK-FROM-THE-RECORD"
    path.write_text(json.dumps(record) + "\n")
    page = write_report(run).read_text()
    assert "MARK-FROM-THE-RECORD" in page and "assistant · step 1" in page and "exit code 0" in page


def _one_episode_run(tmp_path, scripted):
    run = tmp_path / "run"
    evaluate(scripted.ENV_ID, agent="oracle", output_dir=run, task_ids="right-1", progress=False)
    return run


def test_a_missing_record_is_a_clear_error_naming_the_file(tmp_path, scripted):
    run = _one_episode_run(tmp_path, scripted)
    (run / "episodes.jsonl").unlink()
    with pytest.raises(ValueError, match=r"right-1.*episodes\.jsonl does not exist.*right-1__a0\.json"):
        write_report(run)
    assert main(["view", str(run)]) == 2


def test_a_corrupt_record_is_a_clear_error_naming_the_file(tmp_path, scripted):
    run = _one_episode_run(tmp_path, scripted)
    path = run / "episodes.jsonl"
    [record] = read_episodes(path)
    path.write_text("{not json\n" + json.dumps({"format": "other"}) + "\n")
    with pytest.raises(ValueError, match=r"run .*right-1.*record '[0-9a-f]+' is not in .*episodes\.jsonl; the file is "
                                         r"corrupt \(2 bad line\(s\): line 1: not valid JSON .*; line 2: not a "
                                         r"termgym\.episode/1 record\)"):
        write_report(run)
    path.write_text("")
    with pytest.raises(ValueError, match=r"record '[0-9a-f]+' is not in .*episodes\.jsonl\. To play"):
        write_report(run)
    # A record torn by a killed writer costs only its own line: the others still read.
    path.write_text('{"format": "termgym.episode/1", "episo' + json.dumps(record) + "\n")
    assert "corrupt" in pytest.raises(ValueError, write_report, run).value.args[0]
    path.write_text('{"format": "termgym.episode/1", "episo\n' + json.dumps(record) + "\n")
    assert "assistant · step 1" in write_report(run).read_text()


def test_an_old_result_with_an_inline_transcript_still_shows(tmp_path, scripted):
    run = _one_episode_run(tmp_path, scripted)
    file = run / "episodes" / "right-1__a0.json"
    data = json.loads(file.read_text())
    data["record"] = None  # written before every episode was recorded
    data["messages"] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "OLD-INLINE-PROMPT"},
                        {"role": "assistant", "content": "echo hi"}]
    data["turns"] = [{"step": 1, "action": {"kind": "command"}, "exec": {"exit_code": 7}, "reward": 0.0}]
    file.write_text(json.dumps(data))
    page = write_report(run).read_text()
    assert "OLD-INLINE-PROMPT" in page and "exit code 7" in page
