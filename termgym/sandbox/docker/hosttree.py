"""Host directories bind-mounted into a container: the task's tree without ``docker cp``.

When the engine runs on this machine (and this process is root, so it can delete what the
container's root writes), a sandbox's workdir and ``/tmp`` are host directories bound read-write
into its container, under one private directory (``termgym-docker-*``, mode 0700, where local
sandbox roots live: a roomy tmpfs such as ``/dev/shm`` when there is one). Then

* the task's tree is copied in on the host (what the local backend does) instead of being
  archived through the engine, and the copy can run before the container is even taken from the
  pool;
* ``write_file``/``read_file`` under those paths are file operations on the host, not
  ``put_archive``/``get_archive`` round trips (the grader writes four files and reads two back).

What the agent writes there is its own; the host must never be led outside the directory by it.
Every host access below walks the path one component at a time with ``openat`` and
``O_NOFOLLOW`` from the mount's host directory, so a symlink the agent planted (at any component,
swapped in at any moment) is never followed on the host: such a path is handed back to the engine
(``None``), which resolves it inside the container as ``docker cp`` does. A file is opened only
after ``O_PATH`` showed it is a regular file, so a device node or FIFO the agent made is never
opened here. Inside the container the agent sees ordinary directories; hard links out of them
cannot be made (another mount), and nothing on the host follows its symlinks.

A path is bound only where the image has nothing (no such path, or an empty directory: checked in
the image's overlay2 layers), so an image's own ``/app`` or ``/tmp`` contents are never hidden.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path

from termgym.sandbox.hostfs import open_dir, read_regular

#: Name prefix of the private host directories (``termgym gc`` finds forgotten ones by it).
TREE_PREFIX = "termgym-docker-"
#: Sandbox paths that are never bound (the system, and what Docker itself mounts).
_NEVER = frozenset({"/", "/usr", "/etc", "/proc", "/dev", "/sys", "/bin", "/lib", "/lib64", "/sbin", "/var",
                    "/root", "/run", "/boot", "/opt", "/srv", "/home", "/mnt", "/media"})


def tree_parent_dir() -> str | None:
    """Where the private host directories go: where local sandbox roots go (see
    :func:`termgym.sandbox.local.sandbox_parent_dir`)."""
    from termgym.sandbox.local import sandbox_parent_dir

    return sandbox_parent_dir()


class HostTree:
    """The host side of a container's bound paths: one private directory, one subdirectory per path.

    ``mounts`` maps sandbox paths (absolute, normalised) to their host directories; :meth:`binds`
    is what container creation needs; :meth:`copy_in`, :meth:`write`, :meth:`read` act on the host
    and return ``False``/``None`` where the engine must do it instead.
    """

    def __init__(self, sandbox_paths: list[str], parent: str | None = None) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=TREE_PREFIX, dir=parent if parent is not None else tree_parent_dir()))
        self.mounts: dict[str, Path] = {}
        try:
            for i, dest in enumerate(sorted(sandbox_paths)):
                host = self.path / f"m{i}"
                host.mkdir()
                os.chmod(host, 0o1777 if dest == "/tmp" else 0o755)
                self.mounts[dest] = host
        except BaseException:
            self.remove()
            raise

    def binds(self) -> dict[str, dict[str, str]]:
        """Docker ``volumes`` entries: each host directory read-write at its sandbox path."""
        return {str(host): {"bind": dest, "mode": "rw"} for dest, host in self.mounts.items()}

    def locate(self, sandbox_path: str) -> tuple[Path, list[str]] | None:
        """The mount's host directory and the path's components below it; None if not under one."""
        parts = [p for p in sandbox_path.split("/") if p and p != "."]
        if ".." in parts:
            return None
        best: tuple[Path, list[str]] | None = None
        for dest, host in self.mounts.items():
            prefix = [p for p in dest.split("/") if p]
            if parts[: len(prefix)] == prefix and (best is None or len(parts) - len(prefix) < len(best[1])):
                best = (host, parts[len(prefix):])  # the innermost mount holding the path
        return best

    def copy_in(self, host_src: str | Path, sandbox_dir: str) -> bool:
        """Copy a host directory's contents to a bound sandbox directory that is absent or empty; False
        where the engine must do it (not under a bound path, not empty, a symlink on the way).

        Meant for ``start()``, before anything of the agent's runs; the parents are walked without
        following symlinks all the same (an earlier copy may have brought some).
        """
        found = self.locate(sandbox_dir)
        if found is None:
            return False
        host, parts = found
        if parts:
            parent = open_dir(host, parts[:-1], create=True)
            if parent is None:
                return False
            try:
                try:
                    st = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
                except FileNotFoundError:
                    os.mkdir(parts[-1], 0o755, dir_fd=parent)
                else:
                    if not stat.S_ISDIR(st.st_mode):
                        return False
            finally:
                os.close(parent)
        target = host.joinpath(*parts)
        if target.is_symlink() or not target.is_dir() or any(os.scandir(target)):
            return False
        shutil.copytree(host_src, target, symlinks=True, dirs_exist_ok=True)
        return True

    def write(self, sandbox_path: str, data: bytes, mode: int) -> bool:
        """Create or replace a file under a bound path; False where the engine must do it.

        Replaces what is there (a symlink, a FIFO, a device node: unlinked, never opened), as the
        engine's archive extraction does; creates missing parent directories (0755).
        """
        found = self.locate(sandbox_path)
        if found is None or not found[1]:
            return False
        host, parts = found
        parent = open_dir(host, parts[:-1], create=True)
        if parent is None:
            return False
        name = parts[-1]
        try:
            for _ in range(3):
                with contextlib.suppress(FileNotFoundError):
                    st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        raise IsADirectoryError(errno.EISDIR, "is a directory in the sandbox", sandbox_path)
                    os.unlink(name, dir_fd=parent)
                try:
                    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                                 dir_fd=parent)
                except FileExistsError:
                    continue  # something was made there meanwhile: look again
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    os.fchmod(fh.fileno(), mode)
                return True
            return False
        finally:
            os.close(parent)

    def read(self, sandbox_path: str) -> bytes | None:
        """A regular file's bytes under a bound path; None where the engine must read it (a symlink,
        a special file). Raises ``FileNotFoundError``/``IsADirectoryError`` like ``read_file``."""
        found = self.locate(sandbox_path)
        if found is None or not found[1]:
            return None
        host, parts = found
        try:
            parent = open_dir(host, parts[:-1], create=False)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "no such file in the sandbox", sandbox_path) from None
        if parent is None:
            return None
        try:
            # a symlink (resolved in the container) or a special file (never opened here): None
            return read_regular(parent, parts[-1])
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "no such file in the sandbox", sandbox_path) from None
        except IsADirectoryError:
            raise IsADirectoryError(errno.EISDIR, "is a directory in the sandbox", sandbox_path) from None
        finally:
            os.close(parent)

    def remove(self) -> None:
        """Delete the private directory and everything in it (never following a symlink)."""
        shutil.rmtree(self.path, ignore_errors=True)


# -- which paths of an image may be bound -----------------------------------------------------

_empty_cache: dict[tuple[str, str], bool] = {}
_local_engines: dict[int, bool] = {}
_cache_lock = threading.Lock()


def engine_is_local(client) -> bool:
    """Whether the engine runs on this machine and shares its file system: a unix socket here, and
    this process may delete what a container's root writes (it is root itself)."""
    key = id(client)
    with _cache_lock:
        if key in _local_engines:
            return _local_engines[key]
    base_url = str(getattr(client.api, "base_url", ""))
    local = os.geteuid() == 0 and base_url.startswith("http+docker://") and "localhost" in base_url
    if local:
        try:
            local = client.info().get("Driver") == "overlay2"
        except Exception:  # noqa: BLE001 - no answer: do not bind
            local = False
    with _cache_lock:
        _local_engines[key] = local
    return local


def bindable_paths(client, image: str, candidates: list[str]) -> list[str]:
    """The sandbox paths among ``candidates`` that image ``image`` leaves empty (absent, or an empty
    directory in every layer), so a bound host directory hides nothing of the image's.

    Paths inside another candidate are dropped (the outer mount covers them); system paths are never
    bound. Cached per image id and path.
    """
    info = _inspect_image(client, image)
    if info is None:
        return []
    driver = info.get("GraphDriver") or {}
    if driver.get("Name") != "overlay2":
        return []
    data = driver.get("Data") or {}
    layers = [p for p in [data.get("UpperDir", ""), *str(data.get("LowerDir", "")).split(":")] if p]
    chosen: list[str] = []
    for path in sorted({os.path.normpath(c) for c in candidates}, key=len):
        if path in _NEVER or not path.startswith("/") or any(path.startswith(c.rstrip("/") + "/") for c in chosen):
            continue
        key = (info["Id"], path)
        with _cache_lock:
            empty = _empty_cache.get(key)
        if empty is None:
            empty = all(_empty_in_layer(Path(layer), path) for layer in layers) if layers else False
            with _cache_lock:
                _empty_cache[key] = empty
        if empty:
            chosen.append(path)
    return chosen


#: Seconds an image's inspection is reused (a tag rebuilt meanwhile is seen after this long).
IMAGE_TTL = 10.0
_images: dict[tuple[int, str], tuple[float, dict]] = {}


def _inspect_image(client, image: str) -> dict | None:
    now = time.monotonic()
    with _cache_lock:
        cached = _images.get((id(client), image))
    if cached is not None and now - cached[0] < IMAGE_TTL:
        return cached[1]
    try:
        info = client.api.inspect_image(image)
    except Exception:  # noqa: BLE001 - the engine reports a missing image when the container is created
        return None
    with _cache_lock:
        _images[(id(client), image)] = (now, info)
    return info


def _empty_in_layer(layer: Path, sandbox_path: str) -> bool:
    """True when ``sandbox_path`` is absent or an empty directory in one image layer (and no parent
    component of it is a file or a symlink there)."""
    if not layer.is_dir():
        return False  # layers we cannot read: assume the worst
    current = layer
    for part in [p for p in sandbox_path.split("/") if p]:
        current = current / part
        if not os.path.lexists(current):
            return True
        if current.is_symlink() or not current.is_dir():
            return False
    try:
        return not any(os.scandir(current))
    except OSError:
        return False
