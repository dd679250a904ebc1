"""JSON Lines reading shared by every file termgym writes one object per line to, and writing a whole one.

Episode records, evaluation recordings and SWE-SYNTH's compact records all read the same way: blank
lines are skipped, and a line that does not parse is reported with its number so that the caller
decides whether it costs the line (a record torn by a killed writer) or the whole file. A file
written whole (:func:`write_json_lines`) replaces the old one atomically.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from termgym.atomic import write_text_atomically


def json_lines(path: str | Path) -> Iterator[tuple[int, Any, str | None]]:
    """``(line number, object, None)`` per non-blank line, or ``(number, None, problem)`` when it is not JSON.

    Opening the file happens on first iteration; ``OSError`` (a missing file) propagates.
    """
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line), None
            except json.JSONDecodeError as exc:
                yield number, None, f"not valid JSON ({exc.msg} at column {exc.colno})"


def write_json_lines(path: str | Path, objects: Iterable[Any], **dumps: Any) -> None:
    """Replace ``path`` with ``objects``, one compact JSON object a line (``dumps`` go to
    :func:`json.dumps`, e.g. ``sort_keys=True``), atomically."""
    write_text_atomically(path, "".join(json.dumps(obj, separators=(",", ":"), **dumps) + "\n" for obj in objects))


def write_json(path: str | Path, data: Any, **dumps: Any) -> None:
    """Replace ``path`` with ``data`` as one JSON document and a newline, atomically."""
    write_text_atomically(path, json.dumps(data, **dumps) + "\n")


__all__ = ["json_lines", "write_json", "write_json_lines"]
