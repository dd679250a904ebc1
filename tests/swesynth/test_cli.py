"""``termgym swesynth`` commands, and generation on a third-party project downloaded from PyPI."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile

import pytest

from termgym.archives import extract_all
from termgym.cli import main
from termgym.commands.swesynth import ProgressBar
from termgym.env import oracle_actions
from termgym.factory.swesynth.generate import Stats
from termgym.factory.swesynth.report import check_report
from termgym.tasks.swesynth import default_suite
from termgym.tasks.swesynth.suite import SweSynthSuite


def test_show_a_bundled_task_by_id_and_by_path(capsys):
    suite = default_suite("toy")
    task_id = suite.task_ids()[0]
    assert main(["swesynth", "show", task_id, "--suite", "toy"]) == 0
    out = capsys.readouterr().out
    record = suite.record(task_id)
    assert task_id in out and record.problem_statement.strip()[:30] in out and "--- fix patch (oracle) ---" in out
    folder = suite._folders[task_id]
    assert main(["swesynth", "show", str(folder), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["task_id"] == task_id
    assert main(["swesynth", "show", "no-such-task-0", "--suite", "toy"]) == 1
    assert "no task 'no-such-task-0'" in capsys.readouterr().err


def test_generate_command_on_a_repository(repo_copy, tmp_path, capsys):
    repo, _ = repo_copy
    out = tmp_path / "cli-suite"
    # The host runs `python`; the sandbox (checked at generation: oracle 1, unfixed 0) has `python3`.
    code = main(["swesynth", "generate", "--repo", str(repo), "--test-cmd", "python -m pytest -q", "--n", "1",
                 "--sandbox-test-cmd", "python3 -m pytest -q",
                 "--seed", "3", "--out", str(out), "--bug-types", "wrong-operator", "off-by-one"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "wrote 1 task(s)" in captured.out and "yield" in captured.out and "tasks/min" in captured.out
    assert "1/1 tasks" in captured.err  # the progress bar (plain lines when not a terminal)
    [task_dir] = [p for p in out.iterdir() if (p / "task.json").is_file()]
    assert json.loads((task_dir / "task.json").read_text())["bug"]["bug_types"][0] in ("wrong-operator", "off-by-one")
    assert main(["swesynth", "generate", "--repo", str(tmp_path / "missing"), "--test-cmd", "x", "--n", "1",
                 "--out", str(out)]) == 1
    assert "neither a directory nor a git URL" in capsys.readouterr().err
    # a batch for a suite that is not one: named before anything runs
    assert main(["swesynth", "generate", "--repo", str(repo), "--test-cmd", "x", "--n", "1", "--out", str(out),
                 "--extends", str(tmp_path / "nowhere")]) == 1
    assert "--extends: " in (err := capsys.readouterr().err) and "nowhere/suite.json: no suite.json" in err
    # --resume reaches generate, which carries runs on only in a compact suite (named before anything runs)
    assert main(["swesynth", "generate", "--repo", str(repo), "--test-cmd", "x", "--n", "1", "--out", str(out),
                 "--resume"]) == 1
    assert "resume needs storage='compact'" in capsys.readouterr().err


def test_progress_bar_draws_in_place_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    bar = ProgressBar(stream)
    stats = Stats(wanted=4, attempted=3, kept=2)
    bar(stats)
    stats.kept = 4
    bar(stats)
    text = stream.getvalue()
    assert text.startswith("\r[###############...............] 2/4 tasks") and text.endswith("\n")
    assert text.count("\r") == 2


@pytest.mark.slow
def test_generation_on_a_pypi_sdist(tmp_path, capsys):
    """The issue's third-party demonstration: a project nobody here bundled or named in the code
    (inflection, from its PyPI sdist) through the same ``termgym swesynth generate`` command; the
    tasks then play through ``gym.make``."""
    import gymnasium as gym

    import termgym  # noqa: F401  (registers the envs)

    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                           "inflection==0.5.1", "-d", str(tmp_path)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.skip(f"PyPI is not reachable here: {proc.stderr.strip()[-200:]}")
    with tarfile.open(next(tmp_path.glob("inflection-*.tar.gz"))) as tar:
        extract_all(tar, tmp_path)
    repo = next(p for p in tmp_path.iterdir() if p.is_dir())
    out = tmp_path / "out"
    assert main(["swesynth", "generate", "--repo", str(repo), "--test-cmd", "python3 -m pytest -q", "--n", "2",
                 "--seed", "0", "--out", str(out), "--name", "inflection", "--max-attempts", "12"]) == 0
    assert "wrote 2 task(s)" in capsys.readouterr().out
    suite = SweSynthSuite(out, behaviour="any")  # every task it wrote (the default serves the checked ones)
    assert len(suite.task_ids()) == 2
    # generate tries a check for every task it keeps: each record holds one or says why not
    assert all(record.validation.get("behaviour") for record in map(suite.record, suite.task_ids()))
    assert SweSynthSuite(out).behaviour == "required"
    for task_id in suite.task_ids():
        record = suite.record(task_id)
        assert record.target_tests and record.bug_patch.startswith("diff --git a/inflection/")
        assert record.validation and record.difficulty in ("easy", "medium", "hard")
        assert not check_report(record.problem_statement, target_tests=record.target_tests,
                                patch=record.bug_patch, repo=repo)
    env = gym.make("termgym/SweSynth-v0", path=str(out), max_steps=10)
    try:
        task_id = SweSynthSuite(out).task_ids()[0]  # one gym.make serves by default
        env.reset(seed=0, options={"task_id": task_id})
        for message in oracle_actions(env.unwrapped):
            _, reward, terminated, truncated, info = env.step(message)
            if terminated or truncated:
                break
        assert info["task_id"] == task_id and info["grade"]["all_passed"] and reward == 1.0
    finally:
        env.close()


def test_summary_prints_the_table_and_rewrites_it_in_a_docs_file(tmp_path, capsys):
    from termgym.factory.swesynth.bundle import SUITE_DIR

    docs = tmp_path / "guide.md"
    docs.write_text("# Guide\n\n<!-- swesynth-summary:begin -->\nold table\n<!-- swesynth-summary:end -->\n\nafter\n")
    assert main(["swesynth", "summary", str(SUITE_DIR), "--docs", str(docs)]) == 0
    table = capsys.readouterr().out
    assert "| project | licence |" in table
    text = docs.read_text()
    assert "old table" not in text and table.strip() in text
    assert text.startswith("# Guide\n") and text.endswith("\nafter\n")
    assert main(["swesynth", "summary", str(tmp_path)]) == 1
    assert "holds no suite.json" in capsys.readouterr().err
