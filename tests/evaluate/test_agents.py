"""Agents: the registry, agents by import path, sync agents, and how their failures are classified."""

from __future__ import annotations

import asyncio
import time

import pytest

import termgym
from termgym import CommandTask, ListSuite
from termgym.agents import AGENTS, Agent, Episode, Reply, make_agent
from termgym.agents.nop import NopAgent
from termgym.agents.openai import OpenAIAgent
from termgym.agents.oracle import OracleAgent
from termgym.evaluation import evaluate
from termgym.wrappers.recording import read_episodes


def test_registry_builds_agents_by_name_and_import_path():
    assert isinstance(make_agent("oracle"), OracleAgent)
    assert isinstance(make_agent("nop"), NopAgent)
    assert isinstance(make_agent("openai", model="m", base_url="http://127.0.0.1:1/v1"), OpenAIAgent)
    assert AGENTS["replay"] == "termgym.agents.replay:ReplayAgent"
    agent = make_agent("custom_agents:ListAgent", commands=["ls"])
    assert isinstance(agent, Agent) and agent.commands == ["ls"]
    instance = NopAgent()
    assert make_agent(instance) is instance


@pytest.mark.parametrize("spec, options, message", [
    ("gpt", {}, "unknown agent 'gpt'; choose one of openai, oracle, nop, replay"),
    ("no_such_module_xyz:Agent", {}, "cannot import module 'no_such_module_xyz'"),
    ("custom_agents:Missing", {}, "module 'custom_agents' has no attribute 'Missing'"),
    ("oracle", {"model": "m"}, "agent 'oracle' does not take option(s) model"),
    ("openai", {"temprature": 0.1}, "does not take option(s) temprature"),
])
def test_bad_agent_specs_are_named(spec, options, message):
    with pytest.raises(ValueError) as info:
        make_agent(spec, **options)
    assert message in str(info.value)


def test_openai_agent_rejects_bad_settings():
    with pytest.raises(ValueError, match="base_url must start with http"):
        OpenAIAgent(base_url="localhost:8000/v1")
    with pytest.raises(ValueError, match="timeout must be positive"):
        OpenAIAgent(timeout=0)


def test_reply_coercion():
    assert Reply.coerce("text").message == "text"
    assert Reply.coerce({"role": "assistant", "content": "x"}).message["content"] == "x"
    with pytest.raises(TypeError, match="must return a Reply, str or dict, not int"):
        Reply.coerce(3)


def test_oracle_and_nop_set_the_floor_and_ceiling(tmp_path, scripted):
    oracle = evaluate(scripted.ENV_ID, agent="oracle", output_dir=tmp_path / "oracle", task_ids="right-1,explore",
                      progress=False)
    nop = evaluate(scripted.ENV_ID, agent="nop", output_dir=tmp_path / "nop", task_ids="right-1,explore",
                   progress=False)
    assert oracle.summary["solve_rate"] == 1.0 and nop.summary["solve_rate"] == 0.0
    assert [r.steps for r in nop.results] == [1, 1]


def test_oracle_in_the_toolcall_protocol(tmp_path, scripted):
    outcome = evaluate(scripted.ENV_ID, agent="oracle", output_dir=tmp_path / "run", task_ids="right-1",
                       protocol="toolcall", progress=False)
    assert outcome.results[0].passed and outcome.run_dir.transcript(outcome.results[0])["messages"][-1]["role"] == "tool"


def test_sync_agent_by_import_path_runs_concurrently(tmp_path, scripted):
    # Four episodes, each with an agent that blocks 1 s per turn (3 turns): 12 s if they ran one
    # after another (or blocked the event loop), about 3 s side by side.
    started = time.monotonic()
    outcome = evaluate(scripted.ENV_ID, agent="custom_agents:ListAgent", output_dir=tmp_path / "run",
                       agent_options={"commands": [f"echo {scripted.WORD} > answer.txt", "true"], "pause": 1.0},
                       task_ids="right-1,right-2,explore,wrong-answer", concurrency=4, progress=False)
    assert time.monotonic() - started < 8.0
    assert outcome.summary["solved"] == 4 and {r.steps for r in outcome.results} == {3}
    # The four episodes appended to the one recording side by side: four whole records, one each.
    records = read_episodes(tmp_path / "run" / "episodes.jsonl")
    assert sorted(r["task_id"] for r in records) == ["explore", "right-1", "right-2", "wrong-answer"]
    assert {r.record["episode_id"] for r in outcome.results} == {r["episode_id"] for r in records}


def test_agent_exception_is_an_agent_error_and_does_not_stop_others(tmp_path, scripted):
    outcome = evaluate(scripted.ENV_ID, agent="custom_agents:CrashingAgent", output_dir=tmp_path / "run",
                       task_ids="right-1,right-2", progress=False)
    for result in outcome.results:
        assert (result.status, result.steps, result.score) == ("agent_error", 1, 0.0)
        assert result.error["type"] == "KeyError" and "lost its notes" in result.error["message"]
        # The transcript up to the failure is kept: the record was written as abandoned.
        transcript = outcome.run_dir.transcript(result)
        assert transcript["messages"][-1]["role"] == "user"
        assert transcript["record"]["end_reason"] == "abandoned"
    assert outcome.summary["agent_errors"] == 2 and outcome.summary["scored"] == 2


def test_infra_error_from_agent_is_retried_as_a_fresh_episode(tmp_path, scripted):
    outcome = evaluate(scripted.ENV_ID, agent="custom_agents:FlakyInfraAgent", output_dir=tmp_path / "run",
                       task_ids="right-1,explore", infra_retries=1, infra_backoff=0.01, progress=False)
    records = read_episodes(tmp_path / "run" / "episodes.jsonl")
    for result in outcome.results:
        assert result.status == "completed" and result.passed
        assert [f["message"] for f in result.infra_failures] == ["the GPU node went away"]
        # Each try has its own record; the result points at the one of the try that counted.
        [failed_try] = result.infra_failures
        mine = {r["episode_id"]: r for r in records if r["task_id"] == result.task_id}
        assert len(mine) == 2 and result.record["try"] == 1 and failed_try["record"]["try"] == 0
        assert mine[result.record["episode_id"]]["end_reason"] != "abandoned"
        assert mine[result.record["episode_id"]]["metadata"]["try"] == 1
        assert mine[failed_try["record"]["episode_id"]]["end_reason"] == "abandoned"


def test_broken_sandbox_setup_is_an_infra_error(tmp_path):
    bad = CommandTask("bad-setup", "x", grade_command="true", setup_commands=["exit 3"])
    good = CommandTask("good", "x", grade_command="test -f done", oracle=["touch done"])
    termgym.register_suite("evaltest/BrokenSetup-v0", ListSuite([bad, good]), max_steps=3)
    outcome = evaluate("evaltest/BrokenSetup-v0", agent="oracle", output_dir=tmp_path / "run", infra_retries=2,
                       infra_backoff=0.01, progress=False)
    by_task = {r.task_id: r for r in outcome.results}
    assert by_task["good"].passed
    broken = by_task["bad-setup"]
    assert broken.status == "infra_error" and broken.error["where"] == "env.reset"
    assert broken.error["type"] == "SandboxError" and len(broken.infra_failures) == 2
    # The env never reset: no record to point at, and the report says so instead of failing.
    assert broken.record is None and outcome.run_dir.transcript(broken) is None
    with pytest.raises(ValueError, match="'bad-setup' .* has no record: it failed before its episode started"):
        broken.load_record(outcome.run_dir.path)


def test_episode_timeout_bounds_a_stuck_agent(tmp_path, scripted):
    started = time.monotonic()
    outcome = evaluate(scripted.ENV_ID, agent="custom_agents:SleepyAgent", output_dir=tmp_path / "run",
                       task_ids="right-1", episode_timeout=1.0, progress=False)
    assert time.monotonic() - started < 10
    (result,) = outcome.results
    assert (result.status, result.end_reason, result.error["type"]) == ("agent_error", "episode_timeout",
                                                                        "EpisodeTimeout")


def test_openai_agent_act_builds_the_request_from_the_episode(scripted_server):
    agent = OpenAIAgent(base_url=scripted_server.base_url, model="m", timeout=2)
    episode = Episode(task_id="right-1", attempt=0, env=None, messages=[  # type: ignore[arg-type]
        {"role": "system", "content": "sys"}, {"role": "user", "content": "[task:right-1] do it"}])
    reply = asyncio.run(agent.act(episode))
    assert "```bash\necho termgym > answer.txt\n```" in reply.message
    assert reply.usage["prompt_tokens"] > 0 and reply.meta["retries"] == 0


def test_evaluate_works_inside_a_running_event_loop(tmp_path, scripted):
    # A notebook already runs a loop; evaluate() must not fail with "cannot be called from a running loop".
    async def main():
        return evaluate(scripted.ENV_ID, agent="oracle", output_dir=tmp_path / "run", task_ids="right-1",
                        progress=False)

    assert asyncio.run(main()).summary["solved"] == 1
