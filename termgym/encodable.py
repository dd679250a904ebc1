"""Text that always encodes: what the agent's workspace hands the host, made safe to store.

A file name in the agent's sandbox is bytes; Python gives the bytes that are not UTF-8 back as lone
surrogates (``os.fsdecode``: ``b"notes-\\xfe.txt"`` is ``"notes-\\udcfe.txt"``), and such a string
raises ``UnicodeEncodeError`` wherever it is written as UTF-8: an episode record, a run's
``result.json``, a trainer's recording. One ``printf`` in the workspace would then make an
infrastructure error of the agent's own failure. Everything that carries workspace text out of an
episode (:class:`~termgym.tasks.base.Grade`) goes through :func:`encodable`, and the writers encode
what is left with :data:`JSON_ERRORS`, so no string from an episode can stop a record from being
written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: The ``errors`` of the writers' UTF-8 encoding: a lone surrogate left in JSON text becomes its own
#: ``\\udcfe`` escape, which is valid JSON and reads back as the same string.
JSON_ERRORS = "backslashreplace"


def encodable_text(text: str) -> str:
    """``text`` itself when it encodes as UTF-8; else with each undecodable byte written ``\\xfe``
    (the bytes a file name had) and any other lone surrogate as ``\\udxxx``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that no byte stands for
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """``value`` with ``fn`` applied to every string in it (dict keys and values, list and tuple
    items); other values as they are. Returns ``value`` itself when nothing changed."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        items = [(map_strings(k, fn), map_strings(v, fn)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items())):
            return value
        return dict(items)
    if isinstance(value, (list, tuple)):
        items = [map_strings(v, fn) for v in value]
        if all(v is v0 for v, v0 in zip(items, value)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value


def encodable(value: Any) -> Any:
    """``value`` with every string in it made :func:`encodable_text` (see :func:`map_strings`)."""
    return map_strings(value, encodable_text)


__all__ = ["JSON_ERRORS", "encodable", "encodable_text", "map_strings"]
