"""Property-based tests give one answer per tree: the grader and the factory's screen pin Hypothesis
(:mod:`termgym.tasks.swesynth.pinned_hypothesis`): derandomized, no deadline, no example database,
the project's own profile kept.

Each test runs a small tree's ``@given`` tests through the real grader (or the real screen) in a
local sandbox, with the Hypothesis and pytest of a bundled project's provisioned test environment
(dpath's). The sabotage replaces the pinning plugin with one that does nothing and shows the same
checks failing: draws that change from run to run, and a slow example failing its deadline.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from termgym.factory.swesynth import screen as screen_mod
from termgym.factory.swesynth.screen import ProjectEnv, ScreenWorker
from termgym.sandbox import make_sandbox
from termgym.sandbox.base import SandboxSpec
from termgym.tasks.swesynth import grading
from termgym.tasks.swesynth.grading import run_graded_tests
from termgym.tasks.swesynth.projects import project_sandbox_spec_parts

PROJECT = "dpath"  # a bundled project whose locked test environment holds Hypothesis
COMMAND = "python3 -m pytest -q tests"
DRAWS = "/tmp/draws.txt"

CONFTEST = """
from hypothesis import settings
settings.register_profile("project", max_examples=7)
settings.load_profile("project")
"""

TESTS = f"""
import time
from hypothesis import given, settings, strategies as st

@given(st.integers())
def test_draws(x):
    with open({DRAWS!r}, "a") as fh:
        fh.write(f"{{x}}\\n")

@given(st.just(0))  # one example, nothing to shrink: the deadline alone decides
def test_slow(x):
    time.sleep(0.4)
"""


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "__init__.py").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "tests" / "test_props.py").write_text(textwrap.dedent(TESTS))
    tmp_path.chmod(0o755)  # the grader hands the tree to another user
    return tmp_path


@pytest.fixture()
def unpinned(tmp_path_factory, monkeypatch):
    """The sabotage: the pinning plugin swapped for one that loads and does nothing."""
    idle = tmp_path_factory.mktemp("idle") / "idle.py"
    idle.write_text("# pins nothing\n")
    monkeypatch.setattr(grading, "PINNING_SOURCE", idle)
    monkeypatch.setattr(screen_mod, "PINNING_SOURCE", idle)


def _grade_twice(tree: Path) -> tuple[list[dict[str, str]], list[list[str]]]:
    parts = project_sandbox_spec_parts(PROJECT, "/app")
    spec = SandboxSpec(workdir="/app", copy_dirs={str(tree): "/app"}, env=dict(parts.env),
                       ro_binds=dict(parts.ro_binds))
    box = make_sandbox("local", spec)
    outcomes, draws = [], []
    try:
        box.start()
        for _ in range(2):
            box.exec(f"rm -f {DRAWS}")
            run = run_graded_tests(box, COMMAND, "/app", ["demo"], 300, python_path=parts.python_path,
                                   trusted_dirs=parts.trusted_dirs)
            assert run.started and not run.tamper, run.log_tail
            outcomes.append(run.outcomes)
            draws.append(box.read_file(DRAWS).decode().split())
    finally:
        box.close()
    return outcomes, draws


def test_a_grade_draws_the_same_examples_and_keeps_the_projects_profile(tree):
    outcomes, draws = _grade_twice(tree)
    assert draws[0] == draws[1]
    assert len(draws[0]) == 7  # the project's profile (max_examples=7) is kept under the pins
    assert outcomes[0] == outcomes[1]


def test_a_grade_gives_a_slow_example_no_deadline(tree):
    outcomes, _ = _grade_twice(tree)
    assert all(o["tests/test_props.py::test_slow"] == "passed" for o in outcomes)


def test_sabotage_without_the_pins_a_grade_draws_by_chance_and_a_slow_example_fails(tree, unpinned):
    outcomes, draws = _grade_twice(tree)
    assert draws[0] != draws[1]
    assert all(o["tests/test_props.py::test_slow"] == "failed" for o in outcomes)


def _screen(tree: Path) -> tuple[dict[str, str], list[str]]:
    worker = ScreenWorker(tree, COMMAND, ["demo"], ProjectEnv.for_project(PROJECT))
    try:
        worker.box.exec(f"rm -f {DRAWS}")
        run = worker.run({}, None)
        return run.outcomes, worker.box.read_file(DRAWS).decode().split()
    finally:
        worker.close()


def test_the_screen_pins_as_the_grader_does(tree):
    outcomes, draws = _screen(tree)
    assert outcomes["tests/test_props.py::test_slow"] == "passed"
    assert len(draws) == 7 and draws == _grade_twice(tree)[1][0]


def test_sabotage_the_screen_without_the_pins_fails_the_slow_example(tree, unpinned):
    outcomes, _ = _screen(tree)
    assert outcomes["tests/test_props.py::test_slow"] == "failed"
