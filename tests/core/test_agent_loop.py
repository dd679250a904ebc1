"""The one agent loop (termgym.agents.loop.run_episode) on real local sandboxes, through wrappers."""

from __future__ import annotations

import asyncio

import gymnasium as gym
import pytest

from termgym.agents.loop import EnvFailure, LoopOutcome, run_episode
from termgym.env import TerminalEnv, Truncate
from termgym.wrappers.rewards import ProcessReward


def bash(command: str) -> str:
    return f"THOUGHT: run it.\n\n```bash\n{command}\n```"


SUBMIT = bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")


class Scripted:
    """A policy that plays a list of actions and records which hooks ran."""

    def __init__(self, actions, *, asynchronous: bool = True) -> None:
        self.actions = list(actions)
        self.calls: list[str] = []
        self.steps = []
        if not asynchronous:
            self.act = self._act_sync

    def start(self, prompt, info):
        self.calls.append("start")
        assert "hello.txt" in prompt and info["task_id"] == "hello-2"

    async def act(self, observation, info):
        return self._next()

    def _act_sync(self, observation, info):
        return self._next()

    def _next(self):
        self.calls.append("act")
        return self.actions.pop(0) if self.actions else None

    def observe(self, step):
        self.calls.append("observe")
        self.steps.append(step)

    async def end(self):
        self.calls.append("end")


@pytest.mark.parametrize("asynchronous", [True, False])
def test_the_loop_plays_to_the_grade_through_the_wrappers(hello_suite, asynchronous):
    env = ProcessReward(TerminalEnv(hello_suite))
    policy = Scripted([bash("echo 2 > hello.txt"), SUBMIT], asynchronous=asynchronous)
    try:
        outcome = asyncio.run(run_episode(env, policy, options={"task_id": "hello-2"}))
    finally:
        env.close()
    assert outcome.done and outcome.end_reason == "submitted" and outcome.final_info["grade"]["passed"]
    assert [s.index for s in outcome.steps] == [1, 2] and outcome.steps[-1].terminated
    assert "reward_events" in outcome.steps[0].info  # the wrapper saw every step
    assert outcome.total_reward == pytest.approx(sum(s.reward for s in outcome.steps))
    assert policy.calls == ["start", "act", "observe", "act", "observe", "end"]
    assert outcome.env_seconds > 0


def test_max_turns_ends_the_episode_with_a_truncate_step_the_wrappers_settle(hello_suite):
    env = ProcessReward(TerminalEnv(hello_suite))
    policy = Scripted([bash("ls"), bash("pwd"), bash("echo 2 > hello.txt")])
    try:
        outcome = asyncio.run(run_episode(env, policy, options={"task_id": "hello-2"}, max_turns=2))
    finally:
        env.close()
    assert outcome.end_reason == "max_turns" and isinstance(outcome.steps[-1].action, Truncate)
    assert outcome.steps[-1].truncated and outcome.steps[-1].info["action"]["kind"] == "cut"
    # the clawback of the shaping paid for ls/pwd came on the Truncate step: the return is 0
    assert outcome.final_info["process_reward"]["return"] == pytest.approx(0.0)
    assert outcome.total_reward == pytest.approx(0.0)


def test_a_policy_may_stop_without_ending_the_episode(hello_suite):
    env = TerminalEnv(hello_suite)
    policy = Scripted([bash("ls")])  # then None: stop
    try:
        outcome = asyncio.run(run_episode(env, policy, options={"task_id": "hello-2"}))
        assert not outcome.done and outcome.end_reason is None and len(outcome.steps) == 1
        assert not env.done  # still running: the caller closes it
    finally:
        env.close()
    assert policy.calls[-1] == "end"


def test_env_errors_are_env_failures_and_policy_errors_pass_through(hello_suite):
    class Broken(Scripted):
        async def act(self, observation, info):
            raise KeyError("the agent broke")

    env = TerminalEnv(hello_suite)
    try:
        with pytest.raises(EnvFailure, match="env.reset failed") as caught:
            asyncio.run(run_episode(env, Scripted([]), options={"task_id": "no-such-task"}))
        assert caught.value.during == "reset" and caught.value.retriable
        policy = Broken([])
        outcome = LoopOutcome()
        with pytest.raises(KeyError, match="the agent broke"):
            asyncio.run(run_episode(env, policy, options={"task_id": "hello-2"}, outcome=outcome))
        assert policy.calls[-1] == "end" and outcome.reset_info["task_id"] == "hello-2"
    finally:
        env.close()
    with pytest.raises(ValueError, match="max_turns"):
        asyncio.run(run_episode(env, Scripted([]), max_turns=0))


def test_the_loop_works_on_a_gym_make_env(hello_suite):
    gym.register("termgym-test/LoopHello-v0", entry_point="termgym.env:TerminalEnv", kwargs={"suite": hello_suite})
    try:
        env = gym.make("termgym-test/LoopHello-v0")
        try:
            outcome = asyncio.run(run_episode(env, Scripted([SUBMIT]), options={"task_id": "hello-2"}))
        finally:
            env.close()
    finally:
        del gym.registry["termgym-test/LoopHello-v0"]
    assert outcome.end_reason == "submitted" and outcome.final_info["grade"]["passed"] is False
