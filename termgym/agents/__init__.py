"""Agents that play termgym environments: ``openai``, ``oracle``, ``nop``, ``replay``, ``minisweagent``
(mini-swe-agent's own ``DefaultAgent``), ``harbor`` (Harbor's agents, Python >= 3.12),
``cli`` (a command-line agent run inside the sandbox), or your own.

``make_agent(name_or_path, **options)`` builds one from a name in :data:`AGENTS` or an import
path ``"my_pkg.my_agent:MyAgent"`` (a class or a factory). See :mod:`termgym.agents.base` for the
interface.
"""

from __future__ import annotations

import inspect
from typing import Any

from termgym.agents.base import Agent, Episode, InfraError, Reply
from termgym.imports import load_object

#: name -> "module:Class"; imported lazily so that an agent's dependencies cost nothing until used.
AGENTS: dict[str, str] = {
    "openai": "termgym.agents.openai:OpenAIAgent",
    "oracle": "termgym.agents.oracle:OracleAgent",
    "nop": "termgym.agents.nop:NopAgent",
    "replay": "termgym.agents.replay:ReplayAgent",
    "minisweagent": "termgym.agents.minisweagent:MiniSweAgent",
    "harbor": "termgym.agents.harbor:HarborAgent",
    "cli": "termgym.agents.cli:CliAgent",
}


def resolve_agent_class(agent: str) -> Any:
    """The class (or factory) behind a registered name or a ``"module:attr"`` path."""
    return load_object(agent, what="agent", names=AGENTS)


def make_agent(agent: str | Agent, **options: Any) -> Agent:
    """Build an agent from a name in :data:`AGENTS`, an import path, or return an instance as is.

    Options the agent's constructor does not accept are an error that names them.
    """
    if isinstance(agent, Agent):
        if options:
            raise TypeError(f"agent options {sorted(options)} given, but the agent is already built")
        return agent
    factory = resolve_agent_class(agent)
    if not callable(factory):
        raise ValueError(f"agent {agent!r} is not a class or factory")
    _check_options(agent, factory, options)
    built = factory(**options)
    if not isinstance(built, Agent) and not callable(getattr(built, "act", None)):
        raise TypeError(f"agent {agent!r} built a {type(built).__name__}, which has no act() method")
    return built


def _check_options(agent: str, factory: Any, options: dict[str, Any]) -> None:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # builtins or C extensions: let the call itself complain
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    accepted = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ValueError(f"agent {agent!r} does not take option(s) {', '.join(unknown)}; "
                         f"it takes: {', '.join(sorted(accepted)) or 'nothing'}")


__all__ = ["AGENTS", "Agent", "Episode", "InfraError", "Reply", "make_agent", "resolve_agent_class"]
