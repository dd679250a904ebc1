"""Command-line agents run inside the task's sandbox (the ``cli`` agent), graded by termgym.

The agent is a stand-in CLI program (``standin_cli_agent.py``: an OpenAI chat loop that runs the
commands the model sends) copied into a real bubblewrap sandbox; the model is a scripted
OpenAI-compatible server on host loopback, forwarded into the sandbox's network namespace.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from scripted_agents import CommandScripted

from termgym.agents import make_agent
from termgym.agents.cli import RECIPES
from termgym.evaluation import evaluate
from termgym.evaluation.results import RunDir

SWESYNTH = "termgym/SweSynth-v0"
TOY = {"path": "toy"}  # the toy suite: tasks from the projects written for termgym
STANDIN = str(Path(__file__).resolve().parent / "standin_cli_agent.py")
COMMAND = 'python3 /opt/standin/agent.py "$TERMGYM_INSTRUCTION" --model "$TERMGYM_MODEL" --log /tmp/agent.jsonl'


def _run(tmp_path, task, commands, name, **options):
    with CommandScripted(commands) as server:
        agent_options = {"command": COMMAND, "files": {"/opt/standin/agent.py": STANDIN}, "model": "scripted-1",
                         "base_url": server.base_url, "log_path": "/tmp/agent.jsonl", **options}
        outcome = evaluate(SWESYNTH, agent="cli", output_dir=tmp_path / name, task_ids=task.task_id, split="all",
                           progress="off", infra_retries=0, agent_options=agent_options, env_kwargs=TOY)
    episode = json.loads((tmp_path / name / "episodes" / f"{task.task_id}__a0.json").read_text())
    # the result keeps a summary; the turns are read from the episode's record
    episode["turns"] = RunDir(tmp_path / name).transcript(outcome.results[0])["turns"]
    return outcome, server, episode


def test_a_cli_agent_in_the_sandbox_fixes_a_swesynth_task(tmp_path, swesynth_task):
    task = swesynth_task
    probe = "curl -sS -m 3 http://example.com >/dev/null && echo NET || echo NONET; echo $OPENAI_BASE_URL"
    outcome, server, episode = _run(tmp_path, task, [probe, *task.oracle_commands()], "fix")
    assert outcome.summary["solved"] == 1 and episode["status"] == "completed" and episode["score"] == 1.0
    # One door: the instruction, the program file and the program's run are steps of the episode.
    assert [t["meta"].get("cli_step") for t in episode["turns"]] == ["files", "files", "run", None]
    assert "python3 /opt/standin/agent.py" in json.dumps(episode["turns"][2])
    meta = episode["turns"][-1]["meta"]
    assert meta["cli_exit_code"] == 0 and "standin-agent: done" in meta["cli_output"]
    log = [json.loads(line) for line in meta["cli_log"].splitlines()]
    # It reached the model (forwarded under its own name) and nothing else.
    assert log[0]["output"].startswith("NONET") and "http://model.termgym:" in log[0]["output"]
    assert log[-1] == {"turn": 2, "done": True} and len(server.requests) == 3
    # It worked on the instruction, with the key the host gave it.
    assert task.instruction[:60] in server.requests[0]["body"]["messages"][1]["content"]
    assert server.requests[0]["authorization"] == "Bearer EMPTY" or server.requests[0]["authorization"]


def test_a_cli_agent_that_does_not_fix_gets_grade_zero(tmp_path, swesynth_task):
    outcome, _, episode = _run(tmp_path, swesynth_task, ["echo '# no fix' >> README.md"], "wrong")
    assert outcome.summary["solved"] == 0 and episode["status"] == "completed" and episode["score"] == 0.0


def test_the_time_limit_stops_the_program_and_the_episode_is_still_graded(tmp_path, swesynth_task):
    _, _, episode = _run(tmp_path, swesynth_task, ["sleep 60"], "slow", timeout=3)
    meta = episode["turns"][-1]["meta"]
    assert meta["cli_timed_out"] is True and meta["cli_seconds"] < 30
    assert episode["status"] == "completed" and episode["score"] == 0.0


def test_setup_commands_run_first_and_a_failing_one_is_named(tmp_path, swesynth_task):
    _, _, episode = _run(tmp_path, swesynth_task, ["true"], "setup", setup=["echo prepared > /tmp/prep"],
                         command="cat /tmp/prep")
    assert episode["turns"][-1]["meta"]["cli_output"].strip() == "prepared"
    _, _, episode = _run(tmp_path, swesynth_task, ["true"], "badsetup", setup=["exit 7"])
    assert episode["status"] == "agent_error"
    assert "setup command 'exit 7' failed (exit 7)" in episode["error"]["message"]


def test_the_tasks_command_ban_and_max_steps_hold_for_a_cli_agent(tmp_path, swesynth_task):
    # SWE-SYNTH refuses checksum commands (they would reveal the changed file): also in a CLI agent's setup.
    _, _, episode = _run(tmp_path, swesynth_task, ["true"], "banned", setup=["md5sum README.md"])
    assert episode["status"] == "agent_error"
    assert "setup command 'md5sum README.md' failed (exit 1): Command not permitted" in episode["error"]["message"]
    # max_steps counts the agent's steps: two steps (instruction, program file) and the run never starts.
    with CommandScripted(["true"]) as server:
        evaluate(SWESYNTH, agent="cli", output_dir=tmp_path / "short", task_ids=swesynth_task.task_id, split="all",
                 progress="off", infra_retries=0, env_kwargs={**TOY, "max_steps": 2},
                 agent_options={"command": COMMAND, "files": {"/opt/standin/agent.py": STANDIN}, "model": "m",
                                "base_url": server.base_url})
    short = json.loads((tmp_path / "short" / "episodes" / f"{swesynth_task.task_id}__a0.json").read_text())
    assert short["end_reason"] == "max_steps" and short["steps"] == 2 and server.requests == []


@pytest.mark.parametrize("options, message", [
    ({}, "give exactly one of command (a shell command) or recipe"),
    ({"command": "x", "recipe": "codex"}, "give exactly one of command"),
    ({"recipe": "nope"}, "unknown recipe 'nope'; choose one of codex, claude-code, aider, openhands, goose"),
    ({"command": "x", "base_url": "https://api.example.com/v1"}, "base_url must be an http:// URL"),
    ({"command": "x", "files": {"rel/path": STANDIN}}, "files key 'rel/path' must be an absolute sandbox path"),
    ({"command": "x", "files": {"/a": "/no/such/file/q"}}, "no such host file '/no/such/file/q'"),
    ({"command": "x", "setup": "echo"}, "setup must be a list, not str"),
])
def test_bad_options_are_named(options, message):
    with pytest.raises(ValueError) as excinfo:
        make_agent("cli", **options)
    assert message in str(excinfo.value)


REAL_AGENTS = {"codex": ("@openai/codex", "codex", "codex-cli"),
               "claude-code": ("@anthropic-ai/claude-code", "claude", "Claude Code")}


@pytest.mark.skipif(not os.environ.get("TERMGYM_TEST_REAL_CLI_AGENTS"),
                    reason="downloads ~0.5 GB from npm: set TERMGYM_TEST_REAL_CLI_AGENTS=1")
@pytest.mark.parametrize("recipe", sorted(REAL_AGENTS))
def test_real_cli_agents_from_npm_start_inside_the_sandbox(tmp_path, recipe):
    # npm installs on the host (the sandbox has no network); the package tree is copied in and the
    # program started with the host's node, which the local backend shows read-only under /usr.
    from termgym.sandbox import make_sandbox
    from termgym.sandbox.base import SandboxSpec

    package, program, banner = REAL_AGENTS[recipe]
    assert RECIPES[recipe]["install"] == f"npm install -g {package}"
    subprocess.run(["npm", "install", "--prefix", str(tmp_path / "npm"), package, "--no-audit", "--no-fund"],
                   check=True, capture_output=True, timeout=600)
    with make_sandbox("local", SandboxSpec()) as sandbox:
        sandbox.start()
        sandbox.put_dir(tmp_path / "npm", "/opt/agent")
        result = sandbox.exec(f"/opt/agent/node_modules/.bin/{program} --version", timeout=120)
    assert result.exit_code == 0 and banner in result.output, result.output
