"""The ``minisweagent`` agent: mini-swe-agent's own ``DefaultAgent`` playing a termgym episode.

mini-swe-agent (``pip install 'termgym[bench]'``) owns its loop: ``DefaultAgent.run(task)`` asks its
model for a message, runs each action through an *environment* (``execute(action) -> {"output",
"returncode"}``), formats the outputs with its own templates and repeats until the model submits or
a limit is hit. termgym's harness owns a loop too (``agent.act`` -> ``env.step``). This module joins
the two without changing either:

- :class:`TermgymEnvironment` implements mini-swe-agent's environment protocol. Its ``execute`` does
  not run anything itself: it hands the command to the harness and waits for the result of the
  termgym step that ran it.
- :class:`MiniSweAgent` is a termgym :class:`~termgym.agents.base.Agent`. ``start`` launches
  ``DefaultAgent.run`` in a thread; each ``act`` returns the next command mini-swe-agent wants to
  run (written in the env's protocol), and the following ``act`` hands that step's result back.

So mini-swe-agent sees its own prompts, parsing, model classes and observation templates, while
termgym runs every command in the task's sandbox, records it, applies its limits and grades the
episode exactly as for a native agent. The model's raw reply is kept in each turn's ``meta``
(``meta["model_content"]``), its token usage in ``usage`` when the model class reports one.
"""

from __future__ import annotations

import asyncio
import os
import queue
import re
import shlex
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from termgym.agents.base import Agent, Episode, InfraError, Reply

SENTINEL = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

# litellm exceptions that mean "the endpoint did not answer", not "the agent failed".
_INFRA_EXCEPTIONS = {"APIConnectionError", "ServiceUnavailableError", "InternalServerError", "Timeout",
                     "RateLimitError", "APIError", "ConnectionError"}

_FENCE = re.compile(r"```.*?(```|$)", re.DOTALL)


def _import_minisweagent() -> Any:
    # Its banner goes to stdout on import; termgym's progress output must stay readable.
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    try:
        import minisweagent
    except ImportError as exc:
        raise InfraError("the minisweagent agent needs mini-swe-agent: pip install 'termgym[bench]' "
                         f"(or mini-swe-agent==2.4.6): {exc}", retriable=False) from exc
    return minisweagent


def load_config(config: str | dict[str, Any]) -> dict[str, Any]:
    """mini-swe-agent's configuration from a dict, a file path, or the name of one it ships.

    Names are looked up the way ``mini -c NAME`` does (``default``, ``mini``, ``swebench``…).
    """
    if isinstance(config, dict):
        return config
    import yaml

    _import_minisweagent()
    from minisweagent.config import get_config_from_spec

    try:
        data = get_config_from_spec(config)
    except FileNotFoundError as exc:
        raise ValueError(f"minisweagent config {config!r}: no such file or built-in config ({exc})") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"minisweagent config {config!r} is not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("agent", {}), dict):
        raise ValueError(f"minisweagent config {config!r} must be a mapping with an 'agent' section")
    return data


@dataclass
class _Bridge:
    """The two queues between mini-swe-agent's thread and the harness, and what crossed them."""

    to_harness: queue.Queue = field(default_factory=queue.Queue)  # ("command"|"exit"|"error", payload)
    to_agent: queue.Queue = field(default_factory=queue.Queue)  # an output dict, or _STOP
    last_model_message: dict[str, Any] | None = None
    message_reported: bool = True
    stopped: threading.Event = field(default_factory=threading.Event)


_STOP = object()


class TermgymEnvironment:
    """mini-swe-agent's environment protocol over a termgym episode (see the module docstring).

    ``execute`` returns what mini-swe-agent's ``LocalEnvironment`` returns (``output``,
    ``returncode``, ``exception_info``) and raises its ``Submitted`` on the same sentinel, so a
    protocol that does not end the episode on the sentinel itself still submits.
    """

    def __init__(self, bridge: _Bridge, *, task_id: str, backend: str, workdir: str | None,
                 template_vars: dict[str, Any]) -> None:
        from pydantic import BaseModel

        class TermgymEnvironmentConfig(BaseModel):
            task_id: str
            backend: str
            cwd: str = ""

        self.config = TermgymEnvironmentConfig(task_id=task_id, backend=backend, cwd=workdir or "")
        self._bridge = bridge
        self._template_vars = dict(template_vars)

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        """Run ``action["command"]`` as one termgym step; blocks until the harness has stepped."""
        from minisweagent.exceptions import Submitted

        command = str(action.get("command", ""))
        if cwd:
            command = f"cd {shlex.quote(cwd)} && {command}"
        self._bridge.to_harness.put(("command", command))
        output = self._bridge.to_agent.get()
        if output is _STOP:
            from minisweagent.exceptions import InterruptAgentFlow

            # Ends DefaultAgent.run the way its own limits do, so its trajectory is saved normally.
            raise InterruptAgentFlow({"role": "exit", "content": "termgym ended the episode",
                                      "extra": {"exit_status": "EpisodeEnded", "submission": ""}})
        lines = output.get("output", "").lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SENTINEL and output["returncode"] == 0:
            submission = "".join(lines[1:])
            raise Submitted({"role": "exit", "content": submission,
                             "extra": {"exit_status": "Submitted", "submission": submission}})
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        """The config plus the sandbox's ``uname`` fields (``system``, ``release``, ``version``, ``machine``)."""
        return {**self.config.model_dump(), **self._template_vars, **kwargs}

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {"environment": self.config.model_dump(mode="json"),
                                    "environment_type": f"{type(self).__module__}.{type(self).__name__}"}}}


class _ObservedModel:
    """Wraps a mini-swe-agent model to keep its last reply (for the step's ``meta`` and ``usage``)."""

    def __init__(self, model: Any, bridge: _Bridge) -> None:
        self._model = model
        self._bridge = bridge

    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        message = self._model.query(messages, **kwargs)
        self._bridge.last_model_message = message
        self._bridge.message_reported = False
        return message

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


class MiniSweAgent(Agent):
    """Runs mini-swe-agent's ``DefaultAgent`` (its prompts, parsing and model) on termgym episodes.

    Args:
        model: the model name mini-swe-agent's ``get_model`` resolves (``openai/gpt-4.1``,
            ``anthropic/claude-sonnet-4-5``…); ``--model`` of ``termgym eval``.
        config: a mini-swe-agent config: a built-in name (``mini``, the default of its ``mini`` command;
            ``default``, ``swebench``), a YAML
            path, or a dict; its ``agent`` and ``model`` sections are used (its ``environment`` section
            is not: termgym's sandbox is the environment).
        model_class: mini-swe-agent model class (``litellm``, ``litellm_textbased``, ``deterministic``
            or an import path); default: the config's, else mini-swe-agent's choice.
        model_config: keyword arguments merged over the config's ``model`` section (e.g. the
            ``outputs`` of the deterministic test model).
        base_url: an OpenAI-compatible API root; passed to litellm as ``api_base`` (and the model
            name gets an ``openai/`` prefix when it has no provider), cost tracking errors ignored.
        api_key_env: environment variable with the key for ``base_url`` (default ``OPENAI_API_KEY``).
        step_limit / cost_limit: override the config's limits (termgym's own ``max_steps`` and
            time limit apply too).
        trajectory_dir: also save mini-swe-agent's own trajectory (``<task>__<attempt>.traj.json``).
    """

    name = "minisweagent"

    def __init__(self, model: str | None = None, config: str | dict[str, Any] = "mini",
                 model_class: str | None = None, model_config: dict[str, Any] | None = None,
                 base_url: str | None = None, api_key_env: str | None = None, step_limit: int | None = None,
                 cost_limit: float | None = None, trajectory_dir: str | None = None) -> None:
        if model_config is not None and not isinstance(model_config, dict):
            raise ValueError(f"minisweagent: model_config must be a mapping, not {type(model_config).__name__}")
        self.config = load_config(config)
        self.config_name = config if isinstance(config, str) else "<dict>"
        self.model = model
        self.model_class = model_class
        self.model_config = dict(model_config or {})
        self.base_url = base_url
        self.api_key_env = api_key_env or "OPENAI_API_KEY"
        self.step_limit = step_limit
        self.cost_limit = cost_limit
        self.trajectory_dir = Path(trajectory_dir) if trajectory_dir else None
        if model is None and not self.model_config.get("model_name") and not self.config.get("model", {}).get(
                "model_name") and not os.getenv("MSWEA_MODEL_NAME") and model_class != "deterministic":
            raise ValueError("minisweagent: no model given (--model, model_config.model_name, the config's "
                             "model.model_name or $MSWEA_MODEL_NAME)")

    def _model_settings(self) -> dict[str, Any]:
        settings = dict(self.config.get("model") or {})
        settings.update(self.model_config)
        if self.model_class:
            settings["model_class"] = self.model_class
        if self.base_url:
            kwargs = dict(settings.get("model_kwargs") or {})
            kwargs.setdefault("api_base", self.base_url)
            kwargs.setdefault("api_key", os.environ.get(self.api_key_env, "EMPTY"))
            settings["model_kwargs"] = kwargs
            settings.setdefault("cost_tracking", "ignore_errors")
        return settings

    def _model_name(self) -> str | None:
        name = self.model
        if name and self.base_url and "/" not in name:
            name = f"openai/{name}"  # litellm's provider prefix for OpenAI-compatible servers
        return name

    async def start(self, episode: Episode) -> None:
        _import_minisweagent()
        from minisweagent.agents.default import DefaultAgent
        from minisweagent.models import get_model

        env = episode.env
        if env.protocol.name == "terminus":
            raise ValueError("the minisweagent agent runs shell commands, not keystrokes: use the minisweagent "
                             "(default) or toolcall protocol, not terminus")
        uname = await asyncio.to_thread(_sandbox_uname, env)
        bridge = _Bridge()
        environment = TermgymEnvironment(bridge, task_id=episode.task_id, backend=env.backend,
                                         workdir=getattr(env.task, "workdir", None), template_vars=uname)
        name = self._model_name() or ("deterministic" if self.model_class == "deterministic" else None)
        try:
            model = get_model(name, self._model_settings())
        except Exception as exc:  # pydantic ValidationError, unknown model class…
            raise ValueError(f"minisweagent: cannot build the model: {exc}") from exc
        if (litellm := sys.modules.get("litellm")) is not None:
            # litellm prints a provider list to stdout when it cannot price a model; keep stdout for
            # termgym's own output (e.g. `termgym eval --json`).
            litellm.suppress_debug_info = True
        agent_settings = dict(self.config.get("agent") or {})
        agent_settings.pop("agent_class", None)
        agent_settings.pop("mode", None)  # the interactive agent's setting; DefaultAgent is never interactive
        if self.step_limit is not None:
            agent_settings["step_limit"] = self.step_limit
        if self.cost_limit is not None:
            agent_settings["cost_limit"] = self.cost_limit
        if self.trajectory_dir is not None:
            agent_settings["output_path"] = self.trajectory_dir / f"{episode.task_id}__{episode.attempt}.traj.json"
        try:
            agent = DefaultAgent(_ObservedModel(model, bridge), environment, **agent_settings)
        except Exception as exc:
            raise ValueError(f"minisweagent: bad agent config {self.config_name!r}: {exc}") from exc
        instruction = env.task.instruction if env.task is not None else episode.prompt

        def run() -> None:
            try:
                info = agent.run(instruction)
                bridge.to_harness.put(("exit", info))
            except BaseException as exc:  # handed to act(), which decides whose failure it is
                bridge.to_harness.put(("error", exc))
            finally:
                bridge.stopped.set()

        thread = threading.Thread(target=run, name=f"minisweagent-{episode.task_id}", daemon=True)
        episode.state.update(bridge=bridge, thread=thread, agent=agent, exit=None, stepped=False)
        thread.start()

    async def act(self, episode: Episode) -> Reply:
        state = episode.state
        bridge: _Bridge = state["bridge"]
        if state["exit"] is not None:  # mini-swe-agent stopped; keep submitting (terminus asks twice)
            return self._submit(episode, state["exit"])
        if state["stepped"]:
            bridge.to_agent.put(_last_output(episode))
        kind, payload = await asyncio.to_thread(bridge.to_harness.get)
        if kind == "error":
            if type(payload).__name__ in _INFRA_EXCEPTIONS:
                raise InfraError(f"mini-swe-agent's model call failed: {type(payload).__name__}: {payload}")
            raise payload
        if kind == "stop":
            raise RuntimeError("the episode ended")
        if kind == "exit":
            state["exit"] = payload or {}
            return self._submit(episode, state["exit"])
        state["stepped"] = True
        return Reply(message=_protocol_message(episode, payload, self._model_content(bridge)),
                     **self._model_report(bridge))

    async def end(self, episode: Episode) -> None:
        bridge: _Bridge | None = episode.state.get("bridge")
        if bridge is None:
            return
        if episode.state.get("stepped") and episode.state.get("exit") is None:
            # termgym ended the episode on the last step; if that step was mini-swe-agent's submission,
            # let it see the output so that its trajectory ends "Submitted" as it would on its own.
            last = _last_output(episode)
            if last["output"].lstrip().startswith(SENTINEL):
                bridge.to_agent.put(last)
        bridge.to_agent.put(_STOP)
        bridge.to_harness.put(("stop", None))  # wakes an act() still waiting (cancelled by a timeout)
        await asyncio.to_thread(episode.state["thread"].join, 10.0)

    def _submit(self, episode: Episode, info: dict[str, Any]) -> Reply:
        submission = str(info.get("submission") or "")
        meta = {"minisweagent_exit_status": info.get("exit_status", "")}
        return Reply(message=episode.env.protocol.submit_message(submission), meta=meta)

    @staticmethod
    def _model_content(bridge: _Bridge) -> str:
        message = bridge.last_model_message or {}
        return str(message.get("content") or "")

    @staticmethod
    def _model_report(bridge: _Bridge) -> dict[str, Any]:
        # One model message may hold several actions; its usage belongs to the first step only.
        if bridge.message_reported or bridge.last_model_message is None:
            return {}
        bridge.message_reported = True
        message = bridge.last_model_message
        extra = message.get("extra") or {}
        meta: dict[str, Any] = {"model_content": str(message.get("content") or "")}
        if extra.get("cost"):
            meta["cost"] = extra["cost"]
        usage = (extra.get("response") or {}).get("usage") if isinstance(extra.get("response"), dict) else None
        report: dict[str, Any] = {"meta": meta}
        if isinstance(usage, dict):
            report["usage"] = {k: int(usage[k]) for k in ("prompt_tokens", "completion_tokens")
                               if isinstance(usage.get(k), int)}
        return report

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "config": self.config_name,
                "model_class": self.model_class, "base_url": self.base_url}


def _sandbox_uname(env: Any) -> dict[str, str]:
    """``platform.uname()``-style fields of the sandbox (mini-swe-agent's templates show them)."""
    keys = ("system", "release", "version", "machine")
    result = env.sandbox.exec("uname -s; uname -r; uname -v; uname -m", timeout=30)
    values = result.output.splitlines() if result.exit_code == 0 else []
    return {k: (values[i].strip() if i < len(values) else "") for i, k in enumerate(keys)}


def _last_output(episode: Episode) -> dict[str, Any]:
    """The last termgym step's result in mini-swe-agent's form."""
    result = episode.env.last_exec
    if result is None:  # the step ran nothing (a refused or unparsable message): show what termgym said
        text = str(episode.messages[-1].get("content") or "") if episode.messages else ""
        return {"output": text, "returncode": -1, "exception_info": ""}
    info = ""
    if result.timed_out:
        info = "An error occurred while executing the command: the command timed out and was killed"
    return {"output": result.output, "returncode": -1 if result.timed_out else result.exit_code,
            "exception_info": info}


def _protocol_message(episode: Episode, command: str, model_content: str) -> str | dict[str, Any]:
    """An assistant message in the env's protocol that runs ``command``."""
    protocol = episode.env.protocol
    if protocol.name == "minisweagent":
        # Keep the model's reasoning; its action block is rewritten in termgym's grammar.
        thought = _FENCE.sub("", model_content).strip() or "THOUGHT: (mini-swe-agent)"
        return f"{thought}\n\n```bash\n{command}\n```"
    return protocol.oracle_message(command)


__all__ = ["MiniSweAgent", "TermgymEnvironment", "load_config"]
