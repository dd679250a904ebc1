"""Red-team attacks on SWE-SYNTH grading that ``test_swesynth_grading.py`` does not cover.

Each attack leaves the bug of the bundled task ``ledgerly-03e7642999`` in place and goes after the
grade from inside the test process (code appended to ``ledgerly/__init__.py``, imported by every
test) or through the shape of the agent's diff. Each must score 0, never an infrastructure error and
never a hang. The threat model: ``docs/security.md``.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from termgym.sandbox.local import BubblewrapSandbox
from termgym.tasks.swesynth import default_suite
from termgym.tasks.swesynth.suite import prepare_workspace

TASK = "ledgerly-03e7642999"  # the bug: Account.normal_side says "Credit" instead of "credit"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("swesynth-cache")


@pytest.fixture(scope="module")
def task(cache):
    return default_suite(cache_dir=cache).load(TASK)


@pytest.fixture(scope="module")
def buggy_tree(task, cache):
    return prepare_workspace(task.record, cache)


def diff_of(buggy_tree: Path, tmp_path: Path, edit) -> str:
    """The agent's diff after ``edit(work_tree)`` changed a copy of the buggy repository."""
    work = tmp_path / "work"
    shutil.copytree(buggy_tree, work, symlinks=True)
    edit(work)
    subprocess.run(["git", "add", "-A", "-N", "."], cwd=work, check=True)
    return subprocess.run(["git", "diff", "--no-ext-diff", "--binary", "HEAD"], cwd=work, check=True,
                          capture_output=True, text=True).stdout


def grade(task, patch: str) -> dict:
    """Grade ``patch`` in fresh bubblewrap sandboxes, as the env's grader does after its checks."""
    boxes = []

    def new_sandbox(spec):
        box = BubblewrapSandbox(spec)
        boxes.append(box)
        box.start()
        return box

    try:
        return task.grade_patch(patch, new_sandbox)
    finally:
        for box in boxes:
            box.close()


def appended(code: str, path: str = "ledgerly/__init__.py"):
    def edit(work: Path) -> None:
        target = work / path
        target.write_text(target.read_text() + textwrap.dedent(code))
    return edit


def assert_scores_zero(details: dict) -> None:
    assert not details["all_passed"], details
    assert details["target_result"] == "0/3", details
    assert not details.get("infra_error"), details


# -- code under test going after the grader through the standard library -----------------------

STDLIB_ATTACKS = {
    # The plugin serialises each event with json.dumps and MACs the result: rewrite the body before
    # it is signed and every phase reads "passed", with a valid chain.
    "json_dumps_rewrites_events_before_signing": """
        import json as _json
        _dumps = _json.dumps
        def _forged(obj, *args, **kwargs):
            text = _dumps(obj, *args, **kwargs)
            return text.replace('"outcome":"failed"', '"outcome":"passed"')
        _json.dumps = _forged
    """,
    # hmac.new sees the key on every event: capture it, then forge a continued chain at exit.
    "hmac_new_captures_the_key": """
        import hmac as _hmac, atexit as _atexit
        _new = _hmac.new
        _seen = {}
        def _spy(key, msg=None, digestmod=""):
            _seen["key"] = key
            return _new(key, msg, digestmod)
        _hmac.new = _spy
    """,
}


@pytest.mark.parametrize("code", STDLIB_ATTACKS.values(), ids=STDLIB_ATTACKS.keys())
def test_stdlib_patching_cannot_forge_events(task, buggy_tree, tmp_path, code):
    assert_scores_zero(grade(task, diff_of(buggy_tree, tmp_path, appended(code))))
