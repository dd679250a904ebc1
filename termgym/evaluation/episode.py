"""Playing one episode with an agent, and classifying how it failed.

Where a failure happens decides whose it is: anything raised while making, resetting, stepping
or closing the environment is an infrastructure failure (the sandbox died, a task's setup broke),
and so is an :class:`~termgym.agents.base.InfraError` from the agent (the endpoint stayed
unreachable). Anything else raised by the agent is the agent's failure. Infrastructure failures are
retried from scratch (a fresh env, a fresh ``Episode``) up to ``infra_retries`` times with back-off;
agent failures are final.

The episode itself is played by the one agent loop, :func:`termgym.agents.loop.run_episode`; this
module adapts an :class:`~termgym.agents.base.Agent` to it (:class:`AgentPolicy`) and turns the
loop's outcome into an :class:`~termgym.evaluation.results.EpisodeResult`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import inspect
import os
import socket
import time
import traceback
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from termgym.agents.base import Agent, Episode, InfraError, Reply
from termgym.agents.loop import EnvFailure, LoopOutcome, Step, run_episode
from termgym.env import terminal_env
from termgym.evaluation.results import EpisodeResult
from termgym.sandbox import run_blocking


@dataclass
class EpisodeSpec:
    """Everything needed to play one episode, picklable (it travels to Ray workers)."""

    env_spec: Any  # gymnasium EnvSpec (carries the suite, so custom suites work on remote workers)
    env_kwargs: dict[str, Any]
    task_id: str
    attempt: int
    seed: int | None = None
    episode_timeout: float | None = None
    infra_retries: int = 2
    infra_backoff: float = 2.0
    process_rewards: dict[str, Any] | None = None  # ProcessReward options; None: no process rewards
    record_path: str | None = None  # append the episode to this JSONL file (termgym.wrappers.recording)
    record_experiment: str = "eval"
    record_metadata: dict[str, Any] | None = None


async def play_with_retries(spec: EpisodeSpec, agent: Agent) -> EpisodeResult:
    """Play ``spec``'s episode, retrying infrastructure failures; never raises for a failed episode."""
    failures: list[dict[str, Any]] = []
    for attempt in range(spec.infra_retries + 1):
        if attempt:
            await asyncio.sleep(spec.infra_backoff * 2 ** (attempt - 1))
        result = await play_episode(spec, agent)
        if result.status != "infra_error":
            result.infra_failures = failures
            return result
        assert result.error is not None
        failures.append(result.error)
        if not result.error.get("retriable", True):
            break
    result.infra_failures = failures[:-1]
    return result


async def play_episode(spec: EpisodeSpec, agent: Agent) -> EpisodeResult:
    """Play one try of ``spec``'s episode. The result's status says how it ended."""
    started = time.monotonic()
    result = EpisodeResult(task_id=spec.task_id, attempt=spec.attempt, status="completed", seed=spec.seed,
                           started_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                           worker=f"{socket.gethostname()}:{os.getpid()}")
    env: gym.Env | None = None
    timings = {"agent": 0.0, "env": 0.0}
    try:
        env = await _env_call(timings, "make", _make_env, spec)
        await _bounded(_loop(spec, agent, env, result, timings), spec.episode_timeout)
    except _EpisodeTimeout:
        result.status = "agent_error"
        result.end_reason = "episode_timeout"
        result.error = {"kind": "agent", "type": "EpisodeTimeout",
                        "message": f"the episode took longer than {spec.episode_timeout:g}s"}
    except EnvFailure as exc:
        result.status = "infra_error"
        result.error = _error("infra", exc.cause, f"env.{exc.during}", retriable=exc.retriable)
    except InfraError as exc:
        result.status = "infra_error"
        result.error = _error("infra", exc, "agent", retriable=exc.retriable)
    except Exception as exc:
        result.status = "agent_error"
        result.end_reason = result.end_reason or "agent_error"
        result.error = _error("agent", exc, "agent")
    finally:
        if env is not None:
            if not result.messages:
                with contextlib.suppress(Exception):
                    result.messages = list(env.get_wrapper_attr("messages") or [])
            try:
                # Blocking, but short (kills the sandbox's processes); it must also run on cancellation.
                env.close()
            except Exception:
                pass
    if result.status != "completed":
        result.score, result.passed = 0.0, False
    result.wall_time = round(time.monotonic() - started, 4)
    result.agent_time = round(timings["agent"], 4)
    result.env_time = round(timings["env"], 4)
    return result


class AgentPolicy:
    """An evaluation :class:`~termgym.agents.base.Agent` as a policy of the agent loop.

    It builds the agent's :class:`~termgym.agents.base.Episode` view after ``reset``, turns each
    ``act`` into an action (a :class:`~termgym.agents.base.Reply`'s token data rides on the message
    under ``"extra"``), and writes each step into ``result`` as it happens, so an episode cut by
    its timeout keeps the turns it played.
    """

    def __init__(self, spec: EpisodeSpec, agent: Agent, env: gym.Env, result: EpisodeResult) -> None:
        self.spec, self.agent, self.env, self.result = spec, agent, env, result
        self.episode: Episode | None = None
        self._reply: Reply | None = None

    async def start(self, prompt: Any, info: dict[str, Any]) -> None:
        self.episode = Episode(task_id=self.spec.task_id, attempt=self.spec.attempt, env=terminal_env(self.env),
                               messages=self.env.get_wrapper_attr("messages"), tools=info.get("tools"),
                               system_prompt=info.get("system_prompt", ""), prompt=prompt)
        await self.agent.start(self.episode)

    async def act(self, observation: Any, info: dict[str, Any]) -> Any:
        assert self.episode is not None
        self._reply = Reply.coerce(await _act(self.agent, self.episode))
        return self._reply.action()

    def observe(self, step: Step) -> None:
        assert self.episode is not None and self._reply is not None
        result, reply, info = self.result, self._reply, step.info
        self.episode.step = step.index
        # The env appends to its history list; keep the agent's view pointing at the live one.
        self.episode.messages = self.env.get_wrapper_attr("messages")
        parsed = info.get("action") or {}
        turn: dict[str, Any] = {"step": step.index, "action": parsed, "reward": step.reward}
        for key in ("exec", "refused", "reward_events", "env_reward", "process_reward"):
            if key in info:
                turn[key] = info[key]
        turn.update(reply.record())
        result.turns.append(turn)
        result.steps = step.index
        result.total_reward += step.reward
        result.format_errors += parsed.get("kind") == "format_error"
        result.prompt_tokens += int(reply.usage.get("prompt_tokens", 0))
        result.completion_tokens += int(reply.usage.get("completion_tokens", 0))

    async def end(self) -> None:
        # Also on cancellation (the episode timeout): an agent's own loop must not outlive its episode.
        end = getattr(self.agent, "end", None)
        if end is not None and self.episode is not None:
            with contextlib.suppress(Exception):
                value = end(self.episode)
                if inspect.isawaitable(value):
                    await value


async def _loop(spec: EpisodeSpec, agent: Agent, env: gym.Env, result: EpisodeResult,
                timings: dict[str, float]) -> None:
    prepare = getattr(agent, "prepare_env", None)
    if prepare is not None:  # e.g. a CLI agent asks for its model endpoint to be forwarded into the sandbox
        prepare(terminal_env(env))
    policy = AgentPolicy(spec, agent, env, result)
    outcome = LoopOutcome()
    try:
        await run_episode(env, policy, seed=spec.seed, options={"task_id": spec.task_id}, outcome=outcome)
    finally:  # also when the episode failed or timed out: the time spent so far is still split
        timings["agent"] += outcome.agent_seconds
        timings["env"] += outcome.env_seconds
    info = outcome.final_info or {}
    grade = info.get("grade") or {}
    result.grade = grade
    result.score = float(grade.get("score", outcome.steps[-1].reward if outcome.steps else 0.0))
    result.passed = bool(grade.get("passed", False))
    result.end_reason = outcome.end_reason
    result.messages = list(info.get("messages") or env.get_wrapper_attr("messages"))
    result.record = _record_reference(spec, env)
    if grade.get("infra_error"):
        # The grader could not run the tests at all (no interpreter, no runner, a suite that
        # does not collect here): an outage, not the agent's 0. Not retried: it would recur.
        result.status = "infra_error"
        result.error = {"kind": "infra", "type": "GradingInfraError", "message": str(grade["infra_error"])[:4000],
                        "where": "grade", "retriable": False}


def _record_reference(spec: EpisodeSpec, env: gym.Env) -> dict[str, Any] | None:
    """Where the episode's full record is (the recorder's file and the record's id), if it was recorded."""
    if spec.record_path is None:
        return None
    try:
        episode_id = env.get_wrapper_attr("last_episode_id")
    except AttributeError:
        return None
    return {"path": spec.record_path, "episode_id": episode_id} if episode_id else None


def _make_env(spec: EpisodeSpec) -> gym.Env:
    env = gym.make(spec.env_spec, disable_env_checker=True, **spec.env_kwargs)
    if spec.process_rewards is not None:
        from termgym.wrappers.rewards import ProcessReward

        env = ProcessReward(env, **spec.process_rewards)
    if spec.record_path is not None:  # outermost, so the record sees the process rewards
        from termgym.wrappers.recording import RecordEpisodes

        env = RecordEpisodes(env, spec.record_path, experiment=spec.record_experiment,
                             metadata={**(spec.record_metadata or {}), "attempt": spec.attempt})
    return env


class _EpisodeTimeout(Exception):
    pass


async def _bounded(coro: Any, timeout: float | None) -> None:
    # Not asyncio.wait_for: a TimeoutError raised *inside* the episode must not read as the
    # episode's own time limit.
    task = asyncio.ensure_future(coro)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise _EpisodeTimeout
    task.result()


async def _act(agent: Agent, episode: Episode) -> Any:
    if inspect.iscoroutinefunction(agent.act):
        return await agent.act(episode)
    # A synchronous agent must not block the other episodes: run it in the I/O pool.
    value = await run_blocking(agent.act, episode)
    return await value if inspect.isawaitable(value) else value


async def _env_call(timings: dict[str, float], during: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    t0 = time.monotonic()
    try:
        return await run_blocking(fn, *args, **kwargs)
    except Exception as exc:
        raise EnvFailure(during, exc) from exc
    finally:
        timings["env"] += time.monotonic() - t0


def _error(kind: str, exc: BaseException, where: str, retriable: bool = True) -> dict[str, Any]:
    frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return {"kind": kind, "type": type(exc).__name__, "message": str(exc)[:4000], "where": where,
            "retriable": retriable, "traceback": "".join(frames)[-4000:]}
