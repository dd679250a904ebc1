"""JSON Lines reading shared by every file termgym writes one object per line to.

Episode records, evaluation recordings and SWE-SYNTH's compact records all read the same way: blank
lines are skipped, and a line that does not parse is reported with its number so that the caller
decides whether it costs the line (a record torn by a killed writer) or the whole file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


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


__all__ = ["json_lines"]
