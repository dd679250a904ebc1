"""veRL RL data: one parquet row per (task, epoch) — the one RL-row contract of termgym.

Both ``termgym data rl`` and ``python -m trainers.verl.prepare_data rl`` build their rows here
(:func:`build_rl_rows`), so a row means the same thing whichever wrote it. Each row is what
veRL's ``RLHFDataset`` and termgym's agent loop (``trainers/verl``) read:

* ``prompt`` — the episode's opening chat exactly as ``env.reset`` builds it
  (:meth:`termgym.env.TerminalEnv.opening_messages`: the protocol's system prompt, when it has
  one, and the task prompt), so veRL's over-long-prompt filter measures the real thing; the agent
  loop still takes its prompt from the env at rollout time;
* ``data_source`` — the env id; ``agent_name`` — the veRL agent loop to run (``termgym_agent``);
* ``reward_model`` — ``{"style": "env", "ground_truth": <task id>}``: the env grades, the field
  (which veRL requires) names what is graded;
* ``extra_info`` — ``index`` (running over every row written together, train then val),
  ``task_id``, ``env_id``, ``split`` (the suite split the task ids come from, ``"default"`` for
  the suite's default) and ``env_kwargs`` (``gym.make`` arguments as a JSON string, so rows with
  different arguments share one parquet schema). The agent loop needs only ``env_id``,
  ``task_id`` and ``env_kwargs``.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

#: The veRL agent loop name registered by ``trainers/verl/agent_loop.py``.
DEFAULT_AGENT_NAME = "termgym_agent"


def suite_task_ids(env_id: str, env_kwargs: Mapping[str, Any] | None = None, split: str | None = None) -> list[str]:
    """The ordered task ids of ``env_id``'s suite in ``split`` (the env is built; no sandbox starts)."""
    env = _make(env_id, env_kwargs)
    try:
        return [str(t) for t in env.get_wrapper_attr("suite").task_ids(split)]
    finally:
        env.close()


def build_rl_rows(
    env_id: str,
    *,
    split: str | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    agent_name: str = DEFAULT_AGENT_NAME,
    task_ids: Sequence[str] | None = None,
    limit: int | None = None,
    epochs: int = 1,
    start_index: int = 0,
) -> list[dict[str, Any]]:
    """veRL RL rows for the tasks of ``env_id``'s suite in ``split`` (or the given ``task_ids`` of it).

    The env is built (``gym.make(env_id, **env_kwargs)``) but no sandbox starts: prompts come from
    the suite's tasks and the env's protocol. ``epochs`` repeats the task list; ``limit`` keeps
    the first tasks only; ``index`` starts at ``start_index``.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    env = _make(env_id, env_kwargs)
    try:
        suite = env.get_wrapper_attr("suite")
        opening_messages = env.get_wrapper_attr("opening_messages")
        available = [str(t) for t in suite.task_ids(split)]
        if task_ids is None:
            chosen = available
        else:
            known = set(available)
            missing = [t for t in map(str, task_ids) if t not in known]
            if missing:
                raise ValueError(f"{env_id} split {split!r} has no task(s) {missing[:5]} ({len(available)} tasks)")
            chosen = [str(t) for t in task_ids]
        if limit is not None:
            chosen = chosen[:limit]
        if not chosen:
            raise ValueError(f"{env_id} split {split!r} has no tasks")
        env_kwargs_json = json.dumps(dict(env_kwargs or {}), sort_keys=True)
        prompts = {task_id: opening_messages(suite.load(task_id)) for task_id in dict.fromkeys(chosen)}
        rows = []
        index = start_index
        for _ in range(epochs):
            for task_id in chosen:
                rows.append({
                    "data_source": env_id,
                    "agent_name": agent_name,
                    "prompt": prompts[task_id],
                    "reward_model": {"style": "env", "ground_truth": task_id},
                    "extra_info": {"index": index, "task_id": task_id, "env_id": env_id,
                                   "split": split or "default", "env_kwargs": env_kwargs_json},
                })
                index += 1
        return rows
    finally:
        env.close()


def _make(env_id: str, env_kwargs: Mapping[str, Any] | None) -> Any:
    import gymnasium as gym

    import termgym  # noqa: F401 - registers the termgym/* ids
    from termgym.registration import termgym_env_ids

    if env_id not in gym.registry:
        raise ValueError(f"unknown env id {env_id!r}; registered termgym ids: {', '.join(termgym_env_ids())}")
    return gym.make(env_id, **dict(env_kwargs or {}))


__all__ = ["DEFAULT_AGENT_NAME", "build_rl_rows", "suite_task_ids"]
