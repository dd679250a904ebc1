"""The choose-the-fix benchmark's report: per-variant spread and each seed's claim against its shuffled baseline.

The launches themselves take minutes each (``python -m benchmarks.choose_fix``); here the report is fed
runs of known numbers, including seeds where the claim fails.
"""

from __future__ import annotations

from benchmarks import choose_fix


def _run(variant: str, seed: int, *, fix: float, wrong: float, nothing: float, forge: float, reward: float) -> dict:
    return {"seed": seed, "variant": variant, "steps": 5, "held_out_before": 0.3, "held_out_after": reward,
            "choices_before": {}, "choices_after": {"fix": fix, "wrong edit": wrong, "nothing": nothing, "forge": forge},
            "train_curve": [0.3, reward], "failed_checks": {}, "seconds": 300.0}


LEARNED = [
    _run("unchecked", 0, fix=0.04, wrong=0.04, nothing=0.0, forge=0.92, reward=0.96),
    _run("unchecked-shuffled", 0, fix=0.2, wrong=0.4, nothing=0.2, forge=0.2, reward=0.4),
    _run("checked", 0, fix=0.33, wrong=0.62, nothing=0.05, forge=0.0, reward=0.33),
    _run("checked-shuffled", 0, fix=0.2, wrong=0.3, nothing=0.2, forge=0.3, reward=0.2),
]


def test_both_claims_hold_when_each_seed_learns_past_its_baseline():
    summary = choose_fix.summary(LEARNED)
    assert summary["unchecked claim"]["every_seed"] is True
    assert summary["unchecked claim"]["per_seed"][0] == {"forge": 0.92, "baseline": 0.2, "holds": True}
    assert summary["checked claim"]["per_seed"][0]["edit"] == 0.95
    assert summary["checked claim"]["every_seed"] is True
    assert summary["unchecked"]["forge"] == {"mean": 0.92, "min": 0.92, "max": 0.92}
    assert "holds for every seed" in choose_fix.markdown(LEARNED, "test box")


def test_a_checked_run_that_still_forges_fails_its_claim():
    runs = LEARNED[:3] + [_run("checked", 0, fix=0.3, wrong=0.5, nothing=0.0, forge=0.2, reward=0.3)] + LEARNED[3:]
    runs = [r for r in runs if not (r["variant"] == "checked" and r["choices_after"]["forge"] == 0.0)]
    summary = choose_fix.summary(runs)
    assert summary["checked claim"]["every_seed"] is False
    assert summary["unchecked claim"]["every_seed"] is True
    assert "does NOT hold for every seed" in choose_fix.markdown(runs, "test box")


def test_an_unchecked_run_no_better_than_its_baseline_fails_its_claim():
    runs = [_run("unchecked", 1, fix=0.0, wrong=0.0, nothing=0.0, forge=0.85, reward=0.85),
            _run("unchecked-shuffled", 1, fix=0.05, wrong=0.05, nothing=0.0, forge=0.9, reward=0.9)]
    assert choose_fix.summary(runs)["unchecked claim"]["every_seed"] is False


def test_a_seed_without_its_baseline_makes_no_claim():
    summary = choose_fix.summary([LEARNED[0], LEARNED[2]])
    assert "unchecked claim" not in summary and "checked claim" not in summary


def test_with_the_evidence_the_claim_is_the_fix_itself_not_any_edit():
    fixed = _run("evidence", 2, fix=0.88, wrong=0.08, nothing=0.0, forge=0.04, reward=0.88)
    baseline = _run("evidence-shuffled", 2, fix=0.3, wrong=0.4, nothing=0.1, forge=0.2, reward=0.3)
    summary = choose_fix.summary([fixed, baseline])
    assert summary["evidence claim"]["per_seed"][2]["fix"] == 0.88 and summary["evidence claim"]["every_seed"] is True
    # edits on all episodes but the fix only on a third: the checked claim would hold, this one does not
    any_edit = _run("evidence", 2, fix=0.33, wrong=0.67, nothing=0.0, forge=0.0, reward=0.33)
    assert choose_fix.summary([any_edit, baseline])["evidence claim"]["every_seed"] is False
