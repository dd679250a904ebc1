"""TerminalEnv: the Gymnasium contract, episodes, limits, async and vector use."""

from __future__ import annotations

import asyncio
import os
import time

import gymnasium as gym
import pytest
from hello_tasks import make_hello_tasks

import termgym
from termgym import CommandTask, ListSuite
from termgym.env import TerminalEnv, Truncate, aclose, areset, astep, oracle_actions


def bash(command: str) -> str:
    return f"THOUGHT: run it.\n\n```bash\n{command}\n```"


def play_oracle(env) -> tuple[float, dict]:
    for action in oracle_actions(env.unwrapped):
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return reward, info
    raise AssertionError("the oracle never ended the episode")


def test_reset_returns_prompt_and_info(hello_suite):
    env = TerminalEnv(hello_suite)
    obs, info = env.reset(seed=0)
    assert info["task_id"].startswith("hello-")
    assert env.task.instruction in obs
    assert info["system_prompt"] == info["messages"][0]["content"]
    assert [m["role"] for m in env.messages] == ["system", "user"]
    env.close()


def test_task_choice_is_deterministic_from_the_seed(hello_suite):
    a, b = TerminalEnv(hello_suite), TerminalEnv(hello_suite)
    ids_a = [a.reset(seed=s)[1]["task_id"] for s in range(6)]
    ids_b = [b.reset(seed=s)[1]["task_id"] for s in range(6)]
    assert ids_a == ids_b and len(set(ids_a)) > 1
    a.reset(seed=11)
    b.reset(seed=11)
    assert [a.reset()[1]["task_id"] for _ in range(4)] == [b.reset()[1]["task_id"] for _ in range(4)]
    a.close()
    b.close()


def test_task_id_option_picks_the_task(hello_suite):
    env = TerminalEnv(hello_suite)
    assert env.reset(options={"task_id": "hello-3"})[1]["task_id"] == "hello-3"
    with pytest.raises(KeyError, match="no task 'nope'"):
        env.reset(options={"task_id": "nope"})
    env.close()


def test_oracle_episode_terminates_with_grade(hello_suite):
    env = TerminalEnv(hello_suite)
    env.reset(seed=2)
    reward, info = play_oracle(env)
    assert reward == 1.0
    assert info["grade"]["passed"] is True and info["end_reason"] == "submitted"
    assert info["messages"][-1]["content"] == "Submitted."
    env.close()


def test_submitting_without_solving_scores_zero(hello_suite):
    env = TerminalEnv(hello_suite)
    env.reset(seed=2)
    obs, reward, terminated, truncated, info = env.step(env.protocol.submit_message())
    assert terminated and not truncated and reward == 0.0 and info["grade"]["passed"] is False


def test_step_limit_truncates_and_grades(hello_suite):
    env = TerminalEnv(hello_suite, max_steps=3)
    env.reset(options={"task_id": "hello-1"})
    rewards = []
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(bash("ls"))
        rewards.append(reward)
    assert truncated and not terminated and info["end_reason"] == "max_steps"
    assert "grade" in info and rewards == [0.0, 0.0, 0.0]
    with pytest.raises(RuntimeError, match="reset"):
        env.step(bash("ls"))


def test_wall_clock_budget_truncates(hello_suite):
    env = TerminalEnv(hello_suite, time_limit=0.5)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(bash("sleep 0.6"))
    assert truncated and info["end_reason"] == "time_limit"


def test_time_limit_inside_a_command_runs_nothing_more_of_its_line():
    """The deadline cuts the reply's shell too: the echo after the sleep never runs (Harbor: 0)."""
    task = CommandTask("late", "Create hello.txt containing 1.", grade_command="grep -qx 1 hello.txt")
    env = TerminalEnv(ListSuite([task]), time_limit=3)  # the default, persistent, shell
    env.reset(seed=0)
    started = time.monotonic()
    _, reward, terminated, truncated, info = env.step(bash("sleep 20; echo 1 > hello.txt"))
    assert time.monotonic() - started < 15, "the step must end at the 3 s deadline, not after the sleep"
    assert truncated and not terminated and info["end_reason"] == "time_limit"
    assert reward == 0.0 and info["exec"]["timed_out"] and info["exec"]["restarted"]


def test_command_timeout_before_the_time_limit_keeps_the_shell(hello_suite):
    """An ordinary per-command timeout kills only the program: cwd and variables survive."""
    env = TerminalEnv(hello_suite, time_limit=120, command_timeout=1)
    env.reset(seed=0)
    env.step(bash("cd /tmp && export TG_KEPT=yes"))
    _, _, _, truncated, info = env.step(bash("sleep 30"))
    assert info["exec"]["timed_out"] and not info["exec"]["restarted"] and not truncated
    env.step(bash('echo "$PWD:$TG_KEPT"'))
    assert env.unwrapped.last_exec.output.strip() == "/tmp:yes"
    env.close()


def test_context_limit_truncates(hello_suite):
    env = TerminalEnv(hello_suite, max_context_chars=5000)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(bash("seq 1 3000"))
    assert truncated and info["end_reason"] == "context_limit"


def test_format_errors_are_observations_not_crashes(hello_suite):
    env = TerminalEnv(hello_suite)
    env.reset(seed=0)
    for bad in ["no code here", "```bash\nls\n```\n```bash\npwd\n```", "```bash\n\n```", ""]:
        obs, reward, terminated, truncated, info = env.step(bad)
        assert info["action"]["kind"] == "format_error"
        assert "EXACTLY ONE action" in obs
        assert not terminated
    env.close()


def test_persistent_and_stateless_modes(hello_suite):
    env = TerminalEnv(hello_suite, mode="persistent")
    env.reset(seed=0)
    env.step(bash("cd /tmp && export V=7"))
    assert "/tmp" in env.step(bash("pwd; echo V=$V"))[0] and "V=7" in env.messages[-1]["content"]
    env.close()
    env = TerminalEnv(hello_suite, mode="stateless")
    env.reset(seed=0)
    env.step(bash("cd /tmp && export V=7"))
    obs = env.step(bash("pwd; echo V=$V"))[0]
    assert "/workspace" in obs and "V=\n" in obs
    env.close()


def test_command_timeout_is_reported(hello_suite):
    env = TerminalEnv(hello_suite, command_timeout=0.5)
    env.reset(seed=0)
    obs, *_ , info = env.step(bash("sleep 30"))
    assert info["exec"]["timed_out"] and "<returncode>124</returncode>" in obs and "timed out" in obs
    env.close()


def test_long_output_is_elided_in_observations(hello_suite):
    env = TerminalEnv(hello_suite)
    env.reset(seed=0)
    obs = env.step(bash("seq 1 100000"))[0]
    assert len(obs) < 11_000 and "elided" in obs and obs.rstrip().endswith("100000\n</output>".rstrip())
    env.close()


def test_render_ansi_transcript(hello_suite):
    env = TerminalEnv(hello_suite, render_mode="ansi")
    env.reset(seed=0)
    env.step(bash("echo rendered-output"))
    text = env.render()
    assert "[assistant]" in text and "rendered-output" in text and "\x1b[" in text
    env.close()


def test_toolcall_protocol_episode(hello_suite):
    env = TerminalEnv(hello_suite, protocol="toolcall")
    obs, info = env.reset(options={"task_id": "hello-4"})
    assert [t["function"]["name"] for t in info["tools"]] == ["bash", "submit"]
    reward, info = play_oracle(env)
    assert reward == 1.0
    roles = [m["role"] for m in info["messages"]]
    assert roles[:4] == ["system", "user", "assistant", "tool"]
    assert info["messages"][3]["tool_call_id"] == info["messages"][2]["tool_calls"][0]["id"]


def test_passes_gymnasium_env_checker(hello_suite):
    from gymnasium.utils.env_checker import check_env

    env = TerminalEnv(hello_suite, render_mode="ansi")
    check_env(env)
    env.close()


def test_gym_make_and_custom_registration():
    termgym.register_suite("tests/Hello-v0", "hello_tasks:suite", max_steps=4)
    termgym.register_suite("tests/HelloObj-v0", lambda: ListSuite(make_hello_tasks(2)), max_steps=4)
    env = gym.make("tests/HelloObj-v0")
    assert env.unwrapped.max_steps == 4
    env.reset(seed=0)
    reward, _ = play_oracle(env)
    assert reward == 1.0
    env.close()


def test_custom_task_in_twenty_lines():
    class CountLines(CommandTask):
        """Write the number of lines of data.txt into count.txt."""

        def __init__(self, n: int):
            super().__init__(
                f"count-{n}", "Write the number of lines in data.txt into count.txt.",
                files={"data.txt": "x\n" * n},
                grade_command=f"test \"$(cat count.txt)\" = {n}",
                oracle=["wc -l < data.txt > count.txt"],
            )

    termgym.register_suite("tests/Count-v0", lambda: ListSuite([CountLines(n) for n in (3, 5, 8)]))
    env = gym.make("tests/Count-v0")
    for seed in range(3):
        env.reset(seed=seed)
        assert play_oracle(env)[0] == 1.0
    env.close()


def test_async_vector_env_runs_episodes():
    termgym.register_suite("tests/HelloVec-v0", "hello_tasks:suite", max_steps=3)
    # the workers are new processes: they find hello_tasks through PYTHONPATH
    os.environ["PYTHONPATH"] = os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])
    envs = gym.make_vec("tests/HelloVec-v0", num_envs=4, vectorization_mode="async")
    try:
        obs, infos = envs.reset(seed=0)
        assert len(obs) == 4
        finished = [False] * 4
        for _ in range(3):
            obs, rewards, terms, truncs, infos = envs.step([bash("echo hi")] * 4)
            finished = [f or t or u for f, t, u in zip(finished, terms, truncs)]
        assert all(finished)
    finally:
        envs.close()


def test_async_steps_do_not_block_the_event_loop(hello_suite):
    async def main():
        env = TerminalEnv(hello_suite)
        await areset(env, seed=0)
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        await astep(env, bash("sleep 1"))
        task.cancel()
        await aclose(env)
        return ticks

    assert asyncio.run(main()) > 40


def test_200_concurrent_async_episodes_leak_nothing(hello_suite, tmp_path, monkeypatch):
    monkeypatch.setenv("TERMGYM_SANDBOX_DIR", str(tmp_path))  # our sandboxes' host dirs land here only

    cgroups = []

    async def episode(i: int) -> float:
        env = TerminalEnv(ListSuite(make_hello_tasks(5)))
        await areset(env, seed=i)
        cgroups.extend(env.sandbox._cgroups)
        try:
            for action in oracle_actions(env):
                obs, reward, terminated, truncated, info = await astep(env, action)
                if terminated or truncated:
                    return reward
        finally:
            await aclose(env)
        return -1.0

    async def main():
        return await asyncio.gather(*(episode(i) for i in range(200)))

    start = time.monotonic()
    rewards = asyncio.run(main())
    assert rewards == [1.0] * 200
    assert time.monotonic() - start < 300
    assert [d for d in os.listdir(tmp_path) if d.startswith("termgym-local-")] == []
    assert cgroups and [cg for cg in cgroups if cg.exists()] == []


def test_malformed_submission_is_refused_and_the_agent_can_resubmit():
    class AnswerTask(CommandTask):
        def check_submission(self, submission):
            return None if submission.strip().isdigit() else "the answer must be a whole number"

        def grade(self, ctx):
            return termgym.Grade(score=float(ctx.submission == "42"), passed=ctx.submission == "42")

    env = TerminalEnv(ListSuite([AnswerTask("q", "What is 6 x 7?", grade_command="true")]))
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.protocol.submit_message("forty-two"))
    assert not terminated and "must be a whole number" in obs and info["submission_error"]
    obs, reward, terminated, truncated, info = env.step(env.protocol.submit_message("42"))
    assert terminated and reward == 1.0


def test_a_truncate_step_grades_an_episode_ended_from_outside(hello_suite):
    env = TerminalEnv(hello_suite)
    env.reset(options={"task_id": "hello-3"})
    env.step(bash("echo 3 > hello.txt"))
    _, reward, terminated, truncated, info = env.step(Truncate("context_limit"))
    assert reward == 1.0 and info["end_reason"] == "context_limit" and info["grade"]["passed"]
    assert (terminated, truncated, info["action"]["kind"]) == (False, True, "cut")
    assert env.sandbox is None
    with pytest.raises(RuntimeError, match="reset"):
        env.step(Truncate("context_limit"))
    with pytest.raises(ValueError, match="reason"):
        Truncate("")


def test_token_data_rides_on_the_message_and_comes_back_in_info(hello_suite):
    env = TerminalEnv(hello_suite)
    env.reset(options={"task_id": "hello-3"})
    try:
        message = {"role": "assistant", "content": bash("echo 3 > hello.txt"), "extra": {"token_ids": [1, 2]}}
        *_, info = env.step(message)
        assert info["extra"] == {"token_ids": [1, 2]}
        assert "extra" not in env.messages[-2] and env.messages[-2]["content"] == message["content"]
        with pytest.raises(TypeError, match="extra"):
            env.step({"role": "assistant", "content": "x", "extra": [1]})
    finally:
        env.close()
