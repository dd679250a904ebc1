"""Run inside the Harbor venv with termgym on PYTHONPATH: termgym's Terminus-2 prompts next to Harbor's.

Prints JSON: what termgym's protocol renders and what Harbor's Terminus-2 agent renders from the
same instruction and screen, for the first prompt and the completion confirmation.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from harbor.agents.terminus_2 import terminus_2

from termgym.protocols.base import Action
from termgym.protocols.terminus import TerminusProtocol
from termgym.sandbox.base import ExecResult

INSTRUCTION = "Create /app/done.txt containing {ok} — with braces and unicode."
SCREEN = "Current Terminal Screen:\nroot@sandbox:/app# "

protocol = TerminusProtocol()
protocol._initial_screen = SCREEN  # what start() takes from tmux; set directly: no sandbox here
task = SimpleNamespace(instruction=INSTRUCTION)
confirm = protocol.render_observation(ExecResult("New Terminal Output:\nok", 0), Action("command", extra={"confirm": True}))

template = (Path(terminus_2.__file__).parent / "templates" / "terminus-json-plain.txt").read_text()
agent = SimpleNamespace(options=SimpleNamespace(parser_name="json"))
print(json.dumps({
    "prompt_source": protocol.prompt_source,
    "system": protocol.system_prompt(task),
    "termgym_prompt": protocol.task_prompt(task),
    "harbor_prompt": template.format(instruction=INSTRUCTION, terminal_state=SCREEN),
    "termgym_confirm": confirm,
    "harbor_confirm": terminus_2.Terminus2._get_completion_confirmation_message(agent, "New Terminal Output:\nok"),
}))
