"""The reward table as data: seed 000's defaults, configuration, and the anti-farming invariant."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from termgym.wrappers.rewards import (
    DEFAULT_CAPS,
    DEFAULT_TABLE,
    EVENTS,
    PROGRESS_TABLE,
    SEED000,
    SEED000_TABLE,
    ProcessReward,
    RewardTable,
    pass_rate_of,
    progress_of,
)

# Seed 000's "Process Rewards" table, transcribed (event -> reward; partial pass is 0.5 x pass_rate).
SEED000_ROWS = {
    "Valid bash command": 0.01,
    "Command succeeds": 0.02,
    "Code modified": 0.03,
    "Tests discovered": 0.02,
    "Invalid format": -0.05,
    "Timeout": -0.02,
    "All tests pass": 1.0,
    "Partial pass": 0.5,
}
SEED_TO_EVENT = {
    "Valid bash command": "valid_command",
    "Command succeeds": "command_success",
    "Code modified": "code_modified",
    "Tests discovered": "tests_discovered",
    "Invalid format": "invalid_format",
    "Timeout": "timeout",
    "All tests pass": "all_tests_pass",
    "Partial pass": "partial_pass",
}
ROOT = Path(__file__).resolve().parents[2]


def test_seed000_table_equals_seed_000_and_is_available_by_name():
    expected = {SEED_TO_EVENT[k]: v for k, v in SEED000_ROWS.items()}
    assert dict(SEED000_TABLE) == expected
    assert {k: v for k, v in SEED000.weights.items() if k in expected} == expected
    assert RewardTable.named("seed000") is SEED000 and SEED000.scoring == "pass_rate" and not SEED000.settle
    assert set(expected) <= set(EVENTS)


def test_default_table_is_progress_with_seed_000_step_weights():
    assert DEFAULT_TABLE is PROGRESS_TABLE is RewardTable.named("progress")
    assert DEFAULT_TABLE.scoring == "progress" and DEFAULT_TABLE.settle
    for event, weight in SEED000_TABLE.items():
        if event not in ("all_tests_pass", "partial_pass"):
            assert DEFAULT_TABLE.weights[event] == weight
    assert DEFAULT_TABLE.weights["target_tests"] == 1.0 and DEFAULT_TABLE.weights["regressions"] == 1.0
    with pytest.raises(ValueError, match="unknown reward table 'seed0'"):
        RewardTable.named("seed0")


def test_seed_000_file_table_matches_when_present():
    """Where the seed itself is on disk (developer machines), parse its markdown table too."""
    seeds = sorted((ROOT.parent / "shared" / "seeds").glob("000_*.md"))
    if not seeds:
        pytest.skip("seed 000 is not on this machine; the transcription above is the reference")
    text = seeds[0].read_text()
    section = text.split("## Process Rewards", 1)[1].split("##", 1)[0]
    parsed = {}
    for row in re.findall(r"^\|\s*\**([A-Za-z ]+?)\**\s*\|\s*\**([-+]?[\d.]+)", section, re.M):
        parsed[SEED_TO_EVENT[row[0]]] = float(row[1])
    assert parsed == dict(SEED000_TABLE)


def test_docs_table_matches_code():
    doc = (ROOT / "docs" / "rewards.md").read_text()
    for event, weight in {**SEED000_TABLE, "target_tests": 1.0, "regressions": -1.0}.items():
        cap = DEFAULT_CAPS.get(event)
        pattern = rf"\|\s*`{event}`\s*\|\s*{re.escape(f'{weight:+g}')}"
        assert re.search(pattern, doc), f"docs/rewards.md does not list {event} with {weight:+g}"
        if cap is not None:
            assert re.search(rf"\|\s*`{event}`\s*\|[^\n]*\|\s*{cap}\s*\|", doc), f"docs cap for {event} should be {cap}"
    assert f"{DEFAULT_TABLE.max_shaping():.2f}" in doc


def test_max_shaping_is_below_the_outcome_reward():
    assert DEFAULT_TABLE.max_shaping() == pytest.approx(10 * 0.01 + 10 * 0.02 + 5 * 0.03 + 1 * 0.02)
    assert DEFAULT_TABLE.max_shaping() < DEFAULT_TABLE.weights["all_tests_pass"]


def test_max_outcome_depends_on_scoring():
    assert PROGRESS_TABLE.max_outcome() == 1.0 and SEED000.max_outcome() == 1.0
    assert RewardTable(weights={"target_tests": 2.0}).max_outcome() == 2.0


def test_every_weight_and_cap_is_configurable():
    table = RewardTable(weights={"code_modified": 0.1, "timeout": -0.5}, caps={"code_modified": 2})
    assert table.weights["code_modified"] == 0.1 and table.weights["timeout"] == -0.5
    assert table.weights["valid_command"] == 0.01  # the rest stays seed 000's
    assert table.caps["code_modified"] == 2
    again = RewardTable.from_dict(table.to_dict())
    assert again == table
    seeded = RewardTable.from_dict({"base": "seed000", "caps": {"code_modified": 1}})
    assert seeded.scoring == "pass_rate" and seeded.caps["code_modified"] == 1 and not seeded.settle


def test_farmable_table_is_refused_unless_allowed(calc_env):
    env = calc_env()
    with pytest.raises(ValueError, match="can be farmed"):
        ProcessReward(env, caps={"valid_command": None})
    with pytest.raises(ValueError, match="can be farmed"):
        ProcessReward(env, weights={"command_success": 0.2})
    wrapped = ProcessReward(env, caps={"valid_command": None}, allow_farmable=True)
    assert wrapped.table.max_shaping() == float("inf")


@pytest.mark.parametrize("bad, message", [
    ({"weights": {"ran_ls": 1.0}}, "unknown reward event"),
    ({"caps": {"all_tests_pass": 1}}, "unknown reward event"),
    ({"caps": {"valid_command": -1}}, "non-negative integer"),
    ({"weights": {"timeout": "high"}}, "must be a number"),
    ({"weigths": {}}, "unknown reward table key"),
    ({"scoring": "vibes"}, "scoring must be one of"),
    ({"weights": {"target_tests": 0}}, "needs target_tests > 0"),
    ({"base": "nope"}, "unknown reward table 'nope'"),
])
def test_bad_tables_are_rejected_with_the_key_named(bad, message):
    with pytest.raises((ValueError, TypeError), match=message):
        RewardTable.from_dict(bad)


@pytest.mark.parametrize("grade, rate", [
    ({"score": 0.0, "passed": False, "pass_rate": 0.25}, 0.25),
    ({"score": 0.0, "passed": False, "all_result": "234/236"}, 234 / 236),
    ({"score": 0.4, "passed": False}, 0.4),
    ({"score": 0.0, "passed": False, "pass_rate": 1.7}, 1.0),
])
def test_pass_rate_of(grade, rate):
    assert pass_rate_of(grade) == pytest.approx(rate)


def test_seed000_outcome_prefers_all_passed_then_pass_rate():
    assert SEED000.outcome({"score": 1.0, "passed": True}) == ("all_tests_pass", 1.0, 1.0)
    assert SEED000.outcome({"score": 0.0, "passed": False, "all_passed": False, "pass_rate": 0.5}) == (
        "partial_pass", 0.5, 0.25)
    assert SEED000.outcome({"score": 0.9, "passed": False, "all_passed": True})[0] == "all_tests_pass"
    with pytest.raises(ValueError, match="pass_rate must be a number"):
        SEED000.outcome({"score": 0.0, "passed": False, "pass_rate": "most"})


@pytest.mark.parametrize("grade, target, regressions", [
    ({"score": 0.0, "passed": False, "target_result": "1/4", "all_result": "200/233"}, 0.25, 30 / 229),
    ({"score": 1.0, "passed": True, "target_result": "4/4", "all_result": "233/233"}, 1.0, 0.0),
    ({"score": 0.0, "passed": False, "all_result": "0/233", "pass_rate": 0.0}, 0.0, 0.0),  # patch did not apply
    ({"score": 0.5, "passed": False}, 0.5, 0.0),  # a score-graded suite (LIVEWEB)
    ({"score": 0.5, "passed": True}, 1.0, 0.0),
])
def test_progress_of(grade, target, regressions):
    progress = progress_of(grade)
    assert progress.target == pytest.approx(target) and progress.regressions == pytest.approx(regressions)


@pytest.mark.parametrize("grade, message", [
    ({"target_result": "five"}, "target_result must look like"),
    ({"target_result": "5/4"}, "target_result must look like"),
    ({"target_result": "1/4", "all_result": 3}, "all_result must look like"),
    ({"score": "high"}, "score must be a number"),
])
def test_progress_of_rejects_malformed_grades(grade, message):
    with pytest.raises(ValueError, match=message):
        progress_of(grade)


def test_progress_outcome_is_floored_and_reports_the_kept_share():
    events, kept = PROGRESS_TABLE.outcome_events({"target_result": "1/2", "all_result": "51/102"})
    assert kept == 0.0 and sum(e["reward"] for e in events) == 0.0
    assert PROGRESS_TABLE.outcome({"target_result": "2/2", "all_result": "101/102"}) == (
        "target_tests", pytest.approx(0.99), pytest.approx(0.99))
