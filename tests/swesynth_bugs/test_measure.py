"""The operator measurement (benchmarks/bug_operators.py) runs end to end on the shop project."""

from __future__ import annotations

from benchmarks.bug_operators import measure
from tests.swesynth_bugs.shop import TEST_COMMAND


def test_measure_counts_breakage_and_signals(shop):
    lines: list[str] = []
    result = measure(shop, TEST_COMMAND, ["coordinated-key-rename", "wrong-aggregate"], 1, 0, ["shop"], ["tests"],
                     log=lines.append)
    key = result["coordinated-key-rename"]
    assert key["candidates"] == 2 and key["tried"] == 1 and key["broke"] == 1
    assert key["edits"] == {2: 1} and key["tiers"] == {"hard": 1} and key["shows_line"] == 0
    agg = result["wrong-aggregate"]
    assert agg["candidates"] >= 2 and agg["tried"] == 1
    assert len(lines) == 2 and lines[0].strip().startswith("coordinated-key-rename: 2 candidates")
