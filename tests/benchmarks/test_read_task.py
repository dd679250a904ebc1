"""The read-task benchmark's report: per-variant spread and the per-seed margin over the masked baseline.

The launches themselves take minutes each (``python -m benchmarks.read_task``); here the report is fed
runs of known numbers, including one whose intact seed does not beat its baseline.
"""

from __future__ import annotations

from benchmarks import read_task


def _run(variant: str, seed: int, after: float) -> dict:
    return {"seed": seed, "variant": variant, "steps": 6, "held_out_before": 0.35, "held_out_after": after,
            "train_curve": [0.3, after], "failed_checks": {}, "seconds": 300.0}


def test_every_seed_beating_its_own_baseline_is_the_claim():
    runs = [_run("intact", 0, 0.92), _run("masked", 0, 0.31), _run("intact", 1, 0.94), _run("masked", 1, 0.39)]
    summary = read_task.summary(runs)
    assert summary["intact"] == {"seeds": 2, "mean": 0.93, "min": 0.92, "max": 0.94}
    assert summary["margin"]["per_seed"] == {0: 0.61, 1: 0.55}
    assert summary["margin"]["every_seed_beats_its_baseline"] is True
    assert "every seed beats its own baseline by 0.3" in read_task.markdown(runs, "test box")


def test_one_seed_below_its_baseline_margin_fails_the_claim():
    runs = [_run("intact", 0, 0.92), _run("masked", 0, 0.31), _run("intact", 1, 0.45), _run("masked", 1, 0.39)]
    summary = read_task.summary(runs)
    assert summary["margin"]["every_seed_beats_its_baseline"] is False
    assert "NOT every seed beats" in read_task.markdown(runs, "test box")


def test_a_seed_without_its_baseline_has_no_margin():
    summary = read_task.summary([_run("intact", 0, 0.92), _run("masked", 1, 0.31)])
    assert "margin" not in summary


def test_the_shuffled_baseline_gets_its_own_margin():
    runs = [_run("intact", 0, 0.92), _run("masked", 0, 0.31), _run("shuffled", 0, 0.70)]
    summary = read_task.summary(runs)
    assert summary["margin"]["per_seed"] == {0: 0.61} and summary["margin"]["every_seed_beats_its_baseline"]
    assert summary["margin over shuffled"]["per_seed"] == {0: 0.22}
    assert summary["margin over shuffled"]["every_seed_beats_its_baseline"] is False
    table = read_task.markdown(runs, "test box")
    assert "intact minus masked, per seed: 0: +0.61; every seed beats" in table
    assert "intact minus shuffled, per seed: 0: +0.22; NOT every seed beats" in table
