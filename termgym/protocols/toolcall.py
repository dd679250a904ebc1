"""The tool-call protocol: OpenAI function calls ``bash(command)`` and ``submit(answer)``.

An action is an assistant message dict (or its JSON text) with ``tool_calls``; exactly one call
per turn. Observations go back as ``tool`` messages bound to the call's id.
"""

from __future__ import annotations

import json
from string import Template
from typing import TYPE_CHECKING, Any

from termgym.protocols.base import Action, Protocol, coerce_message
from termgym.sandbox.output import elide

if TYPE_CHECKING:
    from termgym.sandbox.base import ExecResult
    from termgym.tasks.base import Task

SYSTEM_TEMPLATE = """You are an autonomous agent working in a Linux shell to solve a task.
Use the `bash` tool to run one shell command at a time and read its output. When the task is done,
call the `submit` tool (with your final answer if the task asks for one). Commands must not be
interactive."""

TASK_TEMPLATE = """$instruction

You are working in $workdir."""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run one bash command in the task's shell and return its exit code and output.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "The command to run."}},
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Finish the task. Pass the final answer if the task asks for one.",
            "parameters": {
                "type": "object",
                "properties": {"answer": {"type": "string", "description": "The final answer (optional)."}},
            },
        },
    },
]


class ToolCallProtocol(Protocol):
    """OpenAI function calling with ``bash`` and ``submit`` tools."""

    name = "toolcall"

    def __init__(self, system_template: str = SYSTEM_TEMPLATE, task_template: str = TASK_TEMPLATE,
                 max_observation_chars: int = 10_000) -> None:
        self.system_template = Template(system_template)
        self.task_template = Template(task_template)
        self.max_observation_chars = max_observation_chars

    def system_prompt(self, task: Task) -> str:
        return self.system_template.safe_substitute()

    def task_prompt(self, task: Task) -> str:
        return self.task_template.safe_substitute(instruction=task.instruction, workdir=task.workdir)

    def tools(self) -> list[dict[str, Any]]:
        return TOOLS

    def parse(self, message: str | dict[str, Any]) -> Action:
        message = coerce_message(message)
        if not isinstance(message, dict):
            return Action("format_error", raw=message,
                          error="Reply with a tool call (`bash` or `submit`), not plain text.")
        calls = message.get("tool_calls") or []
        if len(calls) != 1:
            return Action("format_error", raw=message,
                          error=f"Make exactly one tool call per turn; found {len(calls)}.")
        call = calls[0]
        call_id = call.get("id") or "call_0"
        function = call.get("function") or {}
        name = function.get("name")
        try:
            arguments = function.get("arguments") or "{}"
            args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        except (json.JSONDecodeError, TypeError, ValueError) as exc:
            return Action("format_error", raw=message, error=f"The arguments of `{name}` are not valid JSON: {exc}",
                          extra={"tool_call_id": call_id})
        if name == "bash":
            command = args.get("command")
            if not isinstance(command, str) or not command.strip():
                return Action("format_error", raw=message, error="`bash` needs a non-empty string `command`.",
                              extra={"tool_call_id": call_id})
            return Action("command", raw=message, command=command, extra={"tool_call_id": call_id})
        if name == "submit":
            answer = args.get("answer", "")
            return Action("submit", raw=message, submission=answer if isinstance(answer, str) else json.dumps(answer),
                          extra={"tool_call_id": call_id})
        return Action("format_error", raw=message, error=f"Unknown tool {name!r}; the tools are `bash` and `submit`.",
                      extra={"tool_call_id": call_id})

    def render_observation(self, result: ExecResult, action: Action) -> str:
        text = elide(result.output, self.max_observation_chars)
        status = f"exit code {result.exit_code}" + (" (timed out, killed)" if result.timed_out else "")
        return f"[{status}]\n{text}"

    def render_format_error(self, action: Action) -> str:
        return f"Error: {action.error}"

    def assistant_message(self, message: str | dict[str, Any]) -> dict[str, Any]:
        return super().assistant_message(coerce_message(message))

    def observation_message(self, observation: str, action: Action) -> dict[str, Any]:
        call_id = action.extra.get("tool_call_id")
        if call_id is None:
            return {"role": "user", "content": observation}
        return {"role": "tool", "tool_call_id": call_id, "content": observation}

    def oracle_message(self, command: str) -> dict[str, Any]:
        return _call("bash", {"command": command})

    def submit_message(self, submission: str = "") -> dict[str, Any]:
        return _call("submit", {"answer": submission})


def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    import uuid

    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
         "function": {"name": name, "arguments": json.dumps(args)}}]}
