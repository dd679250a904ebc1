"""The Docker backend: one container per sandbox, driven through the Docker SDK for Python.

Container. Made from ``spec.image`` (default ``termgym/base:bookworm``, see
:mod:`termgym.sandbox.images`) with ``--network none`` unless ``spec.network``, memory (no swap),
pids, CPU share and rlimits from ``spec.limits``, ``--init`` so orphans are reaped,
``no-new-privileges``, and labels that mark it as termgym's (``termgym=1``, the session id, the
creating host and pid) so ``termgym gc`` can find what a crashed run left behind. Its main process
only sleeps; ``close()`` removes the container with everything in it. ``DOCKER_HOST`` (or
``docker_host=``) selects the engine, so sandboxes may live on another machine.

Execution. One ``docker exec`` runs a bash loop whose stdin and output are a socket we hold: a
command goes in NUL-terminated and is ``eval``-ed with stdin from ``/dev/null``; the loop then
prints a line carrying a random per-shell token and the exit code, which ends the command's output.
That is one socket round trip per command instead of a ``docker exec`` per command. In persistent
mode the ``eval`` runs in the loop's own shell (``cd`` and variables survive); in stateless mode in
a fresh subshell started in the workdir.

Killing. A second long-lived exec, the supervisor, is a bash loop that kills on request every
process in the container except the init, the main process, itself and the shell, using builtins
only, so it works even when a fork bomb has used up the pids limit. A timeout (or output past
``limits.output_bytes``) asks it to kill; a shell stuck in a builtin loop is killed too and a new
shell started (the result says ``restarted``), as after ``on_timeout="kill_shell"`` or ``abort()``,
which ask it to kill the shell first.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import io
import os
import secrets
import shlex
import socket
import tarfile
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from termgym.sandbox.base import (
    BackendUnavailable,
    ExecResult,
    Limits,
    Mode,
    OnTimeout,
    Sandbox,
    SandboxError,
    SandboxSpec,
    check_on_timeout,
    read_only_binds,
)
from termgym.sandbox.images import DEFAULT_BASE_IMAGE, docker_client
from termgym.sandbox.output import OutputBuffer

if TYPE_CHECKING:
    from termgym.sandbox.pool import WarmPool

# Labels on every container termgym makes (``termgym gc`` keys on them).
LABEL = "termgym"
LABEL_SESSION = "termgym.session"
LABEL_HOST = "termgym.host"
LABEL_PID = "termgym.pid"
LABEL_PID_START = "termgym.pid_start"
LABEL_POOL = "termgym.pool"

#: One id per Python process, so a run's containers can be told apart from another run's.
SESSION_ID = uuid.uuid4().hex[:12]

# Environment for commands: no pagers, no progress bars (the agent sees plain text). PATH comes
# from the image, which may have its own (a virtualenv, a toolchain).
COMMAND_ENV = {
    "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat",
    "MANPAGER": "cat", "PIP_PROGRESS_BAR": "off", "TQDM_DISABLE": "1", "PYTHONDONTWRITEBYTECODE": "1",
}

# The shell loop (argv: mode, workdir, pids threshold; first stdin line: the token). The token never appears in
# argv or the environment, so a command cannot read it from /proc and forge the end of its output.
_SHELL = r"""
exec 2>&1
IFS= read -r __tg_tok || exit 1
__tg_mode=$1 __tg_wd=$2 __tg_max=$3
[ -d "$__tg_wd" ] || mkdir -p -- "$__tg_wd"
cd -- "$__tg_wd" || exit 1
trap 'printf "\n__TG_%s_EXIT %d\n" "$__tg_tok" "$?"' EXIT
printf '__TG_%s_READY %d\n' "$__tg_tok" "$$"
while IFS= read -r -d '' __tg_cmd; do
  if [ -n "$__tg_max" ]; then
    # A background fork bomb from an earlier command would make this one hang in fork retries:
    # report it instead, so the host clears the sandbox and sends the command again.
    __tg_n=0
    { read -r __tg_n </sys/fs/cgroup/pids/pids.current || read -r __tg_n </sys/fs/cgroup/pids.current; } 2>/dev/null
    if [ "$__tg_n" -ge "$__tg_max" ] 2>/dev/null; then
      printf '\n__TG_%s_FULL 0 %s\n' "$__tg_tok" "$__tg_n"
      continue
    fi
  fi
  # bash reports jobs killed since the last command at the next one it runs: swallow those notices
  # here (the supervisor returns only once every killed process is a zombie, so none comes later).
  jobs >/dev/null 2>&1
  if [ "$__tg_mode" = stateless ]; then
    ( cd -- "$__tg_wd" && eval "$__tg_cmd" ) </dev/null
  else
    eval "$__tg_cmd" </dev/null
  fi
  __tg_rc=$?
  __tg_n=-
  { read -r __tg_n </sys/fs/cgroup/pids/pids.current || read -r __tg_n </sys/fs/cgroup/pids.current; } 2>/dev/null
  printf '\n__TG_%s_RC %d %s\n' "$__tg_tok" "$__tg_rc" "$__tg_n"
done
"""

# The supervisor. At start it spares pid 1, its children (the container's main process) and
# itself; each request line "K <pid>..." kills every other process not listed, in passes until
# none is left (a fork bomb refills between passes); "A <shell>" kills that shell first (so it
# runs nothing more of its command line), then every other process. Builtins only: it must not
# need a new pid.
_SUPERVISOR = r"""
exec 2>/dev/null
__keep=" 1 $$ "
for __d in /proc/[0-9]*; do
  read -r __s <"$__d/stat" || continue
  __r=${__s##*) }; set -- $__r
  [ "$2" = 1 ] && __keep="$__keep${__d#/proc/} "
done
printf 'READY %d\n' "$$"
while read -r __op __args; do
  if [ "$__op" = A ]; then kill -9 $__args; __args=; fi
  __spare="$__keep $__args "
  __n=1 __passes=0
  while [ "$__n" -gt 0 ] && [ "$__passes" -lt 200 ]; do
    __n=0 __passes=$((__passes + 1))
    for __d in /proc/[0-9]*; do
      __p=${__d#/proc/}
      case "$__spare" in *" $__p "*) continue ;; esac
      read -r __s <"$__d/stat" || continue
      __r=${__s##*) }; set -- $__r
      [ "$1" = Z ] && continue
      kill -9 "$__p" && __n=$((__n + 1))
    done
  done
  printf 'DONE %d\n' "$__passes"
done
"""

_STARTER = ThreadPoolExecutor(max_workers=64, thread_name_prefix="termgym-docker-start")
_clients: dict[str | None, object] = {}
_clients_lock = threading.Lock()


def get_client(docker_host: str | None = None):
    """A shared Docker SDK client per engine address (``None``: ``DOCKER_HOST`` or the local socket)."""
    key = docker_host or os.environ.get("DOCKER_HOST")
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = docker_client(docker_host)
        return client


def _process_start_ticks(pid: int) -> str:
    """The start time of ``pid`` in clock ticks since boot ("" if unknown): tells pid reuse apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def container_labels(*, pool: bool = False) -> dict[str, str]:
    """Labels for a container this process creates."""
    labels = {
        LABEL: "1",
        LABEL_SESSION: SESSION_ID,
        LABEL_HOST: socket.gethostname(),
        LABEL_PID: str(os.getpid()),
        LABEL_PID_START: _process_start_ticks(os.getpid()),
    }
    if pool:
        labels[LABEL_POOL] = "1"
    return labels


def pool_key(spec: SandboxSpec) -> tuple:
    """What makes two specs' containers interchangeable before start: image, limits, network."""
    binds = tuple(read_only_binds(spec))  # mounts are fixed when a container is created
    return (spec.image or DEFAULT_BASE_IMAGE, spec.limits, bool(spec.network), binds)


def create_container(client, spec: SandboxSpec, *, pool: bool = False) -> str:
    """Create and start a container for ``spec`` (without files or setup); return its id.

    Pool containers get no workdir (the shell creates it at ``start()``), so one pool serves
    specs that differ only in workdir, files, env and setup.
    """
    import docker.errors
    import docker.types

    image = spec.image or DEFAULT_BASE_IMAGE
    lim: Limits = spec.limits
    ulimits = []
    if lim.cpu_seconds:
        ulimits.append(docker.types.Ulimit(name="cpu", soft=int(lim.cpu_seconds), hard=int(lim.cpu_seconds)))
    if lim.file_size_mb:
        size = int(lim.file_size_mb) * 1024 * 1024
        ulimits.append(docker.types.Ulimit(name="fsize", soft=size, hard=size))
    if lim.open_files:
        ulimits.append(docker.types.Ulimit(name="nofile", soft=int(lim.open_files), hard=int(lim.open_files)))
    kwargs: dict = dict(
        command=["sleep", "infinity"],
        init=True,
        name=f"termgym-{SESSION_ID}-{secrets.token_hex(4)}",
        hostname="sandbox",
        labels=container_labels(pool=pool),
        network_mode="bridge" if spec.network else "none",
        security_opt=["no-new-privileges"],
        ulimits=ulimits,
        stdin_open=False,
        environment=dict(COMMAND_ENV) if pool else {**COMMAND_ENV, **spec.env},
    )
    if not pool:
        kwargs["working_dir"] = spec.workdir
    binds = read_only_binds(spec)
    if binds:
        kwargs["volumes"] = {host_dir: {"bind": dest, "mode": "ro"} for host_dir, dest in binds}
    if lim.memory_mb:
        kwargs["mem_limit"] = f"{int(lim.memory_mb)}m"
        kwargs["memswap_limit"] = f"{int(lim.memory_mb)}m"  # no swap: a hog is OOM-killed, not slowed
    if lim.pids:
        kwargs["pids_limit"] = int(lim.pids)
    if lim.cpus:
        kwargs["nano_cpus"] = int(lim.cpus * 1e9)
    if lim.storage_mb:
        kwargs["storage_opt"] = {"size": f"{int(lim.storage_mb)}M"}
    try:
        # create + start rather than run: run() would try to pull a missing image from a registry.
        try:
            container = client.containers.create(image, **kwargs)
        except docker.errors.APIError as exc:
            # storage_opt needs overlay2 on xfs with pquota; the limit is documented as best effort.
            if "storage_opt" not in kwargs or "storage" not in str(exc).lower() or isinstance(
                exc, docker.errors.ImageNotFound
            ):
                raise
            kwargs.pop("storage_opt")
            container = client.containers.create(image, **kwargs)
        try:
            container.start()
        except BaseException:
            remove_container(client, container.id)
            raise
    except docker.errors.ImageNotFound as exc:
        raise BackendUnavailable(
            f"image {image!r} is not on the Docker host. Build termgym's base image with "
            f"`termgym images build-base`, build the task's Dockerfile (termgym.sandbox.images.build_image), "
            f"or `docker load` the image. ({exc.explanation})"
        ) from exc
    except docker.errors.APIError as exc:
        raise SandboxError(f"docker could not start a container from {image!r}: {exc.explanation or exc}") from exc
    return container.id


_image_runtimes: dict[str, str] = {}


def image_runtime(client, image: str) -> str:
    """What records call the system of containers made from ``image`` (cached per image name).

    termgym's base image carries the runtime version it was imported from; a task's own image is
    named as ``image:<name>@<short id>``.
    """
    cached = _image_runtimes.get(image)
    if cached is None:
        from termgym.sandbox.images import LABEL_KIND, LABEL_RECIPE

        try:
            found = client.images.get(image)
        except Exception:
            return f"image:{image}"
        labels = found.labels or {}
        if labels.get(LABEL_KIND) == "base" and labels.get(LABEL_RECIPE):
            cached = labels[LABEL_RECIPE]
        else:
            cached = f"image:{image}@{found.short_id.split(':')[-1]}"
        _image_runtimes[image] = cached
    return cached


def remove_container(client, container_id: str) -> None:
    """Remove a container and everything running in it; a missing container is fine."""
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound):
        try:
            client.api.remove_container(container_id, force=True, v=True)
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                raise


class _Channel:
    """A ``docker exec`` whose stdin we write and whose (demultiplexed) output we read."""

    def __init__(self, api, container_id: str, argv: list[str], environment: Mapping[str, str] | None = None):
        self.exec_id = api.exec_create(container_id, argv, stdin=True, stdout=True, stderr=True,
                                       environment=dict(environment or {}))["Id"]
        self._response = api.exec_start(self.exec_id, socket=True)
        self._sock = getattr(self._response, "_sock", self._response)
        self._raw = bytearray()
        self.eof = False

    def send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            self.eof = True
            raise EOFError(str(exc)) from exc

    def recv(self, timeout: float) -> bytes | None:
        """Output bytes (stdout and stderr alike), ``None`` on timeout, ``b""`` at end of stream."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            payload = self._take_frames()
            if payload:
                return payload
            if self.eof:
                return b""
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self._sock.settimeout(remaining)
            try:
                chunk = self._sock.recv(1 << 16)
            except TimeoutError:
                return None
            except OSError:
                chunk = b""
            if not chunk:
                self.eof = True
            self._raw += chunk

    def _take_frames(self) -> bytes:
        # Docker's multiplexed stream: 8-byte header (stream id, 3 zero bytes, big-endian size).
        out = bytearray()
        while len(self._raw) >= 8:
            size = int.from_bytes(self._raw[4:8], "big")
            if len(self._raw) < 8 + size:
                break
            out += self._raw[8 : 8 + size]
            del self._raw[: 8 + size]
        return bytes(out)

    def read_line(self, prefix: bytes, timeout: float) -> tuple[bytes, bytes]:
        """Read until a line starting with ``prefix``; return (text before it, rest of that line)."""
        deadline = time.monotonic() + timeout
        buf = bytearray()
        while True:
            start = buf.find(prefix)
            if start >= 0 and (start == 0 or buf[start - 1 : start] == b"\n"):
                end = buf.find(b"\n", start)
                if end >= 0:
                    return bytes(buf[:start]), bytes(buf[start + len(prefix) : end])
            chunk = self.recv(deadline - time.monotonic())
            if chunk is None:
                raise TimeoutError(f"no {prefix!r} line within {timeout:g}s; got {bytes(buf[-500:])!r}")
            if chunk == b"":
                raise EOFError(f"stream ended before {prefix!r}; got {bytes(buf[-500:])!r}")
            buf += chunk

    def close(self) -> None:
        for closer in (getattr(self._sock, "close", None), getattr(self._response, "close", None)):
            with contextlib.suppress(Exception):
                if closer:
                    closer()
        self.eof = True


@dataclass
class _Shell:
    channel: _Channel
    token: bytes
    pid: int


# Every sandbox still open at interpreter exit is closed then (a crash that skips atexit is what
# `termgym gc` is for).
_live: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_live_sandboxes() -> None:
    for sandbox in list(_live):
        with contextlib.suppress(Exception):
            sandbox.close()


class DockerSandbox(Sandbox):
    """A sandbox in a Docker container (see the module docstring).

    ``docker_host`` overrides ``DOCKER_HOST``. ``pool`` takes a started container from a
    :class:`~termgym.sandbox.pool.WarmPool` instead of waiting for ``docker run``; ``pool_size=N``
    uses the process-wide pool of that size for this engine (what ``sandbox_options={"pool_size":
    N}`` of an env does).
    """

    backend = "docker"

    def __init__(self, spec: SandboxSpec | None = None, *, mode: Mode = "persistent",
                 docker_host: str | None = None, pool: WarmPool | None = None,
                 pool_size: int | None = None) -> None:
        super().__init__(spec, mode=mode)
        if pool is not None and pool_size is not None:
            raise ValueError("pass either pool= or pool_size=, not both")
        if pool_size is not None and (not isinstance(pool_size, int) or pool_size < 0):
            raise ValueError(f"pool_size must be a non-negative int, got {pool_size!r}")
        self.docker_host = docker_host
        self._pool = pool
        self._pool_size = pool_size
        self._lock = threading.RLock()
        self._started = False
        self._client = None
        self.container_id: str | None = None
        self.from_pool = False
        self._shell: _Shell | None = None
        self._supervisor: _Channel | None = None
        self._supervisor_pid: int | None = None
        self._forwarder = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            if self.closed:
                raise SandboxError("this sandbox is closed")
            self._client = get_client(self.docker_host)
            _live.add(self)
            try:
                pool = self._pool
                if pool is None and self._pool_size:
                    from termgym.sandbox.pool import shared_pool

                    pool = shared_pool(self._pool_size, docker_host=self.docker_host)
                if pool is not None:
                    self.container_id = pool.acquire(self.spec)
                    self.from_pool = self.container_id is not None
                if self.container_id is None:
                    self.container_id = create_container(self._client, self.spec)
                # The two execs are independent: start them side by side (each is an API round trip).
                supervisor = _STARTER.submit(self._start_supervisor)
                try:
                    self._start_shell()
                finally:
                    supervisor.result()
                if self.spec.services:
                    self._start_services()
                self._copy_spec_files()
                self._hide_installed_copies()
                self._started = True
                self.run_setup_commands()
            except BaseException:
                self.close()
                raise

    def _hide_installed_copies(self) -> None:
        """Delete termgym and installed copies of the workspace's project from the image's Python dirs.

        The container's file system is its own, so they are removed before the agent's first
        command (the local backend mounts over them instead); see :mod:`termgym.sandbox.runtime`.
        """
        from termgym.sandbox.runtime import hidden_distributions, mask_shell_command, runtime_has_none_of

        hidden = hidden_distributions(self.spec)
        if runtime_has_none_of(self.runtime, hidden):
            return  # the image is a runtime known here to hold none of them: no command needed
        result = self._run(mask_shell_command(hidden), 60)
        if result.exit_code != 0:
            raise SandboxError(f"could not hide installed package copies in the container: {result.output[-500:]}")

    @property
    def runtime(self) -> str | None:
        """The task runtime version the image was imported from, else ``image:<name>``."""
        image = self.spec.image or DEFAULT_BASE_IMAGE
        if self._client is None:
            return None
        return image_runtime(self._client, image)

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._forwarder is not None:
                with contextlib.suppress(Exception):
                    self._forwarder.close()
            for channel in (self._shell.channel if self._shell else None, self._supervisor):
                if channel is not None:
                    channel.close()
            self._shell = self._supervisor = None
            if self.container_id is not None and self._client is not None:
                remove_container(self._client, self.container_id)
            _live.discard(self)

    # -- commands -------------------------------------------------------------------------------

    def exec(self, command: str, timeout: float | None = None, *,
             on_timeout: OnTimeout = "kill_command") -> ExecResult:
        check_on_timeout(on_timeout)
        if "\x00" in command:
            return ExecResult(output="command contains a NUL byte, which a shell cannot run", exit_code=2)
        with self._lock:
            if self.closed:
                raise SandboxError("this sandbox is closed")
            if not self._started:
                self.start()
            timeout = self.spec.limits.command_timeout if timeout is None else timeout
            return self._run(command, timeout, kill_shell=on_timeout == "kill_shell")

    def abort(self) -> None:
        with self._lock:
            if self._started and not self.closed:
                self._kill_commands(include_shell=True)
                self._restart_shell()

    def _run(self, command: str, timeout: float, *, kill_shell: bool = False) -> ExecResult:
        started = time.monotonic()
        notes: list[str] = []
        restarted = False
        if self._shell is None or self._shell.channel.eof:
            self._restart_shell()
            restarted = True
            notes.append("the previous shell had exited; a new one was started (working directory and "
                         "variables were reset)")
        shell = self._shell
        assert shell is not None
        rc_mark, exit_mark, full_mark = (b"\n__TG_" + shell.token + kind for kind in (b"_RC ", b"_EXIT ", b"_FULL "))
        keep = len(exit_mark) + 1
        resent = False
        out = OutputBuffer(self.spec.limits.output_bytes)
        pending = bytearray()
        deadline = started + timeout
        timed_out = flooded = stuck = shell_exited = aborted = False
        exit_code: int | None = None
        pids_now: int | None = None
        payload = command.encode("utf-8", errors="surrogateescape") + b"\x00"
        try:
            shell.channel.send(payload)
        except EOFError:  # the shell died between commands (killed from outside): start another
            self._restart_shell()
            restarted = True
            shell = self._shell
            assert shell is not None
            rc_mark, exit_mark, full_mark = (b"\n__TG_" + shell.token + k for k in (b"_RC ", b"_EXIT ", b"_FULL "))
            shell.channel.send(payload)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if timed_out:
                    stuck = True  # killed everything but the shell, still no exit code: a builtin loop
                    break
                timed_out = True
                if kill_shell:
                    aborted = True
                    self._kill_commands(include_shell=True)
                    out.feed(bytes(pending))
                    break
                self._kill_commands()
                deadline = time.monotonic() + 2.0  # grace for the shell to report
                continue
            chunk = shell.channel.recv(min(remaining, 1.0))
            if chunk is None:
                continue
            if chunk == b"":
                shell_exited = True  # no marker at all: the shell was killed (e.g. by the OOM killer)
                break
            pending += chunk
            found = _find_marker(pending, rc_mark, exit_mark, full_mark)
            if found is not None:
                start, line = found
                if line is None:
                    continue  # the marker's line is not complete yet
                out.feed(bytes(pending[:start]))
                fields = line.split()
                if fields[0] == b"FULL" and resent:
                    notes.append("the sandbox is still at its process limit; the command did not run")
                    exit_code = 1
                    break
                if fields[0] == b"FULL":
                    self._kill_commands()
                    notes.insert(0, f"the sandbox had reached its process limit ({self.spec.limits.pids}) "
                                 "before this command; every background process was killed")
                    resent = True
                    del pending[:]
                    shell.channel.send(payload)
                    continue
                exit_code = int(fields[1]) if len(fields) > 1 and fields[1].lstrip(b"-").isdigit() else 1
                if fields[0] == b"EXIT":
                    shell_exited = True
                elif len(fields) > 2 and fields[2].isdigit():
                    pids_now = int(fields[2])
                break
            if len(pending) > keep:
                out.feed(bytes(pending[:-keep]))
                del pending[:-keep]
            if out.overflowed and not flooded:
                flooded = True
                self._kill_commands()
        duration = time.monotonic() - started
        text = out.text()
        if flooded:
            notes.append(f"output exceeded {self.spec.limits.output_bytes} bytes; the command was stopped")
        if aborted:
            self._restart_shell()
            restarted = True
            notes.append(f"command timed out after {timeout:g} s; it and its shell were killed, so the rest of "
                         "the command line did not run; a new shell was started")
        elif stuck or shell_exited:
            if stuck:
                self._kill_commands(include_shell=True)
            self._restart_shell()
            restarted = True
            what = "the shell did not respond" if stuck else "the shell exited"
            notes.append(f"{what}; the sandbox shell was restarted: working directory and variables were reset")
        elif pids_now is not None and self.spec.limits.pids and pids_now >= int(self.spec.limits.pids) - 2:
            # A fork bomb (or a runaway spawner) left the sandbox unable to start anything.
            self._kill_commands()
            notes.append(f"the sandbox reached its process limit ({self.spec.limits.pids}); "
                         "every background process was killed")
        if timed_out:
            if not aborted:
                notes.append(f"command timed out after {timeout:g} s and was killed")
            exit_code = 124
        if exit_code is None:
            exit_code = 137 if shell_exited else 1
        for note in notes:
            text += f"\n[{note}]"
        return ExecResult(output=text, exit_code=exit_code, timed_out=timed_out, duration=duration,
                          truncated=flooded, restarted=restarted)

    # -- files ----------------------------------------------------------------------------------

    def write_file(self, path: str, data: str | bytes, mode: int = 0o644) -> None:
        self._put_files({self.resolve(path): (data, mode)})

    def write_files(self, files: Mapping[str, str | bytes]) -> None:
        # One archive for all of them: one API call instead of one per file.
        self._put_files({self.resolve(p): (d, 0o644) for p, d in files.items()})

    def read_file(self, path: str) -> bytes:
        target = self.resolve(path)
        for _ in range(16):  # follow symlinks inside the container (get_archive returns the link)
            member, data = self._get_single(target)
            if member.issym():
                link = PurePosixPath(member.linkname)
                target = str(link if link.is_absolute() else PurePosixPath(target).parent / link)
                continue
            if member.isdir():
                raise IsADirectoryError(errno.EISDIR, "is a directory in the sandbox", target)
            return data
        raise OSError(errno.ELOOP, "too many symlinks in the sandbox", target)

    def put_dir(self, host_dir: str | Path, sandbox_dir: str) -> None:
        host_dir = Path(host_dir)
        if not host_dir.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a directory on the host", str(host_dir))
        self._put_archive(_tar_dir(host_dir, self.resolve(sandbox_dir)))

    def get_dir(self, sandbox_dir: str, host_dir: str | Path) -> None:
        import docker.errors

        target = self.resolve(sandbox_dir)
        self._ensure_running()
        try:
            stream, stat = self._client.api.get_archive(self.container_id, target)
        except docker.errors.NotFound as exc:
            raise FileNotFoundError(errno.ENOENT, "no such directory in the sandbox", target) from exc
        if not stat.get("mode", 0) & (1 << 31):  # Go's os.ModeDir
            raise NotADirectoryError(errno.ENOTDIR, "not a directory in the sandbox", target)
        _extract_dir(b"".join(stream), Path(host_dir))

    # -- internals ------------------------------------------------------------------------------

    def _ensure_running(self) -> None:
        if self.closed:
            raise SandboxError("this sandbox is closed")
        if not self._started and self.container_id is None:
            self.start()

    def _put_files(self, files: Mapping[str, tuple[str | bytes, int]]) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for target, (data, mode) in files.items():
                payload = data.encode() if isinstance(data, str) else bytes(data)
                info = tarfile.TarInfo(target.lstrip("/"))
                info.size, info.mode, info.mtime = len(payload), mode, int(time.time())
                tar.addfile(info, io.BytesIO(payload))
        self._put_archive(buf.getvalue())

    def _put_archive(self, archive: bytes) -> None:
        import docker.errors

        self._ensure_running()
        try:
            ok = self._client.api.put_archive(self.container_id, "/", archive)
        except docker.errors.APIError as exc:
            raise OSError(f"cannot copy into the sandbox: {exc.explanation or exc}") from exc
        if not ok:
            raise OSError("cannot copy into the sandbox: docker refused the archive")

    def _get_single(self, target: str) -> tuple[tarfile.TarInfo, bytes]:
        import docker.errors

        self._ensure_running()
        try:
            stream, _ = self._client.api.get_archive(self.container_id, target)
        except docker.errors.NotFound as exc:
            raise FileNotFoundError(errno.ENOENT, "no such file in the sandbox", target) from exc
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            if member is None:
                raise FileNotFoundError(errno.ENOENT, "no such file in the sandbox", target)
            if member.isfile():
                extracted = tar.extractfile(member)
                return member, extracted.read() if extracted else b""
            return member, b""

    def _copy_spec_files(self) -> None:
        for host_src, dest in self.spec.copy_dirs.items():
            self.put_dir(host_src, dest)
        if self.spec.files:
            self.write_files(self.spec.files)

    def _environment(self) -> dict[str, str]:
        return {**COMMAND_ENV, **self.spec.env}

    def _start_supervisor(self) -> None:
        channel = _Channel(self._client.api, self.container_id,
                           ["bash", "--noprofile", "--norc", "-c", _SUPERVISOR, "termgym-supervisor"])
        try:
            _, pid = channel.read_line(b"READY ", timeout=30)
        except (TimeoutError, EOFError) as exc:
            channel.close()
            raise SandboxError(f"the sandbox supervisor did not start (does the image have bash?): {exc}") from exc
        self._supervisor, self._supervisor_pid = channel, int(pid)

    def _start_shell(self) -> None:
        token = secrets.token_hex(16).encode()
        channel = _Channel(self._client.api, self.container_id,
                           ["bash", "--noprofile", "--norc", "-c", _SHELL, "bash", self.mode, self.workdir,
                            self._pids_threshold()],
                           self._environment())
        try:
            channel.send(token + b"\n")
            before, pid = channel.read_line(b"__TG_" + token + b"_READY ", timeout=30)
        except (TimeoutError, EOFError) as exc:
            channel.close()
            raise SandboxError(f"the sandbox shell did not start in {self.workdir}: {exc}") from exc
        self._shell = _Shell(channel, token, int(pid))

    def _pids_threshold(self) -> str:
        """Process count at which the sandbox counts as full (a few below the pids limit)."""
        pids = self.spec.limits.pids
        return str(max(int(pids) - 3, 1)) if pids else ""

    def _restart_shell(self) -> None:
        if self._shell is not None:
            self._shell.channel.close()
            self._shell = None
        self._start_shell()

    def _kill_commands(self, include_shell: bool = False) -> None:
        """Kill every process but the init, the main process, the supervisor (and the shell)."""
        shell = [] if self._shell is None else [str(self._shell.pid)]
        request = f"A {' '.join(shell)}" if include_shell else f"K {' '.join(shell)}"
        for attempt in range(2):
            supervisor = self._supervisor
            try:
                if supervisor is None or supervisor.eof:
                    raise EOFError("supervisor gone")
                supervisor.send(f"{request}\n".encode())
                supervisor.read_line(b"DONE ", timeout=30)
                return
            except (EOFError, TimeoutError):
                if supervisor is not None:
                    supervisor.close()
                self._supervisor = None
                if attempt == 0:
                    with contextlib.suppress(Exception):
                        self._start_supervisor()
        # Without a supervisor nothing can kill selectively: restart the container's processes
        # (the filesystem stays) and begin again with a fresh shell.
        self._client.api.restart(self.container_id, timeout=0)
        self._start_supervisor()
        if self._shell is not None:
            self._shell.channel.close()
            self._shell = None
        if self._forwarder is not None:
            self._forwarder.close()
            self._forwarder = None
            self._start_services()

    def _start_services(self) -> None:
        from termgym.sandbox.forwarding import PortForwarder, plan_addresses

        pid = container_host_pid(self._client, self.container_id)
        if pid is None:
            raise SandboxError(
                "spec.services (host TCP services reachable from a sandbox without network, as LIVEWEB "
                "uses) need a Docker engine on this machine: the forwarder opens the ports inside the "
                "container's network namespace. With a remote DOCKER_HOST use the local backend "
                "(backend='local') for LIVEWEB, or set spec.network=True and reach the service by address."
            )
        self._forwarder = PortForwarder()
        self._forwarder.start(pid, self.spec.services)
        lines = "".join(f"{ip}\t{name}\n" for name, ip in plan_addresses(self.spec.services).items())
        result = self._run(f"printf %s {shlex.quote(lines)} >> /etc/hosts", 30)
        if result.exit_code != 0:
            raise SandboxError(f"cannot add the service host names to /etc/hosts: {result.output}")


def container_host_pid(client, container_id: str) -> int | None:
    """The pid of the container's init on this machine, or None when the engine runs elsewhere.

    The engine reports a pid in its own pid namespace; it is ours only if that process's cgroup
    names the container (true for a local engine whatever DOCKER_HOST spells it as).
    """
    info = client.api.inspect_container(container_id)
    pid = int(info.get("State", {}).get("Pid") or 0)
    if not pid:
        return None
    try:
        cgroups = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    return pid if info["Id"] in cgroups else None


def _find_marker(buf: bytearray, *marks: bytes) -> tuple[int, bytes | None] | None:
    """The first marker in ``buf``: (its offset, its line without the prefix, or None if incomplete).

    The returned line keeps the marker's kind word, e.g. ``b"RC 0 5"``.
    """
    best = None
    for mark in marks:
        i = buf.find(mark)
        if i >= 0 and (best is None or i < best[0]):
            best = (i, mark)
    if best is None:
        return None
    i, mark = best
    kind_start = i + len(mark) - len(mark.rsplit(b"_", 1)[1])
    end = buf.find(b"\n", i + len(mark))
    if end < 0:
        return i, None
    return i, bytes(buf[kind_start:end])


def _tar_dir(host_dir: Path, target: str) -> bytes:
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


def _extract_dir(archive: bytes, host_dir: Path) -> None:
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


# -- garbage collection -----------------------------------------------------------------------------


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
    return not recorded or _process_start_ticks(pid) == recorded


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


def live_sandboxes() -> Iterable[DockerSandbox]:
    """Docker sandboxes of this process that are not closed yet (for diagnostics and tests)."""
    return [s for s in list(_live) if not s.closed]
