"""LIVEWEB: questions about a live, time-evolving web world reached over HTTP from the terminal.

>>> import gymnasium as gym, termgym
>>> env = gym.make("termgym/LiveWeb-v0")                 # the offline simulated world
>>> env = gym.make("termgym/LiveWeb-v0", source="live")  # the real sites (network and keys needed)

Task ids are ``liveweb-<family>-<seed>``: a family is one site (``subnets``, ``crypto``,
``stocks``, ``news``, ``books``) or ``cross`` (questions spanning sites); the seed fixes the world's
cast (names, base prices). Every load of a task (every ``env.reset``) draws a fresh episode: a
world variant (every price path, story and book perturbed), a start time anywhere in a 120-day
simulated history, and questions whose subjects and thresholds come from that state, so answers
from an earlier episode of the same task are no use. 6 families × 5,000 seeds = 30,000 tasks;
every seed divisible by 20 is held out as the ``test`` split (1,500 tasks), the rest is ``train``.
See ``docs/liveweb.md``.
"""

from termgym.tasks.liveweb.grading import LLMValidator
from termgym.tasks.liveweb.questions import FAMILIES
from termgym.tasks.liveweb.server import WorldServer, shared_server
from termgym.tasks.liveweb.suite import SOURCES, LiveWebSuite, default_suite
from termgym.tasks.liveweb.task import LiveWebTask
from termgym.tasks.liveweb.world import World

__all__ = ["FAMILIES", "SOURCES", "LLMValidator", "LiveWebSuite", "LiveWebTask", "World", "WorldServer", "default_suite",
           "shared_server"]
