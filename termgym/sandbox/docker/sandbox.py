"""The Docker sandbox: a container per sandbox, its shell and supervisor on exec channels.

The container is made ready (:mod:`~termgym.sandbox.docker.ready`: started, its workdir and
``/tmp`` bound from host directories where the engine is on this machine, supervisor and shell
execs waiting) at ``start()``, or taken ready from a warm pool (:mod:`~termgym.sandbox.docker.pool`;
every sandbox uses the process-wide one unless told otherwise). The task's tree is then copied in
on the host where its destination is bound (else archived in through the engine), and the shell
gets its token. ``close()`` kills everything in the container at once and leaves its removal to
the background (:mod:`~termgym.sandbox.docker.removal`).

Execution. The shell session of :mod:`termgym.sandbox.shell` over one ``docker exec``
(:class:`~termgym.sandbox.docker.channel.ExecChannel`) whose stdin and output are a socket we hold;
the shell's control lines travel in band, after a random per-shell token. That is one socket round
trip per command instead of a ``docker exec`` per command.

Files. Under a bound path ``write_file``/``read_file`` are host file operations that never follow
a symlink the agent made (:class:`~termgym.sandbox.docker.hosttree.HostTree`); elsewhere, or where a
symlink is in the way, they are the engine's archive API, which resolves paths inside the container.

Killing. Where the engine runs on this machine the host kills: it freezes the container's cgroup
and signals every process in it but the init, the main process and the shell
(:mod:`~termgym.sandbox.docker.hostkill`), out of reach of anything running in the container.
Elsewhere a second long-lived exec, the supervisor, kills on request every process in the
container except the init, the main process, itself and the shell, using builtins only, so it works
even when a fork bomb has used up the pids limit. A timeout (or output past
``limits.output_bytes``) asks it to kill; a shell stuck in a builtin loop is killed too and a new
shell started (the result says ``restarted``), as after ``on_timeout="kill_shell"`` or ``abort()``,
which ask it to kill the shell first.
"""

from __future__ import annotations

import contextlib
import errno
import io
import shlex
import tarfile
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from termgym.sandbox.base import Mode, SandboxError, SandboxSpec
from termgym.sandbox.docker.archive import extract_dir, tar_dir
from termgym.sandbox.docker.channel import ExecChannel
from termgym.sandbox.docker.container import (
    container_host_pid,
    get_client,
    image_runtime,
)
from termgym.sandbox.docker.hostkill import HostKiller, host_killer
from termgym.sandbox.docker.hosttree import HostTree
from termgym.sandbox.docker.pool import DEFAULT_POOL_SIZE, WarmPool, shared_pool
from termgym.sandbox.docker.ready import (
    ReadyContainer,
    close_supervisor,
    open_shell_exec,
    prepare,
    start_supervisor,
    supervisor_result,
)
from termgym.sandbox.docker.removal import dispose, open_init
from termgym.sandbox.hostfs import open_dir
from termgym.sandbox.images import DEFAULT_BASE_IMAGE
from termgym.sandbox.process_handle import ProcessHandle
from termgym.sandbox.shell import InBandChannel, ShellChannel, ShellSandbox


class DockerSandbox(ShellSandbox):
    """A sandbox in a Docker container (see the module docstring).

    ``docker_host`` overrides ``DOCKER_HOST``. A sandbox takes a ready container from the
    process-wide :class:`~termgym.sandbox.docker.pool.WarmPool` of
    :data:`~termgym.sandbox.docker.pool.DEFAULT_POOL_SIZE` for its engine; ``pool_size=N`` uses the
    shared pool of that size instead (what ``sandbox_options={"pool_size": N}`` of an env does),
    ``pool_size=0`` none (every start makes its own container), ``pool=`` a pool of your own.
    """

    backend = "docker"

    def __init__(self, spec: SandboxSpec | None = None, *, mode: Mode = "persistent",
                 docker_host: str | None = None, pool: WarmPool | None = None,
                 pool_size: int | None = None) -> None:
        super().__init__(spec, mode=mode)
        if pool is not None and pool_size is not None:
            raise ValueError("pass either pool= or pool_size=, not both")
        if pool_size is not None and (isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 0):
            raise ValueError(f"pool_size must be a non-negative int, got {pool_size!r}")
        self.docker_host = docker_host
        self._pool = pool
        self._pool_size = DEFAULT_POOL_SIZE if pool is None and pool_size is None else pool_size
        self._client = None
        self.container_id: str | None = None
        self.from_pool = False
        self.host_tree: HostTree | None = None  # the host directories bound at the workdir and /tmp
        self._init: ProcessHandle | None = None
        self._killer: HostKiller | None = None  # kills through the container's cgroups from here
        self._supervisor: ExecChannel | None = None
        self._supervisor_pid: int | None = None
        self._supervisor_start = None  # a supervisor start still under way (a Future)
        self._waiting_shell: ExecChannel | None = None  # a shell exec waiting for its token
        self._forwarder = None

    # -- lifecycle --------------------------------------------------------------------------

    def _create(self) -> None:
        self._client = get_client(self.docker_host)
        pool = self._pool
        if pool is None and self._pool_size:
            pool = shared_pool(self._pool_size, docker_host=self.docker_host)
        ready = pool.acquire(self.spec, self.mode) if pool is not None else None
        self.from_pool = ready is not None
        if ready is None:
            ready = prepare(self._client, self.spec, self.mode)
        self._adopt(ready)
        self._copy_spec_files()  # before the shell enters the workdir
        self._session.start()
        if self.spec.services:
            self._start_services()
        self._hide_installed_copies()

    def _adopt(self, ready: ReadyContainer) -> None:
        """Take over what :func:`~termgym.sandbox.docker.ready.prepare` made (``_destroy`` frees it)."""
        self.container_id, self.host_tree, self._init = ready.id, ready.tree, ready.init
        self._killer = ready.killer
        self._supervisor_start = ready.supervisor
        self._waiting_shell = ready.shell

    def _hide_installed_copies(self) -> None:
        """Delete termgym and installed copies of the workspace's project from the image's Python dirs.

        The container's file system is its own, so they are removed before the agent's first
        command (the local backend mounts over them instead); see :mod:`termgym.sandbox.runtime`.
        """
        from termgym.sandbox.runtime import hidden_distributions, mask_shell_command, runtime_has_none_of

        hidden = hidden_distributions(self.spec)
        if runtime_has_none_of(self.runtime, hidden):
            return  # the image is a runtime known here to hold none of them: no command needed
        result = self._session.run(mask_shell_command(hidden), 60)
        if result.exit_code != 0:
            raise SandboxError(f"could not hide installed package copies in the container: {result.output[-500:]}")

    @property
    def runtime(self) -> str | None:
        """The task runtime version the image was imported from, else ``image:<name>``."""
        image = self.spec.image or DEFAULT_BASE_IMAGE
        if self._client is None:
            return None
        return image_runtime(self._client, image)

    def _destroy(self) -> None:
        if self._forwarder is not None:
            with contextlib.suppress(Exception):
                self._forwarder.close()
        for channel in (self._supervisor, self._waiting_shell):
            if channel is not None:
                channel.close()
        close_supervisor(self._supervisor_start)
        self._supervisor = self._waiting_shell = self._supervisor_start = None
        if self.container_id is not None and self._client is not None:
            dispose(self._client, self.container_id, init=self._init, tree=self.host_tree)
        self._init = None

    # -- files ----------------------------------------------------------------------------------

    def write_file(self, path: str, data: str | bytes, mode: int = 0o644) -> None:
        self._write_many({self.resolve(path): (data, mode)})

    def write_files(self, files: Mapping[str, str | bytes]) -> None:
        self._write_many({self.resolve(p): (d, 0o644) for p, d in files.items()})

    def _write_many(self, files: Mapping[str, tuple[str | bytes, int]]) -> None:
        """Write files (absolute sandbox paths -> (data, mode)): on the host where bound, the rest in
        one archive (one API call instead of one per file)."""
        tree = self._bound_tree()
        rest = {}
        for target, (data, mode) in files.items():
            payload = data.encode() if isinstance(data, str) else bytes(data)
            if tree is None or not tree.write(target, payload, mode):
                rest[target] = (payload, mode)
        if rest:
            self._put_files(rest)

    def read_file(self, path: str) -> bytes:
        target = self.resolve(path)
        tree = self._bound_tree()
        if tree is not None:
            data = tree.read(target)
            if data is not None:
                return data
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
        self._put_archive(tar_dir(host_dir, self.resolve(sandbox_dir)))

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
        extract_dir(b"".join(stream), Path(host_dir))

    # -- internals ------------------------------------------------------------------------------

    def open_host_dir(self, sandbox_dir: str) -> int | None:
        tree = self._bound_tree()
        target = self.resolve(sandbox_dir)
        found = tree.locate(target) if tree is not None and not self._binds_overlap(target) else None
        return None if found is None else open_dir(found[0], found[1])

    def host_paths(self) -> dict[str, str]:
        tree = self.host_tree
        return {} if tree is None else {str(host): dest for dest, host in tree.mounts.items()}

    def _bound_tree(self) -> HostTree | None:
        """The host directories to use for file operations now (None before start or after close)."""
        self._ensure_running()
        return self.host_tree

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
        tree = self.host_tree
        for host_src, dest in self.spec.copy_dirs.items():
            if tree is None or not tree.copy_in(host_src, self.resolve(dest)):
                self.put_dir(host_src, dest)
        if self.spec.files:
            self.write_files(self.spec.files)

    def _start_supervisor(self) -> None:
        self._supervisor, self._supervisor_pid = start_supervisor(self._client.api, self.container_id)

    def _adopt_supervisor(self) -> None:
        """Wait for the supervisor started with the container, if it has not been taken yet."""
        if self._supervisor_start is not None:
            started, self._supervisor_start = supervisor_result(self._supervisor_start), None
            if started is not None:
                self._supervisor, self._supervisor_pid = started

    def _open_shell(self, token: bytes) -> ShellChannel:
        """The sandbox shell: the exec made ready with the container if it is still there, else a new one."""
        exec_channel, self._waiting_shell = self._waiting_shell, None
        if exec_channel is None or exec_channel.gone():
            if exec_channel is not None:
                exec_channel.close()
            exec_channel = open_shell_exec(self._client.api, self.container_id, self.spec, self.mode)
        return InBandChannel(exec_channel, token)

    def _kill_processes(self, *, include_shell: bool = False) -> None:
        """Kill every process but the init, the main process, the supervisor (and the shell): from
        this machine through the container's cgroups where it can (see
        :mod:`~termgym.sandbox.docker.hostkill`), else by asking the supervisor."""
        if self._killer is not None:
            spare = set() if include_shell or self._session.pid is None else {self._session.pid}
            if self._killer.kill(spare):
                return
            self._killer = None  # the container stopped: restart it below (and look again)
            self._restart_container()
            return
        shell = [] if self._session.pid is None else [str(self._session.pid)]
        request = f"A {' '.join(shell)}" if include_shell else f"K {' '.join(shell)}"
        self._adopt_supervisor()
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
        self._restart_container()

    def _restart_container(self) -> None:
        """Restart the container's processes (the filesystem stays): a new init, a new way to kill
        (the host's, else a supervisor) and, at the next command, a new shell."""
        self._client.api.restart(self.container_id, timeout=0)
        if self._init is not None:  # the restarted container has a new init
            self._init.close()
            self._init = open_init(self._client, self.container_id)
            self._killer = host_killer(self._init)
        if self._killer is None:
            self._start_supervisor()
        if self._session.channel is not None:
            self._session.channel.close()  # its shell died with the restart: the session starts another
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
        result = self._session.run(f"printf %s {shlex.quote(lines)} >> /etc/hosts", 30)
        if result.exit_code != 0:
            raise SandboxError(f"cannot add the service host names to /etc/hosts: {result.output}")
