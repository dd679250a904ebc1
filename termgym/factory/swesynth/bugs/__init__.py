"""Bug operators and difficulty signals of SWE-SYNTH.

- :mod:`.source`: the mutation machinery every operator shares (spans of a module's text).
- :mod:`.flow`: single-edit operators whose wrong value surfaces away from the changed line.
- :mod:`.callgraph`: the repository's import and call graph.
- :mod:`.coordinated`: coordinated 2-3-edit bugs and value bugs in helpers other modules call.
- :mod:`.signals`: per-task signals of what makes a task easy, and the difficulty tier.

The classic single-edit operators, the registry of all bug types and the seeded planner live in
:mod:`termgym.factory.swesynth.inject`, which the generator calls.
"""

from termgym.factory.swesynth.bugs.signals import SignalError, difficulty_tier, task_signals

__all__ = ["SignalError", "difficulty_tier", "task_signals"]
