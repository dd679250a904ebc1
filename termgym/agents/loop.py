"""The one agent loop: reset the env, then ask a policy for an action and step, until the episode ends.

Every driver of a termgym episode runs this loop: the evaluation harness
(:mod:`termgym.evaluation.episode`), ``termgym play``, the veRL agent loop (which adds token
bookkeeping around it) and the ART integration. It is shaped like mini-swe-agent's
``DefaultAgent.run`` — a ``while True`` over one ``step`` (query the model, execute), ending on a
submission or a limit — but the env, not the loop, executes and grades, and a limit the loop
itself enforces ends the episode *through a step* (:class:`~termgym.env.Truncate`), so every
wrapper (process rewards, the recorder) sees the end.

.. code-block:: python

    class Echo:
        async def act(self, observation, info):
            return "THOUGHT: look\\n\\n```bash\\nls\\n```"

    outcome = await run_episode(env, Echo(), options={"task_id": "hello-1"}, max_turns=20)
    outcome.end_reason, outcome.total_reward, outcome.final_info["grade"]

A policy is any object with ``act(observation, info)`` (a coroutine or a plain function; a plain
one runs in termgym's I/O thread pool so it cannot block other episodes) that returns the next
action: an assistant message (text or an OpenAI message dict, token data under ``"extra"``), a
:class:`~termgym.env.Truncate` to end the episode at a limit of its own, or ``None`` to stop
without ending it (the caller closes the env; nothing is graded). Optional hooks:
``start(prompt, info)`` after ``reset``, ``observe(step)`` after each :class:`Step`, and
``end()`` once the loop is left however it was left (also on an exception or cancellation).

Exceptions raised by the env (``reset``/``step``) come out as :class:`EnvFailure` (an
infrastructure failure); exceptions from the policy come out unchanged (the agent's failure).
The loop never closes the env: its caller made it and closes it.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym

from termgym.env import Truncate, areset, astep
from termgym.sandbox import BackendUnavailable, run_blocking


class EnvFailure(Exception):
    """The environment (or its sandbox) raised: an infrastructure failure.

    ``during`` names the call (``"make"``, ``"reset"``, ``"step"``, ``"close"``); ``cause`` is the
    original exception; ``retriable`` is ``False`` when retrying cannot help (no such backend here).
    """

    def __init__(self, during: str, cause: BaseException) -> None:
        super().__init__(f"env.{during} failed: {type(cause).__name__}: {cause}")
        self.during = during
        self.cause = cause
        # A missing backend (no bubblewrap, no Docker engine) fails every retry the same way.
        self.retriable = not isinstance(cause, BackendUnavailable)


@dataclass
class Step:
    """One ``env.step`` as the loop saw it: the action sent and the env's five return values."""

    index: int  # 1-based
    action: Any
    observation: Any
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


@dataclass
class LoopOutcome:
    """What :func:`run_episode` returns.

    ``final_info`` is the last step's ``info`` (grade, ``end_reason``, whole ``messages``) or
    ``None`` when the policy stopped the loop before the episode ended. ``agent_seconds`` /
    ``env_seconds`` split the wall time between the policy and the env.
    """

    prompt: Any = None
    reset_info: dict[str, Any] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    final_info: dict[str, Any] | None = None
    total_reward: float = 0.0
    agent_seconds: float = 0.0
    env_seconds: float = 0.0

    @property
    def done(self) -> bool:
        """Whether the episode ended (graded) rather than being stopped by the policy."""
        return self.final_info is not None

    @property
    def end_reason(self) -> str | None:
        """``info["end_reason"]`` of the last step (``submitted``, ``max_steps``, a truncation reason…)."""
        if self.final_info is None:
            return None
        last = self.steps[-1] if self.steps else None
        default = "submitted" if last is not None and last.terminated else "truncated"
        return self.final_info.get("end_reason") or default


class Policy(Protocol):
    """What :func:`run_episode` asks for the next action (see the module docstring for the hooks)."""

    def act(self, observation: Any, info: dict[str, Any]) -> Any: ...


async def run_episode(env: gym.Env, policy: Any, *, seed: int | None = None, options: dict[str, Any] | None = None,
                      max_turns: int | None = None, outcome: LoopOutcome | None = None) -> LoopOutcome:
    """Play one episode of ``env`` (through all its wrappers) with ``policy``.

    ``max_turns`` caps the steps the loop takes; when it is reached before the env ends the
    episode, the loop ends it with ``Truncate("max_turns")``. ``outcome``: a :class:`LoopOutcome`
    to fill in (and return), so a caller whose loop is cancelled still has the steps and timings
    so far. See the module docstring.
    """
    if max_turns is not None and max_turns < 1:
        raise ValueError(f"max_turns must be at least 1 or None, got {max_turns}")
    outcome = outcome if outcome is not None else LoopOutcome()
    try:
        outcome.prompt, outcome.reset_info = await _env(outcome, "reset", areset, env, seed=seed, options=options)
        await _hook(outcome, policy, "start", outcome.prompt, outcome.reset_info)
        observation, info = outcome.prompt, outcome.reset_info
        while True:
            if max_turns is not None and len(outcome.steps) >= max_turns:
                action: Any = Truncate("max_turns")
            else:
                action = await _timed_agent(outcome, _call(policy.act, observation, info))
                if action is None:
                    return outcome
            observation, reward, terminated, truncated, info = await _env(outcome, "step", astep, env, action)
            step = Step(len(outcome.steps) + 1, action, observation, float(reward), bool(terminated),
                        bool(truncated), info)
            outcome.steps.append(step)
            outcome.total_reward += step.reward
            if step.done:
                outcome.final_info = info
            await _hook(outcome, policy, "observe", step)
            if step.done:
                return outcome
    finally:
        end = getattr(policy, "end", None)
        if end is not None:
            await _call(end)


async def _env(outcome: LoopOutcome, during: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    t0 = time.monotonic()
    try:
        return await fn(*args, **kwargs)
    except Exception as exc:
        raise EnvFailure(during, exc) from exc
    finally:
        outcome.env_seconds += time.monotonic() - t0


async def _timed_agent(outcome: LoopOutcome, awaitable: Any) -> Any:
    t0 = time.monotonic()
    try:
        return await awaitable
    finally:
        outcome.agent_seconds += time.monotonic() - t0


async def _hook(outcome: LoopOutcome, policy: Any, name: str, *args: Any) -> None:
    hook = getattr(policy, name, None)
    if hook is not None:
        await _timed_agent(outcome, _call(hook, *args))


async def _call(fn: Any, *args: Any) -> Any:
    """Await ``fn(*args)``: a coroutine function directly, a plain function in the I/O thread pool."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    value = await run_blocking(fn, *args)
    return await value if inspect.isawaitable(value) else value


__all__ = ["EnvFailure", "LoopOutcome", "Policy", "Step", "run_episode"]
