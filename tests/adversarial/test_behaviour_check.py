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
from termgym.tasks.swesynth.task import prepare_workspace

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

# -- variants the issue does not list ----------------------------------------------------------------

#: The package tells the test run from anything else at import (a module global chosen once) and
#: takes another code path there: the tests' table under pytest, the bug wherever else it runs, the
#: replay included. Stored inputs the tests do not make are answered by the bug.
TESTS_ONLY_PATH = """
import sys as _sys
_UNDER_TESTS = "_pytest" in _sys.modules or "pytest" in _sys.modules
if _UNDER_TESTS:
""" + "".join("    " + line + "\n" for line in HARD_CODED.strip().splitlines())

#: The package is left alone; the tests' table comes in through interpreter start-up hooks placed in
#: the workspace (``sitecustomize``/``usercustomize`` on the path of a run from the repository root,
#: and a ``.pth`` file), which patch ``Account.normal_side`` once ``ledgerly`` is importable.
STARTUP_HOOK = """
import sys as _sys
def _patch():
    try:
        from ledgerly.accounts import Account
    except Exception:
        return
""" + "".join("    " + line + "\n" for line in HARD_CODED.strip().splitlines()) + """
_patch()
"""

ATTACKS = {"trace_function_forgery": ("ledgerly/__init__.py", TRACE_FORGERY),
           "always_equal": ("ledgerly/accounts.py", ALWAYS_EQUAL),
           "hard_coded_test_values": ("ledgerly/accounts.py", HARD_CODED),
           "exception_swallowing": ("ledgerly/accounts.py", SWALLOWING),
           "tests_only_code_path": ("ledgerly/accounts.py", TESTS_ONLY_PATH),
           "startup_hook_in_workspace": {"sitecustomize.py": STARTUP_HOOK, "usercustomize.py": STARTUP_HOOK,
                                         "ledgerly_hook.pth": "import sitecustomize\n"}}


#: Attacks that the sandboxes defeat before the comparison: the grader's pytest and the replay run
#: with the workspace off ``sys.path`` at start-up (and ``-s``), so ``sitecustomize``,
#: ``usercustomize`` and ``.pth`` files in the repository never run.
HOOKS_THAT_NEVER_LOAD = ("startup_hook_in_workspace",)


def grade_attack(task, buggy_tree, tmp_path, name: str) -> dict:
    edits = ATTACKS[name] if isinstance(ATTACKS[name], dict) else dict([ATTACKS[name]])
    patch = make_patch(buggy_tree, tmp_path, edits)
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
    if name in HOOKS_THAT_NEVER_LOAD:
        assert details.get("tests_passed") is not True and details["target_result"].startswith("0/"), details
        return  # neither the test run nor the replay imports them: the bug is tested as it is
    # the tests alone would have paid: only the behaviour comparison stands between this and a 1
    assert details.get("tests_passed") is True and details["all_result"].split("/")[0] == \
        details["all_result"].split("/")[1], details
    assert details["behaviour_passed"] is False and details["behaviour_mismatches"], details
    assert "differ from the clean code" in details["behaviour_failure"], details


# The start-up hooks never load in the graded run (asserted above), so there is no comparison to sabotage.
@pytest.mark.parametrize("name", sorted(set(ATTACKS) - set(HOOKS_THAT_NEVER_LOAD)))
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


def test_a_replay_that_never_returns_is_the_agents_zero(task, buggy_tree, tmp_path, monkeypatch):
    """The oracle's fix plus code that, in the replay, ignores the per-call alarm and sleeps: the
    whole replay's time limit ends it (30 s plus the per-call seconds per input: 10 s a call in a
    grade, 2 s here so that the wait is 50 s, not 130 s), a 0 and no infra error."""
    from termgym.tasks.swesynth import behaviour

    monkeypatch.setattr(behaviour, "GRADE_CALL_SECONDS", 2.0)
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


def _task_with_a_test_call(cache):
    """A served toy task whose stored inputs include one of its tests' own calls."""
    suite = default_suite("toy", cache_dir=cache)
    for task_id in sorted(suite.task_ids("all")):
        task = suite.load(task_id)
        if any(item.get("origin", "").startswith("test") for item in task.record.behaviour["inputs"]):
            return task
    pytest.fail("no served toy task stores one of its tests' calls")


def test_an_input_the_tests_make_is_never_held_out_whatever_its_label(cache):
    """Held out means no test makes the call, checked against the digest of every call the tests
    make, not taken from the input's label: a copy of a test call labelled "perturbed" is not held
    out, and the stored perturbations that do tell the bug apart are (real sandbox, the task's
    tests run under the recorder). Sabotage: trusting the label marks the copy held out."""
    from termgym.factory.swesynth import behaviour_record

    task = _task_with_a_test_call(cache)
    check = {**task.record.behaviour}
    check.pop("heldout")  # as an older check: marked by running the tests again
    test_call = next(item for item in check["inputs"] if item["origin"].startswith("test"))
    disguised = {**test_call, "id": "copy", "origin": "perturbed:0:pos:0"}
    planted = {**check, "inputs": [*check["inputs"], disguised],
               "answers": {**check["answers"], "copy": check["answers"][test_call["id"]]}}
    marked = behaviour_record.mark_heldout(task.record, planted)
    assert "copy" not in marked["heldout"] and test_call["id"] not in marked["heldout"], marked["heldout"]
    assert behaviour.servable(marked), marked
    assert all(item["origin"].startswith("perturbed") for item in marked["inputs"] if item["id"] in marked["heldout"])


def test_sabotage_labels_alone_would_hold_out_a_test_call(cache, monkeypatch):
    from termgym.factory.swesynth import behaviour_record

    monkeypatch.setattr(behaviour_record, "_test_call_digests", lambda box: set())
    task = _task_with_a_test_call(cache)
    check = {**task.record.behaviour}
    check.pop("heldout")
    test_call = next(item for item in check["inputs"] if item["origin"].startswith("test"))
    planted = {**check, "inputs": [*check["inputs"], {**test_call, "id": "copy", "origin": "perturbed:0:pos:0"}],
               "answers": {**check["answers"], "copy": check["answers"][test_call["id"]]}}
    assert "copy" in behaviour_record.mark_heldout(task.record, planted)["heldout"]


def _served_toy_tasks_where_the_table_passes_the_tests(cache, want: int) -> list:
    """Served toy tasks (their check decides alone) whose failing tests a table of the tests' own
    answers passes: where only the behaviour check stands between a non-fix and a 1."""
    from benchmarks.behaviour_check import hard_coded_table

    suite = default_suite("toy", cache_dir=cache)
    found = []
    for task_id in sorted(suite.task_ids("all")):
        task = suite.load(task_id)
        if task.record.project is None and hard_coded_table(task):
            found.append(task)
        if len(found) == want:
            break
    return found


def test_code_that_detects_the_replay_and_answers_a_constant_scores_zero(cache, tmp_path):
    """The tests' table under pytest; in any process started as ``probe.py replay``, the table's
    most common answer for every call. On served tasks (held-out inputs with two or more
    different clean answers) that is a 0, no infra error, although the tests pass."""
    from benchmarks.behaviour_check import nonfix_patch

    tasks = _served_toy_tasks_where_the_table_passes_the_tests(cache, 3)
    assert tasks, "no served toy task has a table of test answers"
    decided_by_the_check = 0
    for task in tasks:
        patch = nonfix_patch(task, prepare_workspace(task.record, cache), "probe_constant")
        with FreshSandboxes("local") as new_sandbox:
            details = task.grade_patch(patch, new_sandbox)
        assert not details["all_passed"] and not details.get("infra_error"), (task.record.task_id, details)
        decided_by_the_check += details.get("tests_passed") is True
    assert decided_by_the_check, "the tests failed the constant on every task: the check decided nothing"


def test_a_check_answered_by_one_constant_is_not_served(cache, tmp_path):
    """Sabotage of the outcome rule: ledgerly-03e7642999's held-out inputs all answer "credit", so
    the same replay-detecting constant passes its check (a 1 for a non-fix); that is why the
    bundled suite does not serve the task."""
    from benchmarks.behaviour_check import nonfix_patch

    suite = default_suite("toy", cache_dir=cache, behaviour="any")
    task = suite.load(TASK)
    assert behaviour.heldout_telling(task.record.behaviour) and behaviour.heldout_outcomes(task.record.behaviour) == 1
    assert TASK not in default_suite("toy").task_ids("all")
    patch = nonfix_patch(task, prepare_workspace(task.record, cache), "probe_constant")
    with FreshSandboxes("local") as new_sandbox:
        details = task.grade_patch(patch, new_sandbox)
    assert details["all_passed"] and details["tests_passed"], details
