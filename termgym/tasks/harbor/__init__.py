"""Harbor and Terminal-Bench tasks: ``termgym/Harbor-v0``.

>>> import gymnasium as gym, termgym
>>> env = gym.make("termgym/Harbor-v0", tasks_dir="path/to/terminal-bench-2", backend="docker")

Without ``tasks_dir`` the suite serves the sample tasks bundled in
``termgym_data/harbor/samples``. See ``docs/harbor.md`` for the run semantics and the rule that
decides which tasks the local backend can run.
"""

from termgym.tasks.harbor.config import HarborTaskConfig, TaskFormatError
from termgym.tasks.harbor.loader import discover, is_task_dir, load_task
from termgym.tasks.harbor.suite import SAMPLES_DIR, HarborSuite
from termgym.tasks.harbor.task import HarborTask

__all__ = [
    "SAMPLES_DIR",
    "HarborSuite",
    "HarborTask",
    "HarborTaskConfig",
    "TaskFormatError",
    "discover",
    "is_task_dir",
    "load_task",
]
