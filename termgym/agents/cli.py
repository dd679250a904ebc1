"""The ``cli`` agent: a command-line coding agent (Codex, Claude Code, Aider…) run inside the sandbox.

The agent program runs *in the task's sandbox*, headless, on the task's instruction, and works on
the files there itself; termgym grades the sandbox afterwards as for any episode. The sandbox keeps
its isolation: it has no network, and the only thing it can reach is the model endpoint, which is
forwarded into its network namespace (:mod:`termgym.sandbox.forwarding`, as LIVEWEB forwards its
world server) under the name ``model.termgym``. The agent gets the endpoint and its key in the
usual variables (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``…), the instruction in ``$TERMGYM_INSTRUCTION``
and the file ``$TERMGYM_INSTRUCTION_FILE``, and the task's time limit as its own.

One door: the agent acts through ``env.step``. Writing its instruction and files, each ``setup``
command and the program's run are steps of the episode (in the episode's record, counted against
``max_steps``, checked against the task's command bans, cut at its time limit), then it submits.
What the program does inside its run (its own commands and model turns) is its sub-trajectory:
everything it prints, plus the file it names in ``log_path``, is kept in the run step's ``meta``.
The run step is one command, so the env's per-command timeout (``command_timeout``) and the task's
time limit bound the whole program; give a ``command_timeout`` as long as the agent may work.

The program must be in the sandbox: on the local backend the host's ``/usr`` is visible read-only
(so a host-installed CLI works), on Docker it must be in the image; ``files`` copies scripts in and
``setup`` runs install commands in the sandbox (which has no network: install from files you copy
in, or use an image that has the agent). :data:`RECIPES` lists how the common agents are run.
"""

from __future__ import annotations

import base64
import shlex
import time
import urllib.parse
from pathlib import Path
from typing import Any

from termgym.agents.base import Agent, Episode, Reply

#: The host name the model endpoint has inside the sandbox.
MODEL_HOST = "model.termgym"
#: Where the agent's inputs are written in the sandbox.
AGENT_DIR = "/tmp/termgym-agent"
#: How much of the program's output is kept in the turn's meta (the middle is elided past this).
LOG_CHARS = 200_000

#: Headless invocations of common CLI agents (install: how to get the program; ``command``: how
#: termgym runs it). Verified here only as far as docs/agents.md says; the projects' flags change.
RECIPES: dict[str, dict[str, str]] = {
    "codex": {"install": "npm install -g @openai/codex",
              "command": 'codex exec --full-auto --skip-git-repo-check -m "$TERMGYM_MODEL" "$TERMGYM_INSTRUCTION"'},
    "claude-code": {"install": "npm install -g @anthropic-ai/claude-code",
                    "command": 'claude -p "$TERMGYM_INSTRUCTION" --model "$TERMGYM_MODEL" '
                               "--dangerously-skip-permissions --output-format stream-json --verbose"},
    "aider": {"install": "pip install aider-chat",
              "command": 'aider --yes-always --no-auto-commits --model "openai/$TERMGYM_MODEL" '
                         '--message "$TERMGYM_INSTRUCTION"'},
    "openhands": {"install": "pip install openhands-ai",
                  "command": 'LLM_MODEL="openai/$TERMGYM_MODEL" LLM_BASE_URL="$OPENAI_BASE_URL" '
                             'LLM_API_KEY="$OPENAI_API_KEY" python -m openhands.core.main -t "$TERMGYM_INSTRUCTION"'},
    "goose": {"install": "curl -fsSL https://github.com/block/goose/releases/download/stable/download_cli.sh | bash",
              "command": 'GOOSE_PROVIDER=openai OPENAI_HOST="${OPENAI_BASE_URL%/v1}" GOOSE_MODEL="$TERMGYM_MODEL" '
                         'goose run --no-session -t "$TERMGYM_INSTRUCTION"'},
}


class CliAgent(Agent):
    """Runs a command-line agent headless in each episode's sandbox, then submits for the grade.

    Args:
        command: the shell command that runs the agent in the sandbox (it sees the variables in
            the module docstring), or ``recipe`` names one from :data:`RECIPES`.
        recipe: ``codex``, ``claude-code``, ``aider``, ``openhands`` or ``goose``.
        model: the model name, given to the program as ``$TERMGYM_MODEL``.
        base_url: the model endpoint on the host (``http://127.0.0.1:8000/v1``); forwarded into the
            sandbox, where the program sees it as ``http://model.termgym:<port>/v1``.
        api_key_env: host variable whose value becomes the program's key (default ``OPENAI_API_KEY``).
        files: ``{sandbox_path: host_path}`` copied in before the run (scripts, wheels, config).
        setup: shell commands run in the sandbox before the agent (each must succeed).
        env: more variables for the program.
        log_path: a file in the sandbox the program writes its log to; kept with the trajectory.
        timeout: seconds for the program; default the task's time limit (else 1800).
    """

    name = "cli"

    def __init__(self, command: str | None = None, recipe: str | None = None, model: str | None = None,
                 base_url: str | None = None, api_key_env: str | None = None,
                 files: dict[str, str] | None = None, setup: list[str] | None = None,
                 env: dict[str, str] | None = None, log_path: str | None = None,
                 timeout: float | None = None) -> None:
        if (command is None) == (recipe is None):
            raise ValueError("cli agent: give exactly one of command (a shell command) or recipe "
                             f"({', '.join(RECIPES)})")
        if recipe is not None and recipe not in RECIPES:
            raise ValueError(f"cli agent: unknown recipe {recipe!r}; choose one of {', '.join(RECIPES)}")
        for label, value, kind in (("files", files, dict), ("setup", setup, list), ("env", env, dict)):
            if value is not None and not isinstance(value, kind):
                raise ValueError(f"cli agent: {label} must be a {kind.__name__}, not {type(value).__name__}")
        for target, source in (files or {}).items():
            if not str(target).startswith("/"):
                raise ValueError(f"cli agent: files key {target!r} must be an absolute sandbox path")
            if not Path(source).is_file():
                raise ValueError(f"cli agent: files[{target!r}]: no such host file {source!r}")
        self.command = command if command is not None else RECIPES[str(recipe)]["command"]
        self.recipe = recipe
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env or "OPENAI_API_KEY"
        self.files = {str(k): str(v) for k, v in (files or {}).items()}
        self.setup = list(setup or [])
        self.env = {str(k): str(v) for k, v in (env or {}).items()}
        self.log_path = log_path
        self.timeout = timeout
        self._endpoint = _parse_endpoint(base_url) if base_url else None

    # -- before the sandbox starts: forward the model endpoint into it ---------------------------

    def prepare_env(self, env: Any) -> None:
        """Give the program's run step its own time, and let the sandbox reach the model endpoint only.

        The run is one step, so the env's per-command timeout would stop a long-working agent: it is
        raised to the program's limit (``timeout``, else the env's ``time_limit``, else 1800 s). The
        task's time limit still cuts the program as a deadline.
        """
        import dataclasses

        limit = self.timeout if self.timeout is not None else (env.time_limit or 1800.0)
        if env.config.command_timeout is None or env.config.command_timeout < limit + 10:
            env.config = dataclasses.replace(env.config, command_timeout=float(limit) + 10)
        if self._endpoint is None:
            return
        from termgym.sandbox.base import ServicePort

        host, port, _ = self._endpoint
        env.suite = _ForwardingSuite(env.suite, [ServicePort(MODEL_HOST, port, host, port)])

    # -- the episode -----------------------------------------------------------------------------

    async def start(self, episode: Episode) -> None:
        if episode.env.protocol.name == "terminus":
            raise ValueError("the cli agent runs shell commands through env.step, not keystrokes: use the "
                             "minisweagent (default) or toolcall protocol, not terminus")
        instruction = episode.env.task.instruction
        # (kind, command, what it is): each becomes one env.step, in order.
        plan: list[tuple[str, str, str]] = [("files", _write_command(f"{AGENT_DIR}/instruction.md",
                                                                     instruction.encode(), 0o644), "instruction")]
        for target, source in self.files.items():
            plan.append(("files", _write_command(target, Path(source).read_bytes(), 0o755), target))
        for command in self.setup:
            plan.append(("setup", f"(\n{command}\n)", command))  # a subshell: `exit` ends only it
        plan.append(("run", self._run_command(episode), self.command))
        episode.state.update(plan=plan, position=0, last=None)

    def _variables(self, episode: Episode) -> dict[str, str]:
        import os

        variables = {"TERMGYM_INSTRUCTION_FILE": f"{AGENT_DIR}/instruction.md",
                     "TERMGYM_TASK_ID": episode.task_id, "TERMGYM_MODEL": self.model or ""}
        if self._endpoint is not None:
            _, port, path = self._endpoint
            url = f"http://{MODEL_HOST}:{port}{path}"
            key = os.environ.get(self.api_key_env, "EMPTY")
            variables.update(OPENAI_BASE_URL=url, OPENAI_API_BASE=url, OPENAI_API_KEY=key,
                             ANTHROPIC_BASE_URL=url.removesuffix("/v1"), ANTHROPIC_API_KEY=key)
        variables.update(self.env)
        return variables

    def _run_command(self, episode: Episode) -> str:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in self._variables(episode).items())
        script = (f"export {exports}; export TERMGYM_INSTRUCTION=\"$(cat \"$TERMGYM_INSTRUCTION_FILE\")\"; "
                  f"cd {shlex.quote(episode.env.sandbox.workdir)} && {self.command}")
        if self.timeout is not None:  # the program's own limit (the env's deadline applies too)
            return f"timeout -k 5 {float(self.timeout):g} bash -c {shlex.quote(script)}"
        return f"(\n{script}\n)"

    async def act(self, episode: Episode) -> Reply:
        from termgym.sandbox import run_blocking

        state = episode.state
        protocol = episode.env.protocol
        meta: dict[str, Any] = {}
        if state["last"] is not None:  # the step before ran the plan's last entry: look at its result
            kind, command, what = state["last"]
            result = episode.env.last_exec
            output = result.output if result is not None else str(episode.messages[-1].get("content") or "")
            code = result.exit_code if result is not None else 1
            if kind in ("files", "setup") and code != 0:
                label = "setup command" if kind == "setup" else "writing"
                raise RuntimeError(f"cli agent: {label} {what!r} failed (exit {code}): {output[-2000:]}")
            if kind == "run":
                timed_out = bool(result is not None and result.timed_out) or (self.timeout is not None and code == 124)
                meta = {"cli_command": self.command, "cli_exit_code": code, "cli_timed_out": timed_out,
                        "cli_seconds": round(time.monotonic() - state["run_started"], 3), "cli_output": _clip(output)}
                if self.recipe:
                    meta["cli_recipe"] = self.recipe
                if self.log_path:
                    # Reading the log is the harness's, not the agent's: it is not a step of the episode.
                    try:
                        data = await run_blocking(episode.env.sandbox.read_file, self.log_path)
                        meta["cli_log"] = _clip(data.decode("utf-8", errors="replace"))
                    except Exception as exc:  # no log is worth knowing, not a failure
                        meta["cli_log_error"] = f"{type(exc).__name__}: {exc}"
        state["last"] = None
        if state["position"] < len(state["plan"]):
            kind, command, what = state["plan"][state["position"]]
            state["position"] += 1
            state["last"] = (kind, command, what)
            if kind == "run":
                state["run_started"] = time.monotonic()
            note = {"files": f"cli agent: write {what}", "setup": "cli agent: setup",
                    "run": "cli agent: run the agent program"}[kind]
            message = f"THOUGHT: {note}\n\n```bash\n{command}\n```" if protocol.name == "minisweagent" \
                else protocol.oracle_message(command)
            return Reply(message=message, meta={"cli_step": kind})
        return Reply(message=protocol.submit_message(""), meta=meta)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "command": self.command, "recipe": self.recipe, "model": self.model,
                "base_url": self.base_url}


class _ForwardingTask:
    """A task whose sandbox also reaches ``services`` (everything else is the task's own)."""

    def __init__(self, task: Any, services: list[Any]) -> None:
        self._task = task
        self._services = services

    def sandbox_spec(self) -> Any:
        import dataclasses

        spec = self._task.sandbox_spec()
        return dataclasses.replace(spec, services=[*spec.services, *self._services])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._task, name)


class _ForwardingSuite:
    """A suite whose tasks' sandboxes also reach ``services``."""

    def __init__(self, suite: Any, services: list[Any]) -> None:
        self._suite = suite
        self._services = services

    def load(self, task_id: str) -> Any:
        return _ForwardingTask(self._suite.load(task_id), self._services)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._suite, name)


def _write_command(target: str, data: bytes, mode: int) -> str:
    """A command recreating ``data`` at ``target`` in the sandbox (base64: any bytes survive)."""
    quoted = shlex.quote(target)
    encoded = base64.b64encode(data).decode()
    return (f"mkdir -p \"$(dirname {quoted})\" && printf %s {shlex.quote(encoded)} | base64 -d > {quoted} "
            f"&& chmod {mode:o} {quoted}")


def _parse_endpoint(base_url: str) -> tuple[str, int, str]:
    """``(host, port, path)`` of an ``http://`` endpoint; bad URLs are an error naming them."""
    parsed = urllib.parse.urlsplit(base_url)
    if parsed.scheme != "http" or not parsed.hostname:
        raise ValueError(f"cli agent: base_url must be an http:// URL with a host, got {base_url!r} "
                         "(https endpoints: run a local proxy and give its http:// address)")
    try:
        port = parsed.port or 80
    except ValueError:
        raise ValueError(f"cli agent: base_url {base_url!r} has a bad port") from None
    return parsed.hostname, port, parsed.path.rstrip("/")


def _clip(text: str) -> str:
    if len(text) <= LOG_CHARS:
        return text
    half = LOG_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - LOG_CHARS} characters elided ...]\n{text[-half:]}"


__all__ = ["MODEL_HOST", "RECIPES", "CliAgent"]
