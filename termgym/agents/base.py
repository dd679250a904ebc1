"""The agent interface the evaluation harness drives.

An agent turns the chat history of one episode into the next assistant message. It is small on
purpose:

.. code-block:: python

    from termgym.agents import Agent, Episode, Reply

    class EchoAgent(Agent):
        name = "echo"

        async def act(self, episode: Episode) -> Reply | str | dict:
            return "THOUGHT: look around\\n\\n```bash\\nls\\n```"

One agent instance serves every episode of a run, concurrently: keep per-episode state in
``episode.state``, not on ``self``. ``act`` may also be a plain ``def``; the harness then runs it
in a worker thread so it cannot block the other episodes.

Failures are classified by the harness. An exception from ``act`` is the agent's failure
(``agent_error``) unless it is an :class:`InfraError` (the endpoint was unreachable, a 5xx after
retries…), which marks the episode ``infra_error``: it is retried from scratch and reported
separately. Exceptions raised by the environment or sandbox are infrastructure failures too.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from termgym.env import TerminalEnv


class InfraError(RuntimeError):
    """A failure that is not the agent's: raise it from :meth:`Agent.act` to have it retried.

    ``retriable`` is ``False`` when retrying cannot help (a misconfiguration the user must fix).
    """

    def __init__(self, message: str, *, retriable: bool = True) -> None:
        super().__init__(message)
        self.retriable = retriable


@dataclass
class Reply:
    """One assistant message and what the agent knows about how it was produced.

    ``message`` is what goes to ``env.step``: text (``minisweagent``) or an OpenAI assistant message
    dict with ``tool_calls`` (``toolcall``). ``usage`` holds ``prompt_tokens`` and
    ``completion_tokens`` when known. ``token_ids``/``prompt_token_ids``/``logprobs`` are kept when
    the server returned them. ``meta`` is free-form (latency, retries, finish reason, model).
    """

    message: str | dict[str, Any]
    usage: dict[str, int] = field(default_factory=dict)
    token_ids: list[int] | None = None
    prompt_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def coerce(cls, value: Reply | str | dict[str, Any]) -> Reply:
        """A :class:`Reply` from what an agent returned (a Reply, text, or a message dict)."""
        if isinstance(value, Reply):
            return value
        if isinstance(value, (str, dict)):
            return cls(message=value)
        raise TypeError(f"an agent's act() must return a Reply, str or dict, not {type(value).__name__}")

    def action(self) -> str | dict[str, Any]:
        """What goes to ``env.step``: the message, with the token data of :meth:`record` under ``"extra"``.

        The env takes ``"extra"`` off the message and returns it as the step's ``info["extra"]``
        (where the recorder finds it); a reply without token data is the bare message.
        """
        extra = self.record()
        if not extra:
            return self.message
        message = {"role": "assistant", "content": self.message} if isinstance(self.message, str) else dict(self.message)
        return {**message, "extra": extra}

    def record(self) -> dict[str, Any]:
        """The JSON-able fields worth storing with the step (empty ones left out)."""
        out: dict[str, Any] = {}
        if self.usage:
            out["usage"] = dict(self.usage)
        for key in ("token_ids", "prompt_token_ids", "logprobs"):
            value = getattr(self, key)
            if value is not None:
                out[key] = list(value)
        if self.meta:
            out["meta"] = dict(self.meta)
        return out


@dataclass
class Episode:
    """What an agent sees of one episode.

    ``messages`` is the env's live chat history in OpenAI form (system prompt first, the task prompt
    next, then alternating assistant messages and observations); do not modify it. ``tools`` are the
    OpenAI tool schemas for function-calling protocols (``None`` otherwise). ``env`` is the
    :class:`~termgym.env.TerminalEnv` under the wrappers (:func:`termgym.env.terminal_env`), to read
    only (the oracle agent reads the task from it; stepping it would skip the wrappers). ``state`` is the
    agent's own scratch space for this episode.
    """

    task_id: str
    attempt: int
    env: TerminalEnv
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    system_prompt: str = ""
    prompt: str = ""
    step: int = 0
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def protocol(self) -> str:
        """The env's protocol name (``"minisweagent"``, ``"toolcall"``…)."""
        return self.env.protocol.name


class Agent(ABC):
    """Base class for agents; see the module docstring for the contract.

    Subclasses implement :meth:`act`; :meth:`start`, :meth:`end` and :meth:`close` are optional hooks.
    Constructor keyword arguments come from ``termgym eval --agent-arg key=value`` (and the
    ``--model``/``--base-url``… flags for agents that take them).
    """

    #: Short name recorded in results.
    name: str = "agent"

    async def start(self, episode: Episode) -> None:  # noqa: B027 - optional hook
        """Called once per episode after ``env.reset``, before the first :meth:`act`."""

    @abstractmethod
    async def act(self, episode: Episode) -> Reply | str | dict[str, Any]:
        """The next assistant message for ``episode`` (see :class:`Reply`)."""

    # Optional, not defined here: ``prepare_env(self, env: TerminalEnv) -> None`` is called with each
    # episode's env before its reset (before the sandbox starts), e.g. to forward a host service into it.

    async def end(self, episode: Episode) -> None:  # noqa: B027 - optional hook
        """Called once per episode when it is over, however it ended (graded, timed out, failed).

        Agents that drive their own loop in a thread (mini-swe-agent) stop it here.
        """

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Called once when the run is over (release connections, files…)."""

    def describe(self) -> dict[str, Any]:
        """What identifies this agent's configuration in a run's ``config.json`` (no secrets)."""
        return {"name": self.name}
