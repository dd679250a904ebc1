"""Which tasks a SWE-SYNTH suite serves: only those whose grade a behaviour check decides (the
bundled suites' default), or every task (``behaviour="any"``, suites of your own)."""

from __future__ import annotations

import pytest

from termgym.tasks.swesynth import SweSynthSuite, default_suite
from termgym.tasks.swesynth.records import RecordError
from termgym.tasks.swesynth.suite import TOY_DIR


def _served(suite: SweSynthSuite) -> list[str]:
    return list(suite.task_ids("all"))


def test_the_bundled_suites_serve_only_tasks_with_a_behaviour_check():
    for suite in (default_suite(), default_suite("toy"), SweSynthSuite("toy")):
        served = _served(suite)
        assert served and suite.unchecked > 0, suite.name
        assert all(suite.has_behaviour_check(t) for t in served), suite.name
        # and each served check tells the bug apart on an input the tests never make
        assert all(suite.has_servable_check(t) for t in served), suite.name
        assert sum(suite.unserved.values()) == suite.unchecked + suite.duplicates, suite.name
    everything = default_suite(behaviour="any")
    default = default_suite()
    assert len(_served(everything)) == len(_served(default)) + default.unchecked + default.duplicates
    assert any(not everything.has_behaviour_check(t) for t in _served(everything))


def test_an_unchecked_task_still_loads_by_id_and_grades_by_its_tests():
    suite = default_suite("toy")
    unchecked = next(t for t in _served(default_suite("toy", behaviour="any")) if not suite.has_behaviour_check(t))
    assert unchecked not in _served(suite)
    assert suite.load(unchecked).record.behaviour == {}


def test_a_suite_of_your_own_with_checks_is_checked_by_default():
    """A suite given by path (what ``generate`` writes) is served like the bundled ones when its
    tasks carry checks: only tasks whose check decides alone; ``behaviour="any"`` serves them all."""
    own = SweSynthSuite(TOY_DIR)  # a path, not a bundled name
    assert own.behaviour == "required" and own.unchecked > 0
    assert _served(own) == _served(SweSynthSuite("toy"))
    assert all(own.has_servable_check(t) for t in _served(own))
    everything = SweSynthSuite(TOY_DIR, behaviour="any")
    assert everything.unchecked == 0 and len(_served(everything)) == len(_served(own)) + own.unchecked


def test_a_suite_without_checks_says_so_loudly_and_serves_every_task():
    from termgym.tasks.swesynth.suite import UnsafeGradingWarning

    records = [default_suite("toy", behaviour="any").record(t) for t in _served(default_suite("toy", behaviour="any"))]
    bare = [r for r in records if not r.behaviour][:3]
    with pytest.warns(UnsafeGradingWarning, match="none of its 3 tasks carries a behaviour check.*can forge"):
        suite = SweSynthSuite(bare)
    assert suite.behaviour == "any" and len(_served(suite)) == 3


def test_sabotage_a_default_that_ignores_the_checks_serves_unchecked_tasks(monkeypatch):
    """With the old default (``"any"`` for every suite of your own), tasks without a check that
    decides alone are served again: the test above fails."""
    monkeypatch.setattr(SweSynthSuite, "_default_behaviour", lambda self: "any")
    own = SweSynthSuite(TOY_DIR)
    assert own.behaviour == "any"
    assert any(not own.has_servable_check(t) for t in _served(own))


def test_a_bad_policy_and_a_suite_with_no_checks_are_named():
    with pytest.raises(ValueError, match="behaviour must be one of required, any"):
        SweSynthSuite("toy", behaviour="some")
    records = [default_suite("toy", behaviour="any").record(t) for t in _served(default_suite("toy", behaviour="any"))]
    bare = [r for r in records if not r.behaviour][:3]
    with pytest.raises(RecordError, match="none of its 3 tasks carries a behaviour check"):
        SweSynthSuite(bare, behaviour="required")


def test_a_check_only_the_tests_calls_tell_apart_is_not_served(monkeypatch):
    """A table of the tests' answers passes a check whose telling inputs are all calls the tests
    make; such a task is kept out of ``behaviour="required"``, its reason counted. Sabotage: count
    every check as servable and the same task is served again."""
    from termgym.tasks.swesynth import behaviour

    served = default_suite("toy")
    records = [served.record(t) for t in _served(served)[:3]]
    first = records[0]
    check = first.behaviour
    first.behaviour = {**check, "heldout": [i for i in check["heldout"] if i not in check["telling"]]}
    try:
        suite = SweSynthSuite(records, behaviour="required")
        assert first.task_id not in _served(suite) and len(_served(suite)) == 2
        assert suite.unserved == {"only calls the tests make tell the bug apart (no held-out input does)": 1}
        assert first.task_id in _served(SweSynthSuite(records, behaviour="any"))
        monkeypatch.setattr(behaviour, "servable", lambda c: bool(c))
        assert first.task_id in _served(SweSynthSuite(records, behaviour="required"))
    finally:
        first.behaviour = check
