"""Protocols: ``minisweagent`` (default), ``toolcall`` and ``terminus``. ``make_protocol(name)`` builds one."""

from __future__ import annotations

from typing import Any

from termgym.imports import load_object
from termgym.protocols.base import Action, Protocol, strip_think

#: name -> "module:Class"; imported lazily so optional protocols cost nothing until used.
PROTOCOLS: dict[str, str] = {
    "minisweagent": "termgym.protocols.minisweagent:MiniSweAgentProtocol",
    "toolcall": "termgym.protocols.toolcall:ToolCallProtocol",
    "terminus": "termgym.protocols.terminus:TerminusProtocol",
}


def make_protocol(protocol: str | Protocol, **options: Any) -> Protocol:
    """A protocol instance from a name in :data:`PROTOCOLS`, an import path, or an instance."""
    if isinstance(protocol, Protocol):
        return protocol
    cls = load_object(protocol, what="protocol", names=PROTOCOLS)
    return cls(**options)


__all__ = ["PROTOCOLS", "Action", "Protocol", "make_protocol", "strip_think"]
