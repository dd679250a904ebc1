"""Reading and writing a sandbox's files from the host without following what the agent made.

Both backends keep an agent's workdir in a host directory (a local sandbox's ``root``, a Docker
container's bound workdir, see :mod:`~termgym.sandbox.docker.hosttree`). The agent owns what is
in it: symlinks to the host's files, FIFOs that block a reader, device nodes that would open the
host's disks if the host opened them. Everything here therefore

* opens each path component relative to its parent's descriptor with ``O_NOFOLLOW``, so no
  symlink is ever followed on the host (at any depth, whenever it was planted);
* opens a file only through an ``O_PATH`` descriptor that ``fstat`` showed to be a regular file,
  so a FIFO or device node is never opened (reopening the descriptor opens that very inode);
* bounds what it reads: a listing stops at ``max_entries`` entries and ``max_depth`` levels
  (one descriptor open per level, never one per directory), content at ``max_bytes``.

:func:`walk_tree` lists a directory and reads the files a caller asks for: what the grader uses
to read an agent's changes after every process in its sandbox was killed, without running
anything in the agent's sandbox (see :mod:`termgym.tasks.swesynth.changes`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Deepest directory nesting :func:`walk_tree` follows (each level holds one descriptor open).
MAX_DEPTH = 64


class TreeTooLarge(RuntimeError):
    """A walked tree holds more than the caller allowed to read (the message says what)."""


def open_dir(root: str | Path | int, parts: list[str], *, create: bool = False) -> int | None:
    """A descriptor of ``root/parts...``, each component opened with ``O_NOFOLLOW``; None when a
    component is a symlink or not a directory. Missing directories are made (0755) with ``create``,
    else ``FileNotFoundError``. ``root`` (trusted: the host's own path, or a descriptor of one) is
    opened as it is; the caller closes the result."""
    fd = os.dup(root) if isinstance(root, int) else os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts:
            if name in ("", ".", "..") or "/" in name:
                os.close(fd)
                return None
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    os.close(fd)
                    return None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    os.close(fd)
                    return None
                raise
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def read_regular(dir_fd: int, name: str, limit: int | None = None) -> bytes | None:
    """The bytes of regular file ``name`` in ``dir_fd`` (at most ``limit`` + 1 when given), or None
    when it is a symlink, a FIFO, a socket or a device node (never opened). ``IsADirectoryError``
    for a directory, ``FileNotFoundError`` when there is nothing of that name."""
    handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        mode = os.fstat(handle).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", name)
        if not stat.S_ISREG(mode):
            return None
        # Reopening through the O_PATH descriptor opens that very inode, whatever the name is now.
        with open(f"/proc/self/fd/{handle}", "rb") as fh:
            return fh.read() if limit is None else fh.read(limit + 1)
    finally:
        os.close(handle)


def kind_of(mode: int) -> str:
    """What an entry that is neither a regular file nor a directory is, for messages."""
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


@dataclass(frozen=True)
class FileInfo:
    """A regular file in a walked tree: its permission bits, size and modification time."""

    mode: int
    size: int
    mtime_ns: int


@dataclass
class TreeListing:
    """What :func:`walk_tree` found, paths relative to the walked directory (``/``-separated).

    ``files``: regular files; ``content``: the bytes of those the caller asked to read; ``others``:
    entries that are neither regular files nor directories (symlinks, FIFOs, devices), with what
    they are. Directories the caller skipped are not looked into; symlinks to directories are
    entries in ``others``, never followed.
    """

    files: dict[str, FileInfo] = field(default_factory=dict)
    content: dict[str, bytes] = field(default_factory=dict)
    others: dict[str, str] = field(default_factory=dict)


def walk_tree(top: int, *, skip_dir: Callable[[str], bool], read: Callable[[str], bool],
              max_entries: int, max_bytes: int, max_depth: int = MAX_DEPTH, what: str = "the tree") -> TreeListing:
    """List the directory open as ``top`` (a descriptor; not closed here) and read the regular
    files for which ``read(path)`` holds.

    ``skip_dir(path)`` prunes a directory. Depth first, so only the directories on the current path
    are open (at most ``max_depth`` descriptors, however wide the tree). Raises :class:`TreeTooLarge`
    past ``max_entries`` entries, ``max_bytes`` of content read or ``max_depth`` levels (``what``
    names the tree in the message).
    """
    out = TreeListing()
    entries = read_bytes = 0
    # (open directory, its names not yet looked at, its path prefix)
    stack: list[tuple[int, list[str], str]] = []

    def enter(fd: int, prefix: str) -> None:
        if len(stack) >= max_depth:
            os.close(fd)
            raise TreeTooLarge(f"{what} is deeper than {max_depth} directories")
        try:
            with os.scandir(fd) as it:
                names = sorted((entry.name for entry in it), reverse=True)
        except BaseException:
            os.close(fd)
            raise
        stack.append((fd, names, prefix))

    try:
        enter(os.dup(top), "")
        while stack:
            fd, names, prefix = stack[-1]
            if not names:
                os.close(fd)
                stack.pop()
                continue
            name = names.pop()
            entries += 1
            if entries > max_entries:
                raise TreeTooLarge(f"{what} holds more than {max_entries} files and directories")
            rel = prefix + name
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if skip_dir(rel):
                    continue
                child = open_dir(fd, [name])
                if child is None:  # swapped for a link meanwhile: not followed
                    out.others[rel] = "a symbolic link"
                    continue
                enter(child, rel + "/")
            elif stat.S_ISREG(st.st_mode):
                if read(rel):
                    try:
                        data = read_regular(fd, name, max_bytes - read_bytes)
                    except IsADirectoryError:  # swapped for a directory meanwhile: not entered
                        data = None
                    if data is None:
                        out.others[rel] = "not a regular file"
                        continue
                    read_bytes += len(data)
                    if read_bytes > max_bytes:
                        raise TreeTooLarge(f"the files read from {what} hold more than {max_bytes} bytes")
                    out.content[rel] = data
                out.files[rel] = FileInfo(stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns)
            else:
                out.others[rel] = kind_of(st.st_mode)
    finally:
        for fd, _, _ in stack:
            with contextlib.suppress(OSError):
                os.close(fd)
    return out
