"""A `termgym eval` killed with SIGKILL and started again resumes and ends with the same totals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from termgym.evaluation import evaluate
from termgym.evaluation.results import RunDir
from termgym.evaluation.runner import RunMismatch

HERE = Path(__file__).resolve().parent
TOTALS = ("episodes", "completed", "agent_errors", "infra_errors", "scored", "solved", "solve_rate", "mean_score",
          "pass_at_k", "steps_mean", "format_errors", "prompt_tokens", "completion_tokens", "per_task")


def _eval_command(scripted, server, out: Path) -> list[str]:
    return [sys.executable, "-m", "termgym.cli", "eval", scripted.ENV_ID, "--import", "scripted_model",
            "--agent", "openai", "--base-url", server.base_url, "--model", "scripted-1",
            "--task-ids", ",".join(scripted.DETERMINISTIC), "-k", "3", "-n", "2", "-o", str(out), "--progress", "lines"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}


def test_killed_eval_resumes_to_the_same_totals(tmp_path, scripted):
    with scripted.ScriptedModel(delay=0.15) as server:
        killed = tmp_path / "killed"
        proc = subprocess.Popen(_eval_command(scripted, server, killed), env=_env(), start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        episodes = killed / "episodes"
        deadline = time.monotonic() + 120
        while len(list(episodes.glob("*.json"))) < 5:
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "the eval made no progress"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)  # the eval and its sandboxes, mid-episode
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        before = {p.name: p.read_text() for p in episodes.glob("*.json")}
        total = len(scripted.DETERMINISTIC) * 3
        assert 5 <= len(before) < total

        resumed = subprocess.run(_eval_command(scripted, server, killed), env=_env(), capture_output=True,
                                 text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert f"skipped {len(before)} already finished" in resumed.stdout
        # Finished episodes were not run again.
        assert all((episodes / name).read_text() == text for name, text in before.items())

        straight = evaluate(scripted.ENV_ID, agent="openai", output_dir=tmp_path / "straight",
                            task_ids=scripted.DETERMINISTIC, attempts=3, concurrency=6, progress=False,
                            agent_options={"base_url": server.base_url, "model": "scripted-1"})
    summary = json.loads((killed / "summary.json").read_text())
    assert {k: summary[k] for k in TOTALS} == {k: straight.summary[k] for k in TOTALS}
    assert summary["episodes"] == total and summary["solved"] == 3 * 4
    # Every result, from before the kill or after, reads its transcript from the one recording.
    store = RunDir(killed)
    for result in store.episodes():
        assert store.transcript(result)["record"]["task_id"] == result.task_id


def test_resuming_into_a_run_of_something_else_is_refused(tmp_path, scripted):
    out = tmp_path / "run"
    evaluate(scripted.ENV_ID, agent="oracle", output_dir=out, task_ids="right-1", progress=False)
    with pytest.raises(RunMismatch, match="agent: 'oracle' -> 'nop'"):
        evaluate(scripted.ENV_ID, agent="nop", output_dir=out, task_ids="right-1", progress=False)
    # The same configuration with more tasks resumes and only runs the new ones.
    outcome = evaluate(scripted.ENV_ID, agent="oracle", output_dir=out, task_ids="right-1,right-2", progress=False)
    assert (outcome.ran, outcome.skipped) == (1, 1)
    assert json.loads((out / "config.json").read_text())["task_ids"] == ["right-1", "right-2"]


def test_a_resumed_run_appends_after_a_torn_record(tmp_path, scripted):
    out = tmp_path / "run"
    evaluate(scripted.ENV_ID, agent="oracle", output_dir=out, task_ids="right-1", progress=False)
    with open(out / "episodes.jsonl", "a") as handle:  # a record a killed run left half written
        handle.write('{"format": "termgym.episode/1", "episode_id": "torn')
    outcome = evaluate(scripted.ENV_ID, agent="oracle", output_dir=out, task_ids="right-1,right-2", progress=False)
    assert (outcome.ran, outcome.skipped) == (1, 1)
    assert [outcome.run_dir.transcript(r)["record"]["task_id"] for r in outcome.results] == ["right-1", "right-2"]


def test_rerun_retries_infra_failures_only(tmp_path, scripted):
    out = tmp_path / "run"
    with scripted.ScriptedModel() as server:
        options = {"base_url": server.base_url, "model": "m", "timeout": 5.0, "max_retries": 0}
        first = evaluate(scripted.ENV_ID, agent="openai", output_dir=out, task_ids="right-1,down",
                         agent_options=options, infra_retries=0, progress=False)
        assert [r.status for r in first.results] == ["infra_error", "completed"]  # sorted: down, right-1
        second = evaluate(scripted.ENV_ID, agent="openai", output_dir=out, task_ids="right-1,down",
                          agent_options=options, infra_retries=0, progress=False)
    assert (second.ran, second.skipped) == (1, 1)
    assert [r.task_id for r in second.results if r.status == "infra_error"] == ["down"]
