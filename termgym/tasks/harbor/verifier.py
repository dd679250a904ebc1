"""Turning what a verifier left behind into a score, with Harbor 0.26's rules.

Harbor's contract: ``tests/test.sh`` writes ``/logs/verifier/reward.txt`` (one number) or
``/logs/verifier/reward.json`` (a JSON object of numbers). The rules, as Harbor 0.26 applies them:

* ``reward.json`` wins whenever it exists (``reward.txt`` is then not read); every key is kept
  as its own metric in ``rewards``. A value that is not a finite number (a string, ``null``,
  ``true``, a nested object) makes the whole file an error, as Harbor's
  ``VerifierOutputParseError``.
* ``reward.txt`` holds one finite number, kept as ``{"reward": value}``.
* An empty file, an unparsable one, neither file, a ``reward.json`` without keys, or a verifier
  that ran past its timeout (even if it wrote a reward first) gives **no valid reward**: Harbor
  records the trial as an error and leaves it out of the job's mean. termgym marks such a grade
  with ``details["reward_valid"] = False`` and score 0.
* Values are not clamped: a reward of 1.5 or -1 is reported as written.

The single score termgym reports (``Grade.score``) is ``rewards["reward"]`` when that key exists,
otherwise the first key's value (what Harbor's mean metric reads when a job has one key); every
metric stays in ``details["rewards"]``.

Terminal-Bench's ``run-tests.sh`` writes no reward file; its pytest output is judged instead
(:func:`parse_pytest_summary`), as Terminal-Bench 1's pytest parser does.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field


class RewardError(ValueError):
    """The verifier left no valid reward (the message says why, naming the file)."""


@dataclass
class Reward:
    """The parsed reward: the reported ``score``, every metric, and which file it came from."""

    score: float
    rewards: dict[str, float] = field(default_factory=dict)
    source: str = "reward.txt"


def parse_reward_txt(text: str) -> float:
    """``reward.txt``: one finite number (surrounding whitespace allowed, as Python's float())."""
    if text == "":
        raise RewardError("reward.txt is empty")
    try:
        value = float(text)
    except ValueError:
        raise RewardError(f"reward.txt must hold one number, got {text.strip()[:80]!r}") from None
    if not math.isfinite(value):
        raise RewardError(f"reward.txt holds {text.strip()!r}, which is not a finite number")
    return value


def parse_reward_json(text: str) -> dict[str, float]:
    """``reward.json``: an object whose every value is a finite number; returns it in file order."""
    if text == "":
        raise RewardError("reward.json is empty")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RewardError(f"reward.json is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RewardError(f"reward.json must be an object of numbers, got {type(data).__name__}")
    rewards: dict[str, float] = {}
    for key, value in data.items():
        # bool is an int in Python, and Harbor accepts it as one (true -> 1).
        if not isinstance(value, (int, float)):
            raise RewardError(f"reward.json field {key!r} is {value!r}, not a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise RewardError(f"reward.json field {key!r} is {value!r}, not a finite number")
        rewards[str(key)] = float(value)
    if not rewards:
        raise RewardError("reward.json holds no reward (an empty object)")
    return rewards


def combine_rewards(reward_json: str | None, reward_txt: str | None) -> Reward:
    """Apply the rules in this module's docstring. Raises :class:`RewardError` when there is no valid reward."""
    if reward_json is not None:
        rewards = parse_reward_json(reward_json)
        score = rewards["reward"] if "reward" in rewards else next(iter(rewards.values()))
        return Reward(score, rewards, "reward.json")
    if reward_txt is not None:
        score = parse_reward_txt(reward_txt)
        return Reward(score, {"reward": score}, "reward.txt")
    raise RewardError("the verifier wrote neither /logs/verifier/reward.txt nor /logs/verifier/reward.json")


#: Terminal-Bench 1's pytest statuses; those it counts as passed (SKIPPED and XFAIL included).
TB_STATUSES = ("PASSED", "FAILED", "SKIPPED", "XFAIL", "XPASS", "ERROR")
TB_PASSING = ("PASSED", "XFAIL", "SKIPPED")
_SUMMARY_HEADER = re.compile(r"=+\s*short test summary info\s*=+", re.IGNORECASE)


def parse_pytest_summary(output: str) -> dict[str, str] | None:
    """Test outcomes from pytest's ``-rA`` "short test summary info", read as Terminal-Bench 1 reads them.

    ``None`` when there is no summary header (Terminal-Bench: a parse error, unresolved). Every line
    after the first header whose first word is a pytest status counts; a test is named by what
    follows ``::`` (a ``FAILED`` line's `` - message`` is dropped), so ``SKIPPED [1] t.py:3: why``
    is one entry named ``[1] t.py:3: why``. Only the summary counts, so output a test printed
    earlier cannot fake a result.
    """
    parts = _SUMMARY_HEADER.split(output, maxsplit=1)
    if len(parts) < 2:
        return None
    results: dict[str, str] = {}
    for line in parts[1].splitlines():
        if line.startswith("FAILED") and " - " in line:
            line = " - ".join(line.split(" - ")[:-1])
        words = line.split(maxsplit=1)
        if len(words) <= 1:
            continue
        status = words[0].strip().strip(":")
        if status not in TB_STATUSES:
            continue
        name = words[1].strip().split("::", maxsplit=1)[-1]
        if name:
            results[name] = status
    return results
