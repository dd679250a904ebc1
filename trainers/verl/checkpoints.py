"""The last checkpoint a veRL trainer wrote under a folder (``python -m trainers.verl.checkpoints DIR``).

veRL writes ``global_step_N/`` folders and, for the trainers that track it,
``latest_checkpointed_iteration.txt``. The tracker wins when it names an existing folder; otherwise
the highest ``N`` (by number: ``global_step_10`` comes after ``global_step_9``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

TRACKER = "latest_checkpointed_iteration.txt"
_STEP = re.compile(r"^global_step_(\d+)$")


def last_checkpoint(root: str | Path) -> Path | None:
    """The last ``global_step_N`` folder under ``root``, or ``None`` when there is none."""
    root = Path(root)
    tracker = root / TRACKER
    if tracker.is_file():
        text = tracker.read_text().strip()
        if text.isdigit() and (root / f"global_step_{int(text)}").is_dir():
            return root / f"global_step_{int(text)}"
    steps = [(int(m.group(1)), p) for p in root.glob("global_step_*") if p.is_dir() and (m := _STEP.match(p.name))]
    return max(steps)[1] if steps else None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m trainers.verl.checkpoints CHECKPOINT_DIR", file=sys.stderr)
        return 2
    found = last_checkpoint(args[0])
    if found is None:
        print(f"no global_step_N folder under {args[0]}", file=sys.stderr)
        return 1
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
