"""``termgym-smoke/Hello-v0``: a few one-line shell tasks for trainer smoke runs and tests.

Each task asks for a small file and is graded by a shell command in a real (bubblewrap or Docker)
sandbox; scripted model turns (:data:`SCRIPTS`) solve them, so short runs with a random model still
see successes next to failures. Importing this module registers the id (list it under the agent
loop's ``import_modules`` so veRL's worker processes register it too).
"""

from __future__ import annotations

import termgym
from termgym import CommandTask, ListSuite

ENV_ID = "termgym-smoke/Hello-v0"
MAX_STEPS = 4

COMMAND = "THOUGHT: write it.\n```bash\necho hi > hello.txt\n```"
SUBMIT = "THOUGHT: done.\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"


def smoke_suite(n_tasks: int = 4) -> ListSuite:
    """``n_tasks`` tasks ``hello0..``: create hello.txt containing hi (task prompts say "Task k:")."""
    return ListSuite([CommandTask(f"hello{k}", f"Task {k}: create hello.txt containing hi.",
                                  grade_command="grep -qx hi hello.txt") for k in range(n_tasks)], name="smoke")


#: Marker -> scripted turns for :class:`~trainers.verl.tiny_model.TinyTokenServer`: episodes of task 0
#: write the file and submit (grade 1); the others are sampled from the model.
SCRIPTS = {"Task 0:": [COMMAND, SUBMIT]}

termgym.register_suite(ENV_ID, smoke_suite, max_steps=MAX_STEPS)
