"""The `termgym eval`, `termgym compare` commands and the compare_models API."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from termgym.cli import main as cli_main
from termgym.evaluation import compare_models, evaluate
from termgym.evaluation.runner import list_task_ids


@pytest.mark.parametrize("argv, message", [
    (["eval", "nope/Missing-v0", "--agent", "oracle"], "unknown environment 'nope/Missing-v0'"),
    (["eval", "evaltest/Scripted-v0", "--agent", "oracle", "--task-ids", "right-9"], "task 'right-9' is not in"),
    (["eval", "evaltest/Scripted-v0", "--agent", "oracle", "-k", "0"], "attempts (-k) must be at least 1"),
    (["eval", "evaltest/Scripted-v0", "--agent", "oracle", "--split", "dev"], "has no split 'dev'"),
    (["eval", "evaltest/Scripted-v0", "--agent", "gpt"], "unknown agent 'gpt'"),
    (["eval", "evaltest/Scripted-v0", "--agent-arg", "nokey"], "--agent-arg expects KEY=VALUE"),
    (["eval", "evaltest/Scripted-v0", "--agent", "oracle", "--import", "no_such_mod_q"], "--import no_such_mod_q"),
    (["compare", "a"], "compare needs at least two runs"),
])
def test_bad_arguments_exit_2_with_a_message(argv, message, tmp_path, capsys, scripted):
    assert cli_main([*argv, "-o", str(tmp_path / "run")] if argv[0] == "eval" else argv) == 2
    assert message in capsys.readouterr().err


def test_a_run_where_every_episode_is_an_agent_error_exits_4(tmp_path, capsys, scripted):
    run = tmp_path / "run"
    argv = ["eval", scripted.ENV_ID, "--agent", "custom_agents:CrashingAgent", "--task-ids", "right-1,right-2",
            "-o", str(run), "--quiet"]
    assert cli_main(argv) == 4
    assert "every episode (2) ended in an agent error" in capsys.readouterr().err
    # the same tasks with an agent that runs: an ordinary exit
    assert cli_main(["eval", scripted.ENV_ID, "--agent", "oracle", "--task-ids", "right-1", "-o",
                     str(tmp_path / "oracle"), "--quiet"]) == 0


def test_eval_and_compare_on_the_command_line(tmp_path, capsys, scripted):
    a, b = tmp_path / "oracle", tmp_path / "nop"
    assert cli_main(["eval", scripted.ENV_ID, "--agent", "oracle", "--task-ids", "right-1,explore,wrong-answer",
                     "-k", "2", "-o", str(a), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "solve rate 100.0%  (6/6)" in out and "pass@1 100.0%  pass@2 100.0%" in out
    assert cli_main(["eval", scripted.ENV_ID, "--agent", "nop", "--task-ids", "right-1,explore",
                     "-o", str(b), "--quiet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["solved"] == 0

    assert cli_main(["compare", str(a), str(b)]) == 0
    table = capsys.readouterr().out
    assert "nop - oracle: -1.000" in table and "tied on 0 of 2 tasks" in table
    assert cli_main(["compare", str(a), str(b), "--json", "--label", "A", "--label", "B"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["label"] for r in data["runs"]] == ["A", "B"] and data["common_tasks"] == 2
    (diff,) = data["differences"]
    assert diff["mean_diff"] == -1.0 and diff["losses"] == 2
    rows = {t["task_id"]: t["values"] for t in data["tasks"]}
    assert rows["wrong-answer"] == [1.0, None]  # only in the first run


def test_compare_models_runs_endpoints_and_reuses_run_dirs(tmp_path, scripted_server, scripted):
    oracle_run = tmp_path / "oracle-run"
    evaluate(scripted.ENV_ID, agent="oracle", output_dir=oracle_run, task_ids="right-1,explore,wrong-answer",
             progress=False)
    comparison = compare_models(
        [str(oracle_run), {"model": "scripted-1", "label": "model-a", "timeout": 2.0}],
        scripted.ENV_ID, task_ids=["right-1", "explore", "wrong-answer"], base_url=scripted_server.base_url,
        output_dir=tmp_path / "cmp", progress=False)
    assert [r.label for r in comparison.runs] == ["oracle-run", "model-a"]
    assert (tmp_path / "cmp" / "model-a" / "summary.json").exists()
    (diff,) = comparison.differences
    # The scripted model fails wrong-answer, which the oracle solves.
    assert diff["mean_diff"] == pytest.approx(-1 / 3) and (diff["wins"], diff["losses"], diff["ties"]) == (0, 1, 2)
    assert "model-a - oracle-run: -0.333" in str(comparison)


def test_seed_000_aliases_and_numeric_task_ids(tmp_path, scripted):
    import termgym
    from termgym import CommandTask, ListSuite

    tasks = [CommandTask(str(i), f"task {i}", grade_command=f"test -f f{i}", oracle=[f"touch f{i}"])
             for i in range(100, 112)]
    termgym.register_suite("evaltest/Numbered-v0", ListSuite(tasks), max_steps=3)
    outcome = evaluate("evaltest/Numbered-v0", agent="oracle", output_dir=tmp_path / "run", task_ids="101-103,110",
                       concurrency=4, progress=False)
    assert [r.task_id for r in outcome.results] == ["101", "102", "103", "110"]



def test_a_suite_that_cannot_load_is_a_clear_error(tmp_path):
    import termgym

    termgym.register_suite("evaltest/Broken-v0", "scripted_model:no_such_factory")
    with pytest.raises(ValueError, match="cannot make evaltest/Broken-v0 with {}: ValueError: suite 'scripted_model:no_such_factory': "
                                         "module 'scripted_model' has no attribute 'no_such_factory'"):
        evaluate("evaltest/Broken-v0", agent="oracle", output_dir=tmp_path / "run", progress=False)


@pytest.mark.slow
def test_swesynth_oracle_solves_its_tasks(tmp_path):
    try:
        ids = list_task_ids(gym.spec("termgym/SweSynth-v0"), {"path": "toy"}, None)
    except ValueError as exc:
        pytest.skip(f"the bundled SWE-SYNTH tasks are not available: {exc}")
    outcome = evaluate("swe-synth", agent="oracle", output_dir=tmp_path / "run", limit=2,
                       concurrency=2, progress=False, env_kwargs={"path": "toy"})
    assert len(outcome.results) == min(2, len(ids))
    for result in outcome.results:
        assert result.status == "completed" and result.passed, result.grade
        assert result.grade.get("all_passed") is True
