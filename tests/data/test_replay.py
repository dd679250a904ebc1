"""Replaying a recorded or offline conversation into a fresh env reproduces its grade."""

from __future__ import annotations

import asyncio
import json

import gymnasium as gym
import pytest

from termgym.agents import make_agent
from termgym.agents.base import Episode
from termgym.agents.replay import ReplayAgent, assistant_actions, grades_match, replay_episode
from termgym.data.convert import recording_to_sample
from termgym.data.samples import read_samples, write_samples
from termgym.env import oracle_actions
from termgym.wrappers.recording import RecordEpisodes, read_episodes
from termgym.wrappers.rewards import ProcessReward


def record(env_id, path, plays, **make_kwargs):
    """Record one episode per (task_id, actions-or-'oracle') in ``plays``."""
    env = RecordEpisodes(ProcessReward(gym.make(env_id, **make_kwargs)), path)
    for task_id, actions in plays:
        env.reset(seed=0, options={"task_id": task_id})
        for action in (oracle_actions(env.unwrapped) if actions == "oracle" else actions):
            *_, terminated, truncated, _ = env.step(action)
        assert terminated or truncated
    env.close()
    return read_episodes(path)


@pytest.fixture(scope="module")
def recorded(env_id, tmp_path_factory):
    cmd = "THOUGHT: step\n\n```bash\n{}\n```".format
    path = tmp_path_factory.mktemp("replay") / "episodes.jsonl"
    plays = [
        ("calc-0", "oracle"),                                                       # solved
        ("calc-1", [cmd("sed -i 's/a - b/a + b/' src/calc.py"), "oops",              # tests pass, NOTE missing
                    cmd("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")]),
        ("calc-2", [cmd(f"echo {i} > NOTE.txt") for i in range(8)]),                 # truncated at max_steps
    ]
    return path, record(env_id, path, plays)


def test_grades_match():
    a = {"score": 1.0, "passed": True, "output": "1 passed in 0.04s"}
    assert grades_match(a, dict(a, output="1 passed in 0.05s"))
    assert not grades_match(a, dict(a, score=0.0, passed=False))
    assert not grades_match(a, dict(a, all_result="1/2"))
    assert grades_match(None, None) and not grades_match(a, None)


def test_replaying_recordings_reproduces_their_grades(env_id, recorded):
    _, records = recorded
    assert [r["grade"]["passed"] for r in records] == [True, False, False]
    for rec in records:
        env = gym.make(env_id)
        result = replay_episode(env, rec)
        assert grades_match(result.grade, rec["grade"]), (result.grade, rec["grade"])
        assert result.grade["exit_code"] == rec["grade"]["exit_code"]
        assert result.steps == rec["num_steps"]
        assert result.info["end_reason"] == rec["end_reason"]
        assert result.observation_mismatches == []


def test_replaying_offline_samples_reproduces_their_grades(env_id, recorded, tmp_path):
    _, records = recorded
    path = tmp_path / "samples.json"
    write_samples([recording_to_sample(r) for r in records], path)
    for sample in read_samples(path):
        result = replay_episode(gym.make(env_id), sample)
        assert result.grade["score"] == sample.score and result.grade["passed"] == sample.all_passed


def test_process_rewards_replay_too(env_id, recorded):
    _, records = recorded
    rec = records[0]
    result = replay_episode(ProcessReward(gym.make(env_id)), rec)
    assert result.rewards == pytest.approx([s["reward"] for s in rec["steps"]])


def test_replay_of_a_toolcall_recording(env_id, tmp_path):
    [rec] = record(env_id, tmp_path / "tc.jsonl", [("calc-0", "oracle")], protocol="toolcall")
    assert rec["messages"][2]["tool_calls"] and rec["grade"]["passed"]
    actions = assistant_actions(rec["messages"])
    assert all(isinstance(a, dict) and a["tool_calls"] for a in actions)
    result = replay_episode(gym.make(env_id, protocol="toolcall"), rec)
    assert grades_match(result.grade, rec["grade"]) and result.grade["passed"]


def test_replay_reports_a_cut_short_conversation(env_id, recorded):
    _, records = recorded
    short = dict(records[0], messages=records[0]["messages"][:4])  # only the first assistant turn
    with pytest.raises(RuntimeError, match="did not end"):
        replay_episode(gym.make(env_id), short)
    longer = dict(records[2])
    with pytest.raises(RuntimeError, match="ended after 3 of 8"):
        replay_episode(gym.make(env_id, max_steps=3), longer)


def test_replay_agent_through_the_agent_interface(env_id, recorded):
    path, records = recorded
    agent = make_agent("replay", source=str(path))
    assert isinstance(agent, ReplayAgent) and agent.describe()["tasks"] == 3

    async def play(task_id):
        env = gym.make(env_id)
        _, info = await asyncio.to_thread(env.reset, seed=0, options={"task_id": task_id})
        episode = Episode(task_id=task_id, attempt=0, env=env.unwrapped, messages=env.unwrapped.messages)
        await agent.start(episode)
        while True:
            message = await agent.act(episode)
            *_, terminated, truncated, info = await asyncio.to_thread(env.step, message)
            if terminated or truncated:
                return info["grade"]

    for rec in records:
        assert grades_match(asyncio.run(play(rec["task_id"])), rec["grade"])

    async def unknown():
        episode = Episode(task_id="nope", attempt=0, env=None, messages=[])
        await agent.start(episode)

    with pytest.raises(KeyError, match="no conversation for task 'nope'"):
        asyncio.run(unknown())


def test_replay_agent_select_best(recorded, tmp_path):
    _, records = recorded
    worse = dict(records[0], grade=dict(records[0]["grade"], score=0.0), messages=records[0]["messages"][:3])
    agent = ReplayAgent([worse, records[0]], select="best")
    assert agent.conversations["calc-0"] == records[0]["messages"]
    assert ReplayAgent([worse, records[0]]).conversations["calc-0"] == worse["messages"]
    with pytest.raises(ValueError, match="select must be"):
        ReplayAgent([], select="random")


def test_replay_agent_in_the_evaluation_harness(env_id, recorded, tmp_path):
    from termgym.evaluation import evaluate

    path, records = recorded
    outcome = evaluate(env_id, agent=ReplayAgent(str(path)), output_dir=tmp_path / "run",
                       task_ids=["calc-0", "calc-1"], split="train", concurrency=2, progress=False)
    by_task = {r.task_id: r for r in outcome.results}
    assert by_task["calc-0"].passed and not by_task["calc-1"].passed
    assert grades_match(by_task["calc-0"].grade, records[0]["grade"])
    assert grades_match(by_task["calc-1"].grade, records[1]["grade"])
    assert json.dumps(outcome.summary)  # the run summary is plain JSON


def test_swesynth_recording_to_sample_to_replay_reproduces_the_grade(tmp_path):
    """The bundled SWE-SYNTH suite: record the reference fix and a do-nothing episode, convert both to
    offline samples, replay the samples into fresh envs: the grades (test counts included) match."""
    import termgym  # noqa: F401

    env_id = "termgym/SweSynth-v0"
    task_id = gym.make(env_id, path="toy").unwrapped.suite.task_ids()[1]
    look = "THOUGHT: look\n\n```bash\nls && git status --short\n```"
    quit_ = "THOUGHT: submit\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"
    records = record(env_id, tmp_path / "ss.jsonl", [(task_id, "oracle"), (task_id, [look, quit_])], path="toy")
    assert records[0]["grade"]["all_passed"] and not records[1]["grade"]["all_passed"]
    assert records[1]["grade"]["all_result"] != records[0]["grade"]["all_result"]
    path = tmp_path / "samples.jsonl"
    write_samples([recording_to_sample(r) for r in records], path)
    samples = read_samples(path)
    assert [s.all_result for s in samples] == [r["grade"]["all_result"] for r in records]
    assert samples[0].bug_types == records[0]["task"]["metadata"]["bug_types"]
    for sample, rec in zip(samples, records):
        result = replay_episode(gym.make(env_id, path="toy"), sample)
        assert grades_match(result.grade, rec["grade"]), (result.grade, rec["grade"])
        assert result.grade["failed_tests"] == rec["grade"]["failed_tests"]
