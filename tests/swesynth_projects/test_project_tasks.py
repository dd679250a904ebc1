"""A SWE-SYNTH task on a real bundled project, end to end on both backends: a record that names the
project (no host path), the workspace from its sdist, the agent's test command and the grader both
running with the project's read-only test environment, the oracle scoring 1 and doing nothing 0."""

from __future__ import annotations

import json

import pytest

from termgym.env import TerminalEnv, oracle_actions
from termgym.factory.swesynth.patches import file_diff
from termgym.tasks.swesynth import SweSynthSuite
from termgym.tasks.swesynth.projects import TESTENV_MOUNT, get_project, project_tree
from termgym.tasks.swesynth.records import RecordError, TaskRecord

# A hand-made bug in humanize (src/ layout; its tests need freezegun from the test environment):
# ordinal() gives 'th' to numbers ending in 1.
PATH = "src/humanize/number.py"
OLD = 'PS_("1 (male)", "st"),'
NEW = 'PS_("1 (male)", "th"),'
TARGET = "tests/test_number.py::test_ordinal[1-1st]"
OTHER = "tests/test_number.py::test_ordinal[2-2nd]"


def _bash(command: str) -> str:
    return f"THOUGHT: next step\n```bash\n{command}\n```"


SUBMIT = _bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory):
    """A suite directory whose ``repos`` entry names the project instead of a path."""
    text = (project_tree("humanize") / PATH).read_text()
    assert text.count(OLD) == 1, "the bug's anchor moved"
    buggy = text.replace(OLD, NEW)
    out = tmp_path_factory.mktemp("suite")
    task = out / "humanize-handmade"
    task.mkdir()
    record = {
        "version": 1, "task_id": "humanize-handmade", "repo": "humanize", "test_timeout": 300,
        "bug": {"bug_types": ["wrong-constant"], "problem_statement": "ordinal(1) says '1th'.",
                "target_tests": [TARGET], "patch": file_diff(PATH, text, buggy)},
        "original": {"all_tests": [TARGET, OTHER]}, "fix_patch": file_diff(PATH, buggy, text),
    }
    (task / "task.json").write_text(json.dumps(record))
    (out / "suite.json").write_text(json.dumps({"name": "real-sample", "repos": {"humanize": {"project": "humanize"}},
                                                "splits": {"test": ["humanize-handmade"]}}))
    return out


def test_record_resolves_the_project(suite_dir):
    record = SweSynthSuite(suite_dir).record("humanize-handmade")
    project = get_project("humanize")
    assert record.project == "humanize" and record.repo_dir == project_tree("humanize")
    assert record.test_command == project.test_command and record.source_dirs == list(project.source_dirs)
    assert record.to_json()["project"] == "humanize"
    spec = SweSynthSuite(suite_dir).load("humanize-handmade").sandbox_spec()
    assert list(spec.ro_binds.values()) == [TESTENV_MOUNT]
    assert spec.env["PYTHONPATH"] == f"/app/src:{TESTENV_MOUNT}"


def test_unknown_project_is_an_error_naming_it(tmp_path):
    data = {"task_id": "x-1", "repo": "x", "project": "nosuchproject", "bug": {"patch": "p", "problem_statement": "s"},
            "original": {"all_tests": ["t"]}, "fix_patch": "f"}
    with pytest.raises(RecordError, match="no SWE-SYNTH project 'nosuchproject'"):
        TaskRecord.from_json(data)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_real_project_task_end_to_end(suite_dir, backend, tmp_path, monkeypatch, request):
    if backend == "docker":
        from tests.docker_engine import require_docker
        require_docker()
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))  # test envs are found all the same
    env = TerminalEnv(SweSynthSuite(suite_dir), backend=backend)
    try:
        env.reset(options={"task_id": "humanize-handmade"})
        record = env.task.record
        obs, *_ = env.step(_bash(f"{record.test_command} tests/test_number.py 2>&1 | tail -3; "
                                 "python3 -c 'import freezegun, pytest; print(pytest.__file__)'; "
                                 f"touch {TESTENV_MOUNT}/x 2>&1 | tail -1"))
        text = str(obs)
        assert "failed" in text and "1th" in text or "test_ordinal" in text, text[-2000:]
        assert f"{TESTENV_MOUNT}/pytest/__init__.py" in text  # the pinned pytest, not the runtime's
        assert "Read-only file system" in text
        _, reward, terminated, _, info = env.step(SUBMIT)
        assert terminated and reward == 0.0, info["grade"]
        assert info["grade"]["target_result"] == "0/1" and info["grade"]["all_result"] == "1/2"

        env.reset(options={"task_id": "humanize-handmade"})
        for action in oracle_actions(env):
            _, reward, terminated, _, info = env.step(action)
        grade = info["grade"]
        assert reward == 1.0 and grade["all_passed"] and grade["all_result"] == "2/2", grade
        assert grade["runtime"]["pytest"] == get_project("humanize").pytest_version
    finally:
        env.close()
