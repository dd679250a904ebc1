"""The core CLI commands: list, doctor, play."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def run_cli(*args: str, stdin: str = "", path: Path | None = None) -> subprocess.CompletedProcess:
    dirs = [str(HERE)] + ([str(path)] if path else []) + [os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(dirs))
    return subprocess.run([sys.executable, "-m", "termgym.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=300, env=env)


def test_list_shows_builtin_ids():
    result = run_cli("list", "--no-counts")
    assert result.returncode == 0
    for env_id in ("termgym/SweSynth-v0", "termgym/LiveWeb-v0", "termgym/Harbor-v0"):
        assert env_id in result.stdout


def test_doctor_reports_the_local_backend_working():
    result = run_cli("doctor")
    assert result.returncode == 0
    assert "local" in result.stdout and "bubblewrap sandbox works" in result.stdout


def test_play_runs_typed_commands_and_submission(tmp_path):
    # "module:EnvId" makes gym.make import the module that registers the id
    (tmp_path / "cli_registration.py").write_text(
        "import termgym\nfrom hello_tasks import suite\ntermgym.register_suite('clitest/Hello-v0', suite, max_steps=5)\n")
    result = run_cli("play", "cli_registration:clitest/Hello-v0", "--task-id", "hello-2",
                     stdin="ls\necho 2 > hello.txt\ncat hello.txt\nsubmit\n", path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "task hello-2" in result.stdout
    assert "episode over (submitted): reward 1.0" in result.stdout
    # the oracle plays through the same loop; Ctrl-D (end of input) stops an episode ungraded
    oracle = run_cli("play", "cli_registration:clitest/Hello-v0", "--task-id", "hello-1", "--oracle", path=tmp_path)
    assert oracle.returncode == 0, oracle.stderr
    assert "echo 1 > hello.txt" in oracle.stdout and "episode over (submitted): reward 1.0" in oracle.stdout
    quit_early = run_cli("play", "cli_registration:clitest/Hello-v0", "--task-id", "hello-1", stdin="ls\n",
                         path=tmp_path)
    assert quit_early.returncode == 0 and "episode over" not in quit_early.stdout


def test_help_lists_every_subcommand():
    result = run_cli("--help")
    for command in ("list", "play", "doctor", "eval", "images", "gc"):
        assert command in result.stdout
