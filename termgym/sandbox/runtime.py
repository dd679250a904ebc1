"""The pinned task runtime: one root file system for every sandbox, backend and host.

What a task sees (the Python version, pytest, git, coreutils) must not depend on the machine it
runs on: a task validated where ``python3 -m pytest`` works must not grade 0 on a host whose system
Python lacks pytest. So termgym builds its own Debian root file system once, from a fixed recipe
(:data:`RUNTIME_SUITE`, :data:`RUNTIME_PACKAGES`, the steps below), and

* the local backend binds its ``/usr`` (and ``/etc`` allow-list, merged-usr links) read-only as
  the sandbox's system instead of the host's (:mod:`termgym.sandbox.local`);
* the Docker backend imports the same directory as its base image ``termgym/base:bookworm``
  (:func:`termgym.sandbox.images.build_base_image`).

Version. :func:`current_version` is ``<suite>-<hash>``, the hash of everything that decides the
content (suite, packages, recipe steps); the mirror is not part of it. A built runtime lives in
``<runtime home>/<version>/rootfs`` with ``runtime.json`` beside it (the Python and pytest versions
inside, every Debian package version, size, build time). The runtime home is
``$TERMGYM_RUNTIME_DIR``, else ``/var/lib/termgym/runtime`` for root (CI, setup), else
``$XDG_CACHE_HOME/termgym/runtime``. Build it with ``termgym runtime build`` (root, debootstrap,
the Debian mirror apt uses here); a sandbox started without it fails with that command in the
message. ``TERMGYM_RUNTIME=host`` (or ``runtime="host"``) opts out into the host's ``/usr``.

Masking. Whatever the runtime, a sandbox must not reveal the answer through a copy outside the
workspace: termgym's own installation (its bundled fix patches, the LIVEWEB world generator) and
installed copies of the project under repair (Debian's ``python3-more-itertools`` next to a
more-itertools task). :func:`hidden_distributions` names them for a spec and :func:`hidden_entries`
finds their files in a site-packages directory; each backend hides those entries.
"""

from __future__ import annotations

import configparser
import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from termgym.sandbox.base import BackendUnavailable, SandboxError

RUNTIME_SUITE = "bookworm"
#: What tasks use inside a sandbox today: the shell tools, git (SWE-SYNTH workspaces and grading),
#: python3 with pytest (every test command), curl (LIVEWEB), tmux (the terminus protocol), ps.
RUNTIME_PACKAGES = (
    "bash",
    "coreutils",
    "git",
    "python3",
    "python3-pytest",
    "curl",
    "tmux",
    "procps",
    "ca-certificates",
)
#: Bump when the build steps change in a way the package list does not show.
RUNTIME_RECIPE_VERSION = 2
#: Removed after installing: documentation and caches nothing in a sandbox reads.
PRUNED_PATHS = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/lintian", "var/cache/apt",
                "var/lib/apt/lists", "var/log")
FALLBACK_MIRROR = "http://deb.debian.org/debian"
#: Python distributions every sandbox hides from its system site directories.
ALWAYS_HIDDEN = ("termgym", "termgym_data")  # the code and its bundled task data
#: ``TERMGYM_RUNTIME`` / ``runtime=`` values.
RUNTIME_MODES = ("pinned", "host")

Log = Callable[[str], None]


class RuntimeMissing(BackendUnavailable):
    """The pinned runtime this code asks for has not been built on this machine."""


# -- versions and places -----------------------------------------------------------------


def recipe_hash(packages: Iterable[str] = RUNTIME_PACKAGES, suite: str = RUNTIME_SUITE) -> str:
    """A short hash of everything that decides the runtime's content (not the mirror)."""
    return _recipe_hash(tuple(packages), suite)


@functools.lru_cache(maxsize=16)  # asked at every sandbox start
def _recipe_hash(packages: tuple[str, ...], suite: str) -> str:
    text = "\n".join([f"recipe v{RUNTIME_RECIPE_VERSION}", suite, *sorted(packages), *PRUNED_PATHS])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def current_version() -> str:
    """The runtime version this code uses, e.g. ``"bookworm-3f2a9c0d1b4e"``.

    Stable across machines for the same termgym recipe; record it next to anything a sandbox
    produced (a task's validation, an episode) so results can be traced to the system they ran on.
    """
    return f"{RUNTIME_SUITE}-{recipe_hash()}"


def runtime_mode(requested: str | None = None) -> str:
    """``requested``, else ``$TERMGYM_RUNTIME``, else ``"pinned"``; anything else is an error."""
    mode = requested or os.environ.get("TERMGYM_RUNTIME") or "pinned"
    if mode not in RUNTIME_MODES:
        where = "runtime=" if requested else "TERMGYM_RUNTIME"
        raise ValueError(f"{where} must be one of {', '.join(RUNTIME_MODES)}, not {mode!r}")
    return mode


def runtime_home() -> Path:
    """Where runtimes are built and looked up (see the module docstring)."""
    configured = os.environ.get("TERMGYM_RUNTIME_DIR")
    if configured:
        return Path(configured)
    system = Path("/var/lib/termgym/runtime")
    if os.geteuid() == 0 or system.is_dir():
        return system
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "termgym" / "runtime"


@dataclasses.dataclass(frozen=True)
class RuntimeInfo:
    """One built runtime: where it is and what is in it (``runtime.json``)."""

    version: str
    path: Path  # the directory holding ``rootfs/`` and ``runtime.json``
    python: str = ""
    pytest: str = ""
    packages: dict[str, str] = dataclasses.field(default_factory=dict)
    size_mb: float = 0.0
    build_seconds: float = 0.0
    built_at: str = ""
    mirror: str = ""

    @property
    def rootfs(self) -> Path:
        return self.path / "rootfs"

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["path"] = str(self.path)
        return data


def load_runtime(path: Path) -> RuntimeInfo | None:
    """The runtime at ``path`` (a ``<home>/<version>`` directory), or None if it is not complete."""
    meta = path / "runtime.json"
    if not meta.is_file() or not (path / "rootfs" / "usr" / "bin").is_dir():
        return None
    try:
        data = json.loads(meta.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    fields = {f.name for f in dataclasses.fields(RuntimeInfo)}
    data = {k: v for k, v in data.items() if k in fields}
    data["path"] = path
    return RuntimeInfo(**data)


_loaded: dict[Path, RuntimeInfo] = {}


def find_runtime(version: str | None = None) -> RuntimeInfo | None:
    """The built runtime of ``version`` (default: :func:`current_version`), or None."""
    path = runtime_home() / (version or current_version())
    info = _loaded.get(path)
    if info is not None and os.path.isdir(path / "rootfs" / "usr"):  # still there (not removed)
        return info
    info = load_runtime(path)
    if info is not None:
        _loaded[path] = info
    return info


def installed_runtimes() -> list[RuntimeInfo]:
    """Every complete runtime in the runtime home, current or not."""
    home = runtime_home()
    if not home.is_dir():
        return []
    found = [load_runtime(p) for p in sorted(home.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    return [r for r in found if r is not None]


def build_command() -> str:
    """The command that builds the current runtime here (with the home it will go to)."""
    env = f"TERMGYM_RUNTIME_DIR={os.environ['TERMGYM_RUNTIME_DIR']} " if os.environ.get("TERMGYM_RUNTIME_DIR") else ""
    prefix = "" if os.geteuid() == 0 else "sudo "
    return f"{prefix}{env}termgym runtime build"


def require_runtime() -> RuntimeInfo:
    """The current runtime, or :class:`RuntimeMissing` saying how to build it (or opt out)."""
    info = find_runtime()
    if info is not None:
        return info
    others = [r.version for r in installed_runtimes()]
    stale = f" (found other versions: {', '.join(others)})" if others else ""
    raise RuntimeMissing(
        f"the pinned task runtime {current_version()} is not built in {runtime_home()}{stale}. "
        f"Build it once with `{build_command()}` (needs root, debootstrap and the Debian mirror; "
        "about a minute), or set TERMGYM_RUNTIME=host / runtime='host' to run tasks on this "
        "machine's /usr (grades then depend on the host's Python and packages)."
    )


# -- building ------------------------------------------------------------------------------


def build_runtime(*, force: bool = False, mirror: str | None = None, log: Log = print) -> RuntimeInfo:
    """Build the current runtime unless it exists (``force`` rebuilds); return it.

    Concurrent builders wait for each other (a lock file in the runtime home); the finished tree is
    moved into place in one rename, so a reader never sees half a runtime.
    """
    version = current_version()
    home = runtime_home()
    if not force and (info := find_runtime(version)) is not None:
        log(f"runtime {version} is up to date ({info.rootfs})")
        return info
    if os.geteuid() != 0:
        raise SandboxError(f"building the task runtime needs root (debootstrap and chroot): run `{build_command()}`")
    if not shutil.which("debootstrap"):
        raise SandboxError("debootstrap is not installed: apt-get install -y debootstrap")
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and (info := find_runtime(version)) is not None:  # another process built it meanwhile
            log(f"runtime {version} is up to date ({info.rootfs})")
            return info
        return _build_locked(home, version, (mirror or debian_mirror()).rstrip("/"), log)


def _build_locked(home: Path, version: str, mirror: str, log: Log) -> RuntimeInfo:
    started = time.monotonic()
    staging = home / f".building-{version}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    root = staging / "rootfs"
    try:
        log(f"building task runtime {version}: debootstrap --variant=minbase {RUNTIME_SUITE} from {mirror}")
        keyring = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
        keyring_args = [f"--keyring={keyring}"] if keyring.is_file() else []
        try:
            _run(["debootstrap", "--variant=minbase", *keyring_args, RUNTIME_SUITE, str(root), mirror], "debootstrap")
        except SandboxError as exc:
            if keyring_args:
                raise
            # Ubuntu and other non-Debian hosts lack Debian's signing keys
            raise SandboxError(f"{exc}\n(no {keyring} here: `apt-get install debian-archive-keyring` "
                               "lets debootstrap check Debian's signatures)") from exc
        install_packages(root, mirror, RUNTIME_PACKAGES, log)
        for rel in PRUNED_PATHS:
            shutil.rmtree(root / rel, ignore_errors=True)
        (root / "var/log").mkdir(exist_ok=True)
        (root / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)
        (root / "workspace").mkdir(exist_ok=True)
        packages = _dpkg_versions(root)
        probe = _chroot_output(root, ["python3", "-c", "import platform, pytest; "
                                      "print(platform.python_version(), pytest.__version__)"])
        python, pytest_version = probe.split()
        info = RuntimeInfo(version=version, path=home / version, python=python, pytest=pytest_version,
                           packages=packages, size_mb=round(_tree_bytes(root) / 1e6, 1),
                           build_seconds=round(time.monotonic() - started, 1),
                           built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), mirror=mirror)
        meta = info.to_dict()
        del meta["path"]
        (staging / "runtime.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
        target = home / version
        if target.exists():  # a forced rebuild: move the old one aside first
            old = home / f".old-{version}-{os.getpid()}"
            os.rename(target, old)
            shutil.rmtree(old, ignore_errors=True)
        os.rename(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"built runtime {version} in {info.build_seconds:.0f}s: Python {python}, pytest {pytest_version}, "
        f"{info.size_mb:.0f} MB at {info.rootfs}")
    return info


def remove_runtime(version: str) -> bool:
    """Delete a built runtime; True if it existed."""
    path = runtime_home() / version
    if not (path / "runtime.json").exists():
        return False
    trash = runtime_home() / f".removing-{version}-{os.getpid()}"
    _loaded.pop(path, None)
    os.rename(path, trash)
    shutil.rmtree(trash, ignore_errors=True)
    return True


def install_packages(root: Path, mirror: str, packages: Iterable[str], log: Log) -> None:
    """``apt-get install`` ``packages`` into the debootstrapped ``root`` (as a chroot)."""
    packages = list(packages)
    (root / "etc/apt/sources.list").write_text(f"deb {mirror} {RUNTIME_SUITE} main\n")
    # The chroot resolves the mirror with the host's resolver; the runtime keeps an empty resolv.conf.
    resolv = root / "etc/resolv.conf"
    with contextlib.suppress(FileNotFoundError):
        resolv.unlink()
    if Path("/etc/resolv.conf").exists():
        shutil.copyfile("/etc/resolv.conf", resolv)
    # Keep services from starting inside the chroot while packages install.
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    proc = root / "proc"
    subprocess.run(["mount", "-t", "proc", "proc", str(proc)], check=False, capture_output=True)
    try:
        env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"}
        log(f"apt-get install {' '.join(packages)}")
        _run(["chroot", str(root), "apt-get", "update", "-q"], "apt-get update in the chroot", env)
        _run(["chroot", str(root), "apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
             "apt-get install in the chroot", env)
        _run(["chroot", str(root), "apt-get", "clean"], "apt-get clean", env)
    finally:
        with contextlib.suppress(Exception):
            subprocess.run(["umount", "-l", str(proc)], check=False, capture_output=True)
    policy.unlink()
    resolv.write_text("")


def _dpkg_versions(root: Path) -> dict[str, str]:
    text = _chroot_output(root, ["dpkg-query", "-W", "-f", "${Package} ${Version}\\n"])
    return dict(line.split(" ", 1) for line in text.splitlines() if " " in line)


def _chroot_output(root: Path, argv: list[str]) -> str:
    proc = subprocess.run(["chroot", str(root), *argv], capture_output=True, text=True,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})
    if proc.returncode != 0:
        raise SandboxError(f"{' '.join(argv[:2])} failed in the new runtime: {(proc.stdout + proc.stderr)[-2000:]}")
    return proc.stdout.strip()


def _tree_bytes(root: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def _run(cmd: list[str], what: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip()[-3000:]
        raise SandboxError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd[:6])}...\n{tail}")


# -- the Debian mirror ---------------------------------------------------------------------


def debian_mirror(suite: str = RUNTIME_SUITE, apt_dir: str | Path = "/etc/apt") -> str:
    """The Debian mirror apt on this machine uses for ``suite``.

    Reads one-line ``sources.list`` files and deb822 ``*.sources`` files; ``TERMGYM_DEBIAN_MIRROR``
    overrides. Security and update suites are skipped: debootstrap wants the main archive.
    """
    override = os.environ.get("TERMGYM_DEBIAN_MIRROR")
    if override:
        return override.rstrip("/")
    apt_dir = Path(apt_dir)
    candidates: list[Path] = []
    if (apt_dir / "sources.list").is_file():
        candidates.append(apt_dir / "sources.list")
    if (apt_dir / "sources.list.d").is_dir():
        candidates += sorted((apt_dir / "sources.list.d").iterdir())
    for path in candidates:
        try:
            text = path.read_text()
        except OSError:
            continue
        if path.name.endswith(".sources"):
            found = _mirror_from_deb822(text, suite)
        elif path.name.endswith(".list"):
            found = _mirror_from_one_line(text, suite)
        else:
            found = None
        if found:
            return found.rstrip("/")
    return FALLBACK_MIRROR


def _mirror_from_one_line(text: str, suite: str) -> str | None:
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        # deb [options] uri suite components...
        line = re.sub(r"\[[^\]]*\]", "", line)
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "deb" and parts[2] == suite:
            return parts[1]
    return None


def _mirror_from_deb822(text: str, suite: str) -> str | None:
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        if "deb" not in fields.get("types", "").split():
            continue
        if suite in fields.get("suites", "").split() and fields.get("uris"):
            return fields["uris"].split()[0]
    return None


# -- what a sandbox hides -------------------------------------------------------------------

#: Top-level names in a project that are not its importable distribution.
_NOT_PACKAGES = {"test", "tests", "testing", "doc", "docs", "example", "examples", "benchmarks", "bench",
                 "scripts", "tools", "setup", "conftest", "noxfile", "build", "dist", "site", "src"}


@functools.lru_cache(maxsize=4096)
def normalise(name: str) -> str:
    """A distribution or module name in one spelling (PEP 503, underscores): ``More-Itertools`` ->
    ``more_itertools``."""
    return re.sub(r"[-_.]+", "_", name).lower()


def project_distributions(project_dir: str | Path) -> set[str]:
    """Names under which the Python project in ``project_dir`` could be installed elsewhere.

    Its distribution name (``pyproject.toml``, ``setup.cfg``, ``setup.py``) and its top-level
    packages and modules (in the directory or ``src/``), normalised.
    """
    root = Path(project_dir)
    names: set[str] = set()
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        with contextlib.suppress(Exception):
            text = pyproject.read_text()
            try:
                import tomllib
            except ImportError:  # Python 3.10: the name line of [project] / [tool.poetry] is enough
                for section in re.split(r"^\[", text, flags=re.M):
                    if section.startswith(("project]", "tool.poetry]")):
                        names.update(re.findall(r"""^name\s*=\s*["']([^"']+)["']""", section, re.M)[:1])
            else:
                data = tomllib.loads(text)
                for name in (data.get("project", {}).get("name"), data.get("tool", {}).get("poetry", {}).get("name")):
                    if isinstance(name, str):
                        names.add(name)
    setup_cfg = root / "setup.cfg"
    if setup_cfg.is_file():
        with contextlib.suppress(Exception):
            parser = configparser.ConfigParser(interpolation=None)
            parser.read_string(setup_cfg.read_text())
            if parser.has_option("metadata", "name"):
                names.add(parser.get("metadata", "name"))
    setup_py = root / "setup.py"
    if setup_py.is_file():
        with contextlib.suppress(OSError):
            names.update(re.findall(r"""\bname\s*=\s*["']([A-Za-z0-9_.\-]+)["']""", setup_py.read_text()))
    for base in (root, root / "src"):
        if not base.is_dir():
            continue
        for entry in base.iterdir():
            stem = entry.name[:-3] if entry.name.endswith(".py") else entry.name
            if stem in _NOT_PACKAGES or stem.startswith((".", "_")):
                continue
            if entry.is_dir() and (entry / "__init__.py").is_file():
                names.add(stem)
            elif entry.is_file() and entry.name.endswith(".py"):
                names.add(stem)
    return {normalise(n) for n in names if n}


def hidden_distributions(spec) -> set[str]:
    """The distributions a sandbox for ``spec`` must not show outside its workspace.

    termgym itself, the projects the spec copies in (a SWE-SYNTH repository) and any the spec
    names in ``hidden_packages``.
    """
    names = {normalise(n) for n in ALWAYS_HIDDEN}
    names.update(normalise(n) for n in getattr(spec, "hidden_packages", ()) or ())
    for host_dir in getattr(spec, "copy_dirs", {}) or {}:
        names |= _cached_project_distributions(host_dir)
    return names


_projects: dict[tuple[str, int], frozenset[str]] = {}


def _cached_project_distributions(host_dir: str) -> frozenset[str]:
    # Every reset of a task copies the same prepared tree: read its metadata once per directory
    # mtime (entries added or removed; prepared workspaces are never edited in place).
    try:
        key = (str(host_dir), os.stat(host_dir).st_mtime_ns)
    except OSError:
        return frozenset()
    if key not in _projects:
        _projects[key] = frozenset(project_distributions(host_dir))
    return _projects[key]


_METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg-link", ".pth", ".egg")


def entry_distribution(entry: str) -> str | None:
    """The normalised distribution/module name a site-packages entry belongs to, if it tells.

    ``more_itertools`` / ``six.py`` / ``_cffi.cpython-311-x86_64-linux-gnu.so`` name a module;
    ``more_itertools-8.10.0.egg-info`` a distribution; editable-install hooks
    (``__editable__.termgym-0.1.0.pth``, ``__editable___termgym_0_1_0_finder.py``) the project
    they load.
    """
    name = entry
    editable = re.match(r"^__editable__[._]+(.+?)(?:[-_]\d.*)?(?:\.pth|_finder\.py)$", name)
    if editable:
        return normalise(editable.group(1))
    for suffix in _METADATA_SUFFIXES:
        if name.endswith(suffix):
            return normalise(name[: -len(suffix)].split("-", 1)[0])
    if name.endswith(".py"):
        return normalise(name[:-3])
    if name.endswith(".so"):
        return normalise(name.split(".", 1)[0])
    if "." in name:
        return None
    return normalise(name)


def hidden_entries(site_dir: str | Path, names: Iterable[str]) -> list[str]:
    """Paths (relative to ``site_dir``, a site- or dist-packages directory) that belong to ``names``.

    Top-level entries, the bytecode single-module distributions leave in ``__pycache__``, and
    vendored copies inside other packages (``pkg_resources/_vendor/more_itertools``).
    """
    wanted = {normalise(n) for n in names}

    def scan(directory, prefix, depth):
        try:
            entries = sorted(os.listdir(directory))
        except OSError:
            return []
        found = [prefix + e for e in entries if entry_distribution(e) in wanted]
        if "__pycache__" in entries:
            try:
                cached = sorted(os.listdir(os.path.join(directory, "__pycache__")))
            except OSError:
                cached = []
            found += [f"{prefix}__pycache__/{e}" for e in cached if normalise(e.split(".", 1)[0]) in wanted]
        if depth < 2:
            for e in entries:
                for vendor in ("_vendor", "vendor", "extern", "_vendored"):
                    inner = os.path.join(directory, e, vendor)
                    if prefix + e not in found and os.path.isdir(inner) and not os.path.islink(inner):
                        found += scan(inner, f"{prefix}{e}/{vendor}/", depth + 1)
        return found

    return scan(str(site_dir), "", 0)


_SITE_DIR_NAMES = ("site-packages", "dist-packages")
_site_dirs_cache: dict[str, tuple[float, list[Path]]] = {}


def site_dirs(usr: str | Path, *, max_age: float | None = None) -> list[Path]:
    """Every Python package directory (``site-packages``, ``dist-packages``) under a ``/usr`` tree.

    Not only the system Python's: a bundled interpreter (a cloud SDK's, a tool's virtualenv) has
    its own, often with vendored copies of popular projects. The walk is cached per tree;
    ``max_age`` (seconds) bounds how old a cached answer may be (None: forever, for a runtime that
    never changes).
    """
    key = str(usr)
    cached = _site_dirs_cache.get(key)
    if cached is not None and (max_age is None or time.monotonic() - cached[0] < max_age):
        return cached[1]
    found: list[Path] = []
    for dirpath, dirnames, _ in os.walk(key):  # does not follow symlinks
        for name in list(dirnames):
            if name in _SITE_DIR_NAMES:
                found.append(Path(dirpath, name))
                dirnames.remove(name)  # a site dir's packages are scanned by hidden_entries
            elif name in ("share", "include", "src") and dirpath == key:
                dirnames.remove(name)  # /usr/share, /usr/include, /usr/src hold no importable trees
    found.sort()
    _site_dirs_cache[key] = (time.monotonic(), found)
    return found


_clean_cache: dict[tuple[str, frozenset[str]], bool] = {}


def runtime_has_none_of(version: str | None, names: Iterable[str]) -> bool:
    """True when the runtime ``version`` is built here and none of ``names`` is in its Python dirs.

    A container from that runtime's image then has nothing to hide, and the Docker backend skips
    the clean-up command. False whenever it cannot tell (another image, a runtime not built here).
    """
    if not version or not version.startswith(f"{RUNTIME_SUITE}-"):
        return False
    key = (version, frozenset(normalise(n) for n in names))
    if key not in _clean_cache:
        info = find_runtime(version)
        _clean_cache[key] = info is not None and not any(
            hidden_entries(site, key[1]) for top in ("usr", "opt") for site in site_dirs(info.rootfs / top))
    return _clean_cache[key]


def termgym_install_dir() -> Path | None:
    """The directory this termgym is imported from, when it sits under ``/usr`` (a system install)."""
    here = Path(__file__).resolve().parents[1]
    return here if str(here).startswith("/usr/") else None


def mask_shell_command(names: Iterable[str]) -> str:
    """A shell command that deletes ``names``' entries from every Python site directory under /usr.

    For a container made from an image (the Docker backend): its file system is its own, so the
    copies are removed before the agent's first command rather than mounted over.
    """
    wanted = sorted({normalise(n) for n in names})
    script = (
        "from __future__ import annotations\nimport os, shutil\n"
        f"{_ENTRY_SOURCE}\n"
        "dirs = []\n"
        "for top in ('/usr', '/opt'):\n"
        "    for path, subdirs, _ in os.walk(top):\n"
        "        for n in [n for n in subdirs if n in ('site-packages', 'dist-packages')]:\n"
        "            dirs.append(os.path.join(path, n))\n"
        "            subdirs.remove(n)\n"
        "for d in dict.fromkeys(dirs):\n"
        f"    for rel in hidden_entries(d, {wanted!r}):\n"
        "        p = os.path.join(d, rel)\n"
        "        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)\n"
    )
    # An image without python3 has no Python packages to hide; a failure inside must show.
    return f"if command -v python3 >/dev/null 2>&1; then python3 -I -c {_shell_quote(script)}; fi"


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _function_source(fn) -> str:
    import inspect

    return inspect.getsource(fn)


# The same classification runs inside containers (their python3, not ours): ship its source.
_ENTRY_SOURCE = "\n".join([
    "import functools\nimport re",
    "_METADATA_SUFFIXES = " + repr(_METADATA_SUFFIXES),
    _function_source(normalise),
    _function_source(entry_distribution),
    _function_source(hidden_entries),
])

__all__ = [
    "RUNTIME_PACKAGES",
    "RUNTIME_SUITE",
    "RuntimeInfo",
    "RuntimeMissing",
    "build_runtime",
    "current_version",
    "find_runtime",
    "hidden_distributions",
    "hidden_entries",
    "require_runtime",
    "runtime_home",
    "runtime_mode",
]
