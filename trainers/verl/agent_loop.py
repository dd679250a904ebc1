"""``TermgymAgentLoop``: one termgym episode per veRL sample, token-in/token-out.

Read top to bottom: the sample names an env and a task (``extra_info.env_id`` / ``task_id``);
the env is made off the event loop and played by termgym's one agent loop
(:func:`termgym.agents.loop.run_episode`) with a token policy (:class:`_TokenPolicy`): the system
+ task prompt are tokenised once with veRL's continuous-token builder; then each turn

1. asks the server for at most ``min(max_tokens_per_turn, budget left)`` tokens,
2. appends exactly those tokens to the running sequence (``response_mask`` 1),
3. stops cleanly if the turn did not finish (no end-of-turn token: length-truncated),
4. decodes the turn (special tokens kept, so history text equals the tokens) and steps the env,
5. appends the observation through ``ct_merge_context_msg`` (``response_mask`` 0), unless it
   would leave no room for another turn.

A limit of the loop's own (a cut turn, the token budget, ``max_turns``) ends the episode with a
last ``env.step(Truncate(reason))``, so wrappers settle it. Nothing already generated is ever
re-tokenised. Each env step's reward lands on the last token
of the turn that earned it (``reward_placement="per_turn"``, the input of the
``termgym_turn_grpo`` estimator) or the whole return on the last token (``"final"``). The env
is closed in ``finally``, whatever happens.

An episode whose env failed (:class:`~termgym.agents.loop.EnvFailure`: a sandbox that crashed, a
Ray sandbox node lost mid-episode) is played again from scratch with a fresh env and a fresh
generation, up to ``infra_retries`` times, as ``termgym eval`` does: the sample the trainer gets is
one whole episode of the current policy, and how many tries it took is in its ``extra_fields``.

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
from collections.abc import Callable, Sequence
from typing import Any
from uuid import uuid4

import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput
from verl.utils.profiler import simple_timer
from verl.workers.rollout.replica import TokenOutput

from termgym.imports import load_object
from termgym.wrappers.rewards import CLAWBACK as _CLAWBACK
from termgym.wrappers.rewards import OUTCOME_EVENTS as _OUTCOME_EVENTS

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("TERMGYM_LOGGING_LEVEL", "WARNING"))

REWARD_PLACEMENTS = ("per_turn", "final")

#: The experiment name of the episode records written under ``trajectory_dir``.
TRAJECTORY_EXPERIMENT = "rollouts"

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
    * ``trajectory_dir`` / ``log_sample_rate`` — record this fraction of episodes with termgym's
      recorder (:class:`~termgym.wrappers.recording.RecordEpisodes`, token ids per turn in each
      step's ``extra``) to ``trajectory_dir/rollouts/step_<global step>.jsonl``.
    * ``health_check_interval`` — seconds between health checks in this worker (0: off).
    * ``charge_clawback`` — place ProcessReward's clawback on the turns whose shaping it takes back
      (default true; false: on the last turn, where the env paid it).
    * ``infra_retries`` — times an episode whose env failed is played again from scratch (default 2);
      the last failure is raised.
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
        charge_clawback: bool | str = True,
        infra_retries: int | str = 2,
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
        self.charge_clawback = str(charge_clawback).lower() not in ("false", "0", "no")
        if int(infra_retries) < 0:
            raise ValueError(f"infra_retries must be at least 0, got {infra_retries}")
        self.infra_retries = int(infra_retries)
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
        from termgym.agents.loop import EnvFailure

        lost: list[dict[str, str]] = []
        async with _episode_slots(self.max_concurrent_episodes):
            while True:
                try:
                    return await self._play(str(env_id), str(task_id), extra_info, sampling_params, kwargs, lost)
                except EnvFailure as exc:
                    if not exc.retriable or len(lost) >= self.infra_retries:
                        raise
                    lost.append({"type": type(exc.cause).__name__, "where": f"env.{exc.during}",
                                 "message": str(exc.cause)[:500]})
                    logger.warning("task %s: %s; playing the episode again with a fresh env (try %d of %d)",
                                   task_id, exc, len(lost) + 1, self.infra_retries + 1)

    async def _play(self, env_id: str, task_id: str, extra_info: dict[str, Any], sampling_params: dict[str, Any],
                    kwargs: dict[str, Any], lost: Sequence[dict[str, str]] = ()) -> TermgymAgentLoopOutput:
        from termgym.agents.loop import LoopOutcome, run_episode
        from termgym.env import aclose
        from termgym.sandbox import run_blocking

        metrics: dict[str, Any] = {"generate_sequences": 0.0, "tool_calls": 0.0, "num_preempted": 0}
        full_determinism = getattr(self.rollout_config, "full_determinism", False)
        request_id = f"det-{int(kwargs.get('priority', 0))}" if full_determinism else uuid4().hex
        env = None
        outcome = LoopOutcome()
        try:
            with simple_timer("tool_calls", metrics):
                env = await run_blocking(self._make_env, env_id, extra_info, _global_step(kwargs))
            policy = _TokenPolicy(self, env, env_id, task_id, sampling_params, request_id, metrics)
            await run_episode(env, policy, seed=extra_info.get("seed"), options={"task_id": task_id},
                              max_turns=self.max_turns, outcome=outcome)
        finally:
            metrics["tool_calls"] += outcome.env_seconds
            if env is not None:
                await aclose(env)  # the sandbox never outlives the sample
        record = episode_record_ref(env)

        prompt_ids = policy.prompt_ids
        runtime_ids, response_mask, logprobs = policy.runtime_ids, policy.response_mask, policy.logprobs
        response_ids = runtime_ids[len(prompt_ids):]
        assert len(response_ids) == len(response_mask) <= self.response_length
        turn_scores = [float(r) for r in policy.credited_turn_scores(self.charge_clawback)]
        extra_fields = {
            **policy.server_fields,
            "turn_scores": turn_scores,  # what is placed on each turn's last token (sums to the return)
            "env_step_rewards": [float(r) for r in policy.turn_scores],  # the env's, before any charge-back
            "turn_end_positions": policy.turn_end_positions,
            "turn_anchors": policy.anchors[: len(policy.turn_end_positions)],
            "reward_placement": self.reward_placement,
            "env_id": env_id,
            "task_id": task_id,
            # the env's own record of this episode (when recorded): the trainer's credit checks
            # (trainers/verl/metrics.py) match this trajectory's reward and tokens against it
            "record": record,
            "end_reason": policy.end_reason,
            "grade": policy.grade,
            "assistant_turns": policy.assistant_turns,
            "format_errors": policy.format_errors,
            "truncated_turn": policy.end_reason in ("turn_truncated", "response_budget"),
            # for the trainer's episode metrics (trainers/verl/metrics.py)
            "reward_events": _count(policy.reward_events),
            "model_tokens": int(sum(response_mask)),
            # tries lost to the infrastructure before this one (each played from scratch, nothing kept)
            "infra_failures": list(lost),
            # where the episode's sandbox ran: a Ray node's id for a remote env (termgym.remote), else None
            "sandbox_node": (getattr(env.unwrapped, "remote_node", None) or {}).get("node_id"),
        }
        output = TermgymAgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=response_mask,
            response_logprobs=logprobs if logprobs is not None and len(logprobs) == len(response_mask) else None,
            reward_score=float(sum(turn_scores)),
            num_turns=len(policy.messages) - 1,  # user + assistant + observation turns, as veRL counts
            metrics=AgentLoopMetrics(**metrics),
            extra_fields=extra_fields,
        )
        # veRL makes one agent-loop instance per sample: keep the episode's messages here for
        # inspection (tests, debugging) rather than shipping them through the training batch.
        self.last_episode = {**policy.summary(), "request_id": request_id}
        return output

    def _make_env(self, env_id: str, extra_info: dict[str, Any], global_step: int = -1):
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
        if self.trajectory_dir and self.log_sample_rate > 0:
            # Sampled episodes are written by termgym's recorder (outermost, so it sees every
            # wrapper's rewards): one record per episode, the same format as ``termgym eval --record``.
            from termgym.wrappers.recording import RecordEpisodes, episode_log_path

            step = global_step if global_step >= 0 else None
            env = RecordEpisodes(env, episode_log_path(self.trajectory_dir, TRAJECTORY_EXPERIMENT, step),
                                 experiment=TRAJECTORY_EXPERIMENT, sample_rate=self.log_sample_rate,
                                 metadata={"trainer": "verl"})
            env.set_training_step(step)
        return env


class _TokenPolicy:
    """The agent loop's policy for one veRL sample: tokens around termgym's one loop.

    ``act`` generates the next turn and appends exactly its tokens (``response_mask`` 1); a turn
    that did not finish, or no budget left, becomes a :class:`~termgym.env.Truncate` (the episode
    ends through a step, so wrappers settle it). ``observe`` places each step's reward on its
    turn's last token and merges the observation's tokens (``response_mask`` 0), or, when they
    would leave no room for another turn, asks for a ``Truncate("response_budget")`` next.
    """

    def __init__(self, loop: TermgymAgentLoop, env: Any, env_id: str, task_id: str, sampling_params: dict[str, Any],
                 request_id: str, metrics: dict[str, Any]) -> None:
        self.loop, self.env, self.env_id, self.task_id = loop, env, env_id, task_id
        self.sampling_params, self.request_id, self.metrics = sampling_params, request_id, metrics
        self.prompt_ids: list[int] = []
        self.runtime_ids: list[int] = []
        self.response_mask: list[int] = []
        self.logprobs: list[float] | None = [] if sampling_params.get("logprobs") else None
        self.messages: list[dict[str, Any]] = []
        self.turn_scores: list[float] = []
        self.turn_end_positions: list[int] = []
        self.grade: dict[str, Any] | None = None
        self.end_reason = "max_turns"
        self.assistant_turns = self.format_errors = self.stepped_turns = 0
        # What veRL's server client tags each generation with (the weight versions, ``global_steps``,
        # ``min_global_steps``/``max_global_steps``): kept from the first turn, with the latest
        # ``max_global_steps``, as veRL's own tool agent loop does; the v1 trainer reads them.
        self.server_fields: dict[str, Any] = {}
        self.reward_events: list[str] = []  # names of ProcessReward's events, when the wrapper is on
        self.turn_positive_shaping: list[float] = []  # positive shaping each turn earned (what a clawback takes back)
        self.clawback: tuple[int, float] | None = None  # (turn, amount) of ProcessReward's clawback
        self.anchors: list[str] = []  # per turn: a hash of the observation it started from (GiGPO anchor state)
        self._stop: str | None = None  # a limit reached between turns: the next action truncates

    async def start(self, prompt: Any, info: dict[str, Any]) -> None:
        if info.get("tools"):
            raise ValueError(f"{self.env_id}: protocols with function tools (toolcall) are not supported by "
                             "TermgymAgentLoop yet; use protocol='minisweagent' or a text protocol")
        self.messages = [dict(m) for m in info["messages"]]
        self.prompt_ids = await self.loop.ct_build_initial_tokens(self.messages)
        if len(self.prompt_ids) >= self.loop.prompt_length:
            raise ValueError(
                f"task {self.task_id!r} of {self.env_id}: the initial prompt is {len(self.prompt_ids)} tokens but "
                f"actor_rollout_ref.rollout.prompt_length is {self.loop.prompt_length}; raise data.max_prompt_length"
            )
        self.runtime_ids = list(self.prompt_ids)
        self.anchors = [_anchor_key(self.messages[-1].get("content"))]

    async def act(self, observation: Any, info: dict[str, Any]) -> Any:
        from termgym.env import Truncate

        loop = self.loop
        if self._stop is not None:
            return Truncate(self._stop)
        budget = loop.response_length - len(self.response_mask)
        if budget <= 0:
            return Truncate("response_budget")
        max_tokens = min(loop.max_tokens_per_turn, budget)
        with simple_timer("generate_sequences", self.metrics):
            output: TokenOutput = await loop.server_manager.generate(
                request_id=self.request_id,
                prompt_ids=self.runtime_ids,
                sampling_params={**self.sampling_params, "max_tokens": max_tokens},
            )
        self.metrics["num_preempted"] += output.num_preempted or 0
        _merge_server_fields(self.server_fields, output.extra_fields or {})
        tokens = list(output.token_ids)[:max_tokens]
        if not tokens:
            return Truncate("turn_truncated")
        turn_logprobs = list(output.log_probs)[: len(tokens)] if self.logprobs is not None else None
        merge, self.response_mask, self.logprobs = await loop.ct_merge_assistant_token(
            self.runtime_ids, tokens, self.response_mask, self.logprobs, assistant_logprobs=turn_logprobs)
        self.runtime_ids = merge.token_ids
        self.assistant_turns += 1
        finished = tokens[-1] in loop.stop_token_ids
        text = decode_turn(loop.tokenizer, tokens, loop.stop_token_ids)
        self.messages.append({"role": "assistant", "content": text})
        # The turn's tokens ride on the message (the env hands them back in info; a recorder stores them).
        message = {"role": "assistant", "content": text,
                   "extra": {"token_ids": tokens, **({"logprobs": turn_logprobs} if turn_logprobs else {})}}
        if finished:
            return message
        # A turn cut by max_tokens is not a message the env can judge: the episode ends on it,
        # the env recording its text without acting on it.
        if len(tokens) >= loop.max_tokens_per_turn:
            reason = "turn_truncated"
        elif len(tokens) >= budget:
            reason = "response_budget"
        else:
            reason = "stopped_early"  # the server stopped on something else (abort, other stop id)
        return Truncate(reason, message)

    async def observe(self, step: Any) -> None:
        from termgym.env import Truncate

        info = step.info
        events = info.get("reward_events") or ()
        self.reward_events.extend(e["event"] for e in events)
        positive = sum(float(e["reward"]) for e in events
                       if float(e["reward"]) > 0 and e["event"] not in _OUTCOME_EVENTS and e["event"] != _CLAWBACK)
        clawback = sum(float(e["reward"]) for e in events if e["event"] == _CLAWBACK)
        if isinstance(step.action, Truncate):
            # The loop, not the env, ended the episode (a cut turn, the token budget, max turns): its
            # last step's reward (ProcessReward's outcome) goes on the last token of the response.
            self.grade, self.end_reason = info.get("grade"), step.action.reason
            mask = self.response_mask
            if mask and self.turn_end_positions and self.turn_end_positions[-1] == len(mask) - 1:
                self.turn_scores[-1] += step.reward
                self.turn_positive_shaping[-1] += positive
            elif mask:
                self.turn_scores.append(step.reward)
                self.turn_positive_shaping.append(positive)
                self.turn_end_positions.append(len(mask) - 1)
            if clawback and self.turn_scores:
                self.clawback = (len(self.turn_scores) - 1, clawback)
            return
        self.stepped_turns += 1
        self.turn_scores.append(step.reward)
        self.turn_positive_shaping.append(positive)
        self.turn_end_positions.append(len(self.response_mask) - 1)
        if clawback:
            self.clawback = (len(self.turn_scores) - 1, clawback)
        if (info.get("action") or {}).get("kind") == "format_error":
            self.format_errors += 1
        if step.done:
            self.grade = info.get("grade")
            self.end_reason = info.get("end_reason", "submitted" if step.terminated else "truncated")
            return
        observation_message = _observation_message(self.env, step.observation)
        merge, merged_mask, merged_logprobs = await self.loop.ct_merge_context_msg(
            self.messages, self.messages + [observation_message], self.runtime_ids, self.response_mask, self.logprobs,
        )
        if len(merged_mask) >= self.loop.response_length:
            # No room for another turn after this observation: stop before it, so the response
            # ends on the model's own last token.
            self._stop = "response_budget"
            return
        self.messages.append(observation_message)
        self.runtime_ids, self.response_mask, self.logprobs = merge.token_ids, merged_mask, merged_logprobs
        self.anchors.append(_anchor_key(observation_message["content"]))

    def credited_turn_scores(self, charge_clawback: bool) -> list[float]:
        """The per-turn rewards placed on the tokens: the env's step rewards, with ProcessReward's
        clawback moved onto the turns whose positive shaping it takes back (``charge_clawback``)."""
        from trainers.verl.advantage import charge_clawback as charge

        if not charge_clawback or self.clawback is None:
            return list(self.turn_scores)
        turn, amount = self.clawback
        return charge(self.turn_scores, self.turn_positive_shaping, turn, amount)

    def summary(self) -> dict[str, Any]:
        """The episode as tests and debugging read it (``TermgymAgentLoop.last_episode``)."""
        return {"runtime_ids": self.runtime_ids, "response_mask": self.response_mask, "logprobs": self.logprobs,
                "turn_scores": self.turn_scores, "turn_end_positions": self.turn_end_positions,
                "grade": self.grade, "end_reason": self.end_reason, "messages": self.messages,
                "assistant_turns": self.assistant_turns,
                "stepped_turns": self.stepped_turns,  # assistant turns the env acted on (a cut turn is not)
                "format_errors": self.format_errors, "server_fields": self.server_fields,
                "reward_events": self.reward_events}


def decode_turn(tokenizer, tokens: Sequence[int], stop_token_ids: set[int] | None = None) -> str:
    """The text of one assistant turn: its tokens decoded with special tokens kept, less a final
    end-of-turn token (the chat template writes that one itself). What the env is handed for the turn."""
    stops = _stop_token_ids(tokenizer) if stop_token_ids is None else stop_token_ids
    tokens = list(tokens)
    finished = bool(tokens) and tokens[-1] in stops
    return tokenizer.decode(tokens[:-1] if finished else tokens, skip_special_tokens=False)


def episode_record_ref(env: Any) -> dict[str, str] | None:
    """``{"path", "episode_id"}`` of the episode record ``env``'s recorder wrote (``None`` when the
    episode was not recorded): how a trajectory in veRL's batch names its episode."""
    from termgym.wrappers.recording import RecordEpisodes

    layer = env
    while layer is not None:
        if isinstance(layer, RecordEpisodes):
            if layer.last_episode_id is None:
                return None
            return {"path": str(layer.path), "episode_id": str(layer.last_episode_id)}
        layer = getattr(layer, "env", None)
    return None


def _anchor_key(content: Any) -> str:
    """A short stable hash of an observation's text: turns starting from equal ones share an anchor state."""
    import hashlib

    return hashlib.sha1(str(content).encode("utf-8", "replace")).hexdigest()[:16]


def _global_step(kwargs: dict[str, Any]) -> int:
    step = kwargs.get("global_steps", -1)
    return int(step.item() if hasattr(step, "item") else step)


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
    history = env.get_wrapper_attr("messages") or []
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
