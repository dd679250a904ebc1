"""Shaping cannot be farmed: looping agents earn less than the oracle and no more than the cap."""

from __future__ import annotations

import pytest

from termgym.env import oracle_actions
from termgym.wrappers.rewards import DEFAULT_TABLE, SEED000, ProcessReward

BUDGET = 30


def play(env: ProcessReward, messages, reset: bool = True) -> tuple[float, dict]:
    """Play until the episode ends; returns (sum of rewards, last info)."""
    if reset:
        env.reset(seed=0)
    total = 0.0
    for message in messages:
        _, reward, terminated, truncated, info = env.step(message)
        total += float(reward)
        if terminated or truncated:
            return total, info
    raise AssertionError("the episode did not end")


def oracle_return(calc_env, table: str = "progress") -> float:
    env = ProcessReward(calc_env(max_steps=BUDGET), table)
    env.reset(seed=0)
    total, info = play(env, oracle_actions(env.unwrapped))
    assert info["grade"]["passed"]
    return total


@pytest.mark.parametrize("table", ["progress", "seed000"])
@pytest.mark.parametrize("farmer", ["ls", "varied", "editor", "everything"])
def test_looping_agents_earn_less_than_the_oracle_and_the_cap(calc_env, cmd, farmer, table):
    scripts = {
        "ls": lambda i: cmd("ls"),
        "varied": lambda i: cmd(f"ls && echo {i}"),
        "editor": lambda i: cmd(f"echo '# note {i}' >> src/calc.py"),
        "everything": lambda i: cmd([f"ls tests && echo {i}", f"echo '# {i}' >> src/calc.py",
                                     f"python3 -m pytest -q -p no:cacheprovider tests; echo {i}"][i % 3]),
    }
    env = ProcessReward(calc_env(max_steps=BUDGET), table)
    total, info = play(env, (scripts[farmer](i) for i in range(BUDGET)))
    assert info["end_reason"] == "max_steps"  # it used the whole step budget
    assert not info["grade"]["passed"]
    shaping = info["process_reward"]["shaping"]
    assert total < oracle_return(calc_env, table)
    if table == "progress":  # no progress: every bit of shaping is taken back
        assert total == pytest.approx(0.0) and shaping == pytest.approx(0.0)
        return
    assert total == pytest.approx(shaping)  # failed: the outcome pays 0.5 x 0
    assert shaping <= DEFAULT_TABLE.max_shaping() + 1e-9
    if farmer == "ls":
        assert total == pytest.approx(0.03)  # only the first ls pays
    if farmer == "everything":
        assert shaping == pytest.approx(DEFAULT_TABLE.max_shaping())  # the cap is reachable, not exceedable


def test_documented_cap_is_below_the_outcome():
    assert DEFAULT_TABLE.max_shaping() == pytest.approx(0.47)
    assert DEFAULT_TABLE.max_shaping() < DEFAULT_TABLE.weights["all_tests_pass"]


def test_on_swesynth_ls_for_the_whole_budget_earns_less_than_the_oracle():
    """The bundled SWE-SYNTH suite under seed 000's table: 50 steps of ls vs the reference fix.

    This pins down why seed 000's table is not the default: the outcome pays 0.5 x the share of
    *all* tests passing, and a buggy repository already passes most of them (see
    tests/adversarial/test_process_reward_farming.py for the progress table on the same tasks).
    """
    import gymnasium as gym

    import termgym  # noqa: F401

    env = ProcessReward(gym.make("termgym/SweSynth-v0", path="toy"), table=SEED000)
    try:
        task_id = env.unwrapped.suite.task_ids()[0]
        env.reset(seed=0, options={"task_id": task_id})
        total, info = play(env, oracle_actions(env.unwrapped), reset=False)
        assert info["grade"]["all_passed"]
        oracle_total = total

        env.reset(seed=0, options={"task_id": task_id})
        budget = env.unwrapped.max_steps
        ls = "THOUGHT: look around.\n\n```bash\nls\n```"
        total, info = play(env, [ls] * budget, reset=False)
    finally:
        env.close()
    assert info["end_reason"] == "max_steps" and not info["grade"]["all_passed"]
    shaping = info["process_reward"]["shaping"]
    assert shaping == pytest.approx(0.03) and shaping <= SEED000.max_shaping()
    # seed 000's outcome pays 0.5 x the share of tests that pass with the bug in; the grade failed, so
    # the reconciliation keeps no more than failed_cap (0.3) of the solved-task reward of it
    [partial] = [e for e in info["reward_events"] if e["event"] == "partial_pass"]
    assert partial["reward"] == pytest.approx(0.5 * info["grade"]["pass_rate"]) and partial["reward"] + 0.03 > 0.3
    assert total == pytest.approx(0.3) and info["process_reward"]["reconciled"] < 0
    assert total < 0.5 * oracle_total
