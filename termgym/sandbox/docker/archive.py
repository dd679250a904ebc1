"""Tar archives between the host and a container (``put_archive``/``get_archive`` of the Docker API)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path


def tar_dir(host_dir: Path, target: str) -> bytes:
    """An archive that unpacks ``host_dir``'s contents at ``target`` when put at ``/``."""
    prefix = target.strip("/")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if prefix:
            tar.add(host_dir, arcname=prefix, recursive=False)
        for path in sorted(host_dir.rglob("*")):
            rel = path.relative_to(host_dir).as_posix()
            tar.add(path, arcname=f"{prefix}/{rel}" if prefix else rel, recursive=False)
    return buf.getvalue()


def extract_dir(archive: bytes, host_dir: Path) -> None:
    """Unpack a ``get_archive`` of a directory into ``host_dir`` (its top component stripped).

    Members that would land outside ``host_dir`` (absolute, ``..``, through a symlink) and device
    files are skipped: the archive's content is the agent's and must not write elsewhere.
    """
    host_dir.mkdir(parents=True, exist_ok=True)
    root = os.path.realpath(host_dir)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            parts = member.name.split("/", 1)
            if len(parts) < 2 or not parts[1]:
                continue
            name = parts[1]
            if name.startswith("/") or ".." in name.split("/") or not (member.isreg() or member.isdir()
                                                                          or member.issym()):
                continue
            dest = os.path.join(root, name)
            parent = os.path.realpath(os.path.dirname(dest))
            if parent != root and not parent.startswith(root + os.sep):
                continue
            member.name = name
            member.mode &= 0o777  # no setuid/setgid bits on the host
            if os.path.lexists(dest) and not os.path.isdir(dest):
                os.unlink(dest)
            kwargs = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
            tar.extract(member, root, set_attrs=not member.issym(), **kwargs)

