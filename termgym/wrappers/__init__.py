"""Gymnasium wrappers around :class:`termgym.env.TerminalEnv`.

* :mod:`termgym.wrappers.rewards` — :class:`ProcessReward`, fine-grained per-step rewards;
* :mod:`termgym.wrappers.recording` — :class:`RecordEpisodes`, episodes written as JSONL records.
"""

from termgym.wrappers.recording import RecordEpisodes
from termgym.wrappers.rewards import ProcessReward

__all__ = ["ProcessReward", "RecordEpisodes"]
