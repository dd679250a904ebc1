"""Tasks for the remote tests, importable on every node (the cluster's ``PYTHONPATH`` names this folder)."""

from __future__ import annotations

from termgym import CommandTask, ListSuite

ENV_ID = "termgym-test/RemoteSleep-v0"
TASKS = 4
STEP_SECONDS = 3  # long enough to kill a node while a step runs


def suite() -> ListSuite:
    """Tasks whose oracle runs one slow command, then submits; graded on the file it wrote."""
    return ListSuite([CommandTask(f"sleepy-{i}", f"Write {i} to out.txt, slowly.", grade_command=f"grep -qx {i} out.txt",
                                  oracle=[f"sleep {STEP_SECONDS}; echo {i} > out.txt"]) for i in range(TASKS)])


def register() -> None:
    import gymnasium as gym

    import termgym

    if ENV_ID not in gym.registry:
        termgym.register_suite(ENV_ID, "remote_tasks:suite", max_steps=10)
