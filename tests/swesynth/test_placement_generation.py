"""Placement bugs (issue 42.2) go through the whole generation pipeline and play through the env.

A small project whose tests pin its loops, guards and defaults: ``generate`` restricted to the
placement operators screens and validates tasks in real sandboxes, writes a report for each and
records its behaviour check; every task it keeps has a fix of more than one token, and its oracle
scores 1 and doing nothing 0 through ``gym.make``.
"""

from __future__ import annotations

import textwrap

import pytest

from termgym.factory.swesynth.bugs.placement import PLACEMENT_FINDERS
from termgym.factory.swesynth.bugs.signals import count_changed_tokens
from termgym.factory.swesynth.generate import generate
from termgym.tasks.swesynth.suite import SweSynthSuite
from tests.swesynth.episodes import oracle_and_nop
from tests.swesynth_bugs.test_placement import MODULE

PYTEST = "python3 -m pytest -q tests"
TESTS = textwrap.dedent('''\
    import pytest

    from inventory.core import first_word, label, running_sum, tag, totals


    def test_first_word():
        assert first_word("red apple") == "red"


    def test_first_word_refuses_nothing():
        with pytest.raises(ValueError):
            first_word(None)


    def test_totals_adds_per_name():
        assert totals([("a", 1), ("b", 2), ("a", 3)]) == {"a": 4, "b": 2}


    def test_running_sum():
        assert running_sum([1, 2, 3]) == 12


    def test_tags_are_per_call():
        assert tag("x") == ["x"]
        assert tag("y") == ["y"]


    def test_label_strips():
        assert label("  box ") == "<box>"
''')


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("inventory") / "inventory-repo"
    (root / "inventory").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "inventory" / "__init__.py").write_text("")
    (root / "inventory" / "core.py").write_text(MODULE)
    (root / "tests" / "test_core.py").write_text(TESTS)
    out = tmp_path_factory.mktemp("suite") / "suite"
    result = generate(root, PYTEST, n=3, seed=1, out=out, name="inventory", workers=2,
                      bug_types=list(PLACEMENT_FINDERS), max_bugs=1, source_dirs=["inventory"], test_dirs=["tests"],
                      max_attempts=40)
    return out, result


def test_generation_keeps_placement_bugs_with_multi_token_fixes_and_checks(generated):
    _, result = generated
    assert len(result.records) >= 2, result.stats.to_dict()
    for record in result.records:
        assert set(record.bug_types) <= set(PLACEMENT_FINDERS), record.bug_types
        moved = any(m.get("bug_type") == "update-after-loop" for m in record.mutations)
        assert moved or count_changed_tokens(record.fix_patch) >= 3, record.fix_patch
        assert record.behaviour and record.behaviour.get("inputs"), record.task_id


def test_placement_tasks_play_oracle_one_nop_zero(generated, tmp_path, monkeypatch):
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    out, result = generated
    for record in result.records[:2]:
        oracle, nop, _ = oracle_and_nop(SweSynthSuite(out), record.task_id)
        assert (oracle, nop) == (1.0, 0.0), record.task_id


def test_each_rejection_count_keeps_one_whole_reason(generated, capsys):
    """A user adding a project sees which report rule or which name a candidate failed on, not only a count."""
    _, result = generated
    stats = result.stats
    first = "no clean bug report: no failing test shows a concrete call, its outcome and the expected one"
    kept = stats.examples.get("no clean bug report") or first  # the run's own first such reason, where it had one
    stats.reject(first)
    stats.reject("no clean bug report: a second reason is not kept")
    assert stats.rejected["no clean bug report"] >= 2
    assert stats.examples["no clean bug report"] == kept
    assert stats.to_dict()["rejected_examples"]["no clean bug report"] == stats.examples["no clean bug report"]
    lines = stats.rejection_lines()
    assert lines[0].startswith("rejected: ") and any("e.g. no clean bug report: no failing test" in x for x in lines)
