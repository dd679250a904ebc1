"""The sandbox contract every backend implements.

A sandbox is an isolated place where an agent's shell commands run: a writable workspace
(``SandboxSpec.workdir``), a read-only system, a private ``/tmp``, no network unless asked for,
and resource limits. Backends: ``local`` (bubblewrap, the embedded default) and ``docker``.

Two execution modes:

* ``persistent`` — one long-lived shell; ``cd`` and variables survive between commands.
* ``stateless`` — every command runs in a fresh subshell started in ``workdir`` (mini-swe-agent's
  semantics): nothing but the filesystem carries over.

Two things a timeout can do (``exec``'s ``on_timeout``):

* ``kill_command`` (the default) — kill every process but the shell: the shell keeps its working
  directory and variables, and runs whatever is left of the command line (``sleep 9; echo`` echoes).
* ``kill_shell`` — kill the shell too, so nothing more of the command line runs, then start a fresh
  shell (files stay). For a deadline after which nothing the agent typed may run: an episode's
  time limit, as Harbor cancels its agent. :meth:`Sandbox.abort` does the same outside a command.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import math
import os
import weakref
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Mode = Literal["persistent", "stateless"]
OnTimeout = Literal["kill_command", "kill_shell"]
ON_TIMEOUT_CHOICES = ("kill_command", "kill_shell")


def check_on_timeout(on_timeout: str) -> None:
    """Raise ``ValueError`` naming ``on_timeout`` unless it is one of :data:`ON_TIMEOUT_CHOICES`."""
    if on_timeout not in ON_TIMEOUT_CHOICES:
        raise ValueError(f"on_timeout must be one of {', '.join(map(repr, ON_TIMEOUT_CHOICES))}, not {on_timeout!r}")


class SandboxError(RuntimeError):
    """The sandbox could not be created, or died in a way the caller must handle."""


class BackendUnavailable(SandboxError):
    """A backend's requirement (bubblewrap, a Docker engine, an image) is missing on this machine.

    The message says what is missing and how to provide it.
    """


#: Every sandbox's CPU quota unless its spec says otherwise (``Limits.cpus``), in CPUs.
DEFAULT_CPUS = 1.0
#: The smallest CPU quota a sandbox can have (the kernel's and Docker's floor: 1 ms per 100 ms period).
MIN_CPUS = 0.01


def check_cpus(cpus: object, option: str) -> None:
    """Raise ``ValueError`` naming ``option`` unless ``cpus`` is ``None`` or a finite number >= :data:`MIN_CPUS`."""
    if cpus is None:
        return
    if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or not math.isfinite(cpus) or cpus < MIN_CPUS:
        raise ValueError(f"{option} must be a CPU quota of at least {MIN_CPUS} CPUs (e.g. 0.5 or 2), "
                         f"or None for no quota; got {cpus!r}")


@dataclass(frozen=True)
class Limits:
    """Resource limits for everything that runs inside one sandbox.

    ``None`` disables a limit. ``output_bytes`` is the hard cap on what one command may print
    before it is killed; the text handed to the agent is elided further by the protocol.

    ``cpus`` is a CPU quota for the whole sandbox, in CPUs (``0.5``: half of one core's time, however
    many processes share it; docker: ``nano_cpus``; local: the sandbox's cgroup ``cpu.cfs_quota_us``).
    Every sandbox has one by default (1 CPU), so busy loops one episode leaves behind cannot starve
    another episode's commands or grade. It must be at least :data:`MIN_CPUS`.
    """

    memory_mb: int | None = 2048
    pids: int | None = 256
    cpu_seconds: int | None = 600  # CPU time per process (RLIMIT_CPU)
    file_size_mb: int | None = 1024  # largest file a process may write (RLIMIT_FSIZE)
    open_files: int | None = 4096
    cpus: float | None = DEFAULT_CPUS  # CPU quota of the whole sandbox (docker: nano_cpus; local: cpu.cfs_quota_us)
    storage_mb: int | None = None  # workspace size (best effort; docker only)
    output_bytes: int = 4 * 1024 * 1024
    command_timeout: float = 120.0  # default per-command timeout, seconds

    def __post_init__(self) -> None:
        check_cpus(self.cpus, "Limits.cpus")


@dataclass(frozen=True)
class ServicePort:
    """A host-side TCP service the sandbox may reach although it has no network.

    Inside the sandbox ``hostname:port`` resolves and connects to ``target_host:target_port`` on the
    host; nothing else is reachable. Used by LIVEWEB to expose its world server.
    """

    hostname: str
    port: int
    target_host: str
    target_port: int


@dataclass
class SandboxSpec:
    """What a task wants its sandbox to start as.

    ``files`` maps paths (relative to ``workdir``, or absolute inside the sandbox) to contents.
    ``copy_dirs`` maps host directories to sandbox paths whose contents are copied in (never bound:
    the agent works on its own copy). ``ro_binds`` maps host directories to absolute sandbox paths
    that are mounted read-only instead (shared, never copied: e.g. a project's provisioned test
    dependencies); a write there fails with "Read-only file system". ``setup_commands`` run in ``workdir`` after the files are in
    place, before the agent's first step, and must succeed.
    """

    workdir: str = "/workspace"
    image: str | None = None  # a Docker image; the local backend runs on the pinned task runtime
    files: dict[str, str | bytes] = field(default_factory=dict)
    copy_dirs: dict[str, str] = field(default_factory=dict)  # host dir -> sandbox dir
    ro_binds: dict[str, str] = field(default_factory=dict)  # host dir -> absolute sandbox dir, read-only
    setup_commands: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    network: bool = False
    services: list[ServicePort] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    # Python distributions the system must not show (besides termgym and the projects in
    # ``copy_dirs``, which are always hidden): installed copies of what the agent is asked to fix.
    hidden_packages: tuple[str, ...] = ()


def read_only_binds(spec: SandboxSpec) -> list[tuple[str, str]]:
    """``spec.ro_binds`` checked: ``(absolute host dir, absolute sandbox dir)`` pairs, sorted.

    Raises :class:`SandboxError` naming the entry when a host directory does not exist or a
    sandbox path is relative or would cover a system directory.
    """
    out = []
    for host_dir, dest in sorted(spec.ro_binds.items()):
        if not os.path.isdir(host_dir):
            raise SandboxError(f"ro_binds: host directory {host_dir!r} (for {dest!r}) does not exist")
        if not dest.startswith("/") or os.path.normpath(dest) in _SYSTEM_DIRS:
            raise SandboxError(f"ro_binds: sandbox path {dest!r} (for {host_dir!r}) must be an absolute path "
                               f"outside {', '.join(sorted(_SYSTEM_DIRS))}")
        out.append((os.path.abspath(host_dir), os.path.normpath(dest)))
    return out


_SYSTEM_DIRS = frozenset({"/", "/usr", "/etc", "/proc", "/dev", "/bin", "/lib", "/lib64", "/sbin", "/tmp"})


@dataclass(frozen=True)
class ExecResult:
    """What one command did.

    ``output`` is stdout and stderr interleaved as the command wrote them, decoded as UTF-8 with
    invalid bytes replaced; when the command printed more than ``Limits.output_bytes`` the middle
    is elided and ``truncated`` is set. ``exit_code`` is 124 after a timeout (as coreutils'
    ``timeout`` reports) and the command and all its children have been killed.
    """

    output: str
    exit_code: int
    timed_out: bool = False
    duration: float = 0.0
    truncated: bool = False
    restarted: bool = False  # the persistent shell had to be restarted (state was lost)


class Sandbox(ABC):
    """One isolated workspace with a shell. Use as a context manager or call :meth:`close`.

    Implementations must leave nothing running after :meth:`close` (which is idempotent), kill a
    timed-out command's whole process tree, and never expose the host user's files or grading
    material. Synchronous methods may block; the ``a*`` variants run them off the event loop.
    """

    backend: str = "abstract"

    def __init__(self, spec: SandboxSpec | None = None, *, mode: Mode = "persistent") -> None:
        self.spec = spec or SandboxSpec()
        if mode not in ("persistent", "stateless"):
            raise ValueError(f"mode must be 'persistent' or 'stateless', not {mode!r}")
        self.mode: Mode = mode
        self.closed = False
        _LIVE.add(self)

    @property
    def workdir(self) -> str:
        return self.spec.workdir

    @property
    def runtime(self) -> str | None:
        """The system the sandbox runs on, as records show it: a task-runtime version such as
        ``bookworm-5434a2a7fd2a``, ``"host"``, or ``image:<name>``; None before it started."""
        return None

    @abstractmethod
    def start(self) -> None:
        """Create the sandbox, copy the spec's files in and run its setup commands."""

    @abstractmethod
    def exec(self, command: str, timeout: float | None = None, *,
             on_timeout: OnTimeout = "kill_command") -> ExecResult:
        """Run one shell command (bash syntax) in the sandbox and wait for it.

        ``on_timeout`` says what a timeout kills (see the module docstring): ``"kill_shell"`` also
        ends the shell, so the rest of the command line never runs (the result says ``restarted``).
        """

    @abstractmethod
    def abort(self) -> None:
        """Kill every process in the sandbox, its shell first, and start a fresh shell; files stay.

        What a deadline does: nothing that was running or typed (a tmux pane's job and the rest of
        its line included) runs on, and the sandbox stays usable for grading.
        """

    def stop_commands(self) -> None:
        """Kill every process in the sandbox but its shell; the shell (its directory, variables and
        history) and the files stay.

        What a caller needs between two of its own commands, when whatever the first one left
        running must not go on (a test run's daemons before a behaviour replay): cheaper than
        :meth:`abort`, which also replaces the shell. Backends without a cheaper way abort.
        """
        self.abort()

    def halt(self) -> None:
        """Kill every process in the sandbox, its shell too, and start none: the files stay as they
        are, and a later command starts a new shell.

        What a grader needs before it reads the agent's files from the host (:meth:`open_host_dir`):
        nothing of the agent's runs on, and no shell is started that nobody uses. Backends without a
        cheaper way abort.
        """
        self.abort()

    def open_host_dir(self, sandbox_dir: str) -> int | None:
        """A read-only descriptor of ``sandbox_dir`` opened on the host, every component without
        following a symlink (see :mod:`termgym.sandbox.hostfs`), or None where the host cannot reach
        the sandbox's files (a remote Docker engine, a path outside the host-backed ones, a symlink
        on the way, a read-only bind in or around it, which the host does not see there). The caller
        closes it. ``FileNotFoundError`` when the directory is gone."""
        return None

    def host_paths(self) -> dict[str, str]:
        """Host directories that hold this sandbox's files, each with the sandbox path it is (empty
        where none does): what :func:`in_sandbox_terms` takes out of a message before an agent or a
        record sees it."""
        return {}

    def _binds_overlap(self, target: str) -> bool:
        """Whether a ``spec.ro_binds`` destination is ``target``, inside it or around it."""
        target = os.path.normpath(target)
        inside = target.rstrip("/") + "/"  # "/" for the root
        for dest in self.spec.ro_binds.values():
            dest = os.path.normpath(dest)
            if dest == target or dest.startswith(inside) or target.startswith(dest + "/"):
                return True
        return False

    @abstractmethod
    def write_file(self, path: str, data: str | bytes, mode: int = 0o644) -> None:
        """Create or replace a file (``path`` relative to the workdir or absolute)."""

    @abstractmethod
    def read_file(self, path: str) -> bytes:
        """Return a file's bytes; raises ``FileNotFoundError`` if it does not exist."""

    @abstractmethod
    def put_dir(self, host_dir: str | Path, sandbox_dir: str) -> None:
        """Copy a host directory's contents into ``sandbox_dir`` (created if needed)."""

    @abstractmethod
    def get_dir(self, sandbox_dir: str, host_dir: str | Path) -> None:
        """Copy a sandbox directory's contents out to ``host_dir`` (created if needed)."""

    @abstractmethod
    def close(self) -> None:
        """Kill everything in the sandbox and free its resources. Safe to call twice."""

    # -- conveniences shared by all backends ---------------------------------------------

    def run_setup_commands(self) -> None:
        """Run the spec's setup commands in order (backends call this at the end of ``start``).

        The first failing command raises :class:`SandboxError` with its exit code and output tail.
        """
        for command in self.spec.setup_commands:
            result = self.exec(command)
            if result.exit_code != 0:
                raise SandboxError(f"setup command failed (exit {result.exit_code}): {command}\n{result.output[-2000:]}")

    def write_files(self, files: Mapping[str, str | bytes]) -> None:
        for path, data in files.items():
            self.write_file(path, data)

    def resolve(self, path: str) -> str:
        """An absolute sandbox path for ``path`` (relative paths are under the workdir)."""
        return path if path.startswith("/") else f"{self.workdir.rstrip('/')}/{path}"

    def __enter__(self) -> Sandbox:
        if not getattr(self, "_started", False):
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # a forgotten sandbox must not outlive its owner
        with contextlib.suppress(Exception):
            if not self.closed:
                self.close()

    async def astart(self) -> None:
        await run_blocking(self.start)

    async def aexec(self, command: str, timeout: float | None = None, *,
                    on_timeout: OnTimeout = "kill_command") -> ExecResult:
        return await run_blocking(self.exec, command, timeout, on_timeout=on_timeout)

    async def aclose(self) -> None:
        await run_blocking(self.close)


_EXECUTOR = None
_LIVE: weakref.WeakSet[Sandbox] = weakref.WeakSet()


@atexit.register
def _close_live_sandboxes() -> None:
    """Close sandboxes still open when the interpreter exits (an exception ended the program)."""
    for box in list(_LIVE):
        with contextlib.suppress(Exception):
            box.close()


def run_blocking(fn, *args, **kwargs):
    """Run a blocking sandbox call in termgym's I/O thread pool and return an awaitable.

    The pool is large (sandbox calls mostly wait on a child process), so hundreds of concurrent
    episodes do not queue behind the default executor's handful of threads.
    """
    global _EXECUTOR
    if _EXECUTOR is None:
        from concurrent.futures import ThreadPoolExecutor

        _EXECUTOR = ThreadPoolExecutor(max_workers=512, thread_name_prefix="termgym-io")
    loop = asyncio.get_running_loop()
    return loop.run_in_executor(_EXECUTOR, lambda: fn(*args, **kwargs))


def in_sandbox_terms(text: str, host_paths: dict[str, str]) -> str:
    """``text`` with every host path of ``host_paths`` (from :meth:`Sandbox.host_paths`) written as
    the sandbox path it stands for: a message about the agent's files names them as the agent
    sees them, not where this host keeps them (longer host paths first, so a mount inside another
    is named by its own path)."""
    for host in sorted(host_paths, key=len, reverse=True):
        if host and host in text:
            inside = host_paths[host].rstrip("/")
            text = text.replace(host + "/", inside + "/").replace(host, inside or "/")
    return text
