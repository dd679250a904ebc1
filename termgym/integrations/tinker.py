"""tinker-cookbook over termgym: token-level RL environments for ``tinker_cookbook.rl``.

The cookbook's RL loop (``tinker_cookbook.rl.train``) samples tokens and steps token-level
``Env`` objects; a renderer turns chat messages into model input and sampled tokens back into a
message. This module supplies the three pieces the loop asks for:

* :class:`TermgymTokenEnv` — one termgym episode: ``initial_observation`` renders the env's system
  prompt and task as a generation prompt; ``step(tokens)`` parses the tokens with the renderer,
  steps the termgym env with the message, and returns the reward (the grade on the last step, or
  every step's process rewards), ``episode_done`` and the re-rendered conversation;
* :class:`TermgymEnvGroupBuilder` — ``group_size`` episodes of one task (a GRPO group);
* :class:`TermgymRLDataset` / :class:`TermgymDatasetBuilder` — batches of groups over a suite's split.

Builders hold only strings and numbers (picklable, as the cookbook's distributed rollouts need);
tokenizer and renderer are made in ``make_envs`` through the cookbook's own
``tokenizer_utils.get_tokenizer`` / ``renderers.get_renderer``.

Needs ``pip install 'termgym[tinker]'`` (see docs/integrations.md).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import chz
import gymnasium as gym
import tinker
from tinker_cookbook import renderers, tokenizer_utils
from tinker_cookbook.completers import StopCondition
from tinker_cookbook.renderers import Renderer
from tinker_cookbook.rl import types

from termgym.integrations.episodes import EnvRecipe, episode_metrics, finish_early
from termgym.sandbox import run_blocking

__all__ = [
    "STOP_REASONS",
    "TermgymDatasetBuilder",
    "TermgymEnvGroupBuilder",
    "TermgymRLDataset",
    "TermgymTokenEnv",
]

#: termgym's end reasons as the cookbook's stop reasons (``metrics["stop/<reason>"]``).
STOP_REASONS = {
    "submitted": types.StopReason.COMPLETED,
    "max_steps": types.StopReason.MAX_TURNS,
    "time_limit": types.StopReason.ROLLOUT_TIMEOUT,
    "context_limit": types.StopReason.CONTEXT_OVERFLOW,
}


class TermgymTokenEnv(types.Env):
    """One termgym episode of ``task_id`` as a single-use, token-level cookbook ``Env``.

    Args:
        env: how to build the termgym env (id, ``gym.make`` kwargs, process rewards).
        task_id: the task this episode plays.
        renderer: the cookbook renderer of the policy's chat format.
        seed: passed to ``reset``.
        max_trajectory_tokens: when the next prompt would be longer, the episode is ended and
            graded as ``context_limit`` (``None``: only the env's own limits apply).
    """

    def __init__(self, env: EnvRecipe, task_id: str, renderer: Renderer, *, seed: int | None = None,
                 max_trajectory_tokens: int | None = None) -> None:
        if max_trajectory_tokens is not None and max_trajectory_tokens < 1:
            raise ValueError(f"max_trajectory_tokens must be at least 1 or None, got {max_trajectory_tokens}")
        self.config = env
        self.task_id = str(task_id)
        self.renderer = renderer
        self.seed = seed
        self.max_trajectory_tokens = max_trajectory_tokens
        self.messages: list[renderers.Message] = []
        self.steps = 0
        self.format_errors = 0
        self.tool_protocol = False
        self.final_info: dict[str, Any] | None = None
        self._env: gym.Env | None = None
        self._started = False

    @property
    def done(self) -> bool:
        """Whether the episode has ended (``final_info`` holds its last ``info``)."""
        return self.final_info is not None

    @property
    def gym_env(self) -> gym.Env | None:
        """The live termgym env (``None`` before ``initial_observation`` and after the episode)."""
        return self._env

    async def initial_observation(self) -> tuple[types.Observation, StopCondition]:
        if self._started:
            raise RuntimeError("a TermgymTokenEnv plays one episode; make a new one")
        self._started = True
        self._env = await run_blocking(self.config.make)
        try:
            _prompt, info = await run_blocking(self._env.reset, seed=self.seed, options={"task_id": self.task_id})
        except BaseException:
            await self.close()
            raise
        tools = info.get("tools") or None
        self.tool_protocol = tools is not None
        history = [_renderer_message(m) for m in info["messages"]]
        if tools:
            # The renderer writes the tool schemas into the system turn in the model's own format.
            specs = [t["function"] if "function" in t else t for t in tools]
            system = next((str(m["content"]) for m in history if m["role"] == "system"), "")
            history = self.renderer.create_conversation_prefix_with_tools(specs, system) + [
                m for m in history if m["role"] != "system"]
        self.messages = history
        return self.renderer.build_generation_prompt(self.messages), self.renderer.get_stop_sequences()

    async def step(self, action: types.Action, *, extra: types.ActionExtra | None = None) -> types.StepResult:
        if self._env is None or self.done:
            raise RuntimeError("step() before initial_observation() or after the episode ended")
        message, termination = self.renderer.parse_response(action)
        env = self._env
        seen = len(env.get_wrapper_attr("messages"))
        try:
            _obs, reward, terminated, truncated, info = await run_blocking(env.step, self._env_action(message))
        except BaseException:
            await self.close()
            raise
        self.steps += 1
        parsed = info.get("action") or {}
        format_error = parsed.get("kind") == "format_error"
        self.format_errors += format_error
        # The sampled message as the renderer parsed it (so the next prompt extends this one), then
        # what the env answered.
        self.messages.append(message)
        self.messages.extend(_renderer_message(m) for m in env.get_wrapper_attr("messages")[seen + 1:])
        reward = float(reward)
        metrics: dict[str, float | int] = {"format_error": int(format_error),
                                           "parse/" + str(termination.value): 1}
        logs: dict[str, str | int | float] = {"step": self.steps, "kind": str(parsed.get("kind")),
                                              "command": str(parsed.get("command") or "")[:500]}
        if "reward_events" in info:
            logs["reward_events"] = ",".join(e["event"] for e in info["reward_events"])
        if terminated or truncated:
            self.final_info = info
        else:
            next_ob = self.renderer.build_generation_prompt(self.messages)
            if self.max_trajectory_tokens is not None and next_ob.length > self.max_trajectory_tokens:
                extra_reward, self.final_info = await run_blocking(finish_early, env, "context_limit")
                reward += extra_reward
        if self.final_info is None:
            return types.StepResult(reward=reward, episode_done=False, next_observation=next_ob,
                                    next_stop_condition=self.renderer.get_stop_sequences(),
                                    metrics=metrics, logs=logs)
        metrics.update(episode_metrics(self.final_info, steps=self.steps, format_errors=self.format_errors))
        reason = str(self.final_info.get("end_reason", ""))
        metrics[types.STOP_METRIC_PREFIX + str(STOP_REASONS.get(reason, reason))] = 1.0
        logs["end_reason"] = reason
        await self.close()
        return types.StepResult(reward=reward, episode_done=True, next_observation=tinker.ModelInput.empty(),
                                next_stop_condition=self.renderer.get_stop_sequences(), metrics=metrics, logs=logs)

    def _env_action(self, message: renderers.Message) -> str | dict[str, Any]:
        """What the termgym env takes: the reply's text (thinking stripped), or the whole message with tool calls."""
        text = renderers.get_text_content(message)
        if not self.tool_protocol:
            return text
        action: dict[str, Any] = {"role": "assistant", "content": text or None}
        calls = message.get("tool_calls") or []
        if calls:
            action["tool_calls"] = [{"id": call.id or f"call_{self.steps}_{i}", "type": "function",
                                     "function": {"name": call.function.name, "arguments": call.function.arguments}}
                                    for i, call in enumerate(calls)]
        return action

    async def close(self) -> None:
        """Close the termgym env (its sandbox); safe to call more than once."""
        env, self._env = self._env, None
        if env is not None:
            await run_blocking(env.close)


def _renderer_message(message: Mapping[str, Any]) -> renderers.Message:
    """A termgym chat message as a cookbook renderer message."""
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
    for key in ("tool_call_id", "name"):
        if key in message:
            out[key] = message[key]
    if message.get("tool_calls"):
        out["tool_calls"] = [renderers.ToolCall(id=c.get("id"), function=renderers.ToolCall.FunctionBody(
            name=c["function"]["name"], arguments=c["function"]["arguments"])) for c in message["tool_calls"]]
    return out  # type: ignore[return-value]


@dataclass
class TermgymEnvGroupBuilder(types.EnvGroupBuilder):
    """``group_size`` episodes of the same task, for GRPO's per-group reward centering.

    Args:
        env: the termgym env to play.
        task_id: the task every env of the group plays.
        group_size: episodes per group.
        model_name: the tokenizer to load with ``tinker_cookbook.tokenizer_utils.get_tokenizer``
            (a hub name, a local directory, or a name given to ``register_tokenizer``).
        renderer_name: a ``tinker_cookbook.renderers.get_renderer`` name (``qwen3``, ...).
        max_trajectory_tokens: see :class:`TermgymTokenEnv`.
        seed: episode ``i`` of the group is reset with ``seed + i`` (``None``: unseeded).
    """

    env: EnvRecipe
    task_id: str
    group_size: int
    model_name: str
    renderer_name: str
    max_trajectory_tokens: int | None = None
    seed: int | None = None
    #: The envs of the last ``make_envs`` call (closed by ``cleanup``).
    envs: list[TermgymTokenEnv] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.group_size < 1:
            raise ValueError(f"group_size must be at least 1, got {self.group_size}")

    async def make_envs(self) -> Sequence[types.Env]:
        tokenizer = tokenizer_utils.get_tokenizer(self.model_name)
        renderer = renderers.get_renderer(self.renderer_name, tokenizer)
        self.envs = [TermgymTokenEnv(self.env, self.task_id, renderer, max_trajectory_tokens=self.max_trajectory_tokens,
                                      seed=None if self.seed is None else self.seed + i)
                      for i in range(self.group_size)]
        return self.envs

    async def cleanup(self) -> None:
        for env in self.envs:
            await env.close()

    def logging_tags(self) -> list[str]:
        return ["termgym", self.env.env_id.split("/")[-1]]


class TermgymRLDataset(types.RLDataset):
    """Batches of ``batch_size`` task groups over a list of task ids (one epoch, in a seeded order)."""

    def __init__(self, builders: Sequence[TermgymEnvGroupBuilder], batch_size: int) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if not builders:
            raise ValueError("a TermgymRLDataset needs at least one task")
        self.builders = list(builders)
        self.batch_size = batch_size

    def get_batch(self, index: int) -> Sequence[types.EnvGroupBuilder]:
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} out of range (the dataset has {len(self)} batches)")
        return self.builders[index * self.batch_size:(index + 1) * self.batch_size]

    def __len__(self) -> int:
        return (len(self.builders) + self.batch_size - 1) // self.batch_size


@chz.chz
class TermgymDatasetBuilder(types.RLDatasetBuilder):
    """The ``dataset_builder`` of a ``tinker_cookbook.rl.train.Config`` over a termgym suite.

    ``split`` names the training split of the env's suite; ``test_split`` (optional) the one the
    cookbook evaluates on. ``env_kwargs`` go to ``gym.make``; ``process_rewards`` are
    :class:`~termgym.wrappers.rewards.ProcessReward` options (``None``: outcome reward only). ``task_ids``,
    when given, replaces the split's list. The training order is shuffled with ``seed``.
    """

    env_id: str
    model_name_for_tokenizer: str
    renderer_name: str
    batch_size: int
    group_size: int
    split: str | None = None
    test_split: str | None = None
    task_ids: list[str] | None = None
    env_kwargs: dict[str, Any] = chz.field(default_factory=dict)
    process_rewards: dict[str, Any] | None = None
    max_trajectory_tokens: int | None = None
    seed: int = 0

    def env_config(self) -> EnvRecipe:
        return EnvRecipe(self.env_id, dict(self.env_kwargs), self.process_rewards)

    def groups(self, task_ids: Sequence[str]) -> list[TermgymEnvGroupBuilder]:
        config = self.env_config()
        return [TermgymEnvGroupBuilder(config, str(t), self.group_size, self.model_name_for_tokenizer,
                                       self.renderer_name, self.max_trajectory_tokens) for t in task_ids]

    async def __call__(self) -> tuple[TermgymRLDataset, TermgymRLDataset | None]:
        config = self.env_config()
        train_ids = list(self.task_ids) if self.task_ids is not None else await run_blocking(config.task_ids, self.split)
        if not train_ids:
            raise ValueError(f"{self.env_id}: no tasks in split {self.split!r}")
        random.Random(self.seed).shuffle(train_ids)
        train = TermgymRLDataset(self.groups(train_ids), self.batch_size)
        test = None
        if self.test_split is not None:
            test_ids = await run_blocking(config.task_ids, self.test_split)
            test = TermgymRLDataset(self.groups(test_ids), self.batch_size) if test_ids else None
        return train, test
