"""Harbor's own agents (Terminus-2) on termgym tasks in termgym sandboxes, graded by termgym.

Harbor needs Python >= 3.12: run these in a venv that has it, with termgym on the path, e.g.
``PYTHONPATH=$PWD /work/venvs/harbor-agents/bin/python -m pytest tests/agents_external``. The LLM is
a scripted OpenAI-compatible server on loopback that answers in Terminus-2's JSON format, reached
through Harbor's LiteLLM backend.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("harbor", reason="Harbor needs Python >= 3.12: pip install 'harbor>=0.26,<0.27'")

from scripted_agents import TerminusScripted  # noqa: E402

from termgym.agents import make_agent  # noqa: E402
from termgym.agents.harbor import TermgymSandboxEnvironment  # noqa: E402
from termgym.evaluation import evaluate
from termgym.evaluation.results import RunDir  # noqa: E402
from termgym.sandbox import make_sandbox  # noqa: E402
from termgym.sandbox.base import SandboxSpec  # noqa: E402

SWESYNTH = "termgym/SweSynth-v0"
TOY = {"path": "toy"}  # the toy suite: tasks from the projects written for termgym
QUIET = {"record_terminal_session": False}  # no asciinema install attempt (no network in the sandbox)


def _episode(tmp_path, name, task):
    return json.loads((tmp_path / name / "episodes" / f"{task.task_id}__a0.json").read_text())


def _terminus(tmp_path, task, commands, name, backend="local", max_steps=400):
    # Every command Harbor's agent runs (its tmux calls included) is an env.step: allow enough steps.
    with TerminusScripted(commands) as server:
        outcome = evaluate(SWESYNTH, agent="harbor", output_dir=tmp_path / name, task_ids=task.task_id,
                           split="all", progress="off", infra_retries=0,
                           env_kwargs={**TOY, "backend": backend, "max_steps": max_steps},
                           agent_options={"harbor_agent": "terminus-2", "model": "scripted-1",
                                          "base_url": server.base_url, "logs_dir": str(tmp_path / "logs"),
                                          "agent_kwargs": QUIET})
    return outcome, server, _episode(tmp_path, name, task)


def test_terminus_2_fixes_a_swesynth_task_in_a_bubblewrap_sandbox(tmp_path, swesynth_task):
    task = swesynth_task
    outcome, server, episode = _terminus(tmp_path, task, ["cd /app && git status --short",
                                                          *task.oracle_commands()], "fix")
    assert outcome.summary["solved"] == 1 and episode["status"] == "completed" and episode["score"] == 1.0
    assert episode["grade"]["passed"] is True and episode["end_reason"] == "submitted"
    # Harbor's agent really talked to the model through LiteLLM, and its trajectory was kept.
    assert server.requests[0]["body"]["model"] == "scripted-1"
    assert ":/app# cd /app && git status" in json.dumps(server.requests[1]["body"]["messages"])  # its tmux screen
    turns = RunDir(tmp_path / "fix").transcript(outcome.results[0])["turns"]  # read from the episode's record
    assert episode["prompt_tokens"] > 0 and turns[0]["meta"]["harbor_agent"] == "terminus-2"
    # One door: each of its calls is a step of the record, its tmux keystrokes and the fix among them.
    assert episode["steps"] == len(turns) > 5 and turns[-1]["meta"]["harbor_calls"] == len(turns) - 1
    recorded = json.dumps(turns)
    assert "tmux" in recorded and "send-keys" in recorded and "git apply" in recorded
    trajectory = json.loads((tmp_path / "logs" / f"{task.task_id}__0" / "agent" / "trajectory.json").read_text())
    assert "git apply" in json.dumps(trajectory)


def test_terminus_2_with_a_wrong_fix_gets_grade_zero(tmp_path, swesynth_task):
    outcome, _, episode = _terminus(tmp_path, swesynth_task, ["cd /app && echo '# no fix' >> README.md"], "wrong")
    assert outcome.summary["solved"] == 0 and episode["status"] == "completed" and episode["score"] == 0.0


def test_max_steps_and_the_command_ban_hold_for_harbors_agent(tmp_path, swesynth_task):
    # max_steps counts Harbor's calls: the episode ends truncated, graded, and the agent is stopped.
    _, _, episode = _terminus(tmp_path, swesynth_task, swesynth_task.oracle_commands(), "short", max_steps=4)
    assert episode["end_reason"] == "max_steps" and episode["steps"] == 4 and episode["score"] == 0.0
    # SWE-SYNTH's ban on checksum commands refuses the command Terminus-2 types.
    outcome, _, episode = _terminus(tmp_path, swesynth_task, ["md5sum README.md", *swesynth_task.oracle_commands()],
                                    "banned")
    turns = RunDir(tmp_path / "banned").transcript(outcome.results[0])["turns"]
    refused = [t for t in turns if t.get("refused")]
    assert refused and "md5sum" in json.dumps(refused[0]) and "Command not permitted" in json.dumps(refused[0])
    # The checksum never ran: no 32-hex-digit digest in anything the sandbox printed.
    assert not re.search(r"\b[0-9a-f]{32}\b", json.dumps([t.get("exec") for t in turns]))


@pytest.mark.docker
def test_terminus_2_in_a_docker_sandbox(tmp_path, swesynth_task):
    if subprocess.run(["docker", "image", "inspect", "termgym/base:bookworm"], capture_output=True).returncode:
        pytest.fail("the termgym/base:bookworm image is missing: termgym images build-base")
    outcome, _, episode = _terminus(tmp_path, swesynth_task, swesynth_task.oracle_commands(), "docker",
                                    backend="docker")
    assert episode["status"] == "completed" and episode["score"] == 1.0, episode.get("error")


def test_the_environment_interface_over_a_sandbox(tmp_path):
    # Harbor's BaseEnvironment calls, one by one, on a real bubblewrap sandbox.
    async def scenario(env):
        result = await env.exec("echo $GREETING from $(pwd); exit 3", cwd="/tmp", env={"GREETING": "hi there"})
        assert (result.stdout.strip(), result.return_code) == ("hi there from /tmp", 3)
        (tmp_path / "in.txt").write_text("payload")
        await env.upload_file(tmp_path / "in.txt", "/tmp/up/in.txt")
        await env.download_file("/tmp/up/in.txt", tmp_path / "back" / "out.txt")
        assert (tmp_path / "back" / "out.txt").read_text() == "payload"
        (tmp_path / "tree" / "sub").mkdir(parents=True)
        (tmp_path / "tree" / "sub" / "f").write_text("x")
        await env.upload_dir(tmp_path / "tree", "/tmp/tree")
        await env.download_dir("/tmp/tree", tmp_path / "tree-back")
        assert (tmp_path / "tree-back" / "sub" / "f").read_text() == "x"
        assert await env.is_dir("/tmp/tree") and not await env.is_dir("/tmp/nope")
        slow = await env.exec("sleep 10", timeout_sec=1)
        assert slow.return_code != 0

    with make_sandbox("local", SandboxSpec()) as sandbox:
        sandbox.start()
        env = TermgymSandboxEnvironment(sandbox=sandbox, logs_dir=tmp_path / "trial")
        assert env.type() == "termgym"
        asyncio.run(scenario(env))


def test_an_unknown_harbor_agent_is_named():
    agent = make_agent("harbor", harbor_agent="no-such-agent-q")
    with pytest.raises(ValueError, match="unknown agent 'no-such-agent-q'; Harbor knows: .*terminus-2"):
        agent._build(agent.logs_dir)
    with pytest.raises(ValueError, match="agent_kwargs must be a mapping, not list"):
        make_agent("harbor", agent_kwargs=[1])


# -- Harbor's own trial runner, with termgym's sandbox as an external environment -----------------

SAMPLE = Path(__file__).resolve().parents[2] / "termgym_data" / "harbor" / "samples" / "csv-region-totals"
SOLUTION = (SAMPLE / "solution" / "solve.sh").read_text().split("set -euo pipefail\n", 1)[1]


def _trial(tmp_path, agent, backend="local"):
    from harbor.models.trial.config import EnvironmentConfig, TaskConfig, TrialConfig
    from harbor.trial.trial import Trial

    config = TrialConfig(task=TaskConfig(path=SAMPLE), trials_dir=tmp_path / "trials", agent=agent,
                         environment=EnvironmentConfig(import_path="termgym.agents.harbor:TermgymSandboxEnvironment",
                                                       kwargs={"backend": backend}))

    async def run():
        trial = await Trial.create(config)
        return await trial.run()

    return asyncio.run(run())


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_harbors_trial_runner_and_oracle_on_a_termgym_sandbox(tmp_path, backend):
    from harbor.models.trial.config import AgentConfig

    result = _trial(tmp_path, AgentConfig(name="oracle"), backend)
    assert result.exception_info is None, result.exception_info
    assert result.verifier_result.rewards["reward"] == 1.0


def test_harbors_trial_runner_with_terminus_2_on_a_termgym_sandbox(tmp_path, monkeypatch):
    from harbor.models.trial.config import AgentConfig

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # litellm insists on a key; the scripted server ignores it

    rewards = {}
    for name, commands in (("right", [SOLUTION.strip()]), ("wrong", ["echo '{}' > /app/summary.json"])):
        with TerminusScripted(commands) as server:
            agent = AgentConfig(name="terminus-2", model_name="openai/scripted-1",
                                kwargs={"api_base": server.base_url, **QUIET})
            result = _trial(tmp_path / name, agent)
        assert result.exception_info is None, result.exception_info
        assert len(server.requests) == len(commands) + 2  # the commands, then task_complete twice
        rewards[name] = result.verifier_result.rewards["reward"]
    assert rewards["right"] == 1.0 and rewards["wrong"] < 1.0


def test_terminal_bench_path_end_to_end_a_registered_dataset_with_terminus_2(tmp_path, monkeypatch):
    # `termgym eval termgym/Harbor-v0 --dataset NAME@VERSION --agent harbor`, with a local git repository and
    # registry file standing in for Harbor's registry, and a scripted model for the LLM.
    import shutil

    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLE, repo / "tasks" / SAMPLE.name)
    for args in (["init", "-q"], ["add", "-A"],
                 ["-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "tasks"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps([{"name": "bench", "version": "1.0", "tasks": [
        {"name": SAMPLE.name, "git_url": repo.as_uri(), "git_commit_id": commit, "path": f"tasks/{SAMPLE.name}"}]}]))
    with TerminusScripted([SOLUTION.strip()]) as server:
        outcome = evaluate("termgym/Harbor-v0", agent="harbor", output_dir=tmp_path / "run", progress="off",
                           infra_retries=0, env_kwargs={"dataset": "bench@1.0", "registry": str(registry),
                                                        "backend": "local", "max_steps": 400},
                           agent_options={"harbor_agent": "terminus-2", "model": "scripted-1",
                                          "base_url": server.base_url, "logs_dir": str(tmp_path / "logs"),
                                          "agent_kwargs": QUIET})
    assert outcome.summary["solved"] == 1, outcome.results[0].error
    job = json.loads((tmp_path / "run" / "result.json").read_text())
    trial = job["trial_results"][0]
    assert trial["source"] == "bench" and trial["task_id"]["git_commit_id"] == commit
    assert job["stats"]["evals"]["terminus-2__scripted-1__bench"]["metrics"][0]["reward"] == 1.0
    from harbor.models.job.result import JobResult

    assert JobResult.model_validate(job).trial_results[0].reward_valid  # Harbor's own reading
