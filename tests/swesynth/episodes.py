"""Playing a SWE-SYNTH task through the real env, shared by the suite tests: the oracle's actions,
then a do-nothing agent that submits at once."""

from __future__ import annotations

SUBMIT = "THOUGHT: nothing to change\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"


def oracle_and_nop(suite, task_id: str, backend: str = "local") -> tuple[float, float, dict]:
    """(the oracle's reward, the do-nothing agent's reward, the do-nothing agent's grade) of
    ``task_id``, two episodes of one :class:`~termgym.env.TerminalEnv` over ``suite``."""
    from termgym.env import TerminalEnv, oracle_actions

    with TerminalEnv(suite, backend=backend) as env:
        env.reset(options={"task_id": task_id})
        reward = 0.0
        for action in oracle_actions(env):
            _, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        oracle = reward
        env.reset(options={"task_id": task_id})
        _, nop, terminated, _, info = env.step(SUBMIT)
        assert terminated
    return oracle, nop, info["grade"]
