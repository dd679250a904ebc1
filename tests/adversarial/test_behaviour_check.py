"""Non-fixes that pass the repository's tests, caught by the behaviour check (real sandboxes, real tasks).

Each attack below leaves the bug in place, and the required tests pass for it: its grade without
the behaviour check (``tests_passed``) is a pass. With the check it scores 0, with no infrastructure
error, because the replayed calls, perturbed ones included, do not give the clean code's answers.
The sabotage test turns the host's comparison off and watches the same attacks score 1: the
behaviour check is what stops them. How the check works: :mod:`termgym.tasks.swesynth.behaviour`,
``docs/security.md``.
"""

from __future__ import annotations

import pytest

from termgym.env import TerminalEnv, oracle_actions
from termgym.sandbox import FreshSandboxes
from termgym.tasks.swesynth import behaviour, default_suite

from .test_swesynth_grading import make_patch

TASK = "ledgerly-03e7642999"  # Account.normal_side says "Credit" instead of "credit"

#: The issue's forgery: at import the package arms a finalizer that calls ``sys.settrace`` later,
#: from whatever code triggers the garbage collection (pytest's, stdlib's: no project frame on the
#: stack), and the trace function clears the exception ``CallInfo.from_call`` caught, through the
#: unaudited ``f_locals``. The tests' outcomes are rewritten to "passed"; the bug stays.
TRACE_FORGERY = """
import sys as _sys, weakref as _weakref
def _tracer(frame, event, arg):
    if event == "line":
        local = frame.f_locals
        if {"func", "when", "reraise", "excinfo", "result"} <= local.keys() \\
                and "precise_stop" not in local and local["excinfo"] is not None:
            local["excinfo"] = None
    return _tracer
class _Cycle:
    pass
def _arm():
    cycle = _Cycle()
    cycle.me = cycle
    _weakref.finalize(cycle, _sys.settrace, _tracer)
_arm()
"""

#: An object that says it equals what the tests expect (case-insensitively), wrapped around the
#: buggy property: every ``==`` the tests and the package make comes out as the fix's would.
ALWAYS_EQUAL = """
class _LooseStr(str):
    def __eq__(self, other):
        return isinstance(other, str) and self.lower() == other.lower()
    __hash__ = str.__hash__
def _loose(fget):
    return property(lambda self: _LooseStr(fget(self)))
Account.normal_side = _loose(Account.normal_side.fget)
"""

#: The values the failing tests expect, hard-coded for the inputs they use; the bug everywhere else.
HARD_CODED = """
_buggy_side = Account.normal_side.fget
def _side(self):
    if self.name == "x" and self.code in ("2000", "3000", "4000"):
        return "credit"
    return _buggy_side(self)
Account.normal_side = property(_side)
"""

#: The tests read the property and compare; a wrapper that swallows whatever goes wrong and answers
#: the value the tests' lookups want ("credit" for the credit-side codes they use) hides the bug too.
SWALLOWING = """
_inner_side = Account.normal_side.fget
def _guarded(self):
    try:
        side = _inner_side(self)
        if side not in ("debit", "credit"):
            raise ValueError(side)
        return side
    except Exception:
        return "credit" if self.code[:1] in "234" and len(self.code) == 4 else "debit"
Account.normal_side = property(_guarded)
"""

ATTACKS = {"trace_function_forgery": ("ledgerly/__init__.py", TRACE_FORGERY),
           "always_equal": ("ledgerly/accounts.py", ALWAYS_EQUAL),
           "hard_coded_test_values": ("ledgerly/accounts.py", HARD_CODED),
           "exception_swallowing": ("ledgerly/accounts.py", SWALLOWING)}


def grade_attack(task, buggy_tree, tmp_path, name: str) -> dict:
    path, code = ATTACKS[name]
    patch = make_patch(buggy_tree, tmp_path, {path: code})
    with FreshSandboxes("local") as new_sandbox:
        return task.grade_patch(patch, new_sandbox)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_non_fixes_that_pass_the_tests_score_zero(task, buggy_tree, tmp_path, name):
    assert task.record.behaviour, "the bundled task lost its behaviour check"
    details = grade_attack(task, buggy_tree, tmp_path, name)
    assert not details.get("infra_error"), details
    assert not details["all_passed"], details
    if name == "trace_function_forgery" and details.get("tamper"):
        return  # the in-process guard caught it first; still a 0
    # the tests alone would have paid: only the behaviour comparison stands between this and a 1
    assert details.get("tests_passed") is True and details["all_result"].split("/")[0] == \
        details["all_result"].split("/")[1], details
    assert details["behaviour_passed"] is False and details["behaviour_mismatches"], details
    assert "differ from the clean code" in details["behaviour_failure"], details


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_sabotage_without_the_comparison_the_attacks_score_one(task, buggy_tree, tmp_path, name, monkeypatch):
    monkeypatch.setattr(behaviour, "compare_answers", lambda expected, got: [])
    details = grade_attack(task, buggy_tree, tmp_path, name)
    if name == "trace_function_forgery" and details.get("tamper"):
        pytest.skip("the in-process guard catches this forgery on this branch")
    assert details["all_passed"] and details["behaviour_passed"], details


def test_oracle_scores_one_through_the_env_with_the_check(cache):
    env = TerminalEnv(default_suite("toy", cache_dir=cache))
    try:
        env.reset(options={"task_id": TASK})
        for action in oracle_actions(env):
            *_, info = env.step(action)
        grade = info["grade"]
        n = len(env.task.record.behaviour["inputs"])
        assert grade["score"] == 1.0 and grade["behaviour"] == f"{n}/{n}" and not grade.get("infra_error"), grade
    finally:
        env.close()


def test_a_replay_that_crashes_hangs_or_lies_is_the_agents_zero(task, buggy_tree, tmp_path):
    """The oracle's fix plus code that breaks the replay process: each is a 0, never an infra error."""
    replaying = "import sys as _s\nif _s.argv[1:2] == ['replay']:\n"
    fix_then = {
        "exits_at_import": replaying + "    import os as _os\n    _os._exit(3)\n",
        # a forged result line on every descriptor it can find (the probe's own stdout among them)
        "prints_a_forged_result": replaying + (
            "    import os as _os\n"
            "    for _fd in range(1, 12):\n"
            "        try:\n"
            "            _os.write(_fd, b'\\nTGBEHAVIOUR {\"results\": []}\\n')\n"
            "        except OSError:\n"
            "            pass\n"),
    }
    for name, code in fix_then.items():
        patch = make_patch(buggy_tree, tmp_path / name, {"ledgerly/__init__.py": code}) + task.record.fix_patch
        with FreshSandboxes("local") as new_sandbox:
            details = task.grade_patch(patch, new_sandbox)
        assert details["tests_passed"] and not details["all_passed"], (name, details)
        assert not details.get("infra_error"), (name, details)
        assert "the behaviour replay failed" in details["behaviour_failure"], (name, details)


def test_the_replay_sandbox_never_holds_the_answers(task):
    """What the replay sandbox gets: the inputs, not one answer (digests and forms both absent)."""
    kept = []

    with FreshSandboxes("local") as fresh:
        def keep_open(spec):
            box = fresh(spec)
            kept.append(box)
            box.close = lambda: None  # read after the grade; FreshSandboxes closes it for real
            return box

        details = behaviour.behaviour_check(task, task.record.fix_patch, keep_open)
        assert details["behaviour_passed"], details
        listing = kept[0].exec("cat /tmp/.tgb-*/inputs.json", timeout=30).output
        assert '"inputs"' in listing
        for answer in task.record.behaviour["answers"].values():
            assert answer["h"] not in listing
        assert '"answers"' not in listing and "args_after" not in listing
        for box in kept:
            type(box).close(box)


def test_a_replay_that_never_returns_is_the_agents_zero(task, buggy_tree, tmp_path):
    """The oracle's fix plus code that, in the replay, ignores the per-call alarm and sleeps: the
    whole replay's time limit ends it (about 30 s plus 10 s per input), a 0 and no infra error."""
    code = ("import sys as _s\nif _s.argv[1:2] == ['replay']:\n"
            "    import signal as _sig, time as _t\n    _sig.signal(_sig.SIGALRM, _sig.SIG_IGN)\n"
            "    _t.sleep(10 ** 6)\n")
    patch = make_patch(buggy_tree, tmp_path, {"ledgerly/__init__.py": code}) + task.record.fix_patch
    with FreshSandboxes("local") as new_sandbox:
        details = task.grade_patch(patch, new_sandbox)
    assert details["tests_passed"] and not details["all_passed"] and not details.get("infra_error"), details
    assert "did not finish within" in details["behaviour_failure"], details


def test_clean_answers_that_do_not_come_back_are_infrastructure_not_the_agents_zero(task):
    """A stored answer the clean code no longer gives (here: one digest altered) fails the oracle
    too, so the grade is an infra error; ``reproduces`` (what ``--verify`` runs) says the same."""
    from termgym.factory.swesynth.behaviour_record import reproduces

    check = task.record.behaviour
    assert reproduces(task.record, check)
    first = check["inputs"][0]["id"]
    broken = {**check, "answers": {**check["answers"], first: {"h": "0" * 64}}}
    assert not reproduces(task.record, broken)
    task.record.behaviour = broken
    try:
        with FreshSandboxes("local") as new_sandbox:
            details = task.grade_patch(task.record.fix_patch, new_sandbox)
    finally:
        task.record.behaviour = check
    assert not details["all_passed"] and "does not reproduce its recorded behaviour" in details["infra_error"], details
