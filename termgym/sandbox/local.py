"""The local backend: a bubblewrap sandbox over termgym's pinned task runtime (the embedded default).

Layout. Each sandbox owns a host directory ``root`` that is bind-mounted as ``/``; the system is
bound read-only on top: the ``/usr`` of the pinned runtime (:mod:`termgym.sandbox.runtime`, the
same Debian tree the Docker backend's base image is made from) with its merged-usr ``/bin``,
``/lib`` symlinks and a short allow-list of its ``/etc`` files. ``runtime="host"`` (or
``TERMGYM_RUNTIME=host``) binds the host's ``/usr`` and ``/etc`` files instead, and grades then
depend on the host. ``/proc`` and ``/dev`` are fresh. The workspace, ``/tmp`` and anything else the
agent writes live inside ``root``, so the host reads and writes them directly (without following
symlinks the agent planted). Nothing else of the host is visible: no home directory, no ``/work``,
no task store; in the system's Python directories, termgym's own installation and installed copies
of the project in the workspace are hidden (:func:`termgym.sandbox.runtime.hidden_distributions`).

Isolation. bubblewrap runs with every namespace it can unshare (pid, net, ipc, uts, cgroup), all
capabilities dropped (we run as root, and a root process with capabilities could remount
``/usr`` read-write), ``--new-session`` and ``--die-with-parent``. Memory, pids and the sandbox's CPU quota
(``Limits.cpus``, 1 CPU by default) are limited by a cgroup v1 group per sandbox where the host
allows it (``ulimit -v`` otherwise, and no CPU quota); CPU time per process, file size and open
files by rlimits set just before bubblewrap starts.

Execution. The shell session of :mod:`termgym.sandbox.shell` over bubblewrap's pipes: commands go
to the shell's stdin, output comes back on its stdout, and the shell reports each exit code on a
pipe of its own, so nothing a command prints can forge the end of its output. A timeout kills every
process in the sandbox's pid namespace except its init and the shell; if the shell itself is stuck
(a builtin loop) the sandbox is restarted around the same files and the result says so.
``on_timeout="kill_shell"`` (and ``abort()``) kill the shell too, with the sandbox frozen, and
restart it the same way.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import errno
import json
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
import warnings
from pathlib import Path

import termgym.sandbox.runtime as task_runtime
from termgym.sandbox.base import (
    BackendUnavailable,
    Mode,
    SandboxError,
    SandboxSpec,
    read_only_binds,
)
from termgym.sandbox.cgroups import (
    CGROUP_ROOT,
    child_pids,
    frozen,
    has_exited,
    remove_cgroup,
    send_kill,
    wait_exited,
)
from termgym.sandbox.hostfs import open_dir
from termgym.sandbox.local_gc import DIR_PREFIX, write_owner
from termgym.sandbox.process_handle import ProcessHandle, hold
from termgym.sandbox.shell import ShellChannel, ShellSandbox, shell_argv

#: System ``/etc`` entries the sandbox may see (read-only, from the runtime or the host); everything
#: else in ``/etc`` is ours. ``python3.*`` entries of the system's Python are added to these.
ETC_ALLOWLIST = (
    "alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "debian_version",
    "gitconfig", "inputrc", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "magic",
    "mime.types", "nsswitch.conf", "os-release", "profile", "protocols", "python3", "python3.11",
    "services", "ssl", "terminfo", "timezone", "tmux.conf", "vim", "xdg",
)
MERGED_USR_LINKS = ("bin", "lib", "lib64", "lib32", "libx32", "sbin")
#: Sandbox paths the host cannot reach through ``root`` (mounts); file access goes through the shell.
MOUNTED_PREFIXES = ("/usr", "/proc", "/dev", "/sys", "/bin", "/lib", "/lib64", "/sbin")


def _under_mount(target: str) -> bool:
    """Whether sandbox path ``target`` is one of :data:`MOUNTED_PREFIXES` or below one."""
    return any(target == p or target.startswith(p + "/") for p in MOUNTED_PREFIXES)


SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: The CFS period of a sandbox's CPU quota, microseconds (its quota is ``Limits.cpus`` times this).
CPU_PERIOD_US = 100_000

def bwrap_path() -> str:
    """The bubblewrap binary, or a clear error saying how to install it."""
    path = shutil.which("bwrap")
    if not path:
        raise BackendUnavailable(
            "the local sandbox needs bubblewrap, which is not installed: "
            "run `apt-get install bubblewrap` (Debian/Ubuntu) or use backend='docker'"
        )
    return path


def sandbox_parent_dir() -> str | None:
    """Where sandbox roots live: ``$TERMGYM_SANDBOX_DIR``, else ``/dev/shm`` when it is a roomy tmpfs.

    Building and removing a root is mostly mkdir/create/rmdir, which costs milliseconds each on a
    journaling disk and microseconds on tmpfs. Files on tmpfs are memory: what the agent writes is
    charged to its sandbox's memory limit. ``None`` means the system temp directory.
    """
    configured = os.environ.get("TERMGYM_SANDBOX_DIR")
    if configured:
        os.makedirs(configured, exist_ok=True)
        return configured
    with contextlib.suppress(OSError):
        st = os.statvfs("/dev/shm")
        if os.access("/dev/shm", os.W_OK) and st.f_bavail * st.f_frsize >= 2 << 30:
            return "/dev/shm"
    return None


def cgroups_available() -> bool:
    """Whether cgroup v1 memory and pids controllers can be written here (root, v1 hierarchy)."""
    return all(os.access(CGROUP_ROOT / c, os.W_OK) and (CGROUP_ROOT / c / "cgroup.procs").exists()
               for c in ("memory", "pids"))


@dataclasses.dataclass(frozen=True)
class SystemTree:
    """What a local sandbox binds read-only as its system: a ``/`` whose ``usr`` and ``etc`` it uses.

    ``label`` is what records show (the runtime version, or ``"host"``); ``etc`` the allow-listed
    ``/etc`` names present in it that are bound; ``etc_links`` those that are symlinks (recreated
    as symlinks, so ``/etc/localtime -> /usr/share/zoneinfo/...`` resolves in the sandbox's own
    ``/usr``, not the host's); ``links`` the merged-usr symlinks at its top (name -> target).
    """

    root: Path
    label: str
    etc: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    etc_links: tuple[tuple[str, str], ...] = ()

    @property
    def usr(self) -> Path:
        return self.root / "usr"


_SYSTEM_TREES: dict[Path, SystemTree] = {}
#: masked_site_args per (usr tree, hidden names): every sandbox of a task asks the same question.
_MASK_ARGS: dict[tuple[str, frozenset[str]], tuple[float, list[str]]] = {}
_HOST_WARNED = False


def system_tree(mode: str | None = None) -> SystemTree:
    """The system a local sandbox runs on: the pinned runtime (default) or, opted into, the host's.

    Raises :class:`~termgym.sandbox.runtime.RuntimeMissing` naming the build command when the
    pinned runtime is not built.
    """
    global _HOST_WARNED
    if task_runtime.runtime_mode(mode) == "host":
        if not _HOST_WARNED:
            _HOST_WARNED = True
            warnings.warn("local sandboxes run on this host's /usr (runtime='host'): what a task sees, and so its "
                          "grade, depends on this machine's Python and packages", RuntimeWarning, stacklevel=3)
        return _scan_system(Path("/"), "host")
    info = task_runtime.require_runtime()
    return _scan_system(info.rootfs, info.version)


def _scan_system(root: Path, label: str) -> SystemTree:
    cached = _SYSTEM_TREES.get(root)
    if cached is not None and cached.label == label:
        return cached
    names = [n for n in ETC_ALLOWLIST if os.path.lexists(root / "etc" / n)]
    with contextlib.suppress(OSError):
        names += sorted(n for n in os.listdir(root / "etc") if n.startswith("python3") and n not in names)
    etc_links = tuple((n, os.readlink(root / "etc" / n)) for n in names if os.path.islink(root / "etc" / n))
    etc = tuple(n for n in names if not os.path.islink(root / "etc" / n))
    links = tuple((n, os.readlink(root / n)) for n in MERGED_USR_LINKS if os.path.islink(root / n))
    tree = SystemTree(root=root, label=label, etc=etc, links=links, etc_links=etc_links)
    if label != "host":  # a built runtime never changes; the host's /usr may
        _SYSTEM_TREES[root] = tree
    return tree


def masked_site_args(usr: Path, hidden: set[str], *, max_age: float | None = None) -> list[str]:
    """bubblewrap arguments that hide ``hidden`` distributions from the Python dirs of ``usr``.

    A site directory holding one of them is rebuilt as a read-only tmpfs with every other entry
    bound back, so the hidden ones do not exist at all (an empty mount point would still import,
    as a namespace package).
    """
    key = (str(usr), frozenset(hidden))
    cached = _MASK_ARGS.get(key)
    if cached is not None and (max_age is None or time.monotonic() - cached[0] < max_age):
        return cached[1]
    args: list[str] = []
    for site in task_runtime.site_dirs(usr, max_age=max_age):
        drop = set(task_runtime.hidden_entries(site, hidden))
        if drop:
            args += _rebuild_dir_args(site, "/usr/" + str(site.relative_to(usr)), drop)
    _MASK_ARGS[key] = (time.monotonic(), args)
    return args


def _rebuild_dir_args(host_dir: Path, dest: str, drop: set[str]) -> list[str]:
    args = ["--tmpfs", dest]
    for entry in sorted(os.listdir(host_dir)):
        if entry in drop:
            continue
        src = host_dir / entry
        nested = {d.split("/", 1)[1] for d in drop if d.startswith(entry + "/")}
        if nested and src.is_dir():
            args += _rebuild_dir_args(src, f"{dest}/{entry}", nested)
        elif src.is_symlink():
            args += ["--symlink", os.readlink(src), f"{dest}/{entry}"]
        else:
            args += ["--ro-bind", str(src), f"{dest}/{entry}"]
    return [*args, "--remount-ro", dest]


class BubblewrapSandbox(ShellSandbox):
    """A sandbox made with bubblewrap on this machine (see the module docstring).

    ``runtime``: ``"pinned"`` (default, or ``$TERMGYM_RUNTIME``) runs on termgym's task runtime,
    ``"host"`` on this machine's ``/usr``.
    """

    backend = "local"

    def __init__(self, spec: SandboxSpec | None = None, *, mode: Mode = "persistent",
                 use_cgroups: bool | None = None, runtime: str | None = None) -> None:
        super().__init__(spec, mode=mode)
        self.runtime_mode = task_runtime.runtime_mode(runtime)
        self._system: SystemTree | None = None
        self._bwrap = ""  # the bubblewrap binary, found at start
        self._use_cgroups = cgroups_available() if use_cgroups is None else use_cgroups
        self._proc: subprocess.Popen | None = None
        self._init_pid: int | None = None  # host pid of the sandbox's pid-namespace init
        # The init and the shell are killed through pidfds (a kept pid can pass to a stranger once
        # its process is gone: termgym.sandbox.process_handle).
        self._init: ProcessHandle | None = None
        self._shell_handle: ProcessHandle | None = None
        self._pidns: str | None = None
        self._cgroups: list[Path] = []
        self._pid_limit_hits = 0  # pids.events' "max" count seen so far: forks the limit refused
        self._freezer: Path | None = None
        self._cpu_cgroup: Path | None = None  # the quota (cpu controller)
        self._cpuacct: Path | None = None  # CPU accounting (cpuacct controller, where mounted apart)
        self._forwarder = None
        self.host_dir: Path | None = None
        self.root: Path | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def _create(self) -> None:
        self._bwrap = bwrap_path()
        self._system = system_tree(self.runtime_mode)
        self.host_dir = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=sandbox_parent_dir()))
        self.root = self.host_dir / "root"
        self._build_root()
        if self._use_cgroups:
            self._make_cgroups()
        elif self.spec.limits.cpus:
            _warn_once("cpu", f"local sandboxes run without their CPU quota (Limits.cpus={self.spec.limits.cpus:g}): "
                              f"no writable cgroup v1 hierarchy at {CGROUP_ROOT}")
        write_owner(self.host_dir, self._cgroups)  # for `termgym gc` if this process dies without closing it
        self._session.start()

    def _destroy(self) -> None:
        self._stop_services()
        self._kill_all()
        for cg in self._cgroups:
            remove_cgroup(cg)
        if self.host_dir is not None:
            shutil.rmtree(self.host_dir, ignore_errors=True)

    @property
    def runtime(self) -> str | None:
        """The system this sandbox runs on: the runtime version, ``"host"``, or None before start."""
        return self._system.label if self._system is not None else None

    # -- what the shell session needs from this backend ---------------------------------------

    def _open_shell(self, token: bytes) -> ShellChannel:
        """A new bubblewrap process around the same root, running the shell (the old one is killed)."""
        if self._proc is not None:
            self._stop_services()
            self._kill_all()
        return self._spawn()

    def _kill_processes(self, *, include_shell: bool = False) -> None:
        if include_shell:
            self._kill_shell_and_commands()
        else:
            self._kill_commands()

    def _at_process_limit(self, reported: int | None) -> bool:
        return self._pids_exhausted()  # the host reads the sandbox's pids cgroup itself

    # -- files ----------------------------------------------------------------------------------

    def host_paths(self) -> dict[str, str]:
        return {} if self.root is None else {str(self.root): "/"}

    def write_file(self, path: str, data: str | bytes, mode: int = 0o644) -> None:
        payload = data.encode() if isinstance(data, str) else bytes(data)
        target = self.resolve(path)
        host = self._host_path(target)
        if host is not None:
            host.parent.mkdir(parents=True, exist_ok=True)
            if host.is_symlink():
                host.unlink()
            host.write_bytes(payload)
            os.chmod(host, mode)
            return
        encoded = base64.b64encode(payload).decode()
        q = shlex.quote(target)
        result = self.exec(f"mkdir -p \"$(dirname {q})\" && printf %s {encoded} | base64 -d > {q} "
                           f"&& chmod {mode:o} {q}", timeout=60)
        if result.exit_code != 0:
            raise OSError(f"cannot write {target} in the sandbox: {result.output.strip()}")

    def read_file(self, path: str) -> bytes:
        target = self.resolve(path)
        host = self._host_path(target)
        if host is not None:
            if not host.is_file():
                raise FileNotFoundError(errno.ENOENT, "no such file in the sandbox", target)
            return host.read_bytes()
        result = self.exec(f"test -f {shlex.quote(target)} && base64 -w0 < {shlex.quote(target)}", timeout=60)
        if result.exit_code != 0:
            raise FileNotFoundError(errno.ENOENT, "no such file in the sandbox", target)
        return base64.b64decode(result.output.strip())

    def put_dir(self, host_dir: str | Path, sandbox_dir: str) -> None:
        target = self.resolve(sandbox_dir)
        host = self._host_path(target)
        if host is None:
            raise SandboxError(f"cannot copy into {target}: it is not a writable sandbox path")
        shutil.copytree(host_dir, host, symlinks=True, dirs_exist_ok=True)

    def get_dir(self, sandbox_dir: str, host_dir: str | Path) -> None:
        target = self.resolve(sandbox_dir)
        host = self._host_path(target)
        if host is None or not host.is_dir():
            raise FileNotFoundError(errno.ENOENT, "no such directory in the sandbox", target)
        shutil.copytree(host, host_dir, symlinks=True, dirs_exist_ok=True)

    def open_host_dir(self, sandbox_dir: str) -> int | None:
        target = self.resolve(sandbox_dir)
        if self.root is None or _under_mount(target) or self._binds_overlap(target):
            return None
        return open_dir(self.root, [p for p in target.split("/") if p])

    def _host_path(self, target: str) -> Path | None:
        """The host path behind a sandbox path, or None where the host must not or cannot go.

        Symlinks the agent created are resolved against the sandbox root, never the host's: a
        link to ``/etc/passwd`` must not make the host touch its own ``/etc/passwd``.
        """
        assert self.root is not None
        if _under_mount(target):
            return None
        parts = [p for p in target.split("/") if p and p != "."]
        current = self.root
        for i, part in enumerate(parts):
            if part == "..":
                return None
            current = current / part
            if current.is_symlink() and i < len(parts) - 1:
                return None  # a directory symlink inside the sandbox: let the shell resolve it
        root_real = os.path.realpath(self.root)
        parent_real = os.path.realpath(current.parent)
        if parent_real != root_real and not parent_real.startswith(root_real + os.sep):
            return None
        if str(current.relative_to(self.root)).split("/")[0] == "etc" and len(parts) == 2 \
                and self._system is not None and parts[1] in self._system.etc:
            return None  # a read-only bind of the host's file
        return current

    # -- internals ------------------------------------------------------------------------------

    def _build_root(self) -> None:
        root = self.root
        assert root is not None
        for d in ("usr", "proc", "dev", "tmp", "etc", "root", "run", "var/tmp"):
            (root / d).mkdir(parents=True, exist_ok=True)
        os.chmod(root / "tmp", 0o1777)
        system = self._system
        assert system is not None
        for name, target in system.links:
            os.symlink(target, root / name)
        etc = root / "etc"
        (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:"
                                    "/usr/sbin/nologin\n")
        (etc / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
        (etc / "hostname").write_text("sandbox\n")
        (etc / "hosts").write_text("127.0.0.1\tlocalhost sandbox\n::1\tlocalhost\n")
        (etc / "resolv.conf").write_text("")
        for name in system.etc:
            p = etc / name
            if (system.root / "etc" / name).is_dir():
                p.mkdir(exist_ok=True)
            else:
                p.touch()
        for name, target in system.etc_links:
            os.symlink(target, etc / name)
        workdir = root / self.spec.workdir.lstrip("/")
        workdir.mkdir(parents=True, exist_ok=True)
        for host_src, dest in self.spec.copy_dirs.items():
            dest_path = root / self.resolve(dest).lstrip("/")
            shutil.copytree(host_src, dest_path, symlinks=True, dirs_exist_ok=True)
        for path, data in self.spec.files.items():
            dest_path = root / self.resolve(path).lstrip("/")
            dest_path.parent.mkdir(parents=True, exist_ok=True)
            dest_path.write_bytes(data.encode() if isinstance(data, str) else data)

    def _bwrap_args(self) -> list[str]:
        assert self.root is not None
        system = self._system
        assert system is not None
        args = [self._bwrap, "--bind", str(self.root), "/", "--ro-bind", str(system.usr), "/usr"]
        for name in system.etc:
            args += ["--ro-bind", str(system.root / "etc" / name), f"/etc/{name}"]
        # The host's /usr may change under a long run (a package installed): look again every minute.
        max_age = 60.0 if system.label == "host" else None
        args += masked_site_args(system.usr, task_runtime.hidden_distributions(self.spec), max_age=max_age)
        own = task_runtime.termgym_install_dir() if system.label == "host" else None
        if own is not None and not any(own.is_relative_to(d) for d in task_runtime.site_dirs(system.usr, max_age=max_age)):
            args += ["--tmpfs", str(own), "--remount-ro", str(own)]  # an install outside the site dirs
        if self.spec.network and os.path.exists("/etc/resolv.conf"):
            args += ["--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf"]
        for host_dir, dest in read_only_binds(self.spec):
            args += ["--ro-bind", host_dir, dest]
        args += ["--proc", "/proc", "--dev", "/dev",
                 "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                 "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox",
                 "--clearenv", "--chdir", self.spec.workdir]
        if not self.spec.network:
            args.append("--unshare-net")
        env = {"PATH": SANDBOX_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb", "PAGER": "cat",
               "GIT_PAGER": "cat", "MANPAGER": "cat", "PIP_PROGRESS_BAR": "off", "TQDM_DISABLE": "1",
               "PYTHONDONTWRITEBYTECODE": "1", "USER": "root"}
        env.update(self.spec.env)
        for key, value in env.items():
            args += ["--setenv", key, value]
        return args

    def _limits_prefix(self) -> str:
        """Shell that joins the cgroups and sets rlimits, then execs bubblewrap (inherited by all)."""
        lim = self.spec.limits
        steps = [f"echo $$ > {shlex.quote(str(cg / 'cgroup.procs'))}" for cg in self._cgroups]
        if lim.cpu_seconds:
            steps.append(f"ulimit -t {int(lim.cpu_seconds)}")
        if lim.file_size_mb:
            steps.append(f"ulimit -f {int(lim.file_size_mb) * 1024}")
        if lim.open_files:
            steps.append(f"ulimit -n {int(lim.open_files)}")
        if lim.memory_mb and not self._cgroups:
            steps.append(f"ulimit -v {int(lim.memory_mb) * 1024}")
        steps.append('exec "$@"')
        return " && ".join(steps)

    def _spawn(self) -> ShellChannel:
        """Start bubblewrap running the sandbox shell; return the channel to that shell."""
        info_r, info_w = os.pipe()
        ctl_r, ctl_w = os.pipe()
        # bubblewrap passes inherited fds through, so the shell reports on the pipe's own number.
        shell = ["/bin/bash", *shell_argv(self.mode, self.spec.workdir, control_fd=ctl_w)[1:]]
        cmd = ["/bin/bash", "-c", self._limits_prefix(), "termgym-sandbox", *self._bwrap_args(),
               "--info-fd", str(info_w), *shell]
        with contextlib.ExitStack() as cleanup:
            cleanup.callback(os.close, info_w)
            cleanup.callback(os.close, ctl_w)
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                pass_fds=(info_w, ctl_w), start_new_session=True, close_fds=True,
                env={"PATH": SANDBOX_PATH},
            )
        channel = _PipeChannel(self._proc, ctl_r)
        try:
            info = _read_info(info_r)
        finally:
            os.close(info_r)
        if "child-pid" not in info:
            # bubblewrap did not say it started in time: stop it before reading what it printed. The
            # sandbox's shell holds the pipe open, so a blocking read here waited for ever (seen at a
            # load of 170, 256 concurrent SWE-SYNTH episodes on 2 cores).
            with contextlib.suppress(OSError):
                self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
            output = ""
            if self._proc.stdout:
                os.set_blocking(self._proc.stdout.fileno(), False)
                with contextlib.suppress(OSError):
                    output = (self._proc.stdout.read1(4096) or b"").decode(errors="replace")
            channel.close()
            raise SandboxError(f"bubblewrap failed to start the sandbox: {output.strip() or 'no output'}")
        self._init_pid = int(info["child-pid"])
        self._init = hold(self._init_pid)
        self._pidns = _pidns(self._init_pid)
        os.set_blocking(self._proc.stdout.fileno(), False)
        os.set_blocking(ctl_r, False)
        self._shell_handle = None
        if self.spec.services:
            self._start_services()
        return channel

    def _start_services(self) -> None:
        from termgym.sandbox.forwarding import PortForwarder

        assert self._init_pid is not None and self.root is not None
        self._forwarder = PortForwarder()
        addresses = self._forwarder.start(self._init_pid, self.spec.services)
        with open(self.root / "etc" / "hosts", "a") as hosts:
            for hostname, ip in addresses.items():
                hosts.write(f"{ip}\t{hostname}\n")

    def _sandbox_pids(self) -> list[int]:
        """Host pids of every process in this sandbox."""
        if self._cgroups:
            with contextlib.suppress(OSError):
                return [int(p) for p in (self._cgroups[-1] / "cgroup.procs").read_text().split()]
        pids = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry.name}/ns/pid") == self._pidns:
                        pids.append(int(entry.name))
        return pids

    def _pids_exhausted(self) -> bool:
        if not self._cgroups or not self.spec.limits.pids:
            return False
        # A fork the limit refused since the last look means a spawner ran into it, even when it
        # is not at the limit right now (a fork bomb's processes die and retry; under load its
        # count can sit just below the limit at the moment we read it).
        try:
            hits = int((self._cgroups[-1] / "pids.events").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            hits = self._pid_limit_hits
        if hits > self._pid_limit_hits:
            self._pid_limit_hits = hits
            return True
        # Processes a command killed on its way out are reaped by the sandbox's init a moment later:
        # give that a few milliseconds before calling the sandbox full.
        for attempt in range(5):
            try:
                current = int((self._cgroups[-1] / "pids.current").read_text())
            except (OSError, ValueError):
                return False
            if current < int(self.spec.limits.pids) * 0.9:
                return False
            if attempt < 4:
                time.sleep(0.02)
        return True

    def _shell_process(self) -> ProcessHandle | None:
        """The sandbox's shell (the init's child), held by a pidfd from the first look on."""
        init = self._init
        if self._shell_handle is None and init is not None and not init.exited():
            children = child_pids(init.pid)
            if children:  # a pid read here is the shell only while it is in the sandbox's namespace
                self._shell_handle = hold(children[0], self._pidns)
        return self._shell_handle

    def _shell(self) -> int | None:
        """Host pid of the sandbox's shell (see :meth:`_shell_process`)."""
        handle = self._shell_process()
        return handle.pid if handle is not None else None

    def _kill_commands(self) -> None:
        """Kill every process of the sandbox except its init and the shell.

        With a freezer cgroup the sandbox is frozen first, so a fork bomb cannot outrun the kill;
        without one, repeated sweeps catch what was forked meanwhile.
        """
        keep = {self._init_pid, self._shell(), self._proc.pid if self._proc else None}
        freezer = self._freezer
        killed: set[int] = set()
        with frozen(freezer):
            for _ in range(1 if freezer else 20):
                victims = [p for p in self._sandbox_pids() if p not in keep]
                if not victims:
                    break
                send_kill(victims)
                killed.update(victims)
                if not freezer:
                    time.sleep(0.01)
        wait_exited(killed)  # a SIGKILL reaches a frozen process once it thaws

    def _kill_shell_and_commands(self) -> None:
        """Kill the shell and every process of the sandbox but the monitor (its init too).

        Frozen first where a freezer cgroup exists, so nothing runs between two kills; without one
        the shell dies first, before the command it waits for can end and let it go on.
        """
        handle, monitor = self._shell_process(), self._proc.pid if self._proc else None
        with frozen(self._freezer):
            if handle is not None:
                handle.kill()
            spared = (handle.pid if handle is not None else None, monitor)
            send_kill(p for p in self._sandbox_pids() if p not in spared)

    def _await_reaped(self, timeout: float = 2.0) -> None:
        """Wait until every child the shell had is dead (a zombie or reaped), so its job notices come now.

        A zombie has already signalled the shell, which reaps it before it reads the next command.
        """
        handle = self._shell_process()
        deadline = time.monotonic() + timeout
        while handle is not None and not handle.exited() and time.monotonic() < deadline:
            children = child_pids(handle.pid)
            if children is None or all(has_exited(pid) for pid in children):
                return
            time.sleep(0.01)

    def _kill_all(self) -> None:
        proc = self._proc
        if proc is not None:
            # Killing the pid-namespace init takes every process in the sandbox down with it. Through
            # its pidfd: the init may have exited long ago (its shell exited) and its pid passed on.
            if self._init is not None:
                self._init.kill()
            # bubblewrap's monitor reaps its init and exits; killing the monitor first would leave
            # the init a zombie of whatever reaps orphans here.
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(Exception):
                    proc.wait(timeout=5)
            for stream in (proc.stdin, proc.stdout):
                with contextlib.suppress(Exception):
                    if stream:
                        stream.close()
        send_kill(self._sandbox_pids() if self._cgroups else [])
        for handle in (self._init, self._shell_handle):
            if handle is not None:
                handle.close()
        self._proc = None
        self._init_pid = None
        self._init = self._shell_handle = None

    def _stop_services(self) -> None:
        if self._forwarder is not None:
            with contextlib.suppress(Exception):
                self._forwarder.close()
            self._forwarder = None

    def _make_cgroups(self) -> None:
        name = f"termgym/{uuid.uuid4().hex[:12]}"
        lim = self.spec.limits
        if lim.memory_mb:
            cg = CGROUP_ROOT / "memory" / name
            cg.mkdir(parents=True)
            self._cgroups.append(cg)
            (cg / "memory.limit_in_bytes").write_text(str(int(lim.memory_mb) * 1024 * 1024))
            with contextlib.suppress(OSError):  # swap accounting may be off
                (cg / "memory.memsw.limit_in_bytes").write_text(str(int(lim.memory_mb) * 1024 * 1024))
        self._make_cpu_cgroups(name, float(lim.cpus) if lim.cpus else None)
        freezer = CGROUP_ROOT / "freezer" / name
        with contextlib.suppress(OSError):
            freezer.mkdir(parents=True)
            self._cgroups.insert(0, freezer)
            self._freezer = freezer
        # pids last: _sandbox_pids reads the last cgroup, and pids always exists
        cg = CGROUP_ROOT / "pids" / name
        cg.mkdir(parents=True)
        (cg / "pids.max").write_text(str(int(lim.pids)) if lim.pids else "max")
        self._cgroups.append(cg)


    def _make_cpu_cgroups(self, name: str, cpus: float | None) -> None:
        """The sandbox's cpu cgroup with its CPU quota (``cpu.cfs_quota_us`` per 100 ms period; none for
        ``None``) and its CPU accounting (where the host has a cpuacct controller).

        A host without a writable cpu controller cannot enforce the quota: that is warned about once
        per process, not an error (as memory falls back to ``ulimit -v``).
        """
        cg = CGROUP_ROOT / "cpu" / name
        try:
            cg.mkdir(parents=True)
            self._cgroups.insert(0, cg)
            (cg / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            quota = -1 if cpus is None else max(1000, round(cpus * CPU_PERIOD_US))  # -1: no quota
            (cg / "cpu.cfs_quota_us").write_text(str(quota))
            self._cpu_cgroup = cg
        except OSError as exc:
            if cpus is not None:
                _warn_once("cpu", f"local sandboxes run without their CPU quota (Limits.cpus={cpus:g}): the "
                                  f"cgroup v1 cpu controller at {CGROUP_ROOT / 'cpu'} cannot be used here ({exc})")
        acct = CGROUP_ROOT / "cpuacct" / name
        if (CGROUP_ROOT / "cpuacct").resolve() != (CGROUP_ROOT / "cpu").resolve() and os.access(CGROUP_ROOT / "cpuacct", os.W_OK):
            with contextlib.suppress(OSError):
                acct.mkdir(parents=True)
                self._cgroups.insert(0, acct)
                self._cpuacct = acct

    def cpu_seconds_used(self) -> float | None:
        """CPU seconds every process of this sandbox has used so far (its cgroup's accounting), or
        ``None`` where the host gives the sandbox no CPU accounting cgroup."""
        for cg, name in ((self._cpuacct, "cpuacct.usage"), (self._cpu_cgroup, "cpuacct.usage")):
            if cg is not None:
                with contextlib.suppress(OSError, ValueError):
                    return int((cg / name).read_text()) / 1e9
        return None

    def cpu_throttling(self) -> dict[str, int]:
        """The CPU quota's counters (``nr_periods``, ``nr_throttled``, ``throttled_time`` in ns) from
        the sandbox's cgroup ``cpu.stat``; empty without a CPU quota cgroup."""
        if self._cpu_cgroup is None:
            return {}
        with contextlib.suppress(OSError):
            return {k: int(v) for k, v in (line.split() for line in (self._cpu_cgroup / "cpu.stat").read_text()
                                           .splitlines() if len(line.split()) == 2)}
        return {}


_WARNED: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


class _PipeChannel(ShellChannel):
    """The local shell's pipes: commands on bubblewrap's stdin, output on its stdout (stderr merged),
    control lines on a pipe of their own, so nothing a command prints can forge one."""

    def __init__(self, proc: subprocess.Popen, control_fd: int) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._stdin = proc.stdin
        self._out = proc.stdout.fileno()
        self._control = control_fd
        self._lines = bytearray()
        self._ended = False
        self._selector: selectors.BaseSelector | None = selectors.DefaultSelector()
        self._selector.register(self._out, selectors.EVENT_READ)
        self._selector.register(control_fd, selectors.EVENT_READ)

    def send(self, data: bytes) -> None:
        if self.eof:
            raise EOFError("the shell is gone")
        try:
            self._stdin.write(data)
            self._stdin.flush()
        except (OSError, ValueError) as exc:  # a broken pipe, or the stream closed by a kill
            self.eof = True
            raise EOFError(str(exc)) from exc

    def receive(self, timeout: float) -> tuple[bytes, bytes | None] | None:
        line = self._line()
        if line is not None:
            return b"", line
        if self._ended or self._selector is None:
            self.eof = True
            raise EOFError("the shell exited")
        output = bytearray()
        for key, _ in self._selector.select(max(timeout, 0.0)):
            try:
                chunk = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self._ended = True
            elif key.fd == self._control:
                self._lines += chunk
            else:
                output += chunk
        line = self._line()
        if line is not None:
            output += self._drain()  # what the command printed before its exit code is in the pipe already
        if not output and line is None:
            if self._ended:
                self.eof = True
                raise EOFError("the shell exited")
            return None
        return bytes(output), line

    def _line(self) -> bytes | None:
        end = self._lines.find(b"\n")
        if end < 0:
            return None
        line = bytes(self._lines[:end])
        del self._lines[: end + 1]
        return line

    def _drain(self, max_reads: int = 16) -> bytes:
        """What the output pipe holds now (bounded: a background job may keep writing)."""
        data = bytearray()
        for _ in range(max_reads):
            try:
                chunk = os.read(self._out, 65536)
            except OSError:  # BlockingIOError: empty for now
                break
            if not chunk:
                break
            data += chunk
        return bytes(data)

    def close(self) -> None:
        if self._selector is not None:
            with contextlib.suppress(Exception):
                self._selector.close()
            self._selector = None
            with contextlib.suppress(OSError):
                os.close(self._control)
        self.eof = True


#: Seconds bubblewrap has to report its sandbox started (hundreds starting at once on 2 cores take long).
INFO_TIMEOUT = 60.0


def _read_info(fd: int, timeout: float = INFO_TIMEOUT) -> dict:
    """Read bubblewrap's --info-fd JSON (it closes the fd once the sandbox runs)."""
    data = b""
    deadline = time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    try:
        while time.monotonic() < deadline:
            if not sel.select(deadline - time.monotonic()):
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
            with contextlib.suppress(json.JSONDecodeError):
                return json.loads(data)
    finally:
        sel.close()
    try:
        return json.loads(data) if data else {}
    except json.JSONDecodeError:
        return {}


def _pidns(pid: int) -> str | None:
    with contextlib.suppress(OSError):
        return os.readlink(f"/proc/{pid}/ns/pid")
    return None


