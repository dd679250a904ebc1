"""Recordings ⇄ offline samples."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from termgym.data.convert import (
    PROVENANCE_KEY,
    is_recording_file,
    load_items,
    recording_to_sample,
    sample_to_recording,
)
from termgym.data.samples import SampleError, read_samples, write_samples
from termgym.env import oracle_actions
from termgym.wrappers.recording import RecordEpisodes, read_episodes
from termgym.wrappers.rewards import ProcessReward


@pytest.fixture(scope="module")
def recording(env_id, tmp_path_factory):
    """Two finished episodes (a solve and a failure) and one abandoned, recorded for real."""
    path = tmp_path_factory.mktemp("rec") / "episodes.jsonl"
    env = RecordEpisodes(ProcessReward(gym.make(env_id)), path, experiment="conv", config={"k": 1})
    env.reset(seed=0, options={"task_id": "calc-0"})
    for action in oracle_actions(env.unwrapped):
        env.step(action)
    env.reset(seed=0, options={"task_id": "calc-1"})
    env.step("THOUGHT: nothing to do\n\n```bash\nls\n```")
    env.step("THOUGHT: done\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```")
    env.reset(seed=0, options={"task_id": "calc-1"})
    env.close()
    return path


def test_recording_to_sample(recording):
    solved, failed, abandoned = read_episodes(recording)
    sample = recording_to_sample(solved)
    assert sample.task_id == "calc-0" and sample.score == 1.0 and sample.all_passed is True
    assert sample.conversation == solved["messages"]
    assert sample.bug_types == ["operator-swap"] and sample.fix_patch == "-a - b\n+a + b\n"
    assert sample.problem_statement == "add() subtracts"
    provenance = sample.extra_other[PROVENANCE_KEY]
    assert provenance["episode_id"] == solved["episode_id"] and provenance["protocol"] == "minisweagent"
    assert provenance["grade"] == solved["grade"] and provenance["config_hash"] == solved["config_hash"]
    assert recording_to_sample(failed).score == 0.0 and recording_to_sample(failed).all_passed is False
    with pytest.raises(SampleError, match="has no grade"):
        recording_to_sample(abandoned)


def test_round_trips(recording, tmp_path):
    records = [r for r in read_episodes(recording) if r["grade"] is not None]
    samples = [recording_to_sample(r) for r in records]
    # sample -> recording -> sample gives the sample back exactly
    for sample in samples:
        rebuilt = sample_to_recording(sample)
        assert rebuilt["messages"] == sample.conversation and rebuilt["grade"]["score"] == sample.score
        assert recording_to_sample(rebuilt).to_dict() == sample.to_dict()
    # the rebuilt record's steps are the assistant turns, parsed
    rebuilt = sample_to_recording(samples[0])
    assert [s["action"]["command"] for s in rebuilt["steps"]] == [
        "sed -i 's/a - b/a + b/' src/calc.py", "echo 0 > NOTE.txt", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
    assert rebuilt["steps"][-1]["terminated"] is True
    # and the files: recording -> samples.jsonl -> read back
    write_samples(samples, tmp_path / "s.jsonl")
    assert [s.to_dict() for s in read_samples(tmp_path / "s.jsonl")] == [s.to_dict() for s in samples]


def test_a_plain_seed_sample_becomes_a_recording():
    from termgym.data.samples import OfflineSample

    sample = OfflineSample.from_dict({"task_id": 1034, "score": 0.5, "extra": {"all_result": "1/2", "conversation": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "u"},
        {"role": "assistant", "content": "no block"}, {"role": "user", "content": "format error"},
        {"role": "assistant", "content": "THOUGHT: x\n```bash\nls\n```"}]}})
    record = sample_to_recording(sample)
    assert [s["action"]["kind"] for s in record["steps"]] == ["format_error", "command"]
    assert record["grade"] == {"score": 0.5, "passed": False, "all_passed": False, "all_result": "1/2"}
    assert record["options"] == {"task_id": "1034"}
    assert recording_to_sample(record).to_dict() == sample.to_dict()
    with pytest.raises(SampleError, match="not a termgym episode record"):
        recording_to_sample({"format": "something/else"})


def test_load_items_mixes_recordings_and_samples(recording, tmp_path):
    assert is_recording_file(recording)
    samples_path = tmp_path / "s.json"
    write_samples([recording_to_sample(read_episodes(recording)[0])], samples_path)
    assert not is_recording_file(samples_path)
    items = load_items([recording, samples_path])
    assert [s.task_id for s in items] == ["calc-0", "calc-1", "calc-0"]  # the abandoned episode is skipped
    with pytest.raises(SampleError, match="no such file"):
        load_items([tmp_path / "missing.jsonl"])


def test_json_of_records_is_valid(recording):
    for line in recording.read_text().splitlines():
        json.loads(line)
