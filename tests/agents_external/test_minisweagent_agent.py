"""mini-swe-agent's own DefaultAgent on termgym tasks, graded and recorded by termgym.

mini-swe-agent is the real package (the ``bench`` extra pins it); its model is its own
``DeterministicModel`` (a scripted list of replies) or its litellm model classes talking to the
scripted OpenAI-compatible server on loopback.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("minisweagent", reason="pip install 'termgym[bench]' for mini-swe-agent")

from minisweagent.models.test_models import make_output  # noqa: E402

from termgym.agents import make_agent  # noqa: E402
from termgym.agents.minisweagent import MiniSweAgent  # noqa: E402
from termgym.cli import main as cli_main  # noqa: E402
from termgym.evaluation import evaluate  # noqa: E402

SWESYNTH = "termgym/SweSynth-v0"
TOY = {"path": "toy"}  # the toy suite: tasks from the projects written for termgym
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def _outputs(*commands: str) -> list[dict]:
    # A mini-swe-agent model message: its text, and the actions its parser extracted from it.
    return [make_output(f"THOUGHT: step {i}.\n\n```mswea_bash_command\n{c}\n```", [{"command": c}])
            for i, c in enumerate(commands)]


def _run(tmp_path, task, outputs, name, **options):
    return evaluate(SWESYNTH, agent="minisweagent", output_dir=tmp_path / name, task_ids=task.task_id,
                    split="all", progress="off", record=True, env_kwargs=TOY,
                    agent_options={"model_class": "deterministic", "model_config": {"outputs": outputs},
                                   **options})


def _episode(tmp_path, name, task):
    return json.loads((tmp_path / name / "episodes" / f"{task.task_id}__a0.json").read_text())


def test_default_agent_replaying_the_fix_solves_a_swesynth_task(tmp_path, swesynth_task):
    task = swesynth_task
    outputs = _outputs("git status --short", *task.oracle_commands(), SUBMIT)
    outcome = _run(tmp_path, task, outputs, "fix", trajectory_dir=str(tmp_path / "traj"))
    assert outcome.summary["solved"] == 1 and outcome.summary["agent_errors"] == 0
    episode = _episode(tmp_path, "fix", task)
    assert episode["passed"] is True and episode["score"] == 1.0 and episode["end_reason"] == "submitted"
    assert episode["grade"]["target_result"].split("/")[0] == episode["grade"]["target_result"].split("/")[1]
    # Each mini-swe-agent action became one termgym step; the model's own text is kept with it.
    assert [t["action"]["command"] for t in episode["turns"]] == ["git status --short", *task.oracle_commands(),
                                                                   SUBMIT]
    assert episode["turns"][0]["meta"]["model_content"].startswith("THOUGHT: step 0.")
    assert episode["turns"][0]["exec"]["exit_code"] == 0
    # termgym's recording and mini-swe-agent's own trajectory both exist.
    (record,) = [json.loads(line) for line in (tmp_path / "fix" / "episodes.jsonl").read_text().splitlines()]
    assert record["task_id"] == task.task_id and record["protocol"] == "minisweagent"
    trajectory = json.loads((tmp_path / "traj" / f"{task.task_id}__0.traj.json").read_text())
    assert trajectory["info"]["exit_status"] == "Submitted"
    assert trajectory["info"]["config"]["environment_type"].endswith("TermgymEnvironment")
    # mini-swe-agent's templates were rendered with the sandbox's uname (Linux), its task is the instruction.
    assert "Linux" in trajectory["messages"][1]["content"]
    assert task.instruction[:80] in trajectory["messages"][1]["content"]
    assert json.loads(trajectory["messages"][3]["content"])["returncode"] == 0  # mini.yaml's observation


def test_a_wrong_fix_gets_termgym_grade_zero(tmp_path, swesynth_task):
    task = swesynth_task
    outcome = _run(tmp_path, task, _outputs("echo '# not a fix' >> README.md", SUBMIT), "wrong")
    episode = _episode(tmp_path, "wrong", task)
    assert outcome.summary["solved"] == 0 and episode["status"] == "completed"
    assert episode["passed"] is False and episode["score"] == 0.0 and episode["end_reason"] == "submitted"


def test_mini_swe_agents_own_step_limit_ends_the_episode_with_a_grade(tmp_path, swesynth_task):
    task = swesynth_task
    _run(tmp_path, task, _outputs("ls", "ls", "ls"), "limit", step_limit=2)
    episode = _episode(tmp_path, "limit", task)
    assert episode["status"] == "completed" and episode["passed"] is False
    assert episode["turns"][-1]["meta"]["minisweagent_exit_status"] == "LimitsExceeded"
    assert episode["steps"] == 3  # two commands, then the submission that ends the termgym episode


def test_termgym_step_limit_stops_mini_swe_agent(tmp_path, swesynth_task):
    task = swesynth_task
    outcome = evaluate(SWESYNTH, agent="minisweagent", output_dir=tmp_path / "cut", task_ids=task.task_id,
                       split="all", progress="off", env_kwargs={**TOY, "max_steps": 2},
                       agent_options={"model_class": "deterministic",
                                      "model_config": {"outputs": _outputs("ls", "ls", "ls", "ls")}})
    episode = _episode(tmp_path, "cut", task)
    assert outcome.summary["completed"] == 1 and episode["end_reason"] == "max_steps" and episode["steps"] == 2


def test_the_litellm_model_class_through_an_openai_compatible_server(tmp_path, scripted_server, scripted, capsys):
    # mini-swe-agent's text-based litellm model, pointed at the loopback server with --base-url.
    regex = r"```bash\s*\n(.*?)\n```"
    code = cli_main(["eval", scripted.ENV_ID, "--agent", "minisweagent", "--model", "scripted-1",
                     "--base-url", scripted_server.base_url, "--task-ids", "explore,wrong-answer",
                     "--agent-arg", "model_class=litellm_textbased",
                     "--agent-arg", "model_config=" + json.dumps({"action_regex": regex}),
                     "-o", str(tmp_path / "run"), "--quiet", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0, summary
    assert {t["task_id"]: t["passed"] for t in summary["per_task"]} == {"explore": 1, "wrong-answer": 0}
    assert summary["prompt_tokens"] > 0  # litellm's usage reached termgym's results
    first = next(r for r in scripted_server.requests if r["task"] == "explore")["body"]
    assert first["model"] == "scripted-1"
    assert first["messages"][0]["content"].startswith("You are a helpful assistant that can interact with a computer.")


@pytest.mark.parametrize("options, message", [
    ({"config": "no_such_config_q"}, "minisweagent config 'no_such_config_q': no such file"),
    ({"model": "m", "model_config": ["x"]}, "model_config must be a mapping, not list"),
    ({}, "minisweagent: no model given"),
    ({"model": "m", "temperature": 0.1}, "does not take option(s) temperature"),
])
def test_bad_options_are_named(options, message):
    with pytest.raises(ValueError) as excinfo:
        make_agent("minisweagent", **options)
    assert message in str(excinfo.value)


def test_a_bad_model_class_is_an_agent_error_naming_it(tmp_path, swesynth_task):
    outcome = evaluate(SWESYNTH, agent=MiniSweAgent(model="m", model_class="no.such.ModelQ"),
                       output_dir=tmp_path / "bad", task_ids=swesynth_task.task_id, split="all", progress="off",
                       env_kwargs=TOY)
    episode = _episode(tmp_path, "bad", swesynth_task)
    assert outcome.summary["agent_errors"] == 1
    assert "cannot build the model" in episode["error"]["message"] and "no.such.ModelQ" in episode["error"]["message"]


def test_the_episode_timeout_stops_mini_swe_agents_thread(tmp_path, swesynth_task):
    import threading

    # The model "thinks" for 3 s (the deterministic model's /sleep action), past the 1 s episode cap.
    outputs = [make_output("", [{"command": "/sleep 3"}]), *_outputs("ls", "ls")]
    outcome = evaluate(SWESYNTH, agent="minisweagent", output_dir=tmp_path / "t", task_ids=swesynth_task.task_id,
                       split="all", progress="off", episode_timeout=1, env_kwargs=TOY,
                       agent_options={"model_class": "deterministic", "model_config": {"outputs": outputs}})
    episode = _episode(tmp_path, "t", swesynth_task)
    assert outcome.summary["agent_errors"] == 1 and episode["end_reason"] == "episode_timeout"
    assert not [t for t in threading.enumerate() if t.name.startswith("minisweagent-") and t.is_alive()]


def test_the_toolcall_protocol_submits_through_mini_swe_agents_own_sentinel(tmp_path, swesynth_task):
    # toolcall has no output sentinel: mini-swe-agent's environment sees it and the adapter submits.
    task = swesynth_task
    evaluate(SWESYNTH, agent="minisweagent", output_dir=tmp_path / "tc", task_ids=task.task_id, split="all",
             progress="off", env_kwargs={**TOY, "protocol": "toolcall"},
             agent_options={"model_class": "deterministic",
                            "model_config": {"outputs": _outputs(*task.oracle_commands(), SUBMIT)}})
    episode = _episode(tmp_path, "tc", task)
    assert episode["passed"] is True and episode["end_reason"] == "submitted"
    assert episode["turns"][-1]["meta"]["minisweagent_exit_status"] == "Submitted"
    assert [t["action"]["kind"] for t in episode["turns"]] == ["command", "command", "submit"]


def test_the_terminus_protocol_is_refused_with_the_reason(tmp_path, swesynth_task):
    evaluate(SWESYNTH, agent="minisweagent", output_dir=tmp_path / "tm", task_ids=swesynth_task.task_id,
             split="all", progress="off", env_kwargs={**TOY, "protocol": "terminus"},
             agent_options={"model_class": "deterministic", "model_config": {"outputs": _outputs("ls")}})
    episode = _episode(tmp_path, "tm", swesynth_task)
    assert episode["status"] == "agent_error" and "not keystrokes" in episode["error"]["message"]
