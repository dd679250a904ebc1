"""Process-reward pay for a non-fix, under every reward table: below half the oracle's return.

A non-fix can make the target tests pass without fixing anything (an always-equal return value, a
wrapper that swallows the buggy function's exceptions, a hard-coded value), and seed 000's table
pays half the reward for the pass rate of a buggy repository. Every table reconciles what tests
passing paid with the final grade: a failed, test-graded episode keeps at most ``failed_cap``
(0.3) of the solved-task reward. Each episode here runs once, in a real bubblewrap sandbox graded by
the repository's tests, under all tables at once (stacked wrappers, each one's reward tapped), with
the reconciliation on (as shipped) and off: the sabotage, which these non-fixes must beat.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.nonfix_rewards import TABLES, play, tapped_env
from termgym.tasks.swesynth import default_suite
from termgym.tasks.swesynth.task import prepare_workspace
from termgym.wrappers.rewards import PROGRESS_TABLE, SEED000

#: A toy task whose target test an always-equal return passes while other required tests fail, and
#: a real bundled task (isodate).
TASKS = ("ledgerly-03e7642999", "isodate-01194bbebc")
NON_FIXES = ("nop", "farm", "swallow", "always_equal", "random_edit")
SHIPPED = ("progress", "seed000")


@pytest.fixture(scope="module")
def episodes(tmp_path_factory) -> dict[tuple[str, str], dict]:
    cache = tmp_path_factory.mktemp("swesynth-cache")
    out = {}
    for task_id in TASKS:
        suite = default_suite("toy" if task_id.startswith("ledgerly") else "v1", cache_dir=cache)
        env, taps = tapped_env(str(cache), path="toy" if task_id.startswith("ledgerly") else "v1")
        try:
            tree = prepare_workspace(suite.load(task_id).record, Path(cache))
            for script in ("oracle", *NON_FIXES):
                result = play(env, taps, task_id, script, tree)
                if result is not None:
                    out[task_id, script] = result
        finally:
            env.close()
    return out


def test_the_tables_under_test_are_the_shipped_ones():
    assert PROGRESS_TABLE.failed_cap == SEED000.failed_cap == 0.3
    assert TABLES["progress"] == "progress" and TABLES["seed000"] == "seed000"


def test_the_oracle_solves_every_task(episodes):
    for task_id in TASKS:
        result = episodes[task_id, "oracle"]
        assert result["grade"]["score"] == 1.0, result
        assert all(r >= 1.0 for r in result["returns"].values()), result


@pytest.mark.parametrize("table", SHIPPED)
def test_no_non_fix_earns_half_the_oracles_return(episodes, table):
    for (task_id, script), result in episodes.items():
        if script == "oracle":
            continue
        assert result["grade"]["score"] == 0.0 and not result["grade"]["infra_error"], (task_id, script, result)
        oracle = episodes[task_id, "oracle"]["returns"][table]
        got = result["returns"][table]
        assert got < 0.5 * oracle, f"{script} on {task_id} under {table}: {got:.3f} vs the oracle's {oracle:.3f}"
        assert got <= 0.3 + 1e-9


@pytest.mark.parametrize("table", SHIPPED)
def test_without_the_reconciliation_a_non_fix_earns_more_than_half(episodes, table):
    """The sabotage: the same episodes with ``failed_cap=None``. Some non-fix passes the target tests
    (progress) or the buggy repository's pass rate (seed 000) and would out-earn half the oracle."""
    off = f"{table} (reconciliation off)"
    over = [(task_id, script, result["returns"][off]) for (task_id, script), result in episodes.items()
            if script != "oracle" and result["returns"][off] >= 0.5 * episodes[task_id, "oracle"]["returns"][off]]
    assert over, f"no non-fix beat half the oracle under {off}: the test would not see a broken reconciliation"
