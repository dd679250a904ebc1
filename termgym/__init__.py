"""termgym: multi-turn terminal environments for LLM agents, with the Gymnasium API.

>>> import gymnasium as gym, termgym
>>> env = gym.make("termgym/SweSynth-v0")
"""

from termgym.config import EnvConfig
from termgym.registration import register_builtin_envs, register_suite
from termgym.tasks.base import CommandTask, Grade, GradingContext, ListSuite, Task, TaskSuite

__version__ = "0.1.0"

register_builtin_envs()

#: What ``termgym`` re-exports from :mod:`termgym.env`: the env, the action that ends an episode
#: from outside, the async path through a wrapper stack and the read-only accessor.
_ENV_NAMES = ("TerminalEnv", "Truncate", "aclose", "areset", "astep", "terminal_env")


def __getattr__(name: str):
    # TerminalEnv imports the sandbox and protocol layers; load it (and its helpers) only when asked for.
    if name in _ENV_NAMES:
        from termgym import env

        return getattr(env, name)
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
    "Truncate",
    "__version__",
    "aclose",
    "areset",
    "astep",
    "register_suite",
    "terminal_env",
]
