"""The Terminus-2 protocol: reply parsing, observation rendering, and a live tmux session."""

from __future__ import annotations

import json
import shutil

import gymnasium as gym
import pytest

import termgym  # noqa: F401
from termgym.protocols import make_protocol
from termgym.protocols.terminus import TerminusProtocol, limit_output, parse_reply
from termgym.sandbox.base import ExecResult


def reply(commands=(), done=False, **extra):
    body = {"analysis": "a", "plan": "p",
            "commands": [{"keystrokes": k, "duration": d} for k, d in commands], "task_complete": done}
    body.update(extra)
    return json.dumps(body)


def test_registered_under_terminus():
    assert isinstance(make_protocol("terminus"), TerminusProtocol)


def test_valid_reply_becomes_a_command_action():
    action = TerminusProtocol().parse(reply([("ls\n", 0.1), ("C-c", 0.5)]))
    assert action.kind == "command" and action.command == "ls\nC-c"
    assert action.extra["commands"] == [("ls\n", 0.1), ("C-c", 0.5)] and action.extra["warnings"] == []


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("just prose", "No JSON object found"),
        ('{"analysis": "a", "plan": "p", "commands": [}', "Invalid JSON"),
        ('{"plan": "p", "commands": []}', "Missing required field(s): analysis"),
        ('{"analysis": "a", "plan": "p"}', "Missing required field(s): commands"),
        ('{"analysis": "a", "plan": "p", "commands": "ls"}', '"commands" must be an array'),
        ('{"analysis": "a", "plan": "p", "commands": [{"duration": 1}]}', 'commands[0] is missing "keystrokes"'),
        ('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": 5}]}', "keystrokes must be a string"),
        ('{"analysis": "a", "plan": "p", "task_complete": true}', "Missing required field(s): commands"),
        ('[1, 2]', "No JSON object found"),
    ],
)
def test_parse_errors_say_what_was_wrong(text, error):
    protocol = TerminusProtocol(prompts="termgym")
    action = protocol.parse(text)
    assert action.kind == "format_error" and error in action.error
    rendered = protocol.render_format_error(action)
    assert "parsing errors" in rendered and error in rendered


def test_lenient_replies_parse_with_warnings_as_terminus_2_does():
    chatty = parse_reply("Sure! " + reply([("ls\n", 0.1)]) + " Hope that helps.")
    assert any("before" in w for w in chatty["warnings"]) and any("after" in w for w in chatty["warnings"])
    fenced = parse_reply("```json\n" + reply([("ls\n", 0.1)]) + "\n```")
    assert fenced["commands"] == [("ls\n", 0.1)]
    unclosed = parse_reply('{"analysis": "a", "plan": "p", "commands": []')
    assert "closing braces were added" in unclosed["warnings"][0]
    capped = parse_reply(reply([("make\n", 500)]), max_duration=60)
    assert capped["commands"] == [("make\n", 60.0)] and "capped" in capped["warnings"][0]
    default = parse_reply('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n"}], "x": 1}')
    assert default["commands"] == [("ls\n", 1.0)] and len(default["warnings"]) == 2
    bad_duration = parse_reply(reply([("x\n", "long")]))  # a warning, not a rejected reply
    assert bad_duration["commands"] == [("x\n", 1.0)] and "not a number" in bad_duration["warnings"][0]
    assert parse_reply(reply(done="yes"))["task_complete"] is True
    assert parse_reply(reply(done="maybe"))["task_complete"] is False
    broken_but_done = parse_reply('{"analysis": "a", "plan": "p", "commands": [5], "task_complete": true}')
    assert broken_but_done["task_complete"] and broken_but_done["commands"] == []
    assert parse_reply('{"analysis": 3, "plan": "p", "commands": []}')["warnings"]
    thinking = parse_reply("<think>{not json}</think>" + reply())
    assert thinking["warnings"] == []


def test_completion_must_be_confirmed_and_the_confirming_reply_runs_its_commands():
    protocol = TerminusProtocol(prompts="termgym")
    first = protocol.parse(reply([("echo hi\n", 0.1)], done=True))
    assert first.kind == "command" and first.extra["confirm"]
    observation = protocol.render_observation(ExecResult("New Terminal Output:\nhi", 0), first)
    assert "Are you sure you want to mark the task as complete?" in observation and "hi" in observation
    final = protocol.parse(reply([("echo last\n", 0.1)], done=True))
    assert final.kind == "command" and final.extra["final"] and final.command == "echo last\n"
    # a reply without task_complete in between resets the question
    protocol = TerminusProtocol(prompts="termgym")
    protocol.parse(reply(done=True))
    protocol.parse(reply([("ls\n", 0.1)]))
    assert protocol.parse(reply(done=True)).extra.get("confirm")


def test_warnings_are_shown_with_the_output():
    protocol = TerminusProtocol(prompts="termgym")
    action = protocol.parse("Here: " + reply([("ls\n", 0.1)]))
    text = protocol.render_observation(ExecResult("New Terminal Output:\nfile", 0), action)
    assert text.startswith("Your previous response had warnings:") and text.endswith("file")


def test_observation_cap_keeps_head_and_tail():
    text = "A" * 6000 + "B" * 6000
    limited = limit_output(text)
    assert len(limited.encode()) < 10_200 and limited.startswith("A" * 5000) and limited.endswith("B" * 5000)
    assert "2000 interior bytes omitted" in limited
    assert limit_output("short") == "short"


def test_oracle_and_submit_messages_round_trip():
    protocol = TerminusProtocol()
    action = protocol.parse(protocol.oracle_message("make"))
    assert action.kind == "command" and action.extra["commands"] == [("make\n", 60.0)]
    assert protocol.parse(protocol.submit_message()).extra.get("confirm")  # asks for confirmation
    assert protocol.parse(protocol.submit_message()).extra.get("final")


def test_bad_options():
    with pytest.raises(ValueError, match="wait must be"):
        TerminusProtocol(wait="forever")


# -- live, in the local sandbox ------------------------------------------------------------------


@pytest.fixture
def terminus_env(make_task, local_backend):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    task_dir = make_task("t")
    env = gym.make("termgym/Harbor-v0", tasks_dir=task_dir.parent, backend=local_backend, protocol="terminus",
                   protocol_options={"wait": "idle", "prompts": "termgym"})
    yield env
    env.close()


def test_live_session_incremental_output_and_completion(terminus_env):
    env = terminus_env
    prompt, info = env.reset(options={"task_id": "t"})
    assert "Task Description:" in prompt and "Current terminal state:" in prompt and "/app#" in prompt
    assert '"keystrokes"' in info["system_prompt"] and info["prompt_source"] == "termgym"
    obs, *_ = env.step(reply([("echo first-$((20+1))\n", 0.5)]))
    assert obs.startswith("New Terminal Output:") and "first-21" in obs
    obs, *_ = env.step(reply([("echo second\n", 0.5)]))
    assert "second" in obs and "first-21" not in obs  # only what is new
    obs, *_ = env.step(reply([("cat\n", 0.3), ("partial", 0.2), ("C-c", 0.3)]))
    assert "partial" in obs and "^C" in obs  # a key name is pressed, not typed
    obs, reward, terminated, *_ = env.step(reply([("echo ok > /app/done.txt\n", 0.5)], done=True))
    assert not terminated and "Are you sure" in obs
    obs, reward, terminated, truncated, info = env.step(reply(done=True))
    assert terminated and reward == 1.0 and info["grade"]["passed"]


def test_live_idle_wait_returns_early(terminus_env):
    env = terminus_env
    env.reset(options={"task_id": "t"})
    obs, *_ = env.step(reply([("echo quick\n", 30)]))
    assert "quick" in obs and env.unwrapped.last_exec.duration < 10
    obs, *_ = env.step(reply([("sleep 0.8; echo slow-done\n", 5)]))
    assert "slow-done" in obs


def test_live_deadline_kills_the_pane_job_and_the_rest_of_the_typed_line(make_task, local_backend):
    """At the episode deadline the pane's `sleep` and the `touch` typed after it never run on."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    # The verifier looks after the agent's sleep would have ended: a pane left running scores 1.
    task_dir = make_task("t", toml='schema_version = "1.1"\n[agent]\ntimeout_sec = 3\n', test_sh="""\
        #!/bin/bash
        sleep 3
        if [ -e /app/x ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
        """)
    env = gym.make("termgym/Harbor-v0", tasks_dir=task_dir.parent, backend=local_backend, protocol="terminus",
                   protocol_options={"wait": "idle", "prompts": "termgym"})
    try:
        env.reset(options={"task_id": "t"})
        sandbox = env.unwrapped.sandbox
        _, reward, terminated, truncated, info = env.step(reply([("sleep 4; touch /app/x\n", 30)]))
        assert truncated and not terminated and info["end_reason"] == "time_limit"
        assert reward == 0.0 and info["grade"]["reward_valid"] is True, info["grade"]
    finally:
        env.close()
    assert sandbox.closed


@pytest.mark.docker
def test_terminus_plays_a_docker_only_sample_with_the_oracle():
    from termgym.env import oracle_actions

    env = gym.make("termgym/Harbor-v0", backend="docker", protocol="terminus", protocol_options={"wait": "idle"})
    try:
        env.reset(options={"task_id": "sysadmin-users-perms"})
        assert not env.unwrapped.task.local_ok
        actions = oracle_actions(env.unwrapped)
        assert actions[-1] == actions[-2]  # Terminus asks to confirm completion: the oracle submits twice
        for action in actions[:-1]:
            obs, reward, terminated, truncated, info = env.step(action)
        assert not terminated and "Are you sure" in obs
        _, reward, terminated, _, info = env.step(actions[-1])
        assert terminated and reward == 1.0, info["grade"]
    finally:
        env.close()
