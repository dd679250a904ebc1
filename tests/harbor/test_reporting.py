"""Reporting as Harbor does: a job ``result.json`` in Harbor's schema (checked with Harbor's own
models when Harbor's venv exists), ``compare`` across a termgym run and a Harbor job,
``--timeout-multiplier``, ``eval --help`` naming every agent, ``list`` counting tasks once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from termgym.agents import AGENTS
from termgym.cli import main
from termgym.evaluation import evaluate
from termgym.tasks.harbor import SAMPLES_DIR, HarborSuite, load_task
from termgym.tasks.harbor.trial import run_trial

HARBOR_PY = Path(os.environ.get("TERMGYM_HARBOR_VENV", Path.home() / ".cache/termgym/harbor-venv")) / "bin/python"


def _copy_samples(root: Path, names: list[str]) -> Path:
    for name in names:
        shutil.copytree(SAMPLES_DIR / name, root / name)
    return root


@pytest.fixture
def harbor_run(tmp_path, make_task, tasks_root, local_backend):
    """An oracle run over two samples (one with several reward keys) and a task without a valid reward."""
    _copy_samples(tasks_root, ["csv-region-totals", "log-error-codes"])
    make_task("no-reward", test_sh="#!/bin/bash\necho no reward file\n")
    outcome = evaluate("termgym/Harbor-v0", agent="oracle", output_dir=tmp_path / "run", progress="off",
                       env_kwargs={"tasks_dir": str(tasks_root), "backend": local_backend}, infra_retries=0)
    return outcome, json.loads((tmp_path / "run" / "result.json").read_text())


def test_the_job_result_has_harbors_fields_and_per_key_means(harbor_run):
    outcome, job = harbor_run
    assert job["schema_version"] == 1 and job["n_total_trials"] == 3 == len(job["trial_results"])
    stats = job["stats"]
    assert stats["n_completed_trials"] == 3 and stats["n_errored_trials"] == 1
    evals = stats["evals"]["oracle__adhoc"]  # Harbor's key: agent__dataset (no dataset: adhoc)
    assert evals["n_trials"] == 2 and evals["n_errors"] == 1  # the trial without a reward is an error, not a 0
    # Harbor's mean: several keys across the trials, so one mean per key (a key a trial lacks counts 0).
    mean = evals["metrics"][0]
    assert mean["reward"] == 1.0 and mean["valid_json"] == pytest.approx(0.5) and set(mean) >= {"units", "revenue"}
    assert evals["reward_stats"]["reward"] == {"1.0": ["csv-region-totals__a0", "log-error-codes__a0"]}
    trials = {t["task_name"]: t for t in job["trial_results"]}
    assert trials["no-reward"]["verifier_result"] is None
    assert "neither /logs/verifier/reward.txt" in trials["no-reward"]["exception_info"]["exception_message"]
    assert trials["log-error-codes"]["verifier_result"] == {"rewards": {"reward": 1.0}}
    assert trials["csv-region-totals"]["task_id"]["path"].endswith("/csv-region-totals")
    assert len(trials["csv-region-totals"]["task_checksum"]) == 64
    assert outcome.summary["no_valid_reward"] == 1 and outcome.summary["mean_score"] == 1.0


@pytest.mark.skipif(not HARBOR_PY.is_file(), reason="Harbor's venv (scripts/setup-harbor.sh) is not here")
def test_the_job_result_validates_against_harbors_own_models(harbor_run, tmp_path):
    path = tmp_path / "run" / "result.json"
    check = ("import sys, json; from harbor.models.job.result import JobResult\n"
             "job = JobResult.model_validate_json(open(sys.argv[1]).read())\n"
             "assert len(job.trial_results) == 3\n"
             "valid = sorted(t.task_name for t in job.trial_results if t.reward_valid)\n"
             "print(json.dumps({'valid': valid, 'errored': job.stats.n_errored_trials}))\n")
    done = subprocess.run([str(HARBOR_PY), "-c", check, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    # Harbor's own reading of the file: which trials have a valid reward.
    assert json.loads(done.stdout) == {"valid": ["csv-region-totals", "log-error-codes"], "errored": 1}


def test_compare_reads_a_harbor_job_beside_a_termgym_run(harbor_run, tmp_path, capsys):
    job_dir = tmp_path / "harbor-job"
    job_dir.mkdir()
    job = json.loads((tmp_path / "run" / "result.json").read_text())
    for trial in job["trial_results"]:  # the Harbor job scored one task lower
        if trial["task_name"] == "log-error-codes":
            trial["verifier_result"] = {"rewards": {"reward": 0.0}}
    (job_dir / "result.json").write_text(json.dumps(job))
    assert main(["compare", str(tmp_path / "run"), str(job_dir), "--json"]) == 0
    comparison = json.loads(capsys.readouterr().out)
    values = {t["task_id"]: t["values"] for t in comparison["tasks"]}
    assert values["log-error-codes"] == [1.0, 0.0] and values["csv-region-totals"] == [1.0, 1.0]
    assert comparison["differences"][0]["mean_diff"] == pytest.approx(-0.5)
    (tmp_path / "nothing-here").mkdir()
    assert main(["compare", str(tmp_path / "run"), str(tmp_path / "nothing-here")]) == 2
    assert "is not a termgym run directory" in capsys.readouterr().err


def test_timeout_multiplier_scales_the_agent_timeout(make_task, local_backend):
    task_dir = make_task("slow-oracle", toml='schema_version = "1.1"\n[agent]\ntimeout_sec = 2.0\n',
                         solve_sh="#!/bin/bash\nsleep 3\necho ok > /app/done.txt\n")
    plain = run_trial(load_task(task_dir), "oracle", backend=local_backend)
    assert plain.agent_timed_out and plain.score == 0.0
    task = load_task(task_dir)
    task.configure_run(timeout_multiplier=3.0)
    assert task.time_limit == 6.0 and task.verifier_timeout == 1800.0
    scaled = run_trial(task, "oracle", backend=local_backend)
    assert not scaled.agent_timed_out and scaled.score == 1.0
    with pytest.raises(ValueError, match="timeout_multiplier must be a positive number, got 0"):
        HarborSuite(timeout_multiplier=0)


def test_eval_help_lists_every_agent(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in AGENTS:
        assert f"{name}:" in text
    assert "--dataset NAME@VERSION" in text and "--timeout-multiplier" in text and "--force-build" in text


def test_list_counts_each_harbor_task_once_and_shows_every_split(capsys):
    assert main(["list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("termgym/Harbor-v0"))
    assert line.split()[2] == str(len(os.listdir(SAMPLES_DIR)))
    assert "train=9" in line and "test=9" in line and "all=9" in line and "local=6" in line
