"""Garbage collection: finding and removing the containers a crashed run left behind (``termgym gc``).

Every container termgym makes is labelled (:func:`termgym.sandbox.docker.container.container_labels`)
with its session, host and creating process; a container whose creator is gone is a leftover.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass

from termgym.sandbox.docker.container import (
    LABEL,
    LABEL_HOST,
    LABEL_PID,
    LABEL_PID_START,
    get_client,
    process_start_ticks,
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

    By default those whose creating process is gone (same host, pid dead or reused); with
    ``older_than`` also those created more than that many seconds ago; with ``everything`` all.
    Containers without the label are never listed.
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
        elif alive is False:
            reason = f"creator pid {labels.get(LABEL_PID)} is gone"
        elif older_than is not None and age > older_than:
            reason = f"older than {older_than:g}s"
        else:
            continue
        name = (info.get("Names") or ["?"])[0].lstrip("/")
        found.append(Leftover(info["Id"][:12], name, info.get("Image", ""), info.get("State", ""), age, reason))
    return found


def collect_garbage(client=None, *, older_than: float | None = None, everything: bool = False,
                    dry_run: bool = False, docker_host: str | None = None) -> list[Leftover]:
    """Remove (unless ``dry_run``) the containers :func:`find_leftovers` lists; return them."""
    client = client or get_client(docker_host)
    leftovers = find_leftovers(client, older_than=older_than, everything=everything)
    if not dry_run:
        for item in leftovers:
            remove_container(client, item.id)
    return leftovers
