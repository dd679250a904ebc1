"""The ``replay`` agent: sends a recorded conversation's assistant turns again, in order.

Replaying an episode recording or an offline sample into a fresh env of the same task reproduces
its grade when the task is deterministic (it is how recordings and samples are checked, and how
an old transcript is re-graded after a grader change)::

    termgym eval termgym/SweSynth-v0 --agent replay --agent-arg source=samples.jsonl

or, without the harness, :func:`replay_episode`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from termgym.agents.base import Agent, Episode


def assistant_actions(conversation: Sequence[Mapping[str, Any]]) -> list[str | dict[str, Any]]:
    """What ``env.step`` takes for each assistant turn: the text, or the whole message when it has tool calls."""
    actions: list[str | dict[str, Any]] = []
    for message in conversation:
        if message.get("role") != "assistant":
            continue
        if message.get("tool_calls"):
            actions.append({k: v for k, v in message.items() if v is not None})
        else:
            actions.append(message.get("content") or "")
    return actions


def _conversation_of(source: Any) -> tuple[str | None, list[dict[str, Any]]]:
    """``(task_id, conversation)`` from an OfflineSample, a sample dict, a record dict or a message list."""
    from termgym.data.samples import OfflineSample

    if isinstance(source, OfflineSample):
        return str(source.task_id), source.conversation
    if isinstance(source, Mapping):
        if "messages" in source:  # an episode record
            task_id = source.get("task_id")
            return (str(task_id) if task_id is not None else None), list(source["messages"])
        if "extra" in source:  # an offline sample dict
            sample = OfflineSample.from_dict(source)
            return str(sample.task_id), sample.conversation
        raise ValueError("cannot replay a mapping without 'messages' (a record) or 'extra' (an offline sample)")
    if isinstance(source, Sequence) and not isinstance(source, str):
        return None, [dict(m) for m in source]
    raise TypeError(f"cannot replay a {type(source).__name__}; give a sample, a record or a list of messages")


def _score_of(item: Any) -> float:
    if isinstance(item, Mapping):
        if "grade" in item:
            return float((item.get("grade") or {}).get("score", 0.0))
        return float(item.get("score", 0.0))
    return float(getattr(item, "score", 0.0) or 0.0)


class ReplayAgent(Agent):
    """Plays, for each episode, the assistant turns recorded for its task id.

    Args:
        source: a file of offline samples (``.json``/``.jsonl``) or episode recordings, or a list of
            samples / records.
        select: which conversation to replay when a task has several: ``"first"`` or ``"best"``
            (highest score).

    An episode whose task has no conversation, or that is still running when the turns run out,
    fails with an error naming the task (an ``agent_error`` in the harness).
    """

    name = "replay"

    def __init__(self, source: str | Path | Sequence[Any], select: str = "first") -> None:
        from termgym.data.convert import load_items

        if select not in ("first", "best"):
            raise ValueError(f"select must be 'first' or 'best', not {select!r}")
        if isinstance(source, (str, Path)):
            items: Sequence[Any] = load_items([source])
            self.source = str(source)
        else:
            items = list(source)
            self.source = f"<{len(items)} conversations>"
        self.select = select
        self.conversations: dict[str, list[dict[str, Any]]] = {}
        scores: dict[str, float] = {}
        for item in items:
            task_id, conversation = _conversation_of(item)
            if task_id is None:
                raise ValueError("every conversation given to ReplayAgent needs a task id (use samples or records)")
            score = _score_of(item)
            if task_id not in self.conversations or (select == "best" and score > scores[task_id]):
                self.conversations[task_id] = conversation
                scores[task_id] = score

    async def start(self, episode: Episode) -> None:
        conversation = self.conversations.get(str(episode.task_id))
        if conversation is None:
            raise KeyError(f"replay source {self.source} has no conversation for task {episode.task_id!r}")
        episode.state["actions"] = assistant_actions(conversation)

    async def act(self, episode: Episode) -> str | dict[str, Any]:
        actions = episode.state["actions"]
        if not actions:
            raise RuntimeError(f"the replayed conversation of task {episode.task_id!r} ran out of assistant turns "
                               f"before the episode ended (was it recorded with a larger max_steps?)")
        return actions.pop(0)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "select": self.select,
                "tasks": len(self.conversations)}


#: The grade fields a replay must reproduce (free text such as a test log's timings may differ).
OUTCOME_KEYS = ("score", "passed", "all_passed", "all_result", "target_result", "pass_rate", "end_reason", "error")


def grades_match(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None,
                 keys: Sequence[str] = OUTCOME_KEYS) -> bool:
    """Whether two grade dicts agree on the outcome fields ``keys`` (missing on both sides is agreement)."""
    if a is None or b is None:
        return a is b
    return all(a.get(k) == b.get(k) for k in keys)


@dataclass
class ReplayResult:
    """What :func:`replay_episode` saw: the grade, the final info, and where observations differed."""

    grade: dict[str, Any] | None
    info: dict[str, Any]
    steps: int
    rewards: list[float] = field(default_factory=list)
    observation_mismatches: list[int] = field(default_factory=list)


def replay_episode(env: Any, source: Any, *, task_id: str | None = None, seed: int | None = None) -> ReplayResult:
    """Replay a sample, record or message list into ``env`` (reset on its task) and return the result.

    ``observation_mismatches`` lists the steps whose observation differs from the recorded one
    (timing-dependent output, a changed sandbox); the grade is what must match. Played by the one
    agent loop (:func:`termgym.agents.loop.run_episode`); from async code, await
    :func:`areplay_episode` instead.
    """
    return asyncio.run(areplay_episode(env, source, task_id=task_id, seed=seed))


async def areplay_episode(env: Any, source: Any, *, task_id: str | None = None, seed: int | None = None) -> ReplayResult:
    """:func:`replay_episode` for async code."""
    from termgym.agents.loop import EnvFailure, run_episode

    recorded_task, conversation = _conversation_of(source)
    task_id = task_id or recorded_task
    if task_id is None:
        raise ValueError("replay_episode needs a task_id for a bare message list")
    recorded_observations = []
    for i, message in enumerate(conversation):
        if message.get("role") == "assistant":
            following = conversation[i + 1] if i + 1 < len(conversation) else None
            recorded_observations.append(following.get("content") if following and following.get("role") != "assistant"
                                         else None)
    policy = _ReplayPolicy(str(task_id), assistant_actions(conversation), recorded_observations)
    try:
        outcome = await run_episode(env, policy, seed=seed, options={"task_id": str(task_id)})
    except EnvFailure as exc:  # a replay reports the env's own error, as env.step raised it
        raise exc.cause from None
    if not outcome.done:
        env.close()
        raise RuntimeError(f"task {task_id!r}: all {len(policy.actions)} replayed turns were sent but the episode did "
                           "not end (the recording was cut short, or the env allows more steps than when it was "
                           "recorded)")
    return policy.result


class _ReplayPolicy:
    """The agent loop's policy for a replay: the recorded assistant turns, in order, then stop."""

    def __init__(self, task_id: str, actions: list[Any], recorded_observations: list[Any]) -> None:
        self.task_id = task_id
        self.actions = actions
        self.recorded_observations = recorded_observations
        self.result = ReplayResult(grade=None, info={}, steps=0)

    async def act(self, observation: Any, info: dict[str, Any]) -> Any:
        index = self.result.steps
        return self.actions[index] if index < len(self.actions) else None

    async def observe(self, step: Any) -> None:
        result, index = self.result, step.index - 1
        result.steps += 1
        result.rewards.append(step.reward)
        recorded = self.recorded_observations[index]
        if recorded is not None and step.observation != recorded and not step.done:
            result.observation_mismatches.append(index)
        if step.done:
            result.grade, result.info = step.info.get("grade"), step.info
            if index != len(self.actions) - 1:
                raise RuntimeError(f"task {self.task_id!r}: the episode ended after {index + 1} of {len(self.actions)} "
                                   f"replayed turns ({step.info.get('end_reason')}); the env differs from the "
                                   "recorded one")


__all__ = ["OUTCOME_KEYS", "ReplayAgent", "ReplayResult", "assistant_actions", "areplay_episode", "grades_match", "replay_episode"]
