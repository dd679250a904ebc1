"""termgym: multi-turn terminal environments for LLM agents, with the Gymnasium API.

>>> import gymnasium as gym, termgym
>>> env = gym.make("termgym/SweSynth-v0")
"""

from termgym.config import EnvConfig
from termgym.registration import register_builtin_envs, register_suite
from termgym.tasks.base import CommandTask, Grade, GradingContext, ListSuite, Task, TaskSuite

__version__ = "0.1.0"

register_builtin_envs()


def __getattr__(name: str):
    # TerminalEnv imports the sandbox and protocol layers; load it only when asked for.
    if name == "TerminalEnv":
        from termgym.env import TerminalEnv

        return TerminalEnv
    raise AttributeError(f"module 'termgym' has no attribute {name!r}")


__all__ = [
    "CommandTask",
    "EnvConfig",
    "Grade",
    "GradingContext",
    "ListSuite",
    "Task",
    "TaskSuite",
    "TerminalEnv",
    "__version__",
    "register_suite",
]
