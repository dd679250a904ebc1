"""The Terminus-2 protocol: JSON keystrokes driving a tmux session inside the sandbox.

Every assistant reply is one JSON object::

    {"analysis": "what the screen shows",
     "plan": "what the commands will do",
     "commands": [{"keystrokes": "ls -la\\n", "duration": 0.5}],
     "task_complete": false}

``keystrokes`` are typed into a tmux pane exactly as given (``\\n`` presses Enter); a keystroke
string that is only a tmux key name such as ``C-c``, ``C-d``, ``Escape`` or ``Up`` presses that key.
After each command the protocol waits ``duration`` seconds (capped at ``max_duration``). The
observation is what appeared on the terminal since the last one ("New Terminal Output"), or the
visible screen when that cannot be told, cut to 10 KB (first and last halves kept).

Completion takes two replies: the first ``"task_complete": true`` runs its commands and asks
for confirmation; a second one in the very next reply runs its commands too, then ends the
episode (as Terminus-2 does). Parsing is as lenient as Terminus-2's: ``analysis``, ``plan`` and
``commands`` are required, a bad ``duration`` or a non-string ``analysis`` is a warning, an
unclosed object is closed, and a completing reply with broken commands still completes. Replies
that cannot be read are answered with what was wrong, and nothing runs.

Waiting. Terminus-2 always sleeps the full ``duration``, and so does ``wait="duration"`` (the
default). With ``wait="idle"`` the wait ends early once the pane's shell is back in the foreground
and the screen has stopped changing, which saves time but can show a different screen than
Terminus-2 would.

Prompts. When the ``harbor`` package is importable (``pip install 'termgym[harbor]'``), the task
prompt is rendered from Harbor's own Terminus-2 template file and the confirmation text from
Harbor's agent, so the model sees byte-identical prompts, as one user message with no system
message; otherwise termgym's own wording is used. :attr:`TerminusProtocol.prompt_source` and the
env's ``reset`` info (``"prompt_source"``) say which.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import string
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from termgym.protocols.base import Action, Protocol, strip_think
from termgym.sandbox.base import ExecResult

if TYPE_CHECKING:
    from termgym.sandbox.base import Sandbox
    from termgym.tasks.base import Task

MAX_OBSERVATION_BYTES = 10_000
DEFAULT_DURATION = 1.0
SESSION = "termgym"
SHELLS = {"bash", "sh", "dash", "zsh"}
#: Largest literal chunk handed to one ``tmux send-keys`` (tmux rejects very long commands).
SEND_CHUNK = 8_000
#: Terminus-2 keeps the whole scrollback (history-limit 10,000,000) so new output is never lost.
HISTORY_LIMIT = 10_000_000

SYSTEM_TEMPLATE = """\
You are an AI assistant solving tasks in a Linux terminal. You control a tmux session by sending \
keystrokes, and you see what the terminal shows.

Reply with exactly one JSON object and nothing else:

{
  "analysis": "What you see on the screen and what it means for the task.",
  "plan": "What the next commands will do, and why.",
  "commands": [
    {"keystrokes": "ls -la\\n", "duration": 0.1},
    {"keystrokes": "cd project\\n", "duration": 0.1}
  ],
  "task_complete": false
}

Fields:
- "analysis" (string, required) and "plan" (string, required).
- "commands" (array, required unless task_complete is true): each item has "keystrokes" (string, \
required), typed exactly as written, so end a command with \\n to run it; a keystroke string that is \
only a tmux key name such as C-c, C-d, Escape, Tab or Up presses that key. "duration" (number of \
seconds, default $default_duration, at most $max_duration) is how long to wait for output before the \
next command: about 0.1 for quick commands (cd, ls, echo, cat), 1 for moderate ones, longer for builds \
and downloads. Prefer a short wait and checking again over a long wait.
- "task_complete" (boolean, optional): true once the task is done. You will be asked to confirm; \
answer with task_complete true again to finish.

Do not use interactive programs that need a full-screen editor unless you can drive them with \
keystrokes; writing files with cat and heredocs is simpler. Each observation shows the new output \
since your last commands (at most 10 KB)."""

TASK_TEMPLATE = """\
Task Description:
$instruction

Current terminal state:
$screen"""

CONFIRM_TEMPLATE = """\
Current terminal state:
$output

Are you sure you want to mark the task as complete? This ends the episode and your work is graded \
as it stands; you will not be able to make further changes. If so, reply with "task_complete": true \
again. Otherwise continue working and leave task_complete false."""

FORMAT_ERROR_TEMPLATE = """\
Your previous response had parsing errors:
ERROR: $error
$warnings
Please fix these issues and reply with one valid JSON object in the format described above."""

# tmux key names a keystroke string may consist of (then it is pressed, not typed).
_KEY_NAME = re.compile(
    r"^(?:[CMS]-)+\S$|^(?:[CMS]-)*(?:Enter|Escape|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End|"
    r"PageUp|PageDown|PgUp|PgDn|NPage|PPage|IC|DC|Insert|Delete|KPEnter|F(?:[1-9]|1[0-2]))$"
)
_KNOWN = {"analysis", "plan", "commands", "task_complete"}


class TerminusParseError(ValueError):
    """A reply that is not a valid Terminus-2 JSON object (the message says what is wrong)."""


def _first_object(text: str) -> tuple[int, int | None]:
    """Start and end (inclusive, ``None`` if never closed) of the first top-level ``{...}`` in ``text``.

    Quotes toggle string state and a backslash escapes the next character anywhere, as a JSON-aware
    scan of model output must (braces inside strings do not count).
    """
    depth, in_string, escaped, start = 0, False, False, -1
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
            continue
        if ch == "\\":
            escaped = True
            continue
        if ch == '"':
            in_string = not in_string
            continue
        if in_string:
            continue
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                return start, i
    return start, None


def _load_object(text: str) -> tuple[Any, list[str]]:
    """Decode the first JSON object in ``text``; warnings say what had to be forgiven."""
    warnings: list[str] = []
    start, end = _first_object(text)
    if start >= 0 and end is not None:
        if text[:start].strip():
            warnings.append("Extra text was found before the JSON object; it was ignored.")
        if text[end + 1 :].strip():
            warnings.append("Extra text was found after the JSON object; it was ignored.")
        candidate = text[start : end + 1]
        try:
            return json.loads(candidate), warnings
        except json.JSONDecodeError as exc:
            error = f"Invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}."
    else:
        error = "No JSON object found in the response."
    # A reply cut short usually lacks closing braces: add as many as are missing and retry.
    missing = text.count("{") - text.count("}")
    if missing > 0:
        repaired = text + "}" * missing
        start, end = _first_object(repaired)
        if start >= 0 and end is not None:
            try:
                data = json.loads(repaired[start : end + 1])
            except json.JSONDecodeError:
                pass
            else:
                return data, ["The JSON object was not closed; closing braces were added.", *warnings]
    # Last resort: the first brace-balanced fragment (at most one level of nesting) that decodes.
    for fragment in re.findall(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}", text, re.DOTALL):
        try:
            return json.loads(fragment), ["The JSON object was taken out of surrounding text.", *warnings]
        except json.JSONDecodeError:
            continue
    raise TerminusParseError(error)


def _truthy_complete(value: Any, warnings: list[str]) -> bool:
    """``task_complete`` as Terminus-2 reads it: a string counts if it says true/1/yes."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    if value is not None and not isinstance(value, bool):
        warnings.append('"task_complete" should be a JSON boolean.')
    return bool(value)


def parse_reply(text: str, max_duration: float = 60.0) -> dict[str, Any]:
    """Validate one Terminus-2 reply. Returns ``analysis``, ``plan``, ``commands`` (list of
    ``(keystrokes, duration)``), ``task_complete`` and ``warnings``; raises :class:`TerminusParseError`.

    ``analysis``, ``plan`` and ``commands`` must be present (also in a completing reply); what
    Terminus-2 forgives is a warning here too.
    """
    data, warnings = _load_object(strip_think(text))
    if not isinstance(data, dict):
        raise TerminusParseError(f"The response must be a JSON object, not {type(data).__name__}.")
    missing = [k for k in ("analysis", "plan", "commands") if k not in data]
    if missing:
        raise TerminusParseError(f"Missing required field(s): {', '.join(missing)}.")
    for key in ("analysis", "plan"):
        if not isinstance(data[key], str):
            warnings.append(f'"{key}" should be a string.')
    raw_commands = data["commands"]
    if not isinstance(raw_commands, list):
        raise TerminusParseError('"commands" must be an array of {"keystrokes": ..., "duration": ...} objects.')
    complete = _truthy_complete(data.get("task_complete", False), warnings)
    try:
        commands = _parse_commands(raw_commands, max_duration, warnings)
    except TerminusParseError as exc:
        if not complete:
            raise
        # Completing anyway: the broken commands are dropped with a warning, as Terminus-2 does.
        warnings.append(str(exc))
        commands = []
    unknown = set(data) - _KNOWN
    if unknown:
        warnings.append(f"Unknown field(s) {', '.join(sorted(unknown))} were ignored.")
    return {"analysis": data["analysis"], "plan": data["plan"], "commands": commands,
            "task_complete": complete, "warnings": warnings}


def _parse_commands(raw: list[Any], max_duration: float, warnings: list[str]) -> list[tuple[str, float]]:
    commands: list[tuple[str, float]] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise TerminusParseError(f'commands[{i}] must be an object with "keystrokes" and "duration".')
        if "keystrokes" not in item:
            raise TerminusParseError(f'commands[{i}] is missing "keystrokes".')
        keys = item["keystrokes"]
        if not isinstance(keys, str):
            raise TerminusParseError(f"commands[{i}].keystrokes must be a string.")
        duration = item.get("duration", DEFAULT_DURATION)
        if "duration" not in item:
            warnings.append(f"commands[{i}] has no duration; waited {DEFAULT_DURATION:g} s.")
        elif not isinstance(duration, (int, float)) or not math.isfinite(duration):
            warnings.append(f"commands[{i}].duration {json.dumps(duration)} is not a number; waited {DEFAULT_DURATION:g} s.")
            duration = DEFAULT_DURATION
        duration = max(0.0, float(duration))
        if duration > max_duration:
            warnings.append(f"commands[{i}].duration {duration:g} s was capped at {max_duration:g} s.")
            duration = max_duration
        extra = set(item) - {"keystrokes", "duration"}
        if extra:
            warnings.append(f"commands[{i}] has unknown field(s) {', '.join(sorted(extra))}; they were ignored.")
        if i < len(raw) - 1 and keys and not keys.endswith("\n"):
            warnings.append(f"commands[{i}] does not end with a newline, so the next command is typed on the same line.")
        commands.append((keys, duration))
    return commands


def limit_output(text: str, max_bytes: int = MAX_OBSERVATION_BYTES) -> str:
    """Keep the first and last ``max_bytes // 2`` bytes of ``text``, saying how much was cut."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= max_bytes:
        return text
    half = max_bytes // 2
    head = data[:half].decode("utf-8", errors="ignore")
    tail = data[-half:].decode("utf-8", errors="ignore")
    omitted = len(data) - len(head.encode()) - len(tail.encode())
    return f"{head}\n[... output limited to {max_bytes} bytes; {omitted} interior bytes omitted ...]\n{tail}"


def harbor_terminus_templates() -> dict[str, Any] | None:
    """Harbor's own Terminus-2 texts from the installed ``harbor`` package, or ``None`` without it.

    ``prompt`` is the template file Terminus-2 formats with ``instruction`` and ``terminal_state``;
    ``confirm`` renders the completion confirmation exactly as Terminus-2's agent does.
    """
    import os

    # Importing Harbor's agent imports litellm, which otherwise tries to download a price list.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import harbor
        from harbor.agents.terminus_2 import terminus_2
    except Exception:  # not installed, or a version whose layout differs
        return None
    template = Path(terminus_2.__file__).parent / "templates" / "terminus-json-plain.txt"
    confirm_fn = getattr(terminus_2.Terminus2, "_get_completion_confirmation_message", None)
    if not template.is_file() or confirm_fn is None:
        return None
    json_agent = SimpleNamespace(options=SimpleNamespace(parser_name="json"))
    return {
        "version": getattr(harbor, "__version__", None) or _dist_version("harbor"),
        "prompt": template.read_text(encoding="utf-8"),
        "confirm": lambda output: confirm_fn(json_agent, output),
    }


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


class TerminusProtocol(Protocol):
    """Terminus-2's JSON-over-tmux protocol (see the module docstring).

    Args:
        max_duration: cap on one command's wait, seconds (Terminus-2: 60).
        wait: ``"duration"`` (always wait the full duration, as Terminus-2 does) or ``"idle"``
            (end a wait early once the shell is idle and the screen is stable).
        width / height: the tmux pane size (Terminus-2: 160 x 40).
        max_observation_bytes: the observation cap (10 KB).
        prompts: ``"auto"`` (Harbor's template files when ``harbor`` is importable, else termgym's),
            ``"harbor"`` (require them) or ``"termgym"``.
        system_template / task_template: ``string.Template`` texts replacing termgym's wording.
    """

    name = "terminus"
    submit_confirmations = 2  # task_complete must be confirmed in the next reply

    def __init__(
        self,
        *,
        max_duration: float = 60.0,
        wait: str = "duration",
        width: int = 160,
        height: int = 40,
        max_observation_bytes: int = MAX_OBSERVATION_BYTES,
        prompts: str = "auto",
        system_template: str = SYSTEM_TEMPLATE,
        task_template: str = TASK_TEMPLATE,
    ) -> None:
        if wait not in ("idle", "duration"):
            raise ValueError(f"wait must be 'idle' or 'duration', not {wait!r}")
        if prompts not in ("auto", "harbor", "termgym"):
            raise ValueError(f"prompts must be 'auto', 'harbor' or 'termgym', not {prompts!r}")
        self.max_duration = float(max_duration)
        self.wait = wait
        self.width, self.height = int(width), int(height)
        self.max_observation_bytes = int(max_observation_bytes)
        self.system_template = string.Template(system_template)
        self.task_template = string.Template(task_template)
        custom = system_template != SYSTEM_TEMPLATE or task_template != TASK_TEMPLATE
        self._harbor = None if prompts == "termgym" or custom else harbor_terminus_templates()
        if prompts == "harbor" and self._harbor is None:
            raise ValueError("prompts='harbor' needs the harbor package: pip install 'termgym[harbor]' (Python >= 3.12)")
        #: Where the prompts come from: "harbor <version>" (Harbor's template files) or "termgym".
        self.prompt_source = f"harbor {self._harbor['version']}" if self._harbor else "termgym"
        self._sandbox: Sandbox | None = None
        self._previous: str | None = None
        self._initial_screen = ""
        self._pending_completion = False
        self._finished = False

    # -- prompts --------------------------------------------------------------------------------

    def system_prompt(self, task: Task) -> str:
        if self._harbor:
            return ""  # Terminus-2 sends one user message; the env then adds no system message
        return self.system_template.safe_substitute(
            default_duration=f"{DEFAULT_DURATION:g}", max_duration=f"{self.max_duration:g}"
        )

    def task_prompt(self, task: Task) -> str:
        if self._harbor:
            return self._harbor["prompt"].format(instruction=task.instruction, terminal_state=self._initial_screen)
        return self.task_template.safe_substitute(instruction=task.instruction, screen=self._initial_screen)

    def run_metadata(self) -> dict[str, Any]:
        """What a run records about this protocol: where its prompts came from."""
        return {"prompt_source": self.prompt_source}

    # -- parsing --------------------------------------------------------------------------------

    def parse(self, message: str | dict[str, Any]) -> Action:
        text = message.get("content") or "" if isinstance(message, dict) else message
        try:
            reply = parse_reply(str(text), self.max_duration)
        except TerminusParseError as exc:
            return Action("format_error", raw=message, error=str(exc))
        keys = "".join(k for k, _ in reply["commands"])
        extra = {"commands": reply["commands"], "warnings": reply["warnings"],
                 "analysis": reply["analysis"], "plan": reply["plan"]}
        if reply["task_complete"]:
            if self._pending_completion:
                # Confirmed: its commands still run (Terminus-2 runs them), then the episode ends.
                extra["final"] = True
            else:
                self._pending_completion = True
                extra["confirm"] = True
        else:
            self._pending_completion = False
        return Action("command", raw=message, command=keys, extra=extra)

    def detect_submission(self, result: ExecResult) -> str | None:
        if self._finished:
            self._finished = False
            return ""
        return None

    # -- the tmux session -----------------------------------------------------------------------

    def start(self, sandbox: Sandbox) -> None:
        """Start the tmux session in the sandbox's workdir and take the first screen.

        The pane's shell runs as ``sandbox.agent_user`` when a task set one (Harbor's ``[agent] user``).
        """
        self._sandbox = sandbox
        self._previous = None
        self._pending_completion = False
        self._finished = False
        user = getattr(sandbox, "agent_user", None)
        shell = "bash --login"
        if user:
            who = f"#{user}" if str(user).isdigit() else str(user)
            shell = f"runuser -u {shlex.quote(who)} -- bash --login"
        result = sandbox.exec(
            f"tmux kill-session -t {SESSION} 2>/dev/null; "
            f"export TERM=xterm-256color SHELL=/bin/bash; "
            f"tmux new-session -d -s {SESSION} -x {self.width} -y {self.height} "
            f"-c {shlex.quote(sandbox.workdir)} {shlex.quote(shell)} "
            f"&& tmux set-option -g history-limit {HISTORY_LIMIT} >/dev/null",
            timeout=30,
        )
        if result.exit_code != 0:
            raise RuntimeError(f"the terminus protocol could not start tmux in the sandbox: {result.output.strip()}")
        time.sleep(0.2)  # let the login shell print its prompt
        self._wait_idle(sandbox, 2.0)
        self._initial_screen = limit_output(self._incremental(sandbox), self.max_observation_bytes)

    def execute(self, action: Action, sandbox: Sandbox, timeout: float | None, *,
                ends_episode: bool = False) -> ExecResult:
        """Type each command's keystrokes, wait, and return the new terminal output as the result.

        ``timeout`` is the reply's whole budget (the env passes what is left of its time limit):
        waits are cut to it and no command is typed after it has passed. When it is the episode's
        time limit (``ends_episode``) and it passed, every process in the sandbox is killed, the
        tmux server and the pane's shell included, so neither the pane's running job nor the rest
        of a typed line runs on into grading (Harbor cancels its agent at the deadline).
        """
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        timed_out = False
        for keys, duration in action.extra.get("commands", []):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                timed_out = True
                break
            self._send(sandbox, keys)
            wait = min(duration, self.max_duration)
            if left is not None and wait > left:
                wait, timed_out = left, True
            self._wait(sandbox, wait)
        output = limit_output(self._incremental(sandbox), self.max_observation_bytes)
        if ends_episode and deadline is not None and time.monotonic() >= deadline:
            sandbox.abort()
        if action.extra.get("final"):
            self._finished = True
        return ExecResult(output=output, exit_code=0, duration=time.monotonic() - started, timed_out=timed_out)

    def _send(self, sandbox: Sandbox, keys: str) -> None:
        if _KEY_NAME.match(keys):
            command = f"tmux send-keys -t {SESSION} {shlex.quote(keys)}"
            sandbox.exec(command, timeout=10)
            return
        for i in range(0, len(keys), SEND_CHUNK):
            chunk = keys[i : i + SEND_CHUNK]
            sandbox.exec(f"tmux send-keys -t {SESSION} -l -- {shlex.quote(chunk)}", timeout=10)

    def _wait(self, sandbox: Sandbox, duration: float) -> None:
        if duration <= 0:
            return
        if self.wait == "duration":
            time.sleep(duration)
            return
        self._wait_idle(sandbox, duration)

    def _wait_idle(self, sandbox: Sandbox, duration: float) -> None:
        """Sleep up to ``duration``; return early once the shell is in front and the screen is stable."""
        deadline = time.monotonic() + duration
        last = None
        time.sleep(min(0.05, duration))
        while time.monotonic() < deadline:
            probe = sandbox.exec(
                f"tmux display-message -p -t {SESSION} '#{{pane_current_command}}' && "
                f"tmux capture-pane -p -t {SESSION} | md5sum",
                timeout=10,
            )
            lines = probe.output.strip().splitlines()
            idle = bool(lines) and lines[0].strip() in SHELLS
            screen = lines[-1] if lines else None
            if idle and screen is not None and screen == last:
                return
            last = screen
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    def _capture(self, sandbox: Sandbox, history: bool) -> str:
        # As Terminus-2: no -J (wrapped lines stay split as displayed), whole history with -S -.
        flags = "-p -S -" if history else "-p"
        return sandbox.exec(f"tmux capture-pane {flags} -t {SESSION}", timeout=10).output

    def _incremental(self, sandbox: Sandbox) -> str:
        """What is new since the last observation, or the visible screen (Terminus-2's rule).

        The first call, an unchanged buffer, or a buffer that no longer contains the previous one
        (cleared, or scrolled out) show the visible screen under "Current Terminal Screen:".
        """
        current = self._capture(sandbox, history=True)
        previous, self._previous = self._previous, current
        if previous is not None:
            before = previous.strip()
            if before in current:
                # Resume at the start of the previous buffer's last line, so the prompt and the
                # typed command read as one line ("root@sandbox:/app# ls").
                start = before.rfind("\n") if "\n" in before else current.index(before)
                new = current[start:]
                if new.strip():
                    return "New Terminal Output:\n" + new
        return "Current Terminal Screen:\n" + self._capture(sandbox, history=False)

    # -- observations ---------------------------------------------------------------------------

    def render_observation(self, result: ExecResult, action: Action) -> str:
        output = result.output
        if action.extra.get("confirm"):
            if self._harbor:
                return self._harbor["confirm"](output)
            return string.Template(CONFIRM_TEMPLATE).substitute(output=output)
        warnings = action.extra.get("warnings") or []
        if warnings:
            output = "Your previous response had warnings:\nWARNINGS: " + " ".join(warnings) + "\n\n" + output
        return output

    def render_format_error(self, action: Action) -> str:
        return string.Template(FORMAT_ERROR_TEMPLATE).substitute(error=action.error or "unknown", warnings="")

    # -- oracle ---------------------------------------------------------------------------------

    def oracle_message(self, command: str) -> str:
        keys = command if command.endswith("\n") else command + "\n"
        return json.dumps({
            "analysis": "Running the reference solution.",
            "plan": "Type the next solution command and wait for it to finish.",
            "commands": [{"keystrokes": keys, "duration": self.max_duration}],
            "task_complete": False,
        })

    def submit_message(self, submission: str = "") -> str:
        return json.dumps({"analysis": "The task is done.", "plan": "Mark it complete.", "commands": [],
                           "task_complete": True})
