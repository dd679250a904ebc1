"""What a learning benchmark leaves behind (``benchmarks.common.write_results``): JSON, table and curves."""

from __future__ import annotations

import json

import pytest

from benchmarks.common import write_results
from benchmarks.plots import seed_curves

RUNS = [{"variant": "intact", "seed": s, "train_curve": [0.3, 0.6, 0.9]} for s in (0, 1)] + \
       [{"variant": "shuffled", "seed": s, "curve": [0.3, 0.35, 0.3]} for s in (0, 1)]


def test_the_runs_their_table_and_their_curves_are_written_beside_each_other(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "bench.json"
    write_results(str(out), RUNS, {"intact": {"mean": 0.9}}, "2 cores", "| table |\n",
                  curves=lambda png: seed_curves(png, "test", RUNS))
    assert json.loads(out.read_text())["runs"] == RUNS
    assert (tmp_path / "bench.md").read_text() == "| table |\n"
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_out_only_the_table_is_printed(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_results(None, RUNS, {}, "2 cores", "| table |\n", curves=lambda png: pytest.fail("no file to draw"))
    assert "| table |" in capsys.readouterr().out and not list(tmp_path.iterdir())
