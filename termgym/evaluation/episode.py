"""Playing one episode with an agent, and classifying how it failed.

Where a failure happens decides whose it is: anything raised while making, resetting, stepping
or closing the environment is an infrastructure failure (the sandbox died, a task's setup broke),
and so is an :class:`~termgym.agents.base.InfraError` from the agent (the endpoint stayed
unreachable). Anything else raised by the agent is the agent's failure. Infrastructure failures are
retried from scratch (a fresh env, a fresh ``Episode``) up to ``infra_retries`` times with back-off;
agent failures are final.
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
from termgym.evaluation.results import EpisodeResult
from termgym.sandbox import BackendUnavailable, run_blocking


class EnvFailure(Exception):
    """The environment (or its sandbox) raised: an infrastructure failure."""

    def __init__(self, during: str, cause: BaseException) -> None:
        super().__init__(f"env.{during} failed: {type(cause).__name__}: {cause}")
        self.during = during
        self.cause = cause
        # A missing backend (no bubblewrap, no Docker engine) fails every retry the same way.
        self.retriable = not isinstance(cause, BackendUnavailable)


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
            unwrapped = env.unwrapped
            if not result.messages:
                result.messages = list(getattr(unwrapped, "messages", []) or [])
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


async def _loop(spec: EpisodeSpec, agent: Agent, env: gym.Env, result: EpisodeResult,
                timings: dict[str, float]) -> None:
    prepare = getattr(agent, "prepare_env", None)
    if prepare is not None:  # e.g. a CLI agent asks for its model endpoint to be forwarded into the sandbox
        prepare(env.unwrapped)
    prompt, info = await _env_call(timings, "reset", env.reset, seed=spec.seed, options={"task_id": spec.task_id})
    unwrapped = env.unwrapped
    episode = Episode(task_id=spec.task_id, attempt=spec.attempt, env=unwrapped,
                      messages=unwrapped.messages, tools=info.get("tools"),
                      system_prompt=info.get("system_prompt", ""), prompt=prompt)
    try:
        await _play(spec, agent, env, episode, result, timings)
    finally:
        # Also on cancellation (the episode timeout): an agent's own loop must not outlive its episode.
        end = getattr(agent, "end", None)
        if end is not None:
            with contextlib.suppress(Exception):
                value = end(episode)
                if inspect.isawaitable(value):
                    await value


async def _play(spec: EpisodeSpec, agent: Agent, env: gym.Env, episode: Episode, result: EpisodeResult,
                timings: dict[str, float]) -> None:
    unwrapped = env.unwrapped
    t0 = time.monotonic()
    await agent.start(episode)
    timings["agent"] += time.monotonic() - t0
    while True:
        t0 = time.monotonic()
        reply = Reply.coerce(await _act(agent, episode))
        timings["agent"] += time.monotonic() - t0
        # The recorder takes the whole Reply (it stores token ids and logprobs); the env only the message.
        action = reply if spec.record_path is not None else reply.message
        observation, reward, terminated, truncated, info = await _env_call(timings, "step", env.step, action)
        episode.step += 1
        # The env appends to its history list; keep the agent's view pointing at the live one.
        episode.messages = unwrapped.messages
        parsed = info.get("action") or {}
        turn: dict[str, Any] = {"step": episode.step, "action": parsed, "reward": float(reward)}
        for key in ("exec", "refused", "reward_events", "env_reward", "process_reward"):
            if key in info:
                turn[key] = info[key]
        turn.update(reply.record())
        result.turns.append(turn)
        result.steps = episode.step
        result.total_reward += float(reward)
        result.format_errors += parsed.get("kind") == "format_error"
        result.prompt_tokens += int(reply.usage.get("prompt_tokens", 0))
        result.completion_tokens += int(reply.usage.get("completion_tokens", 0))
        if terminated or truncated:
            grade = info.get("grade") or {}
            result.grade = grade
            result.score = float(grade.get("score", reward))
            result.passed = bool(grade.get("passed", False))
            result.end_reason = info.get("end_reason") or ("submitted" if terminated else "truncated")
            result.messages = list(info.get("messages") or unwrapped.messages)
            if grade.get("infra_error"):
                # The grader could not run the tests at all (no interpreter, no runner, a suite that
                # does not collect here): an outage, not the agent's 0. Not retried: it would recur.
                result.status = "infra_error"
                result.error = {"kind": "infra", "type": "GradingInfraError", "message": str(grade["infra_error"])[:4000],
                                "where": "grade", "retriable": False}
            return


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
