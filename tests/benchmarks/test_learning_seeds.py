"""The seeds benchmark's report: per setting, each seed's margin over its own shuffled-credit baseline."""

from __future__ import annotations

from benchmarks import learning_seeds


def _run(turns: int, variant: str, seed: int, final: float) -> dict:
    return {"turns": turns, "seed": seed, "variant": variant, "steps": 6, "curve": [0.4, final], "final": final,
            "seconds": 40.0}


def test_every_seed_beating_its_shuffled_baseline_is_the_claim():
    runs = [_run(1, "intact", 0, 0.97), _run(1, "shuffled", 0, 0.41), _run(1, "intact", 1, 0.94),
            _run(1, "shuffled", 1, 0.50), _run(2, "intact", 0, 0.95), _run(2, "shuffled", 0, 0.30)]
    summary = learning_seeds.summary(runs)
    assert summary["1 turn(s), intact"] == {"seeds": 2, "mean": 0.955, "min": 0.94, "max": 0.97}
    assert summary["1 turn(s), margin"]["per_seed"] == {0: 0.56, 1: 0.44}
    assert summary["1 turn(s), margin"]["every_seed"] and summary["2 turn(s), margin"]["every_seed"]
    assert "every seed beats its baseline by 0.3" in learning_seeds.markdown(runs, "test box")


def test_a_seed_that_learns_no_more_than_its_baseline_fails_the_claim():
    runs = [_run(2, "intact", 3, 0.62), _run(2, "shuffled", 3, 0.55)]
    assert learning_seeds.summary(runs)["2 turn(s), margin"]["every_seed"] is False
    assert "NOT every seed beats" in learning_seeds.markdown(runs, "test box")
