"""OpenPipe ART over termgym: one episode → ``art.Trajectory``, N episodes of a task → ``art.TrajectoryGroup``.

ART trains on what its OpenAI-compatible client returned: every assistant turn is kept as the
``Choice`` object the client gave back (with its token logprobs), every other message (system
prompt, task, command outputs) as a plain dict, in ``Trajectory.messages_and_choices``. The model
is asked with exactly ``trajectory.messages()`` — the history ART will tokenize — so what is
trained is what was sampled.

The episode is played by termgym's one agent loop (:func:`termgym.agents.loop.run_episode`, as
``termgym eval`` plays it): ``reset``/``step`` run in termgym's I/O thread pool, so hundreds of
episodes share one event loop with the model calls.

>>> import art
>>> from termgym.integrations.art import RolloutConfig, gather_groups
>>> config = RolloutConfig(env=EnvRecipe("termgym/SweSynth-v0", process_rewards={}))
>>> groups = await gather_groups(model, ["1034", "1035"], config, rollouts_per_group=16)
>>> await backend.train(model, groups)

Needs ``pip install 'termgym[art]'`` (see docs/integrations.md for a light install without ART's
GPU backend).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import art
import openai
from openai.types.chat.chat_completion import Choice

from termgym.agents.loop import Step, run_episode
from termgym.data.samples import OfflineSample
from termgym.env import Truncate, aclose
from termgym.integrations.episodes import EnvRecipe, episode_metrics
from termgym.sandbox import run_blocking

__all__ = [
    "RolloutConfig",
    "TrajectoryLogger",
    "config_hash",
    "gather_groups",
    "rollout",
    "sample_to_trajectory",
    "trajectory_group",
]

#: OpenAI chat-message keys the API accepts; anything else the env keeps (timings, ids) stays home.
_WIRE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


@dataclass(frozen=True)
class RolloutConfig:
    """How each episode is played.

    Args:
        env: which env (and wrappers) an episode runs in.
        temperature / max_tokens / top_p: sampling parameters of every model call (seed 000:
            temperature 0.7, 4096 new tokens).
        logprobs: ask for token logprobs (ART's GRPO needs them; off only for prompted models
            whose endpoint does not return them).
        extra_body: extra request fields (vLLM's ``chat_template_kwargs``, ``top_k``, ...).
        model_call_retries: retries of a model call that failed transiently (connection, 5xx);
            a 400 (context too long) is not retried: the episode is ended and graded instead.
    """

    env: EnvRecipe
    temperature: float | None = 0.7
    max_tokens: int | None = 4096
    top_p: float | None = None
    logprobs: bool = True
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    model_call_retries: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.env, EnvRecipe):
            raise TypeError(f"RolloutConfig.env must be an EnvRecipe, got {type(self.env).__name__}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"RolloutConfig.max_tokens must be at least 1 or None, got {self.max_tokens}")
        if self.model_call_retries < 0:
            raise ValueError(f"RolloutConfig.model_call_retries must be >= 0, got {self.model_call_retries}")


async def rollout(model: art.Model, task_id: str, config: RolloutConfig, *, seed: int | None = None,
                  semaphore: asyncio.Semaphore | None = None) -> art.Trajectory:
    """Play one episode of ``task_id`` with ``model`` and return it as an ``art.Trajectory``.

    ``reward`` is the episode's return (the grade's score, or with process rewards the sum of
    every step's events and the outcome); ``metrics`` are :func:`episode_metrics`'s (score,
    passed, steps, ``end/<reason>``, ``grade/<detail>``, ``process/...``); ``metadata`` has
    ``task_id``, ``env_id``, ``suite`` and ``end_reason``; ``logs`` one line per step.
    ``semaphore`` bounds how many episodes run at once. Failures (the sandbox died, the model
    endpoint kept failing) raise: ART's groups record them as exceptions.
    """
    if semaphore is not None:
        async with semaphore:
            return await _rollout(model, str(task_id), config, seed)
    return await _rollout(model, str(task_id), config, seed)


async def _rollout(model: art.Model, task_id: str, config: RolloutConfig, seed: int | None) -> art.Trajectory:
    env = await run_blocking(config.env.make)
    try:
        policy = _TrajectoryPolicy(model, config, env)
        outcome = await run_episode(env, policy, seed=seed, options={"task_id": task_id})
        assert policy.trajectory is not None and outcome.final_info is not None
        trajectory = policy.trajectory
        trajectory.metrics.update(episode_metrics(outcome.final_info, steps=policy.steps,
                                                  format_errors=policy.format_errors))
        trajectory.metadata["end_reason"] = str(outcome.final_info.get("end_reason", ""))
        return trajectory.finish()
    finally:
        await aclose(env)


class _TrajectoryPolicy:
    """The agent loop's policy for one ART episode: ask the model, keep its ``Choice`` in the trajectory."""

    def __init__(self, model: art.Model, config: RolloutConfig, env: Any) -> None:
        self.client = model.openai_client()
        self.model_name = model.get_inference_name()
        self.config = config
        self.env = env
        self.trajectory: art.Trajectory | None = None
        self.tool_protocol = False
        self.steps = self.format_errors = 0
        self._seen = 0

    def start(self, prompt: Any, info: dict[str, Any]) -> None:
        tools = info.get("tools") or None
        self.tool_protocol = tools is not None
        self.trajectory = art.Trajectory(
            messages_and_choices=[_wire(m) for m in info["messages"]],
            tools=tools,
            reward=0.0,
            metadata={"task_id": str(info.get("task_id", "")), "env_id": self.config.env.env_id,
                      "suite": str(info.get("suite", ""))},
        )

    async def act(self, observation: Any, info: dict[str, Any]) -> Any:
        assert self.trajectory is not None
        try:
            choice = await _complete(self.client, self.model_name, self.trajectory, self.config)
        except openai.BadRequestError as exc:
            # The context outgrew the model (or the request was refused): grade what was done.
            self.trajectory.log(f"model refused the request, episode graded as context_limit: {exc}")
            return Truncate("context_limit")
        self.trajectory.messages_and_choices.append(choice)
        self._seen = len(self.env.get_wrapper_attr("messages"))
        return _action(choice, tool_protocol=self.tool_protocol)

    def observe(self, step: Step) -> None:
        assert self.trajectory is not None
        self.trajectory.reward += step.reward
        if isinstance(step.action, Truncate):
            return
        self.steps += 1
        parsed = step.info.get("action") or {}
        self.format_errors += parsed.get("kind") == "format_error"
        # The env appended the assistant message and then what the agent sees next.
        self.trajectory.messages_and_choices.extend(
            _wire(m) for m in self.env.get_wrapper_attr("messages")[self._seen + 1:])
        events = ",".join(e["event"] for e in step.info.get("reward_events", []))
        self.trajectory.log(f"step {self.steps}: {parsed.get('kind')} {parsed.get('command') or ''!s:.200} "
                            f"reward={step.reward:.4f}" + (f" events={events}" if events else ""))


async def _complete(client: Any, model_name: str, trajectory: art.Trajectory, config: RolloutConfig) -> Choice:
    params: dict[str, Any] = {"model": model_name, "messages": trajectory.messages()}
    if trajectory.tools:
        params["tools"] = trajectory.tools
    for key in ("temperature", "max_tokens", "top_p"):
        if getattr(config, key) is not None:
            params[key] = getattr(config, key)
    if config.logprobs:
        params["logprobs"] = True
    if config.extra_body:
        params["extra_body"] = dict(config.extra_body)
    for attempt in range(config.model_call_retries + 1):
        try:
            response = await client.chat.completions.create(**params)
            break
        except (openai.APIConnectionError, openai.InternalServerError, openai.RateLimitError):
            if attempt == config.model_call_retries:
                raise
            await asyncio.sleep(0.5 * 2 ** attempt)
    if not response.choices:
        raise RuntimeError(f"the model endpoint answered without choices (model {model_name!r})")
    return response.choices[0]


def _action(choice: Choice, *, tool_protocol: bool) -> str | dict[str, Any]:
    """The env's action for an assistant reply: its text, or with function calling the whole message."""
    message = choice.message
    if not tool_protocol:
        return message.content or ""
    action: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        action["tool_calls"] = [call.model_dump(mode="json", exclude_none=True) for call in message.tool_calls]
    return action


def _wire(message: Mapping[str, Any]) -> dict[str, Any]:
    wire = {k: message[k] for k in _WIRE_KEYS if k in message}
    wire.setdefault("content", "")
    return wire


def trajectory_group(model: art.Model, task_id: str, config: RolloutConfig, rollouts: int, *,
                     semaphore: asyncio.Semaphore | None = None, seed: int | None = None) -> Any:
    """An awaitable ``art.TrajectoryGroup`` of ``rollouts`` episodes of one task (a GRPO group).

    The episodes run concurrently when awaited (inside :func:`art.gather_trajectory_groups` they
    count towards its progress bar and exception budget). Episode ``i`` is reset with ``seed + i``
    when ``seed`` is given.
    """
    if rollouts < 1:
        raise ValueError(f"rollouts per group must be at least 1, got {rollouts}")
    seeds = [None if seed is None else seed + i for i in range(rollouts)]
    return art.TrajectoryGroup(
        (rollout(model, task_id, config, seed=s, semaphore=semaphore) for s in seeds),
        metadata={"task_id": str(task_id), "env_id": config.env.env_id},
    )


async def gather_groups(model: art.Model, task_ids: Iterable[str], config: RolloutConfig, *,
                        rollouts_per_group: int, max_concurrent: int | None = None,
                        max_exceptions: int | float = 0, pbar_desc: str | None = "gather") -> list[art.TrajectoryGroup]:
    """One group of ``rollouts_per_group`` episodes per task, all run in parallel through ART's gatherer.

    ``max_concurrent`` bounds the episodes running at once (sandboxes are the scarce resource);
    ``max_exceptions`` is ART's: how many failed episodes are tolerated (kept in each group's
    ``exceptions``) before the gather raises.
    """
    task_ids = [str(t) for t in task_ids]
    if not task_ids:
        raise ValueError("gather_groups needs at least one task id")
    if max_concurrent is not None and max_concurrent < 1:
        raise ValueError(f"max_concurrent must be at least 1 or None, got {max_concurrent}")
    semaphore = asyncio.Semaphore(max_concurrent) if max_concurrent else None
    return await art.gather_trajectory_groups(
        (trajectory_group(model, t, config, rollouts_per_group, semaphore=semaphore) for t in task_ids),
        pbar_desc=pbar_desc, max_exceptions=max_exceptions)


def sample_to_trajectory(sample: OfflineSample) -> art.Trajectory:
    """An offline sample (seed 000's format) as an ``art.Trajectory`` for ``model.train_sft``.

    Assistant turns stay plain dicts: ART's SFT path trains on assistant dict messages (there are
    no logprobs to keep). The reward is the sample's score.
    """
    messages = [_wire(m) for m in sample.conversation]
    if not any(m["role"] == "assistant" for m in messages):
        raise ValueError(f"offline sample {sample.task_id!r} has no assistant turn to train on")
    return art.Trajectory(messages_and_choices=messages, reward=float(sample.score),
                          metrics={"score": float(sample.score), "passed": float(sample.all_passed)},
                          metadata={"task_id": str(sample.task_id), "source": "offline"})


def config_hash(config: Mapping[str, Any]) -> str:
    """A short stable hash of an experiment's settings (key order does not matter)."""
    raw = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(raw).hexdigest()[:12]


class TrajectoryLogger:
    """Writes a sampled fraction of trajectories to ``<log_dir>/<experiment>/step_<n>/`` as JSON.

    Each file is ART's ``for_logging()`` view of one trajectory plus the step, group index,
    experiment name and config hash, so logs of different runs can be told apart. Which
    trajectories are kept is drawn from a generator seeded with the config hash: a rerun of the
    same config logs the same ones.
    """

    def __init__(self, log_dir: str | Path, experiment: str, sample_rate: float, config_hash: str) -> None:
        if not 0.0 <= sample_rate <= 1.0:
            raise ValueError(f"log sample rate must be within 0..1, got {sample_rate}")
        self.root = Path(log_dir) / experiment
        self.experiment = experiment
        self.sample_rate = sample_rate
        self.config_hash = config_hash
        self._random = random.Random(config_hash)

    def log(self, step: int, groups: Sequence[art.TrajectoryGroup]) -> list[Path]:
        """Log this step's sampled trajectories; returns the files written."""
        written: list[Path] = []
        if self.sample_rate <= 0.0:
            return written
        folder = self.root / f"step_{step:05d}"
        for g, group in enumerate(groups):
            for t, trajectory in enumerate(group.trajectories):
                if self._random.random() >= self.sample_rate:
                    continue
                folder.mkdir(parents=True, exist_ok=True)
                record = {"experiment": self.experiment, "config_hash": self.config_hash, "step": step,
                          "group": g, "index": t, **trajectory.for_logging()}
                path = folder / f"group{g:03d}_traj{t:03d}.json"
                path.write_text(json.dumps(record, indent=1, default=str))
                written.append(path)
        return written
