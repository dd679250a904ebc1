"""Difficulty signals from real pytest failure reports, and the tiers they give."""

from __future__ import annotations

import shutil

import pytest

from termgym.factory.swesynth.bugs.callgraph import ModuleMap
from termgym.factory.swesynth.bugs.signals import (
    SignalError,
    changed_locations,
    count_changed_tokens,
    count_edits,
    difficulty_points,
    difficulty_tier,
    shows_changed_line,
    task_signals,
    traceback_locations,
)
from termgym.factory.swesynth.bugs.source import units
from termgym.factory.swesynth.inject import find_bugs, mutate_files
from termgym.factory.swesynth.patches import make_patch
from termgym.factory.swesynth.validate import run_tests
from tests.swesynth_bugs.shop import SOURCES, TEST_COMMAND, TESTS


def run_bug(shop, tmp_path, mutated: dict[str, str]):
    """Run the shop's tests with ``mutated`` files; the failing test ids, reports and the bug patch."""
    tree = tmp_path / "tree"
    shutil.copytree(shop, tree)
    for rel, text in mutated.items():
        (tree / rel).write_text(text)
    result = run_tests(tree, TEST_COMMAND, timeout=300)
    failing = sorted(t for t, o in result.outcomes.items() if o != "passed")
    assert failing, result.output[-2000:]
    return failing, result, make_patch({p: SOURCES[p] for p in mutated}, mutated)


def edit(rel: str, old: str, new: str) -> dict[str, str]:
    assert SOURCES[rel].count(old) == 1
    return {rel: SOURCES[rel].replace(old, new)}


def test_a_coordinated_bug_seen_from_another_module_is_hard(shop, tmp_path):
    found = units(find_bugs(dict(SOURCES), ["coordinated-param-swap"]))
    (unit,) = [u for u in found if u[0].function == "discount"]
    failing, result, patch = run_bug(shop, tmp_path, mutate_files(dict(SOURCES), unit))
    assert failing == ["tests/test_report.py::test_sale"]
    signals = task_signals(patch, failing, result.messages, repo=shop)
    assert signals == {"traceback_shows_line": False, "test_file_names_module": False, "tokens_changed": 4,
                       "files_touched": 2, "edits": 2, "cross_module": True, "failing_tests": 1}
    assert difficulty_tier(signals) == "hard"


def test_a_bug_raising_at_its_line_in_a_test_named_after_it_is_easy(shop, tmp_path):
    failing, result, patch = run_bug(shop, tmp_path, edit("shop/util.py", "value = float(", "value = int("))
    assert "tests/test_util.py::test_parse_price" in failing
    # pytest's own report names shop/util.py at the changed line ...
    line = changed_locations(patch)["shop/util.py"][0][0]
    assert ("shop/util.py", line) in traceback_locations(result.messages["tests/test_util.py::test_parse_price"])
    signals = task_signals(patch, failing, result.messages, repo=shop)
    # ... and `from shop import parse_price` reaches util.py through the package's re-export.
    assert signals["traceback_shows_line"] and signals["test_file_names_module"]
    assert signals["cross_module"] is False and signals["edits"] == 1 and signals["tokens_changed"] == 1
    assert difficulty_tier(signals) == "easy"
    # The terminal output works as well as the junit messages.
    assert task_signals(patch, failing, result.output, repo=shop)["traceback_shows_line"]


def test_a_wrong_value_flowing_out_hides_the_line(shop, tmp_path):
    failing, result, patch = run_bug(shop, tmp_path, edit("shop/util.py", '"count": len(items)',
                                                          '"count": len(items) + 1'))
    assert failing == ["tests/test_cart.py::test_describe", "tests/test_report.py::test_stats"]
    signals = task_signals(patch, failing, result.messages, repo=shop)
    assert not signals["traceback_shows_line"] and not signals["test_file_names_module"]
    assert signals["cross_module"] is True
    assert difficulty_points(signals) == 4 and difficulty_tier(signals) == "hard"
    # Given the modules and test texts instead of a checkout, the same answer.
    modules = ModuleMap(SOURCES, SOURCES.__getitem__)
    assert task_signals(patch, failing, result.messages, modules=modules, test_texts=TESTS) == signals


PATCH = """\
diff --git a/pkg/a.py b/pkg/a.py
--- a/pkg/a.py
+++ b/pkg/a.py
@@ -10,4 +10,4 @@ def f(x):
     y = 1
-    if x < limit:
+    if x <= limit:
         return y
     z = 2
@@ -40,4 +40,3 @@ def g(v):
     a = 1
-    if v is None:
-        raise ValueError("v")
     return a
"""


def test_patch_readers():
    assert changed_locations(PATCH) == {"pkg/a.py": [(11, "    if x <= limit:"), (41, "")]}
    assert count_edits(PATCH) == 2
    assert count_changed_tokens(PATCH) == 1 + 10  # '<' -> '<=', then the deleted guard's tokens
    native = 'Traceback (most recent call last):\n  File "/repo/pkg/a.py", line 11, in f\n    if x <= limit:\n'
    assert traceback_locations(native) == [("/repo/pkg/a.py", 11)]
    assert shows_changed_line(PATCH, native)
    assert shows_changed_line(PATCH, "pkg/a.py:41: in g\n    return a\nE   TypeError")  # where the guard was
    assert not shows_changed_line(PATCH, "pkg/a.py:12: in f\n    return y\nE   AssertionError")
    # A distinctive changed line printed in a report counts even without its location.
    assert shows_changed_line(PATCH, ">       if x <= limit:\nE   TypeError")


@pytest.mark.parametrize("signals, points, tier", [
    ({"traceback_shows_line": True, "test_file_names_module": True, "tokens_changed": 1, "files_touched": 1,
      "edits": 1, "cross_module": False}, 0, "easy"),
    ({"traceback_shows_line": True, "test_file_names_module": False, "tokens_changed": 1, "files_touched": 1,
      "edits": 1, "cross_module": False}, 1, "easy"),
    ({"traceback_shows_line": False, "test_file_names_module": True, "tokens_changed": 1, "files_touched": 1,
      "edits": 1, "cross_module": None}, 2, "medium"),
    ({"traceback_shows_line": True, "test_file_names_module": True, "tokens_changed": 6, "files_touched": 1,
      "edits": 2, "cross_module": False}, 3, "medium"),
    ({"traceback_shows_line": False, "test_file_names_module": True, "tokens_changed": 2, "files_touched": 1,
      "edits": 2, "cross_module": False}, 4, "hard"),
])
def test_tier_thresholds(signals, points, tier):
    assert difficulty_points(signals) == points and difficulty_tier(signals) == tier


def test_bad_inputs_are_named(shop):
    with pytest.raises(SignalError, match="not a unified diff"):
        task_signals("", ["tests/test_util.py::test_x"], "")
    with pytest.raises(SignalError, match="no failing tests"):
        task_signals(PATCH, [], "")
    with pytest.raises(SignalError, match="no failure report for any failing test"):
        task_signals(PATCH, ["tests/test_a.py::t"], {"tests/test_b.py::t": "boom"})
    with pytest.raises(SignalError, match="cannot read failing test file 'tests/test_missing.py'"):
        task_signals(PATCH, ["tests/test_missing.py::t"], "boom", repo=shop)
    with pytest.raises(SignalError, match="is not a directory"):
        task_signals(PATCH, ["tests/test_a.py::t"], "boom", repo=shop / "nope")
    with pytest.raises(SignalError, match="signals lack edits"):
        difficulty_tier({"traceback_shows_line": True, "test_file_names_module": True, "tokens_changed": 1,
                         "files_touched": 1})
