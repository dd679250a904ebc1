"""RecordEpisodes: what an episode record holds, sampling, config hashes, extras from the agent."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from termgym.agents import Reply
from termgym.env import oracle_actions, terminal_env
from termgym.wrappers.recording import (
    RECORD_FORMAT,
    RecordEpisodes,
    config_hash,
    episode_log_path,
    read_episodes,
    read_jsonl,
)
from termgym.wrappers.rewards import ProcessReward


def make(env_id, path, **kwargs):
    return RecordEpisodes(ProcessReward(gym.make(env_id)), path, **kwargs)


def test_an_episode_record_has_everything(env_id, tmp_path, cmd):
    path = tmp_path / "episodes.jsonl"
    env = make(env_id, path, experiment="exp1", config={"lr": 1e-6}, metadata={"model": "tiny"})
    env.reset(seed=0, options={"task_id": "calc-1"})
    actions = [cmd("ls tests"), "no block here", *oracle_actions(terminal_env(env))]
    # token data rides on the message under "extra" (Reply.action builds it); the env hands it back in info
    *_, info = env.step(Reply(message=actions[0], token_ids=[5, 6, 7], prompt_token_ids=[1, 2],
                              logprobs=[-0.1, -0.2, -0.3], usage={"prompt_tokens": 2, "completion_tokens": 3}).action())
    assert info["extra"]["token_ids"] == [5, 6, 7]
    with pytest.raises(TypeError, match="Reply"):
        env.step(Reply(message=actions[0]))  # actions are messages: a Reply object is not one
    env.get_wrapper_attr("record_extra")(token_ids=[9], logprobs=[float("-inf")])
    for action in actions[1:]:
        *_, terminated, truncated, info = env.step(action)
    assert terminated and env.get_wrapper_attr("episodes_written") == 1
    env.close()  # nothing unfinished: no second record

    [record] = read_episodes(path)
    assert record["format"] == RECORD_FORMAT
    assert record["experiment"] == "exp1" and record["config_hash"] == config_hash({"lr": 1e-6})
    assert record["env_id"] == env_id and record["suite"] == "datacalc" and record["protocol"] == "minisweagent"
    assert record["task_id"] == "calc-1" and record["seed"] == 0 and record["metadata"] == {"model": "tiny"}
    assert record["task"]["metadata"]["bug_types"] == ["operator-swap"]
    assert record["messages"] == info["messages"]
    assert [m["role"] for m in record["messages"][:2]] == ["system", "user"]
    assert record["grade"]["passed"] is True and record["end_reason"] == "submitted"
    assert record["num_steps"] == len(actions) == len(record["steps"])
    first, second = record["steps"][:2]
    assert first["action"] == {"kind": "command", "command": "ls tests", "error": None}
    assert first["exec"]["exit_code"] == 0 and "test_calc.py" in first["exec"]["output"]
    assert first["exec"]["duration_s"] >= 0 and first["duration_s"] >= first["exec"]["duration_s"]
    assert [e["event"] for e in first["reward_events"]] == ["valid_command", "command_success", "tests_discovered"]
    assert first["reward"] == pytest.approx(0.05)
    assert first["extra"] == {"usage": {"prompt_tokens": 2, "completion_tokens": 3}, "token_ids": [5, 6, 7],
                              "prompt_token_ids": [1, 2], "logprobs": [-0.1, -0.2, -0.3]}
    assert second["extra"] == {"token_ids": [9], "logprobs": [None]}  # -inf has no JSON spelling
    assert second["action"]["kind"] == "format_error" and second["exec"] is None
    assert record["return"] == pytest.approx(sum(s["reward"] for s in record["steps"]))
    assert record["process_reward"]["return"] == pytest.approx(record["return"])
    assert record["duration_s"] > 0 and record["started_at"] < record["ended_at"]
    # the agent's extras never reach the chat history
    assert all("token_ids" not in m for m in record["messages"])
    config_file = path.parent / f"config_{record['config_hash']}.json"
    assert json.loads(config_file.read_text())["config"] == {"lr": 1e-6}


def test_abandoned_episode_is_written_on_reset_and_close(env_id, tmp_path, cmd):
    path = tmp_path / "e.jsonl"
    env = make(env_id, path)
    env.reset(seed=0)
    env.step(cmd("ls"))
    env.reset(seed=1)  # cuts the first episode short
    env.close()        # and this one, before any step
    first, second = read_episodes(path)
    assert first["end_reason"] == "abandoned" and first["grade"] is None and first["num_steps"] == 1
    assert first["messages"][-2]["role"] == "assistant"
    assert second["end_reason"] == "abandoned" and second["num_steps"] == 0


def test_truncated_episode(env_id, tmp_path, cmd):
    path = tmp_path / "e.jsonl"
    env = make(env_id, path)
    env.reset(seed=0)
    for i in range(8):
        *_, truncated, _ = env.step(cmd(f"echo {i}"))
    assert truncated
    [record] = read_episodes(path)
    assert record["end_reason"] == "max_steps" and record["grade"]["passed"] is False
    assert record["steps"][-1]["truncated"] is True


@pytest.mark.parametrize("rate, expected", [(0.0, 0), (1.0, 6)])
def test_sample_rate_extremes(cheap_env_id, tmp_path, rate, expected, submit):
    path = tmp_path / "e.jsonl"
    env = RecordEpisodes(gym.make(cheap_env_id), path, sample_rate=rate)
    for seed in range(6):
        env.reset(seed=seed)
        env.step(submit)
    env.close()
    assert (len(read_episodes(path)) if path.exists() else 0) == expected


def test_sample_rate_draws_are_seeded(cheap_env_id, tmp_path):
    def recorded(seed, name):
        path = tmp_path / f"{name}.jsonl"
        env = RecordEpisodes(gym.make(cheap_env_id), path, sample_rate=0.3, seed=seed)
        flags = []
        for episode in range(20):
            env.reset(seed=episode)  # each reset writes the previous episode (abandoned) if it was drawn
            flags.append(env.get_wrapper_attr("recording"))
        env.close()
        assert (len(read_episodes(path)) if path.exists() else 0) == sum(flags)
        return flags

    flags = recorded(7, "a")
    assert flags == recorded(7, "b")
    assert flags != recorded(8, "c")
    assert 1 <= sum(flags) <= 13  # 0.3 of 20, loosely


def test_training_step_and_log_path(cheap_env_id, tmp_path, submit):
    path = episode_log_path(tmp_path, "cot_prompt_v1", training_step=12)
    assert path == tmp_path / "cot_prompt_v1" / "step_000012.jsonl"
    env = RecordEpisodes(gym.make(cheap_env_id), path, experiment="cot_prompt_v1")
    env.get_wrapper_attr("set_training_step")(12)
    env.reset(seed=0)
    env.step(submit)
    assert read_episodes(path)[0]["training_step"] == 12


def test_config_hash_is_stable_and_order_free():
    a = config_hash({"lr": 5e-6, "model": {"name": "q", "layers": [1, 2]}})
    b = config_hash({"model": {"layers": [1, 2], "name": "q"}, "lr": 5e-6})
    assert a == b and len(a) == 12
    assert a != config_hash({"lr": 5e-7, "model": {"name": "q", "layers": [1, 2]}})
    assert config_hash(None) == config_hash({})


@pytest.mark.parametrize("kwargs, message", [
    ({"sample_rate": 1.5}, "sample_rate"),
    ({"experiment": ""}, "experiment"),
    ({"experiment": "a/b"}, "experiment"),
])
def test_bad_arguments(env_id, tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        make(env_id, tmp_path / "e.jsonl", **kwargs)


def test_reading_a_torn_file_names_the_line(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text('{"format": "termgym.episode/1"}\n{"format": "termgym.epi\n')
    with pytest.raises(ValueError, match=r"e\.jsonl:2: not valid JSON"):
        list(read_jsonl(path))
    assert len(list(read_jsonl(path, skip_invalid=True))) == 1
    path.write_text('{"format": "something-else"}\n')
    with pytest.raises(ValueError, match="not a termgym episode"):
        read_episodes(path)
