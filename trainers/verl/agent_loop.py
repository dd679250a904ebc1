"""``TermgymAgentLoop``: one termgym episode per veRL sample, token-in/token-out.

Read top to bottom: the sample names an env and a task (``extra_info.env_id`` / ``task_id``);
the env is made and reset off the event loop; the system + task prompt are tokenised once with
veRL's continuous-token builder; then each turn

1. asks the server for at most ``min(max_tokens_per_turn, budget left)`` tokens,
2. appends exactly those tokens to the running sequence (``response_mask`` 1),
3. stops cleanly if the turn did not finish (no end-of-turn token: length-truncated),
4. decodes the turn (special tokens kept, so history text equals the tokens) and steps the env,
5. appends the observation through ``ct_merge_context_msg`` (``response_mask`` 0), unless it
   would leave no room for another turn.

Nothing already generated is ever re-tokenised. Each env step's reward lands on the last token
of the turn that earned it (``reward_placement="per_turn"``, the input of the
``termgym_turn_grpo`` estimator) or the whole return on the last token (``"final"``). The env
is closed in ``finally``, whatever happens.

Registered through ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` pointing at
``trainers/verl/config/agent_loops.yaml``; the dataset rows come from
:mod:`trainers.verl.prepare_data`.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput
from verl.utils.profiler import simple_timer
from verl.workers.rollout.replica import TokenOutput

from termgym.imports import load_object

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("TERMGYM_LOGGING_LEVEL", "WARNING"))

REWARD_PLACEMENTS = ("per_turn", "final")

#: Why an episode ended, besides the env's own reasons (``submitted``, ``max_steps``, ``time_limit``,
#: ``context_limit``): a turn hit ``max_tokens_per_turn`` / the response budget without ending, the
#: server stopped a turn without an end-of-turn token, or the loop's ``max_turns`` was reached.
LOOP_END_REASONS = ("turn_truncated", "response_budget", "stopped_early", "max_turns")


class TermgymAgentLoopOutput(AgentLoopOutput):
    """``AgentLoopOutput`` whose token-level reward puts each turn's reward on that turn's last token.

    ``extra_fields["turn_scores"]`` are the env's step rewards and ``extra_fields["turn_end_positions"]``
    the response indices of the tokens that carry them; their sum is ``reward_score``. veRL's v1
    trainer builds ``rm_scores`` from :meth:`as_dict`, so the placement reaches the advantage
    estimator as ``token_level_rewards``.
    """

    def as_dict(self) -> dict[str, Any]:
        output = super().as_dict()
        positions = self.extra_fields.get("turn_end_positions")
        scores = self.extra_fields.get("turn_scores")
        if self.extra_fields.get("reward_placement") == "per_turn" and positions and "rm_scores" in output:
            rm_scores = torch.zeros_like(output["rm_scores"])
            for position, score in zip(positions, scores, strict=True):
                rm_scores[position] += float(score)
            output["rm_scores"] = rm_scores
        return output


def per_turn_token_rewards(response_length: int, positions: Sequence[int], scores: Sequence[float]) -> torch.Tensor:
    """The token-level reward row :class:`TermgymAgentLoopOutput` produces (for tests and tools)."""
    row = torch.zeros(response_length, dtype=torch.float32)
    for position, score in zip(positions, scores, strict=True):
        row[position] += float(score)
    return row


# One semaphore per event loop (veRL runs one loop per agent-loop worker process): it bounds how
# many episodes, i.e. sandboxes, a worker has open at once.
_SEMAPHORES: dict[int, asyncio.Semaphore] = {}


def _episode_slots(limit: int) -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    key = id(loop)
    if key not in _SEMAPHORES:
        _SEMAPHORES[key] = asyncio.Semaphore(limit)
    return _SEMAPHORES[key]


class TermgymAgentLoop(AgentLoopBase):
    """Play one termgym episode for one sample (see the module docstring).

    Constructor keyword arguments (set them in the agent-loop yaml):

    * ``max_tokens_per_turn`` — cap on one assistant turn (default 4096).
    * ``max_turns`` — optional cap on assistant turns (the env's ``max_steps`` applies anyway).
    * ``reward_placement`` — ``"per_turn"`` (default) or ``"final"``.
    * ``env_kwargs`` — defaults for ``gym.make`` (a sample's ``extra_info.env_kwargs`` wins).
    * ``wrappers`` — wrappers applied after ``gym.make``, as ``"module:attr"`` or callables
      (e.g. ``"termgym.wrappers.rewards:ProcessReward"`` for process rewards).
    * ``import_modules`` — modules imported first, e.g. the one that ``register_suite``-s a custom id.
    * ``max_concurrent_episodes`` — episodes open at once in one agent-loop worker (default 32).
    * ``trajectory_dir`` / ``log_sample_rate`` — write this fraction of episodes as JSON.
    * ``health_check_interval`` — seconds between health checks in this worker (0: off).
    """

    def __init__(
        self,
        *args: Any,
        max_tokens_per_turn: int | str = 4096,
        max_turns: int | None = None,
        reward_placement: str = "per_turn",
        env_kwargs: dict[str, Any] | None = None,
        wrappers: Sequence[str | Callable] = (),
        import_modules: Sequence[str] = (),
        max_concurrent_episodes: int | str = 32,
        trajectory_dir: str | None = None,
        log_sample_rate: float | str = 0.0,
        health_check_interval: float | str = 0.0,
        tools: Any = None,  # veRL passes its tool list to every agent loop; termgym envs bring their own
        **kwargs: Any,
    ) -> None:
        # Numbers may arrive as strings (the yaml reads them from ${oc.env:...}).
        super().__init__(*args, **kwargs)
        if reward_placement not in REWARD_PLACEMENTS:
            raise ValueError(f"reward_placement must be one of {REWARD_PLACEMENTS}, not {reward_placement!r}")
        if int(max_tokens_per_turn) < 1:
            raise ValueError(f"max_tokens_per_turn must be at least 1, got {max_tokens_per_turn}")
        if not 0.0 <= float(log_sample_rate) <= 1.0:
            raise ValueError(f"log_sample_rate must be within 0..1, got {log_sample_rate}")
        self.max_tokens_per_turn = int(max_tokens_per_turn)
        self.max_turns = int(max_turns) if max_turns else None
        self.reward_placement = reward_placement
        self.env_kwargs = _plain(env_kwargs or {})
        self.wrappers = [_resolve(w) for w in (wrappers or ())]
        for module in import_modules or ():
            importlib.import_module(module)
        self.max_concurrent_episodes = int(max_concurrent_episodes)
        self.trajectory_dir = trajectory_dir if trajectory_dir not in (None, "", "null", "None") else None
        self.log_sample_rate = float(log_sample_rate)
        self.prompt_length = self.rollout_config.prompt_length
        self.response_length = self.rollout_config.response_length
        self.stop_token_ids = _stop_token_ids(self.tokenizer)
        if float(health_check_interval) > 0:
            from trainers.verl.monitor import start_health_monitor

            start_health_monitor(interval=float(health_check_interval))

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> TermgymAgentLoopOutput:
        extra_info = _plain(kwargs.get("extra_info") or {})
        env_id = extra_info.get("env_id")
        task_id = extra_info.get("task_id")
        if not env_id or task_id is None:
            raise ValueError(
                "a termgym sample needs extra_info.env_id and extra_info.task_id "
                f"(got keys {sorted(extra_info)}); build the parquet with trainers/verl/prepare_data.py"
            )
        async with _episode_slots(self.max_concurrent_episodes):
            return await self._play(str(env_id), str(task_id), extra_info, sampling_params, kwargs)

    async def _play(self, env_id: str, task_id: str, extra_info: dict[str, Any],
                    sampling_params: dict[str, Any], kwargs: dict[str, Any]) -> TermgymAgentLoopOutput:
        from termgym.sandbox import run_blocking

        metrics: dict[str, Any] = {"generate_sequences": 0.0, "tool_calls": 0.0, "num_preempted": 0}
        full_determinism = getattr(self.rollout_config, "full_determinism", False)
        request_id = f"det-{int(kwargs.get('priority', 0))}" if full_determinism else uuid4().hex
        env = None
        started = time.monotonic()
        try:
            with simple_timer("tool_calls", metrics):
                env = await run_blocking(self._make_env, env_id, extra_info)
                _, info = await run_blocking(env.reset, seed=extra_info.get("seed"), options={"task_id": task_id})
            if info.get("tools"):
                raise ValueError(f"{env_id}: protocols with function tools (toolcall) are not supported by "
                                 "TermgymAgentLoop yet; use protocol='minisweagent' or a text protocol")
            messages: list[dict[str, Any]] = [dict(m) for m in info["messages"]]
            prompt_ids = await self.ct_build_initial_tokens(messages)
            if len(prompt_ids) >= self.prompt_length:
                raise ValueError(
                    f"task {task_id!r} of {env_id}: the initial prompt is {len(prompt_ids)} tokens but "
                    f"actor_rollout_ref.rollout.prompt_length is {self.prompt_length}; raise data.max_prompt_length"
                )
            episode = await self._turns(env, messages, prompt_ids, sampling_params, request_id, metrics)
        finally:
            if env is not None:
                await run_blocking(env.close)  # the sandbox never outlives the sample

        runtime_ids, response_mask, logprobs = episode["runtime_ids"], episode["response_mask"], episode["logprobs"]
        response_ids = runtime_ids[len(prompt_ids):]
        assert len(response_ids) == len(response_mask) <= self.response_length
        turn_scores = [float(r) for r in episode["turn_scores"]]
        extra_fields = {
            **episode["server_fields"],
            "turn_scores": turn_scores,
            "turn_end_positions": episode["turn_end_positions"],
            "reward_placement": self.reward_placement,
            "env_id": env_id,
            "task_id": task_id,
            "end_reason": episode["end_reason"],
            "grade": episode["grade"],
            "assistant_turns": episode["assistant_turns"],
            "format_errors": episode["format_errors"],
            "truncated_turn": episode["end_reason"] in ("turn_truncated", "response_budget"),
            # for the trainer's episode metrics (trainers/verl/metrics.py)
            "reward_events": _count(episode["reward_events"]),
            "model_tokens": int(sum(response_mask)),
        }
        output = TermgymAgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=response_mask,
            response_logprobs=logprobs if logprobs is not None and len(logprobs) == len(response_mask) else None,
            reward_score=float(sum(turn_scores)),
            num_turns=len(episode["messages"]) - 1,  # user + assistant + observation turns, as veRL counts
            metrics=AgentLoopMetrics(**metrics),
            extra_fields=extra_fields,
        )
        self._maybe_log(output, episode["messages"], kwargs, time.monotonic() - started)
        # veRL makes one agent-loop instance per sample: keep the episode's messages here for
        # inspection (tests, debugging) rather than shipping them through the training batch.
        self.last_episode = {**episode, "request_id": request_id}
        return output

    async def _turns(self, env, messages: list[dict[str, Any]], prompt_ids: list[int], sampling_params: dict[str, Any],
                     request_id: str, metrics: dict[str, Any]) -> dict[str, Any]:
        from termgym.sandbox import run_blocking

        runtime_ids = list(prompt_ids)
        response_mask: list[int] = []
        logprobs: list[float] | None = [] if sampling_params.get("logprobs") else None
        turn_scores: list[float] = []
        turn_end_positions: list[int] = []
        grade: dict[str, Any] | None = None
        end_reason = "max_turns"
        assistant_turns = format_errors = stepped_turns = 0
        # What veRL's server client tags each generation with (the weight versions, ``global_steps``,
        # ``min_global_steps``/``max_global_steps``): kept from the first turn, with the latest
        # ``max_global_steps``, as veRL's own tool agent loop does; the v1 trainer reads them.
        server_fields: dict[str, Any] = {}
        reward_events: list[str] = []  # names of ProcessReward's events, when the wrapper is on
        cut_turn = False  # the last assistant turn did not finish (never sent to the env as an action)

        while self.max_turns is None or assistant_turns < self.max_turns:
            budget = self.response_length - len(response_mask)
            if budget <= 0:
                end_reason = "response_budget"
                break
            max_tokens = min(self.max_tokens_per_turn, budget)
            with simple_timer("generate_sequences", metrics):
                output: TokenOutput = await self.server_manager.generate(
                    request_id=request_id,
                    prompt_ids=runtime_ids,
                    sampling_params={**sampling_params, "max_tokens": max_tokens},
                )
            metrics["num_preempted"] += output.num_preempted or 0
            _merge_server_fields(server_fields, output.extra_fields or {})
            tokens = list(output.token_ids)[:max_tokens]
            if not tokens:
                end_reason = "turn_truncated"
                break
            merge, response_mask, logprobs = await self.ct_merge_assistant_token(
                runtime_ids, tokens, response_mask, logprobs,
                assistant_logprobs=list(output.log_probs)[: len(tokens)] if logprobs is not None else None,
            )
            runtime_ids = merge.token_ids
            assistant_turns += 1
            finished = tokens[-1] in self.stop_token_ids
            text = self.tokenizer.decode(tokens[:-1] if finished else tokens, skip_special_tokens=False)
            messages.append({"role": "assistant", "content": text})
            if not finished:
                # A turn cut by max_tokens is not a message the env can judge: end the episode here.
                cut_turn = True
                if len(tokens) >= self.max_tokens_per_turn:
                    end_reason = "turn_truncated"
                elif len(tokens) >= budget:
                    end_reason = "response_budget"
                else:
                    end_reason = "stopped_early"  # the server stopped on something else (abort, other stop id)
                break

            with simple_timer("tool_calls", metrics):
                observation, reward, terminated, truncated, info = await run_blocking(env.step, text)
            stepped_turns += 1
            turn_scores.append(float(reward))
            turn_end_positions.append(len(response_mask) - 1)
            if (info.get("action") or {}).get("kind") == "format_error":
                format_errors += 1
            reward_events.extend(e["event"] for e in info.get("reward_events") or ())
            if terminated or truncated:
                grade = info.get("grade")
                end_reason = info.get("end_reason", "submitted" if terminated else "truncated")
                break

            observation_message = _observation_message(env, observation)
            merge, merged_mask, merged_logprobs = await self.ct_merge_context_msg(
                messages, messages + [observation_message], runtime_ids, response_mask, logprobs,
            )
            if len(merged_mask) >= self.response_length:
                # No room for another turn after this observation: stop before it, so the response
                # ends on the model's own last token.
                end_reason = "response_budget"
                break
            messages.append(observation_message)
            runtime_ids, response_mask, logprobs = merge.token_ids, merged_mask, merged_logprobs

        if grade is None and end_reason in LOOP_END_REASONS:
            # The loop, not the env, ended the episode (a cut turn, the token budget, max turns). It
            # still ends through a step, so wrappers (ProcessReward's outcome) score it like any
            # other last step: the env truncates on the next step, recording the cut turn's text
            # (or nothing, between turns) without acting on it.
            cut_text = messages[-1]["content"] if cut_turn else ""
            with simple_timer("tool_calls", metrics):
                env.unwrapped.request_truncation(end_reason)
                _, reward, _, _, info = await run_blocking(env.step, cut_text)
            grade = info.get("grade")
            reward_events.extend(e["event"] for e in info.get("reward_events") or ())
            if response_mask and turn_end_positions and turn_end_positions[-1] == len(response_mask) - 1:
                turn_scores[-1] += float(reward)
            elif response_mask:
                turn_scores.append(float(reward))
                turn_end_positions.append(len(response_mask) - 1)

        return {
            "runtime_ids": runtime_ids,
            "response_mask": response_mask,
            "logprobs": logprobs,
            "turn_scores": turn_scores,
            "turn_end_positions": turn_end_positions,
            "grade": grade,
            "end_reason": end_reason,
            "messages": messages,
            "assistant_turns": assistant_turns,
            "stepped_turns": stepped_turns,  # assistant turns the env saw (a cut turn is not sent)
            "format_errors": format_errors,
            "server_fields": server_fields,
            "reward_events": reward_events,
        }

    def _make_env(self, env_id: str, extra_info: dict[str, Any]):
        import gymnasium as gym

        import termgym  # noqa: F401 - registers the termgym/* ids

        for module in extra_info.get("import_modules") or ():
            importlib.import_module(module)
        env_kwargs = dict(self.env_kwargs)
        sample_kwargs = extra_info.get("env_kwargs") or {}
        if isinstance(sample_kwargs, str):
            sample_kwargs = json.loads(sample_kwargs) if sample_kwargs.strip() else {}
        env_kwargs.update(sample_kwargs)
        if env_id not in gym.registry:
            raise ValueError(f"env id {env_id!r} is not registered in this agent-loop worker; list the module "
                             "that registers it in the agent loop's import_modules")
        env = gym.make(env_id, **env_kwargs)
        for wrapper in self.wrappers:
            env = wrapper(env)
        return env

    def _maybe_log(self, output: TermgymAgentLoopOutput, messages: list[dict[str, Any]], kwargs: dict[str, Any],
                   seconds: float) -> None:
        if not self.trajectory_dir or self.log_sample_rate <= 0 or random.random() >= self.log_sample_rate:
            return
        step = kwargs.get("global_steps", -1)
        step = int(step.item() if hasattr(step, "item") else step)
        directory = Path(self.trajectory_dir) / f"step_{step:06d}"
        directory.mkdir(parents=True, exist_ok=True)
        record = {
            "env_id": output.extra_fields["env_id"],
            "task_id": output.extra_fields["task_id"],
            "reward": output.reward_score,
            "turn_scores": output.extra_fields["turn_scores"],
            "end_reason": output.extra_fields["end_reason"],
            "grade": output.extra_fields["grade"],
            "prompt_tokens": len(output.prompt_ids),
            "response_tokens": len(output.response_ids),
            "model_tokens": int(sum(output.response_mask)),
            "seconds": round(seconds, 3),
            "messages": messages,
        }
        name = f"{output.extra_fields['task_id']}-{uuid4().hex[:8]}.json".replace("/", "_")
        try:
            (directory / name).write_text(json.dumps(record, indent=1, default=str))
        except OSError as exc:  # logging must never fail a rollout
            logger.warning("could not write trajectory %s: %s", directory / name, exc)


def _count(names: Sequence[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return counts


def _merge_server_fields(fields: dict[str, Any], turn_fields: dict[str, Any]) -> None:
    """Fold one generation's ``TokenOutput.extra_fields`` into the episode's (see ``_turns``).

    The first turn's fields are kept whole (its ``min_global_steps`` is the oldest weight version
    the episode saw); later turns only move ``max_global_steps`` forward.
    """
    if not fields:
        fields.update(turn_fields)
    elif turn_fields.get("max_global_steps") is not None:
        fields["max_global_steps"] = turn_fields["max_global_steps"]


def _observation_message(env, observation: str) -> dict[str, Any]:
    """The message the env appended for ``observation`` (its protocol decides the role)."""
    history = getattr(env.unwrapped, "messages", None) or []
    if history and history[-1].get("role") != "assistant" and history[-1].get("content") == observation:
        return {"role": history[-1]["role"], "content": observation}
    return {"role": "user", "content": observation}


def _stop_token_ids(tokenizer) -> set[int]:
    """Tokens that end an assistant turn as the chat template writes it (``<|im_end|>`` for Qwen).

    Only these count as "finished": the turn's text is then everything before the token, and the
    template re-renders the same token after it, so history text and tokens agree.
    """
    ids = {tokenizer.eos_token_id}
    token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(token_id, int) and token_id != tokenizer.unk_token_id:
        ids.add(token_id)
    return {i for i in ids if i is not None}


def _resolve(obj: str | Callable) -> Callable:
    if callable(obj):
        return obj
    return load_object(obj, what="wrapper")


def _plain(value: Any) -> Any:
    """DictConfig / numpy containers (how veRL hands config and dataset fields over) → plain Python."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, DictConfig | ListConfig):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf comes with veRL
        pass
    if hasattr(value, "tolist") and not isinstance(value, str):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
