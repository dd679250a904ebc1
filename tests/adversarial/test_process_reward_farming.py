"""Process rewards cannot be farmed: scripted agents on real bundled SWE-SYNTH tasks, real sandboxes.

Each script plays one episode of a real task (bubblewrap sandbox, graded by the repository's tests
in a fresh sandbox) under the default table, ``ProcessReward(env)`` ("progress"). The bound the
issue asks for: every script that does not fix the bug returns less than half of what the oracle
returns on the same task; doing nothing returns ~0; an honest attempt that breaks the module is not
out-earned by any farming script. Seed 000's table is played on the issue's farming script too: its
failed episodes are reconciled to ``failed_cap``, and without that they nearly match the oracle.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import gymnasium as gym
import pytest

import termgym  # noqa: F401  (registers the envs)
from termgym.env import oracle_actions
from termgym.wrappers.rewards import ProcessReward

#: One ledgerly and one planwise task from the bundled suite (different repositories and bug types).
TASKS = ("ledgerly-03e7642999", "planwise")
SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def cmd(command: str) -> str:
    return f"THOUGHT: next step.\n\n```bash\n{command}\n```"


def fixed_file(env) -> str:
    """The source file the reference fix touches (a farmer that read the bug report could guess it)."""
    return re.search(r"^\+\+\+ b/(\S+)", env.unwrapped.task.metadata["fix_patch"], re.M).group(1)


def issue_farm(env) -> list[str]:
    """The issue's script: ls tests, six write/revert edits of one file, ten distinct ls, submit."""
    path = fixed_file(env)
    edits = []
    for i in range(6):
        # distinct commands (so each pays valid_command), the same content each time
        edits += [cmd(f"echo '# tweak' >> {path} && echo edit {i}"), cmd(f"git checkout -- {path} && echo reverted {i}")]
    ls = [cmd(c) for c in ("ls", "ls -la", "ls -l tests", "ls -R | head", "ls -1", "ls -a", "ls -lh", "ls -t",
                           "ls -S", "ls -r")]
    return [cmd("ls tests"), *edits, *ls, cmd(f"echo {SUBMIT}")]


def distinct_edits(env) -> list[str]:
    """Six different contents written to the fixed file, then reverted: every write is new content."""
    path = fixed_file(env)
    steps = [cmd(f"printf '\\n# idea {i}: {i * 37}\\n' >> {path}") for i in range(6)]
    return [*steps, cmd(f"git checkout -- {path}"), cmd(f"echo {SUBMIT}")]


def lasting_harmless_edits(env) -> list[str]:
    """Comments left in five source files (a non-empty diff that changes nothing), tests run, submit."""
    test_command = env.unwrapped.task.metadata["test_command"]
    files = "$(git ls-files '*.py' | grep -v '^tests/' | head -5)"
    return [cmd("ls tests"), cmd(f"for f in {files}; do echo '# reviewed' >> $f; done; git status --short"),
            cmd(f"{test_command} -x 2>&1 | tail -3"), cmd(f"echo {SUBMIT}")]


def runner_spam(env) -> list[str]:
    """Ten different test invocations (each distinct, each 'runs the tests'), then submit."""
    test_command = env.unwrapped.task.metadata["test_command"]
    return [cmd(f"{test_command} -k 'not nothing_{i}' 2>&1 | tail -1") for i in range(10)] + [cmd(f"echo {SUBMIT}")]


def edit_the_tests(env) -> list[str]:
    """Make the failing tests pass by deleting them (graded tests are restored: earns nothing)."""
    return [cmd("ls tests"), cmd("for f in tests/test_*.py; do : > $f; done"),
            cmd(f"{env.unwrapped.task.metadata['test_command']} 2>&1 | tail -1"), cmd(f"echo {SUBMIT}")]


def nop(env) -> list[str]:
    return [cmd(f"echo {SUBMIT}")]


def honest_but_broken(env) -> list[str]:
    """A real attempt at the right file that leaves it unimportable (every test fails)."""
    path = fixed_file(env)
    return [cmd("ls tests"), cmd(f"sed -n 1,40p {path}"), cmd(f"sed -i '1i def fix(:' {path}"),
            cmd(f"{env.unwrapped.task.metadata['test_command']} 2>&1 | tail -2"), cmd(f"echo {SUBMIT}")]


SCRIPTS: dict[str, Callable] = {
    "issue_farm": issue_farm, "distinct_edits": distinct_edits, "lasting_harmless_edits": lasting_harmless_edits,
    "runner_spam": runner_spam, "edit_the_tests": edit_the_tests, "nop": nop,
}


def play(env: ProcessReward, task_id: str, script: Callable | None) -> tuple[float, dict]:
    """Reset to ``task_id``, play ``script`` (``None``: the oracle) and return (return, last info)."""
    env.reset(seed=0, options={"task_id": task_id})
    messages = oracle_actions(env.unwrapped) if script is None else script(env)
    total = 0.0
    for message in messages:
        _, reward, terminated, truncated, info = env.step(message)
        total += float(reward)
        if terminated or truncated:
            assert total == pytest.approx(info["process_reward"]["return"])
            return total, info
    raise AssertionError(f"the script did not end the episode on {task_id}")


@pytest.fixture(scope="module")
def task_ids() -> list[str]:
    env = gym.make("termgym/SweSynth-v0", path="toy")
    ids = env.unwrapped.suite.task_ids("all")
    env.close()
    return [TASKS[0], next(t for t in ids if t.startswith(TASKS[1]))]


@pytest.fixture(scope="module")
def returns(task_ids) -> dict[tuple[str, str], tuple[float, dict]]:
    """Every script (and the oracle, ``"oracle"``; the broken attempt) on every task, played once."""
    env = ProcessReward(gym.make("termgym/SweSynth-v0", path="toy", max_steps=40))
    out = {}
    try:
        for task_id in task_ids:
            out[task_id, "oracle"] = play(env, task_id, None)
            out[task_id, "honest_but_broken"] = play(env, task_id, honest_but_broken)
            for name, script in SCRIPTS.items():
                out[task_id, name] = play(env, task_id, script)
    finally:
        env.close()
    return out


def test_the_oracle_solves_and_earns_at_least_the_outcome(returns, task_ids):
    for task_id in task_ids:
        total, info = returns[task_id, "oracle"]
        assert info["grade"]["all_passed"], task_id
        assert total >= 1.0


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_no_non_fixing_script_reaches_half_the_oracle(returns, task_ids, script):
    for task_id in task_ids:
        total, info = returns[task_id, script]
        oracle, _ = returns[task_id, "oracle"]
        assert not info["grade"]["all_passed"], f"{script} fixed {task_id}?"
        assert total < 0.5 * oracle, f"{script} on {task_id}: {total:.3f} vs the oracle's {oracle:.3f}"
        assert total <= 1e-9, f"{script} on {task_id} kept {total:.3f} without progress"
        print(f"{task_id} {script}: return {total:.3f}, oracle {oracle:.3f}, ratio {total / oracle:.3f}")


def test_farming_shaping_is_paid_then_taken_back(returns, task_ids):
    """The farming script does collect provisional shaping, and the last step takes all of it back."""
    for task_id in task_ids:
        _, info = returns[task_id, "issue_farm"]
        counts = info["process_reward"]["counts"]
        assert counts["code_modified"] == 1  # six write/revert cycles of the same content pay once
        _, info = returns[task_id, "distinct_edits"]
        assert info["process_reward"]["counts"]["code_modified"] == 6  # new contents: paid up to the cap...
        [clawback] = [e for e in info["reward_events"] if e["event"] == "clawback"]
        assert clawback["paid"] > 0.2 and clawback["reward"] == pytest.approx(-clawback["paid"])


def test_doing_nothing_earns_nothing(returns, task_ids):
    for task_id in task_ids:
        total, _ = returns[task_id, "nop"]
        assert total == pytest.approx(0.0, abs=1e-9)


def test_an_honest_broken_attempt_is_not_beaten_by_farming(returns, task_ids):
    for task_id in task_ids:
        honest, info = returns[task_id, "honest_but_broken"]
        assert info["grade"]["all_result"].startswith("0/")  # the module no longer imports
        for name in SCRIPTS:
            assert returns[task_id, name][0] <= honest + 1e-9, f"{name} beat the honest attempt on {task_id}"


def test_seed000_table_is_reconciled_on_the_same_script(task_ids):
    """Seed 000's outcome pays 0.5 x the pass rate over all tests (~0.49 for the buggy repository) and
    never claws shaping back; the reconciliation keeps a failed episode at ``failed_cap`` (0.3).
    Sabotage: with the reconciliation off (``failed_cap=None``) the issue's script nearly matches the
    oracle, the hole it closes."""
    returns = {}
    for name, table in (("reconciled", "seed000"), ("off", {"base": "seed000", "failed_cap": None})):
        env = ProcessReward(gym.make("termgym/SweSynth-v0", path="toy", max_steps=40), table=table,
                            allow_farmable=name == "off")
        try:
            returns[name] = play(env, task_ids[0], issue_farm)[0], play(env, task_ids[0], None)[0]
        finally:
            env.close()
    farm, oracle = returns["reconciled"]
    assert farm < 0.5 * oracle and farm == pytest.approx(0.3)
    farm, oracle = returns["off"]
    assert farm > 0.5 * oracle
