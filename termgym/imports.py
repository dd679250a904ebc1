"""Import paths: ``"package.module:attr"`` strings that name a Python object.

Suites, protocols, agents and trainer hooks can be named by such a path so that configurations
stay plain text (picklable for async vector envs and Ray, writable in YAML). :func:`load_object`
is the one place that turns a path into the object; every registry of names
(:data:`termgym.protocols.PROTOCOLS`, :data:`termgym.agents.AGENTS`) goes through it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def is_import_path(value: Any) -> bool:
    """Whether ``value`` looks like ``"module:attr"`` (a string with a module and an attribute)."""
    if not isinstance(value, str) or value.count(":") != 1:
        return False
    module, attr = value.split(":")
    return bool(module.strip()) and bool(attr.strip())


def load_object(path: str, *, what: str = "object", names: Mapping[str, str] | None = None) -> Any:
    """The object at ``path`` (``"module:attr"``, where ``attr`` may be dotted: ``"mod:Class.method"``).

    ``names`` maps short names (``"toolcall"``) to import paths; a name found there is loaded from
    its path. ``what`` names the kind of thing in error messages (``"protocol"``, ``"agent"``).
    Raises ``ValueError`` naming the path and what is wrong with it: no ``:``, a module that cannot
    be imported, or a missing attribute.
    """
    target = names.get(path, path) if names is not None and isinstance(path, str) else path
    if not is_import_path(target):
        if names:
            raise ValueError(f"unknown {what} {path!r}; choose one of {', '.join(names)} or give 'module:attr'")
        raise ValueError(f"{what} must be an import path 'module:attr', not {path!r}")
    module_name, attr = target.split(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"{what} {path!r}: cannot import module {module_name!r}: {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"{what} {path!r}: module {module_name!r} has no attribute {attr!r}") from None
    return obj


__all__ = ["is_import_path", "load_object"]
