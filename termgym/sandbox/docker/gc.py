"""Garbage collection: finding and removing the containers a crashed run left behind (``termgym gc``).

Every container termgym makes is labelled (:func:`termgym.sandbox.docker.container.container_labels`)
with its session, host and creating process; a container whose creator is gone is a leftover. So is
a *dead* one, whoever made it: the engine failed to remove it (a 500 ``unable to remove filesystem``
that outlasted the background retries of :mod:`~termgym.sandbox.docker.removal`). Removing a
container also removes the host directory bound into it (its ``termgym.tree`` label, on this host);
host directories that no container names any more and that are over a minute old go too.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass

from termgym.sandbox.cgroups import process_start_ticks
from termgym.sandbox.docker.container import (
    LABEL,
    LABEL_HOST,
    LABEL_PID,
    LABEL_PID_START,
    LABEL_TREE,
    get_client,
    remove_container,
)


@dataclass
class Leftover:
    """A termgym container found by :func:`find_leftovers` and why it may go."""

    id: str
    name: str
    image: str
    status: str
    age_s: float
    reason: str
    tree: str = ""  # its bound host directory on this host ("" if none)


def _creator_alive(labels: Mapping[str, str]) -> bool | None:
    """Whether the process that created a container still runs (None: it ran on another host)."""
    if labels.get(LABEL_HOST) != socket.gethostname():
        return None
    try:
        pid = int(labels.get(LABEL_PID, ""))
    except ValueError:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    recorded = labels.get(LABEL_PID_START, "")
    return not recorded or process_start_ticks(pid) == recorded


def find_leftovers(client=None, *, older_than: float | None = None, everything: bool = False,
                   docker_host: str | None = None) -> list[Leftover]:
    """termgym containers (label ``termgym=1``) that ``termgym gc`` would remove.

    By default those whose creating process is gone (same host, pid dead or reused) and dead ones
    (a removal the engine failed); with ``older_than`` also those created more than that many
    seconds ago; with ``everything`` all. Containers without the label are never listed.
    """
    client = client or get_client(docker_host)
    now = time.time()
    found = []
    for info in client.api.containers(all=True, filters={"label": f"{LABEL}=1"}):
        labels = info.get("Labels") or {}
        if labels.get(LABEL) != "1":
            continue
        age = now - float(info.get("Created", now))
        alive = _creator_alive(labels)
        if everything:
            reason = "--all"
        elif info.get("State") in ("dead", "removing") and _dead(client, info["Id"]):
            reason = "dead: the engine failed to remove it earlier"
        elif alive is False:
            reason = f"creator pid {labels.get(LABEL_PID)} is gone"
        elif older_than is not None and age > older_than:
            reason = f"older than {older_than:g}s"
        else:
            continue
        name = (info.get("Names") or ["?"])[0].lstrip("/")
        tree = labels.get(LABEL_TREE, "") if labels.get(LABEL_HOST) == socket.gethostname() else ""
        found.append(Leftover(info["Id"][:12], name, info.get("Image", ""), info.get("State", ""), age, reason, tree))
    return found


def _dead(client, container_id: str) -> bool:
    """Whether the engine marks the container dead (a failed removal; "removing" may be one in flight)."""
    try:
        return bool(client.api.inspect_container(container_id).get("State", {}).get("Dead"))
    except Exception:  # noqa: BLE001 - gone meanwhile
        return False


def collect_garbage(client=None, *, older_than: float | None = None, everything: bool = False,
                    dry_run: bool = False, docker_host: str | None = None) -> list[Leftover]:
    """Remove (unless ``dry_run``) the containers :func:`find_leftovers` lists; return them."""
    client = client or get_client(docker_host)
    leftovers = find_leftovers(client, older_than=older_than, everything=everything)
    if not dry_run:
        for item in leftovers:
            remove_container(client, item.id)
            if _is_tree(item.tree):
                shutil.rmtree(item.tree, ignore_errors=True)
        remove_orphan_trees(client)
    return leftovers


def _is_tree(path: str) -> bool:
    """Whether ``path`` names one of termgym's bound host directories (nothing else is ever deleted)."""
    from termgym.sandbox.docker.hosttree import TREE_PREFIX

    return bool(path) and os.path.isabs(path) and os.path.basename(path.rstrip("/")).startswith(TREE_PREFIX)


def remove_orphan_trees(client, *, min_age: float = 60.0) -> list[str]:
    """Delete this host's bound host directories that no termgym container names (over ``min_age`` s old)."""
    from termgym.sandbox.docker.hosttree import TREE_PREFIX, tree_parent_dir

    named = {(c.get("Labels") or {}).get(LABEL_TREE, "") for c in
             client.api.containers(all=True, filters={"label": f"{LABEL}=1"})}
    try:
        entries = list(os.scandir(tree_parent_dir() or tempfile.gettempdir()))
    except OSError:
        return []
    removed = []
    for entry in entries:
        if not entry.name.startswith(TREE_PREFIX) or entry.path in named:
            continue
        try:
            if entry.is_symlink() or time.time() - entry.stat(follow_symlinks=False).st_mtime < min_age:
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed
