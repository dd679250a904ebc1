"""Files replaced whole: a reader (or a run killed mid-write) sees the old file or the new one, never
half of either.

The text is written to a temporary file beside the target, named uniquely per process and thread
(two threads of one process writing the same target do not share it), then renamed over the target.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def write_text_atomically(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8), creating its folder if needed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


__all__ = ["write_text_atomically"]
