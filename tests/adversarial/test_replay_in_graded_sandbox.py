"""The behaviour replay in the sandbox of the graded test run (Docker, where the test run can write).

A grade replays its behaviour inputs in the sandbox whose test run just passed instead of a third
sandbox (:func:`termgym.tasks.swesynth.behaviour.behaviour_check`). In a container the code under
test runs as root and can write the whole tree, so before the replay every process it left is
killed and the tree reset to the buggy commit with the patch applied again. The attacks below are
the oracle's fix plus code that, during the test run only, puts the bug back on disk: once at
import, and from a daemon that outlives pytest. Each must leave the grade the fix's own (1, the
replay reads the fixed tree) and the grade must use one sandbox; the sabotages skip the restore
or the kill and watch the same grade turn into a 0.
"""

from __future__ import annotations

import pytest

from termgym.sandbox import FreshSandboxes
from termgym.sandbox.docker import DockerSandbox
from termgym.tasks.swesynth import behaviour
from tests.docker_engine import require_docker

from .test_behaviour_check import ATTACKS, HOOKS_THAT_NEVER_LOAD
from .test_swesynth_grading import make_patch

pytestmark = pytest.mark.docker

#: Puts the bug back into ``ledgerly/accounts.py`` on disk (the module already imported stays fixed).
_REVERT = '''
import os as _os, sys as _sys
def _put_bug_back():
    _file = _os.path.join(_os.path.dirname(__file__), "accounts.py")
    try:
        with open(_file) as _f:
            _text = _f.read()
        if 'else "credit"' in _text:
            with open(_file, "w") as _f:
                _f.write(_text.replace('else "credit"', 'else "Credit"'))
    except OSError:
        pass
'''

#: During the test run only: the bug goes back on disk once, at import.
REWRITE_AT_TEST_TIME = _REVERT + '''
if "pytest" in _sys.modules:
    import ledgerly.accounts  # noqa: F401  (the fixed code is what the tests run)
    _put_bug_back()
'''

#: During the test run only: a detached daemon keeps putting the bug back for a minute.
DAEMON_AFTER_TEST_RUN = _REVERT + '''
if "pytest" in _sys.modules and not _os.environ.get("TG_DAEMON_STARTED"):
    _os.environ["TG_DAEMON_STARTED"] = "1"
    import ledgerly.accounts  # noqa: F401
    if _os.fork() == 0:
        _os.setsid()
        if _os.fork() == 0:
            _null = _os.open(_os.devnull, _os.O_RDWR)
            for _fd in (0, 1, 2):
                _os.dup2(_null, _fd)
            _os.closerange(3, 1024)
            import time as _time
            _end = _time.monotonic() + 60
            while _time.monotonic() < _end:
                _put_bug_back()
                _time.sleep(0.005)
        _os._exit(0)
    _os.wait()
'''


class CountingSandboxes(FreshSandboxes):
    """Docker sandboxes on demand, counting how many a grade starts."""

    def __init__(self) -> None:
        super().__init__("docker")
        self.started = 0

    def __call__(self, spec):
        self.started += 1
        return super().__call__(spec)


def grade(task, buggy_tree, tmp_path, code: str) -> tuple[dict, int]:
    patch = make_patch(buggy_tree, tmp_path, {"ledgerly/__init__.py": code}) + task.record.fix_patch
    with CountingSandboxes() as new_sandbox:
        details = task.grade_patch(patch, new_sandbox)
    return details, new_sandbox.started


@pytest.fixture(autouse=True)
def _docker():
    require_docker()


def test_the_fix_replays_in_the_graded_container_one_sandbox_per_grade(task, buggy_tree, tmp_path):
    details, started = grade(task, buggy_tree, tmp_path, "\n")
    n = len(task.record.behaviour["inputs"])
    assert details["all_passed"] and details["behaviour"] == f"{n}/{n}", details
    assert started == 1, f"{started} sandboxes for one grade (the replay should reuse the graded one)"


@pytest.mark.parametrize("code", [REWRITE_AT_TEST_TIME, DAEMON_AFTER_TEST_RUN], ids=["rewrite", "daemon"])
def test_what_the_test_run_did_to_the_tree_is_undone_before_the_replay(task, buggy_tree, tmp_path, code):
    details, started = grade(task, buggy_tree, tmp_path, code)
    assert details["tests_passed"] and details["all_passed"] and details["behaviour_passed"], details
    assert started == 1, started


def test_sabotage_without_the_restore_a_rewritten_tree_reaches_the_replay(task, buggy_tree, tmp_path, monkeypatch):
    monkeypatch.setattr(behaviour, "restore_graded_tree", lambda sandbox, workdir, patch: ("", {}))
    details, started = grade(task, buggy_tree, tmp_path, REWRITE_AT_TEST_TIME)
    assert details["tests_passed"] and not details["all_passed"], details
    assert "differ from the clean code" in details["behaviour_failure"] and not details.get("infra_error"), details
    assert started == 2, started  # the clean tree's replay, in a fresh sandbox, cleared the infrastructure


def test_sabotage_without_the_kill_the_daemon_reaches_the_replay(task, buggy_tree, tmp_path, monkeypatch):
    monkeypatch.setattr(DockerSandbox, "stop_commands", lambda self: None)
    details, _ = grade(task, buggy_tree, tmp_path, DAEMON_AFTER_TEST_RUN)
    assert details["tests_passed"] and not details["all_passed"], details
    assert "differ from the clean code" in details["behaviour_failure"], details


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_the_non_fixes_that_pass_the_tests_score_zero_on_docker_too(task, buggy_tree, tmp_path, name):
    """test_behaviour_check's attacks, graded in containers (the replay in the graded one)."""
    edits = ATTACKS[name] if isinstance(ATTACKS[name], dict) else dict([ATTACKS[name]])
    patch = make_patch(buggy_tree, tmp_path, edits)
    with CountingSandboxes() as new_sandbox:
        details = task.grade_patch(patch, new_sandbox)
    assert not details.get("infra_error") and not details["all_passed"], details
    if name == "trace_function_forgery" and details.get("tamper"):
        return
    if name in HOOKS_THAT_NEVER_LOAD:
        assert details.get("tests_passed") is not True, details
        return
    assert details.get("tests_passed") is True and details["behaviour_passed"] is False, details
    assert "differ from the clean code" in details["behaviour_failure"], details
