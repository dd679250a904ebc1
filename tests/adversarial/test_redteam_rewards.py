"""Red-team farming scripts against the default process-reward table (``progress``).

Scripts that ``test_process_reward_farming.py`` does not play, on a real bundled SWE-SYNTH task in
real sandboxes: fixing the bug, collecting the shaping, then reverting before submitting; deleting
only the failing test functions; a stream of new modules; and never submitting at all, so the
episode ends by truncation at ``max_steps`` (where a missing settlement would let the shaping stand).
Each must return less than half of the oracle's return, and in fact nothing.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import termgym  # noqa: F401  (registers the envs)
from termgym.env import oracle_actions
from termgym.wrappers.rewards import ProcessReward

TASK = "ledgerly-03e7642999"
SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
MAX_STEPS = 30


def cmd(command: str) -> str:
    return f"THOUGHT: next step.\n\n```bash\n{command}\n```"


def fix_then_revert(env) -> list[str]:
    """The real fix, the tests run green, then everything reverted before submitting."""
    test_command = env.unwrapped.task.metadata["test_command"]
    return [*oracle_actions(env.unwrapped)[:-1], cmd(f"{test_command} 2>&1 | tail -1"),
            cmd("git checkout -- . && git status --short"), cmd(f"echo {SUBMIT}")]


def delete_the_failing_tests(env) -> list[str]:
    """Only the failing test function removed from its file; the suite then passes in the sandbox."""
    test_command = env.unwrapped.task.metadata["test_command"]
    strip = ("python3 - <<'PY'\nimport re\np = 'tests/test_accounts.py'\ns = open(p).read()\n"
             "s = re.sub(r'@pytest.mark.parametrize\\(\\n    \"code, side\".*?\\n\\n\\n', '', s, flags=re.S)\n"
             "open(p, 'w').write(s)\nPY")
    return [cmd("ls tests"), cmd(strip), cmd(f"{test_command} 2>&1 | tail -1"), cmd(f"echo {SUBMIT}")]


def stream_of_new_modules(env) -> list[str]:
    """A new module with new content at every step (each a 'code change'), then submit."""
    return [cmd(f"echo 'VALUE = {i}' > ledgerly/extra_{i}.py && echo ok {i}") for i in range(12)] + [
        cmd(f"echo {SUBMIT}")]


def never_submit(env) -> list[str]:
    """Distinct edits and commands until the step limit ends the episode (truncation, no submit)."""
    return [cmd(f"printf '\\n# note {i}\\n' >> ledgerly/money.py && ls -a | head -{i + 1}") for i in range(MAX_STEPS + 5)]


SCRIPTS = {"fix_then_revert": fix_then_revert, "delete_the_failing_tests": delete_the_failing_tests,
           "stream_of_new_modules": stream_of_new_modules, "never_submit": never_submit}


def play(env: ProcessReward, script) -> tuple[float, dict]:
    env.reset(seed=0, options={"task_id": TASK})
    messages = oracle_actions(env.unwrapped) if script is None else script(env)
    total = 0.0
    for message in messages:
        _, reward, terminated, truncated, info = env.step(message)
        total += float(reward)
        if terminated or truncated:
            return total, info
    raise AssertionError("the script did not end the episode")


@pytest.fixture(scope="module")
def returns() -> dict[str, tuple[float, dict]]:
    env = ProcessReward(gym.make("termgym/SweSynth-v0", path="toy", max_steps=MAX_STEPS))
    try:
        out = {"oracle": play(env, None)}
        for name, script in SCRIPTS.items():
            out[name] = play(env, script)
    finally:
        env.close()
    return out


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_red_team_farming_scripts_earn_nothing(returns, script):
    oracle, oracle_info = returns["oracle"]
    total, info = returns[script]
    assert oracle_info["grade"]["all_passed"] and oracle >= 1.0
    assert "process_reward" in info, f"{script}: the episode ended without being settled: {info.get('end_reason')}"
    assert not info["grade"]["all_passed"], script
    assert total < 0.5 * oracle and total <= 1e-9, f"{script}: {total:.3f} vs the oracle's {oracle:.3f}"
