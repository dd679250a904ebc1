"""Local sandboxes a dead process left behind, and their removal (``termgym gc``).

A local sandbox is a directory ``termgym-local-*`` under :func:`~termgym.sandbox.local.sandbox_parent_dir`
(its root file system) plus, where cgroups are used, a few cgroups. Its creator removes both when it
closes the sandbox; a creator killed outright (SIGKILL, the OOM killer, a Ray worker whose node died)
removes nothing. Each sandbox therefore records its owner next to its root, out of the sandbox's
sight: :data:`OWNER_FILE` holds the creating process's pid and start time and the sandbox's cgroups.
A sandbox whose owner is gone (no such pid, or the pid now belongs to a later process) is a leftover.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from termgym.sandbox.cgroups import CGROUP_ROOT, process_start_ticks, remove_cgroup

#: The owner record, beside a sandbox's ``root`` (the sandbox sees only ``root``).
OWNER_FILE = "owner.json"
#: The prefix of a local sandbox's directory.
DIR_PREFIX = "termgym-local-"


def write_owner(host_dir: Path, cgroups: list[Path]) -> None:
    """Record this process as the owner of the sandbox in ``host_dir`` (and the sandbox's cgroups)."""
    pid = os.getpid()
    (host_dir / OWNER_FILE).write_text(json.dumps({"pid": pid, "start": process_start_ticks(pid),
                                                   "cgroups": [str(cg) for cg in cgroups]}))


@dataclass(frozen=True)
class LocalLeftover:
    """A local sandbox to remove: its directory, its recorded owner and cgroups, why, and its age."""

    path: str
    pid: int | None
    cgroups: tuple[str, ...]
    reason: str
    age_s: float


def find_local_leftovers(parents: list[str], *, older_than: float | None = None,
                         everything: bool = False) -> list[LocalLeftover]:
    """Local sandboxes in the directories ``parents`` whose owner is gone; with ``older_than`` (seconds)
    also those older than that (a directory without an owner record is taken only then); ``everything``:
    every local sandbox."""
    found = []
    now = time.time()
    for parent in dict.fromkeys(parents):
        try:
            entries = sorted(os.scandir(parent), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if not entry.name.startswith(DIR_PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                age = now - entry.stat(follow_symlinks=False).st_mtime
            except OSError:
                continue
            try:
                owner = json.loads((Path(entry.path) / OWNER_FILE).read_text())
            except (OSError, ValueError):
                owner = None
            pid = owner.get("pid") if isinstance(owner, dict) else None
            cgroups = tuple(owner.get("cgroups") or ()) if isinstance(owner, dict) else ()
            if everything:
                reason = "every local sandbox was asked for"
            elif owner is not None and isinstance(pid, int) and process_start_ticks(pid) != owner.get("start"):
                reason = f"its process {pid} is gone"
            elif older_than is not None and age > older_than:
                reason = f"older than {older_than:g}s" + ("" if owner is not None else " (no owner record)")
            else:
                continue
            found.append(LocalLeftover(entry.path, pid, cgroups, reason, age))
    return found


def collect_local_garbage(parents: list[str], *, older_than: float | None = None, everything: bool = False,
                          dry_run: bool = False) -> list[LocalLeftover]:
    """Remove (unless ``dry_run``) what :func:`find_local_leftovers` lists: each sandbox's processes and
    cgroups, then its directory. Only ``termgym-local-*`` directories and termgym's own cgroups are touched."""
    leftovers = find_local_leftovers(parents, older_than=older_than, everything=everything)
    if not dry_run:
        for item in leftovers:
            for cg in item.cgroups:
                path = Path(cg)
                if path.is_relative_to(CGROUP_ROOT) and "termgym" in path.parts:
                    remove_cgroup(path)
            shutil.rmtree(item.path, ignore_errors=True)
    return leftovers
