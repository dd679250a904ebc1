"""The holes around a SWE-SYNTH grade: what the agent leaves running, and who a failed run blames.

Real bundled tasks in real bubblewrap sandboxes, graded by their repositories' tests:

* busy loops the agent leaves behind (several, detached with ``setsid``/``nohup``, double-forked)
  are stopped before its patch is read or graded: none survives, the grade is the patch's own
  (0 for doing nothing, 1 for the oracle), in normal time, never an infrastructure error;
* an infrastructure error only when the unmodified repository fails too, in a fresh sandbox: a
  patch that keeps pytest from starting, or a graded run that times out in the agent's own code,
  is the agent's 0.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import gymnasium as gym
import pytest

import termgym  # noqa: F401  (registers the envs)
from termgym.env import oracle_actions
from termgym.factory.swesynth.patches import make_patch
from termgym.sandbox import FreshSandboxes, make_sandbox
from termgym.tasks.base import GradingContext
from termgym.tasks.swesynth import default_suite
from tests.adversarial.test_swesynth_infra import BUGGY, grade, record_for, write_repo
from tests.docker_engine import require_docker

#: A real bundled task whose suite grades in seconds (isodate), and a bound far above its grade time.
TASK = "isodate-01194bbebc"
GRADE_TIMEOUT = 120.0
SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def cmd(command: str) -> str:
    return f"THOUGHT: next step.\n\n```bash\n{command}\n```"


def hog_commands(marker: str) -> str:
    """Five busy loops, each detached differently, each with ``marker`` in its command line."""
    loop = "while :; do :; done"
    return "\n".join([
        f"setsid bash -c '{loop}' {marker}-setsid >/dev/null 2>&1 < /dev/null &",
        f"nohup bash -c '{loop}' {marker}-nohup >/dev/null 2>&1 &",
        f"( ( bash -c '{loop}' {marker}-doublefork >/dev/null 2>&1 & ) & )",
        f"( setsid nohup python3 -c 'while True: pass' {marker}-python >/dev/null 2>&1 & )",
        f"( trap '' HUP TERM INT; exec -a {marker}-trapper bash -c '{loop}' ) >/dev/null 2>&1 &",
        "disown -a; sleep 0.5; echo hogs started",
    ])


def host_processes_with(marker: str) -> list[str]:
    """Command lines of every process on this machine that carries ``marker``."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline and "grep" not in cmdline:
                found.append(cmdline.strip())
    return found


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return default_suite("v1", cache_dir=tmp_path_factory.mktemp("swesynth-cache"), grade_timeout=GRADE_TIMEOUT)


def test_hogs_left_behind_are_stopped_before_the_patch_is_graded(suite):
    task = suite.load(TASK)
    marker = f"tghog{uuid.uuid4().hex[:10]}"
    agent = make_sandbox("local", task.sandbox_spec())
    try:
        agent.start()
        assert "hogs started" in agent.exec(hog_commands(marker), timeout=30).output
        assert len(host_processes_with(marker)) >= 5, host_processes_with(marker)
        with FreshSandboxes("local") as new_sandbox:
            started = time.monotonic()
            grade = task.grade(GradingContext(sandbox=agent, new_sandbox=new_sandbox))
            took = time.monotonic() - started
        # Graded with the agent's sandbox still open: its hogs were stopped by the grader, not by a close.
        assert host_processes_with(marker) == []
        assert grade.score == 0.0 and not grade.passed and "infra_error" not in grade.details, grade
        assert grade.error is None and not grade.details["tests_timed_out"], grade
        assert took < GRADE_TIMEOUT, took
        assert agent.exec("echo still usable").output == "still usable\n"
    finally:
        agent.close()
    assert host_processes_with(marker) == []


def test_a_fork_bomb_left_behind_is_stopped_too(suite):
    """A variant: a fork bomb holding the sandbox at its process limit when the agent submits."""
    task = suite.load(TASK)
    agent = make_sandbox("local", task.sandbox_spec())
    try:
        agent.start()
        agent.exec("bomb() { bomb | bomb & }; (bomb &); sleep 2; echo bombed", timeout=30)
        with FreshSandboxes("local") as new_sandbox:
            grade = task.grade(GradingContext(sandbox=agent, new_sandbox=new_sandbox))
        assert grade.score == 0.0 and "infra_error" not in grade.details and grade.error is None, grade
        assert grade.details["all_result"] != f"0/{len(task.record.all_tests)}", grade  # the tests really ran
        assert len(agent._sandbox_pids()) <= 3  # bubblewrap's monitor, the init and a fresh shell
    finally:
        agent.close()


@pytest.mark.docker
def test_docker_hogs_left_behind_are_stopped_before_the_patch_is_graded(suite):
    """The same on the Docker backend: the container's processes are killed (its init stays)."""
    require_docker()
    from termgym.sandbox.docker import get_client

    task = suite.load(TASK)
    marker = f"tghog{uuid.uuid4().hex[:10]}"

    def in_container(sandbox) -> list[str]:
        top = get_client().api.top(sandbox.container_id, ps_args="-eo pid,args")
        return [" ".join(row) for row in top["Processes"] if marker in " ".join(row)]

    agent = make_sandbox("docker", task.sandbox_spec())
    try:
        agent.start()
        assert "hogs started" in agent.exec(hog_commands(marker), timeout=30).output
        assert len(in_container(agent)) >= 5, in_container(agent)
        with FreshSandboxes("docker") as new_sandbox:
            grade = task.grade(GradingContext(sandbox=agent, new_sandbox=new_sandbox))
        assert in_container(agent) == []
        assert grade.score == 0.0 and "infra_error" not in grade.details and grade.error is None, grade
    finally:
        agent.close()


@pytest.mark.parametrize("solve", [False, True], ids=["nop-with-hogs", "oracle-with-hogs"])
def test_cpu_hogs_end_to_end_through_gym_make(suite, solve):
    """The issue's case through ``gym.make``: hogs then submit. The grade is the patch's own, on time."""
    env = gym.make("termgym/SweSynth-v0", path="v1", suite_options={"cache_dir": suite.cache_dir,
                                                         "grade_timeout": GRADE_TIMEOUT})
    marker = f"tghog{uuid.uuid4().hex[:10]}"
    try:
        env.reset(options={"task_id": TASK})
        _, _, _, _, info = env.step(cmd(hog_commands(marker)))
        assert "hogs started" in info["exec"]["output"]
        actions = oracle_actions(env.unwrapped) if solve else [cmd(f"echo {SUBMIT}")]
        started = time.monotonic()
        for action in actions:
            _, reward, terminated, truncated, info = env.step(action)
        took = time.monotonic() - started
        assert terminated and "grade" in info
        grade = info["grade"]
        assert "infra_error" not in grade and not grade.get("tests_timed_out"), grade
        assert reward == (1.0 if solve else 0.0), grade
        assert took < GRADE_TIMEOUT, took
    finally:
        env.close()
    assert host_processes_with(marker) == []


def test_a_patch_that_keeps_pytest_from_starting_is_the_agents_zero(tmp_path):
    """A conftest that imports the package turns a broken package into a pytest that never starts
    its session. The unmodified repository runs in a fresh sandbox, so this is the agent's 0."""
    repo = write_repo(tmp_path / "repo")
    (repo / "tests" / "conftest.py").write_text("import calc  # noqa: F401\n")
    record = record_for(repo)
    broken = make_patch({"calc/__init__.py": BUGGY}, {"calc/__init__.py": BUGGY + "raise SystemExit(3)\n"})
    details = grade(record, broken, tmp_path / "cache")
    assert not details.get("infra_error") and not details["all_passed"], details
    assert details["all_result"] == "0/2"


def test_a_graded_run_that_times_out_in_the_agents_code_is_a_zero(tmp_path):
    repo = write_repo(tmp_path / "repo")
    record = record_for(repo)
    record.test_timeout = 15
    looping = make_patch({"calc/__init__.py": BUGGY},
                         {"calc/__init__.py": BUGGY.replace("return a - b", "while True:\n        pass")})
    details = grade(record, looping, tmp_path / "cache")
    assert details["tests_timed_out"] and not details.get("infra_error") and not details["all_passed"], details


def test_an_unmodified_repository_that_cannot_run_is_still_an_infra_error(tmp_path):
    """The other side: when the fresh, untouched repository cannot run its tests either, the failure
    is provably not the agent's, and it stays an infrastructure error (kept out of training)."""
    repo = write_repo(tmp_path / "repo", tests="import termgym_dependency_nobody_has\n")
    (repo / "tests" / "conftest.py").write_text("import termgym_dependency_nobody_has  # noqa: F401\n")
    record = record_for(repo)
    details = grade(record, record.fix_patch, tmp_path / "cache")
    assert "termgym_dependency_nobody_has" in details.get("infra_error", ""), details
