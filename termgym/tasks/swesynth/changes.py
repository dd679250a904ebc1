"""What the agent changed, read by the host from its sandbox once every process in it was killed.

The grader needs the agent's changes to the source files: the patch it grades in a fresh sandbox.
Reading them with ``git diff`` inside the agent's sandbox means starting a process there (on
Docker a ``docker exec``, about 40 ms before the first byte) that runs the agent's git, with the
agent's repository configuration, in a file system the agent owned. Both backends keep the
workdir in a host directory instead (:meth:`~termgym.sandbox.base.Sandbox.open_host_dir`), so the
grader reads it from there, after :meth:`~termgym.sandbox.base.Sandbox.halt`: nothing of the
agent's runs any more, no process is started in its sandbox, and nothing the agent planted is
followed or opened on the host (:mod:`termgym.sandbox.hostfs`).

:func:`read_agent_changes` compares the agent's workdir with the task's buggy tree on the host
(:func:`~termgym.tasks.swesynth.task.prepare_workspace`):

* **source files** (:func:`~termgym.tasks.swesynth.tree.is_source_path`) are compared byte for
  byte (and by their executable bit, which git records): new, changed and deleted ones are the
  change to grade. A source path that is now a symlink, a FIFO or a device is refused, never read,
  and so is a new or changed source file whose name is not UTF-8 or holds a control character.
* **every other file** that differs (size, modification time, executable bit; the sandbox's copy
  keeps the tree's normalised times) or was added or deleted is listed as ``ignored``: not graded,
  reported. Hidden directories (``.git`` included) and caches/build outputs
  (:data:`~termgym.tasks.swesynth.tree.IGNORED_DIRS`, ``*.egg-info``) are not looked into.

The grader then writes the changed source files into the fresh grading sandbox and lets git there
(the task's own repository, in a sandbox nobody else touched) turn them into the patch
(:meth:`~termgym.tasks.swesynth.task.SweSynthTask.stage_changes`), so the graded tree and the
patch the grade reports are the same thing, with git's rules (``.gitignore``) as before. Where the
host cannot reach the sandbox's files (a remote Docker engine, a task whose tree is only in its
image) :func:`read_agent_changes` returns None and the grader runs git in the agent's sandbox.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from termgym.encodable import encodable_text
from termgym.sandbox.base import Sandbox
from termgym.sandbox.hostfs import TreeListing, TreeTooLarge, walk_tree
from termgym.tasks.swesynth.tree import IGNORED_DIRS, is_source_path

#: Most files and directories a walk of the agent's workdir looks at.
MAX_ENTRIES = 100_000
#: Most bytes of source files read from the agent's workdir.
MAX_SOURCE_BYTES = 32 * 1024 * 1024


class AgentTreeError(RuntimeError):
    """The agent's workdir cannot be graded (gone, or past the limits); the message says why."""


@dataclass
class AgentChanges:
    """The agent's changes to the source files, relative to the workdir.

    ``files``: new content of each new or changed source file, None for a deleted one; ``modes``:
    0o755 or 0o644 for each written file; ``ignored``: other paths the agent changed, added or
    deleted (not graded); ``refused``: source paths that are no longer regular files, with why.
    """

    files: dict[str, bytes | None] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def odd_name(path: str) -> str | None:
    """Why a source path's name cannot be graded, or None: bytes that are not UTF-8 (no module can
    be imported by such a name, and git would quote it in the patch) or a control character."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not valid UTF-8"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "its name holds a control character"
    return None


def skip_dir(path: str) -> bool:
    """Directories a walk does not enter: hidden ones, caches and build outputs."""
    name = path.rsplit("/", 1)[-1]
    return name.startswith(".") or name in IGNORED_DIRS or name.endswith(".egg-info")


_manifests: dict[str, TreeListing] = {}
_manifest_lock = threading.Lock()


def tree_manifest(tree: Path) -> TreeListing:
    """The listing of a prepared (never changing) task tree, cached per path."""
    key = str(tree)
    with _manifest_lock:
        found = _manifests.get(key)
    if found is not None:
        return found
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        listing = walk_tree(fd, skip_dir=skip_dir, read=lambda _: False, max_entries=MAX_ENTRIES * 10,
                            max_bytes=0, what=str(tree))
    finally:
        os.close(fd)
    with _manifest_lock:
        if len(_manifests) > 256:
            _manifests.clear()
        _manifests[key] = listing
    return listing


def read_agent_changes(sandbox: Sandbox, workdir: str, buggy: Path, source_dirs: Sequence[str],
                       test_dirs: Sequence[str] = ()) -> AgentChanges | None:
    """The agent's changes in ``sandbox``'s ``workdir`` against the task's buggy tree ``buggy``
    (host path), read on the host; None where the host cannot reach the sandbox's files.

    Call it after :meth:`~termgym.sandbox.base.Sandbox.halt`. Raises :class:`AgentTreeError` when
    the workdir is gone or holds more than :data:`MAX_ENTRIES` entries or :data:`MAX_SOURCE_BYTES`
    of source files.
    """
    def is_source(path: str) -> bool:
        return is_source_path(path, source_dirs, test_dirs)

    try:
        top = sandbox.open_host_dir(workdir)
    except (FileNotFoundError, NotADirectoryError):
        raise AgentTreeError(f"the workdir {workdir} is no longer a directory in the agent's sandbox") from None
    if top is None:
        return None
    try:
        agent = walk_tree(top, skip_dir=skip_dir, read=is_source, max_entries=MAX_ENTRIES,
                          max_bytes=MAX_SOURCE_BYTES, what=f"the agent's {workdir}")
    except TreeTooLarge as exc:
        raise AgentTreeError(f"cannot read the agent's changes: {exc}") from None
    finally:
        os.close(top)
    base = tree_manifest(buggy)
    out = AgentChanges()
    for path in sorted(set(agent.files) | set(agent.others) | set(base.files) | set(base.others)):
        mine, theirs = agent.files.get(path), base.files.get(path)
        mine_other, theirs_other = agent.others.get(path), base.others.get(path)
        if is_source(path):
            odd = odd_name(path)
            if odd and (mine is not None or mine_other is not None):
                out.refused.append(f"{encodable_text(path)}: {odd}")
            elif mine_other is not None:
                if theirs_other is None:
                    out.refused.append(f"{path}: becomes {mine_other}")
            elif mine is None:
                if theirs is not None or theirs_other is not None:
                    out.files[path] = None
            else:
                data = agent.content[path]
                executable = bool(mine.mode & 0o100)
                if (theirs is None or len(data) != theirs.size or executable != bool(theirs.mode & 0o100)
                        or data != (buggy / path).read_bytes()):
                    out.files[path] = data
                    out.modes[path] = 0o755 if executable else 0o644
        elif mine is not None and theirs is not None:
            if (mine.size, mine.mtime_ns, mine.mode & 0o100) != (theirs.size, theirs.mtime_ns, theirs.mode & 0o100):
                out.ignored.append(path)
        elif (mine is None and mine_other is None) != (theirs is None and theirs_other is None) \
                or (mine is None) != (theirs is None):
            out.ignored.append(path)  # added, deleted, or a file that became a link (or back)
    return out
