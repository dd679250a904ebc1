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


PICK_ID = "termgym-test/RemotePick-v0"
GRADE_SECONDS = 2  # the grade sleeps first: a sandbox node can be killed while a training episode is graded


def pick_suite() -> ListSuite:
    """The learning module's one-turn pick task (write blue to answer.txt), with a slow grader."""
    return ListSuite([CommandTask(f"pick{k}", f"Task {k}: Write the colour blue to answer.txt.",
                                  grade_command=f"sleep {GRADE_SECONDS}; grep -qx blue answer.txt") for k in range(3)],
                     name="remote-pick")


def register_pick() -> None:
    import gymnasium as gym

    import termgym

    if PICK_ID not in gym.registry:
        termgym.register_suite(PICK_ID, "remote_tasks:pick_suite", max_steps=1)


# The veRL agent loop imports this module in its workers (``import_modules``): it registers the pick id there.
register_pick()


def train_pick(out: str, address: str, steps: int, groups: int, n: int) -> None:
    """veRL's CPU trainer on the pick task, joined to the cluster at ``address``, every sandbox on a sandbox
    node (run in its own process by test_ray_training: the trainer sets process-wide state)."""
    from trainers.verl import learning
    from trainers.verl.cpu_trainer import CpuSetup, run

    setup = CpuSetup(env_id=PICK_ID, import_module="remote_tasks", train="0-1", val="2", epochs=8,
                     choices=learning.CHOICES, max_tokens_per_turn=4, groups=groups, n=n, response_length=16,
                     initializer_range=learning.INITIALIZER_RANGE,
                     env_kwargs={"ray": {"resources": {"termgym_sandbox": 1}, "start_timeout": 300}})
    run(out, steps=steps, setup=setup, ray_address=address, extra=learning.recipe_overrides(1e-2),
        log_name="metrics.jsonl")


if __name__ == "__main__":
    import sys

    train_pick(sys.argv[1], sys.argv[2], *(int(x) for x in sys.argv[3:6]))
