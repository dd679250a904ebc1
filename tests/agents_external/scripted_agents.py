"""Scripted OpenAI-compatible servers for other projects' agents, built on the evaluation tests' server.

``TerminusScripted`` answers in Terminus-2's JSON format (analysis, plan, keystroke commands,
task_complete) and ``CommandScripted`` with one shell command per reply as a JSON object
(``{"command": ...}`` or ``{"done": true}``), the format of the stand-in CLI agent. Both play a list of
commands, then declare the task done, counting the assistant turns already in the request.
"""

from __future__ import annotations

import json
from typing import Any

from scripted_model import ScriptedModel


class _Scripted(ScriptedModel):
    def __init__(self, commands: list[str]) -> None:
        super().__init__()
        self.commands = list(commands)

    def reply(self, turn: int) -> str:
        raise NotImplementedError

    def handle(self, handler: Any, body: dict[str, Any]) -> None:
        messages = body["messages"]
        turn = sum(m.get("role") == "assistant" for m in messages)
        with self.lock:
            self.requests.append({"turn": turn, "body": body,
                                  "authorization": handler.headers.get("Authorization")})
        content = self.reply(turn)
        prompt = sum(len(str(m.get("content") or "")) for m in messages) // 4
        handler._json(200, {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
                            "model": body.get("model"),
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                         "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": prompt, "completion_tokens": len(content) // 4,
                                      "total_tokens": prompt + len(content) // 4}})


class TerminusScripted(_Scripted):
    """Terminus-2's JSON replies: one command per turn, then ``task_complete`` (asked twice)."""

    def reply(self, turn: int) -> str:
        if turn < len(self.commands):
            keystrokes = self.commands[turn] + "\n"
            return json.dumps({"analysis": f"step {turn}", "plan": "run the next command",
                               "commands": [{"keystrokes": keystrokes, "duration": 1.0}],
                               "task_complete": False})
        return json.dumps({"analysis": "done", "plan": "finish", "commands": [], "task_complete": True})


class CommandScripted(_Scripted):
    """The stand-in CLI agent's replies: ``{"command": ...}`` per turn, then ``{"done": true}``."""

    def reply(self, turn: int) -> str:
        if turn < len(self.commands):
            return json.dumps({"command": self.commands[turn]})
        return json.dumps({"done": True})
