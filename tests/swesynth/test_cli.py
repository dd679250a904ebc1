"""``termgym swesynth`` commands, and generation on a third-party project downloaded from PyPI."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile

import pytest

from termgym.cli import main
from termgym.commands.swesynth import ProgressBar
from termgym.tasks.swesynth import default_suite
from termgym.tasks.swesynth.generate import Stats, generate


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
def test_generation_on_a_pypi_sdist(tmp_path):
    """The issue's third-party demonstration: toolz (not written here) from its PyPI sdist."""
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                           "toolz==1.2.0", "-d", str(tmp_path)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.skip(f"PyPI is not reachable here: {proc.stderr.strip()[-200:]}")
    with tarfile.open(next(tmp_path.glob("toolz-*.tar.gz"))) as tar:
        tar.extractall(tmp_path, filter="data")
    repo = next(p for p in tmp_path.iterdir() if p.is_dir())
    result = generate(repo, "python -m pytest -q", n=2, seed=0, out=tmp_path / "out", name="toolz",
                      workers=2, source_dirs=["toolz"], max_attempts=8, sandbox_test_command="python3 -m pytest -q")
    assert result.stats.kept == 2 and result.stats.required_tests >= 150
    for record in result.records:
        assert record.target_tests and record.bug_patch.startswith("diff --git a/toolz/")
        assert "toolz" not in record.problem_statement.lower().split()
    print(json.dumps(result.stats.to_dict()))
