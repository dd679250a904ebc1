"""The protocol contract: how assistant messages become actions and results become observations.

A protocol owns the text the model sees (system prompt, task prompt, observations, format
errors) and the grammar of its replies. Prompts are templates (``string.Template`` with
``$instruction``-style fields) that a user can replace through the constructor.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from termgym.sandbox.base import ExecResult, Sandbox
    from termgym.tasks.base import Task

ActionKind = Literal["command", "submit", "format_error"]

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def strip_think(text: str) -> str:
    """Remove ``<think>…</think>`` blocks (and an unterminated leading one) from a reply."""
    text = _THINK.sub("", text)
    if "</think>" in text:  # the template may have opened <think> in the prompt
        text = text.split("</think>", 1)[1]
    return text.strip()


@dataclass
class Action:
    """A parsed assistant message.

    ``kind`` is ``"command"`` (run ``command``), ``"submit"`` (the episode ends with
    ``submission``), or ``"format_error"`` (``error`` says what was wrong; nothing runs).
    ``raw`` is the message as received; ``extra`` carries protocol-specific data (tool-call ids,
    keystroke durations).
    """

    kind: ActionKind
    raw: Any = None
    command: str | None = None
    submission: str | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Protocol(ABC):
    """Base class for protocols. Subclasses implement :meth:`parse` and the templates."""

    name: str = "abstract"
    #: Marker whose presence as the first output line of a command means "I am done".
    submit_sentinel: str | None = None
    #: How many submit messages in a row end an episode (Terminus-2 asks for a confirmation).
    submit_confirmations: int = 1
    #: The env's shell mode (``"persistent"`` or ``"stateless"``), set by :meth:`configure`.
    shell_mode: str = "persistent"

    def configure(self, *, mode: str) -> None:
        """Learn the env settings that shape the text the model sees; the env calls it once, for
        every protocol, before any prompt is written (a prompt may say whether the shell keeps state)."""
        self.shell_mode = mode

    @abstractmethod
    def system_prompt(self, task: Task) -> str:
        """The system message for ``task``."""

    @abstractmethod
    def task_prompt(self, task: Task) -> str:
        """The first user message for ``task`` (the reset observation)."""

    @abstractmethod
    def parse(self, message: str | dict[str, Any]) -> Action:
        """Turn one assistant message into an :class:`Action`. Never raises on bad input."""

    @abstractmethod
    def render_observation(self, result: ExecResult, action: Action) -> str:
        """The text the model sees after ``action`` ran and produced ``result``."""

    @abstractmethod
    def render_format_error(self, action: Action) -> str:
        """The text the model sees after an unparsable message."""

    def run_metadata(self) -> dict[str, Any]:
        """Facts about this protocol's setup that ``reset`` adds to ``info`` (e.g. Terminus-2's prompt source)."""
        return {}

    def tools(self) -> list[dict[str, Any]] | None:
        """OpenAI tool schemas the agent should be offered, if the protocol uses function calls."""
        return None

    def assistant_message(self, message: str | dict[str, Any]) -> dict[str, Any]:
        """The chat-history entry for the assistant's message."""
        if isinstance(message, dict):
            return {k: v for k, v in message.items() if v is not None} | {"role": "assistant"}
        return {"role": "assistant", "content": message}

    def observation_message(self, observation: str, action: Action) -> dict[str, Any]:
        """The chat-history entry for an observation (a user message unless overridden)."""
        return {"role": "user", "content": observation}

    # -- execution: most protocols just run the command; terminus drives tmux instead --------

    def start(self, sandbox: Sandbox) -> None:  # noqa: B027 - optional hook
        """Prepare per-episode state in a started sandbox (e.g. a tmux session)."""

    def execute(self, action: Action, sandbox: Sandbox, timeout: float | None, *,
                ends_episode: bool = False) -> ExecResult:
        """Run a ``command`` action in the sandbox.

        ``ends_episode``: ``timeout`` is the episode's time limit, after which nothing the agent
        typed may run: a timeout then kills the command line's shell too (``on_timeout="kill_shell"``).
        """
        assert action.command is not None
        return sandbox.exec(action.command, timeout=timeout,
                            on_timeout="kill_shell" if ends_episode else "kill_command")

    def detect_submission(self, result: ExecResult) -> str | None:
        """If ``result`` is a submission, return the submitted text (may be empty), else ``None``."""
        if self.submit_sentinel is None:
            return None
        lines = result.output.lstrip().splitlines()
        if lines and lines[0].strip() == self.submit_sentinel:
            return "\n".join(lines[1:]).strip()
        return None

    def oracle_message(self, command: str) -> str | dict[str, Any]:
        """An assistant message, in this protocol's grammar, that runs ``command``."""
        raise NotImplementedError(f"protocol {self.name!r} cannot write oracle messages")

    def submit_message(self, submission: str = "") -> str | dict[str, Any]:
        """An assistant message, in this protocol's grammar, that submits ``submission``."""
        raise NotImplementedError(f"protocol {self.name!r} cannot write submit messages")


def coerce_message(message: str | dict[str, Any]) -> str | dict[str, Any]:
    """Accept an action as text, an OpenAI message dict, or JSON text of such a dict."""
    if isinstance(message, str):
        stripped = message.lstrip()
        if stripped.startswith("{") and '"role"' in stripped:
            try:
                data = json.loads(stripped)
            except json.JSONDecodeError:
                return message
            if isinstance(data, dict) and data.get("role") == "assistant":
                return data
    return message
