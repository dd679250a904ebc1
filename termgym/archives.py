"""Unpacking tar archives termgym did not make (PyPI sdists, files an agent's container sends back).

:func:`extract_all` refuses a member that would land or point outside the destination, whichever
Python runs it: where :mod:`tarfile` has extraction filters (3.12, 3.11.4+) it is tarfile's own
``"data"`` filter; on older builds (Debian 12's 3.11.2 has none) the same rules are checked here
before anything is written.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path


class UnsafeMember(tarfile.TarError):
    """A member that would write or point outside the destination, or is not a file, folder or link."""


def extract_all(tar: tarfile.TarFile, dest: str | Path) -> None:
    """Unpack every member of ``tar`` under ``dest``; raises :class:`tarfile.TarError` naming the
    first member that would land or point outside it (nothing is written then, on old Pythons)."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    root = os.path.realpath(dest)
    members = tar.getmembers()
    for member in members:
        _check(member, root)
    tar.extractall(dest, members=members)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def lands_inside(path: str | Path, root: str | Path) -> bool:
    """Whether ``path``, its links followed, stays within ``root`` (an unpacker that writes members
    itself checks each one so)."""
    return _inside(os.path.realpath(path), os.path.realpath(root))


def _check(member: tarfile.TarInfo, root: str) -> None:
    """What the ``"data"`` filter enforces, for a Python without it (``member`` made safe in place)."""
    name = member.name = member.name.lstrip("/")  # an absolute name lands inside, as with the filter
    if ".." in name.split("/"):
        raise UnsafeMember(f"archive member {name!r} would be written outside {root}")
    target = os.path.realpath(os.path.join(root, name))
    if not _inside(target, root):
        raise UnsafeMember(f"archive member {name!r} would be written outside {root}")
    if member.issym():
        if os.path.isabs(member.linkname):
            raise UnsafeMember(f"archive member {name!r} links to the absolute path {member.linkname!r}")
        if not _inside(os.path.realpath(os.path.join(os.path.dirname(target), member.linkname)), root):
            raise UnsafeMember(f"archive member {name!r} links outside {root} ({member.linkname!r})")
    elif member.islnk():
        if not _inside(os.path.realpath(os.path.join(root, member.linkname)), root):
            raise UnsafeMember(f"archive member {name!r} links outside {root} ({member.linkname!r})")
    elif not (member.isreg() or member.isdir()):
        raise UnsafeMember(f"archive member {name!r} is not a file, folder or link")
    if not member.issym():
        member.mode &= 0o755  # no setuid, setgid or sticky bit, no group/other write (as the filter)
    member.uid, member.gid = os.getuid(), os.getgid()  # the owner is whoever unpacks (as the filter)
    member.uname = member.gname = ""
