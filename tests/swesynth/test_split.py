"""Single-bug tasks split out of multi-bug ones (termgym.factory.swesynth.split, ``termgym swesynth
split``), on the mini project: each bug of a two-bug task is proposed alone, exactly as the bug
patch made it, and becomes a task of its own through generate; nothing else is proposed; a bug a
single-bug task already carries is not proposed again."""

from __future__ import annotations

import pytest

from termgym.cli import main
from termgym.factory.swesynth.audit import bug_units, unit_files
from termgym.factory.swesynth.generate import generate
from termgym.factory.swesynth.inject import apply_mutations
from termgym.factory.swesynth.split import (
    SplitBugs,
    SplitError,
    single_bugs,
    single_bugs_of_one,
    split_project,
)

PYTEST = "python3 -m pytest -q tests"


def _applied(repo, unit) -> dict[str, str]:
    return {path: apply_mutations((repo / path).read_text(), [m for m in unit if m.path == path])
            for path in {m.path for m in unit}}


@pytest.fixture(scope="module")
def two_bug_tasks(mini_baseline, tmp_path_factory):
    repo, _ = mini_baseline
    result = generate(repo, PYTEST, n=3, seed=5, out=tmp_path_factory.mktemp("multi"), max_bugs=2, workers=1,
                      sandbox_check=False, max_attempts=150)
    multi = [r for r in result.records if len(bug_units(r)) >= 2]
    assert multi, result.stats.rejected
    return repo, result.records, multi


def test_each_bug_of_a_multi_bug_task_is_proposed_alone_as_the_patch_made_it(two_bug_tasks):
    repo, records, multi = two_bug_tasks
    for record in multi:
        units = single_bugs(record, repo)
        assert len(units) == len(bug_units(record)) >= 2
        for unit, files in zip(units, unit_files(record, repo)):
            assert _applied(repo, unit) == files  # the bug alone, byte for byte
            assert {m.function for m in unit} <= {m["function"] for m in record.mutations}
    single = next(r for r in records if len(bug_units(r)) == 1)
    assert single_bugs(single, repo) == []  # one bug: nothing to split


def test_split_tasks_are_made_again_through_generate_and_nothing_else_is_proposed(two_bug_tasks, tmp_path):
    repo, records, multi = two_bug_tasks
    source = SplitBugs(records, repo)
    proposed = sum(len(u) for u in source.units)
    assert source.units and source.bug_types
    result = generate(repo, PYTEST, n=len(source.units), seed=0, out=tmp_path / "split", breaker=source, workers=1,
                      sandbox_check=False, max_attempts=len(source.units))
    assert result.stats.candidates == proposed  # no procedural scan beside the split bugs
    assert result.records, result.stats.rejected
    ids = {r.task_id for r in multi}
    for record in result.records:
        assert len(bug_units(record)) == 1 and record.target_tests
        assert set(record.origin["split_from"]) <= ids and record.origin["split_from"]
        assert "source" not in record.origin  # a procedural bug, counted as one by the card
    # a bug that a single-bug task of the suite carries now is not proposed again
    again = SplitBugs([*records, *result.records], repo)
    assert len(again.units) == len(source.units) - len(result.records)
    assert again.skipped["already a task"] >= len(result.records)


def test_sabotage_without_proposes_all_the_procedural_scan_comes_back(two_bug_tasks, tmp_path, monkeypatch):
    repo, records, _ = two_bug_tasks
    source = SplitBugs(records, repo)
    monkeypatch.setattr(SplitBugs, "proposes_all", False)
    result = generate(repo, PYTEST, n=1, seed=0, out=tmp_path / "split", breaker=source, workers=1,
                      sandbox_check=False, max_attempts=1)
    assert result.stats.candidates > sum(len(u) for u in source.units)


def test_a_single_bug_record_is_read_back_and_bad_input_is_named(two_bug_tasks, tmp_path, capsys):
    repo, records, _ = two_bug_tasks
    single = next(r for r in records if len(bug_units(r)) == 1)
    assert _applied(repo, single_bugs_of_one(single, repo)) == unit_files(single, repo)[0]
    with pytest.raises(SplitError, match="no multi-bug task to split"):
        split_project("base58", tmp_path / "out", only=["base58-not-a-task"])
    assert main(["swesynth", "split", "base58", "--out", str(tmp_path / "out"), "--suite", str(tmp_path)]) == 2
    assert "neither a compact suite directory nor a suite name" in capsys.readouterr().err


def test_a_release_history_revert_is_one_bug_however_many_functions_it_touches():
    """The rfc3986 revert of ``to_bytes`` and ``encode_component`` (0.4.1 -> 2.0.0) is one change the
    tests pin: the audit's per-bug checks and ``split`` take it whole (the older ``to_bytes`` alone
    breaks no test; the audit of session 28 counted that as a bug breaking none). Coordinated edits
    are one bug too; two procedural bugs are two."""
    from types import SimpleNamespace

    def record(*kinds):
        return SimpleNamespace(mutations=[{"bug_type": k, "path": "a.py", "line": i, "function": f"f{i}"}
                                          for i, k in enumerate(kinds)])

    assert len(bug_units(record("regression", "regression"))) == 1
    assert len(bug_units(record("coordinated-constant", "coordinated-constant"))) == 1
    assert len(bug_units(record("off-by-one", "wrong-variable"))) == 2
    assert len(bug_units(record("off-by-one", "off-by-one"))) == 2
