"""The mini-swe-agent protocol (the default), matching the offline samples of seed 000.

The model replies with a THOUGHT and exactly one fenced ``bash`` block. It submits by running a
command whose first output line is ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` (whatever follows is
the submission text). Observations are ``<returncode>…</returncode><output>…</output>`` with the
output's middle elided past 10,000 characters.
"""

from __future__ import annotations

import re
from string import Template
from typing import TYPE_CHECKING, Any

from termgym.protocols.base import Action, Protocol, strip_think
from termgym.sandbox.output import elide

if TYPE_CHECKING:
    from termgym.sandbox.base import ExecResult
    from termgym.tasks.base import Task

SENTINEL = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

SYSTEM_TEMPLATE = """You are a helpful assistant that can interact with a computer shell to solve programming tasks.
Your response must contain exactly ONE bash code block with ONE command (or commands connected with && or ||).
Include a THOUGHT section before your command where you explain your reasoning process.
Format your response as shown in <format_example>.

<format_example>
THOUGHT: Your reasoning and analysis here. Explain why you want to perform the action.

```bash
your_command_here
```
</format_example>

Failure to follow these rules will cause your response to be rejected."""

TASK_TEMPLATE = """<pr_description>
Consider the following task:

$instruction
</pr_description>

<instructions>
# Task Instructions

You're working in the directory $workdir. Each command you give runs in a bash shell
$shell_note. You can read and edit files, run programs and run tests.

## Rules
1. Every response must contain exactly one bash code block, preceded by a THOUGHT section.
2. Commands cannot be interactive: no editors, no pagers, nothing that waits for input.
3. Each command has a time limit; long-running commands are stopped.

## Submission
When you are done, submit with this command on its own (anything it prints after the first line is your submission):

```bash
echo $sentinel
```
After that you cannot continue working on this task.
</instructions>"""

_PR_OPEN, _PR_CLOSE = "<pr_description>", "</pr_description>"

OBSERVATION_TEMPLATE = "<returncode>$returncode</returncode>\n$note<output>\n$output</output>"

FORMAT_ERROR_TEMPLATE = """Please always provide EXACTLY ONE action in triple backticks, found $count actions.
$detail
Please format your response exactly as follows:

THOUGHT: Here are some thoughts about why you want to perform the action.

```bash
<action>
```

If you have completed your assignment, please consult the first message about how to submit your
solution (you will not be able to continue working on this task after that)."""

_BLOCK = re.compile(r"```bash[ \t]*\n(.*?)\n?```", re.DOTALL)


class MiniSweAgentProtocol(Protocol):
    """THOUGHT + one ```bash block; see the module docstring. Templates are ``string.Template``s."""

    name = "minisweagent"
    submit_sentinel = SENTINEL

    def __init__(
        self,
        system_template: str = SYSTEM_TEMPLATE,
        task_template: str = TASK_TEMPLATE,
        observation_template: str = OBSERVATION_TEMPLATE,
        format_error_template: str = FORMAT_ERROR_TEMPLATE,
        max_observation_chars: int = 10_000,
        mode: str | None = None,
    ) -> None:
        self.system_template, self.task_template, self.observation_template, self.format_error_template = map(
            Template, (system_template, task_template, observation_template, format_error_template))
        self.max_observation_chars = max_observation_chars
        #: The shell mode the task prompt describes: as given, else the env's (:meth:`Protocol.configure`).
        self.mode = mode

    def system_prompt(self, task: Task) -> str:
        return self.system_template.safe_substitute(sentinel=SENTINEL)

    def task_prompt(self, task: Task) -> str:
        shell_note = ("that keeps its state (working directory, variables) between commands"
                      if (self.mode or self.shell_mode) == "persistent"
                      else "started fresh in that directory (cd and variables do not carry over)")
        text = self.task_template.safe_substitute(
            instruction=task.instruction, workdir=task.workdir, sentinel=SENTINEL,
            shell_note=shell_note, task_id=task.task_id,
        )
        if _PR_OPEN in task.instruction and text.count(_PR_OPEN) > 1:
            # the task wraps its report itself (SWE-SYNTH): keep that one wrapper, drop the template's
            head, _, tail = text.partition(_PR_OPEN + "\n")
            body, _, rest = tail.rpartition(_PR_CLOSE)
            text = head + body.rstrip("\n") + rest
        return text

    def parse(self, message: str | dict[str, Any]) -> Action:
        text = message.get("content") or "" if isinstance(message, dict) else message
        if not isinstance(text, str):
            return Action("format_error", raw=message, error="the message has no text content", extra={"count": 0})
        blocks = _BLOCK.findall(strip_think(text))
        if len(blocks) != 1:
            detail = ("No ```bash block was found." if not blocks
                      else "Several ```bash blocks were found; send one command per response.")
            return Action("format_error", raw=message, error=detail, extra={"count": len(blocks)})
        command = blocks[0].strip()
        if not command:
            return Action("format_error", raw=message, error="The ```bash block is empty.", extra={"count": 1})
        return Action("command", raw=message, command=command)

    def render_observation(self, result: ExecResult, action: Action) -> str:
        note = ""
        if result.timed_out:
            note = "<warning>The command timed out and was killed.</warning>\n"
        output = elide(result.output, self.max_observation_chars)
        if len(result.output) > self.max_observation_chars:
            note += ("<warning>The output was too long: only its head and tail are shown. Use head, tail, "
                     "grep or sed to look at parts of it.</warning>\n")
        return self.observation_template.safe_substitute(returncode=result.exit_code, output=output, note=note)

    def render_format_error(self, action: Action) -> str:
        return self.format_error_template.safe_substitute(count=action.extra.get("count", 0), detail=action.error or "")

    def oracle_message(self, command: str) -> str:
        return f"THOUGHT: Running the reference solution step.\n\n```bash\n{command}\n```"

    def submit_message(self, submission: str = "") -> str:
        command = f"echo {SENTINEL}"
        if submission:
            command = f"cat <<'TERMGYM_SUBMISSION_EOF'\n{SENTINEL}\n{submission}\nTERMGYM_SUBMISSION_EOF"
        return f"THOUGHT: The task is done; submitting.\n\n```bash\n{command}\n```"
