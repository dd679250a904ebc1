"""Real open-source projects for SWE-SYNTH: pinned sdists, their licences, and their test environments.

Each project lives in ``termgym_data/swesynth/projects/<name>/``: the sdist exactly as downloaded
from the package index, its licence file(s) copied out, and ``project.toml``::

    name, version, sdist, sha256          what was downloaded, and its digest
    license, license_files                SPDX id and the copied licence files
    domain, description                   for people and for the tables in docs/swesynth.md
    source_dirs, test_dirs                where bugs may go / the tests (protected, never graded)
    python_path                           directories (relative to the tree) put on PYTHONPATH (``src``)
    test_command                          run from the tree's root (carries the ``--ignore``/``--deselect``)
    test_requirements                     the full lock of the test environment, ``pkg==ver`` lines,
                                          installed with ``--no-deps`` (pytest included)
    test_hashes                           ``pkg -> sha256`` of the wheel each lock line installs
    deselect                              ``[[deselect]] test, reason``: left out of the suite, and why
    protected_files                       configuration files a fix never needs to touch
    test_style                            ``unittest`` (TestCase classes), ``pytest`` or ``mixed``
    lines, tests, suite_seconds           measured facts (source lines, tests collected, one clean run)

:func:`project_tree` unpacks a verified sdist once into the cache. :func:`provision` builds each
project's *test environment*, a ``pip install --target`` directory of the pinned wheels, beside the
task runtime (``$TERMGYM_TESTENV_DIR``, default ``/var/lib/termgym/runtime/testenvs/<name>-<lockhash>``). It needs
the package index and is run by ``termgym swesynth provision`` (``scripts/setup.sh`` calls it); after
that every task of the project runs offline. A sandbox sees the environment read-only at
:data:`TESTENV_MOUNT` (:func:`project_sandbox_spec_parts`: an ``ro_binds`` entry and ``PYTHONPATH``),
on the local and the Docker backend alike, shared by every task of the project.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from termgym.archives import lands_inside
from termgym_data import SWESYNTH_DIR

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

#: Where the bundled project folders live.
PROJECTS_DIR: Path = SWESYNTH_DIR / "projects"
#: The default suite's folder (``suite.SUITE_DIR``, which imports this module; a test keeps them equal).
DEFAULT_SUITE_DIR: Path = SWESYNTH_DIR / "suite-v2"
#: Environment variable naming more project sets (folders of project folders, ``os.pathsep``
#: separated), e.g. one ``termgym swesynth add-project --root DIR`` wrote: their projects are
#: found by name beside the bundled ones, by generation, bundling and the tasks made from them.
PROJECTS_PATH_ENV = "TERMGYM_SWESYNTH_PROJECTS"
#: Where a project's test environment appears inside a sandbox (read-only).
TESTENV_MOUNT = "/opt/swesynth-testenv"
#: The command that builds missing test environments (named in every "missing" error).
PROVISION_COMMAND = "termgym swesynth provision"
#: The interpreter the sandboxes run (the pinned runtime's Debian Python): wheels are chosen for it.
TARGET_PYTHON = "3.11"
TARGET_PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "linux_x86_64")
#: Written last into a finished test environment; its absence means "not provisioned".
MARKER = ".termgym-testenv.json"
#: Bumped when the layout of a test environment changes (part of its directory name).
TESTENV_LAYOUT = 2  # 2: byte-code compiled at provisioning (the mount is read-only)

_REQUIRED = ("name", "version", "sdist", "sha256", "license", "license_files", "domain", "description",
             "source_dirs", "test_dirs", "test_command", "test_requirements", "test_hashes")
_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")
#: SPDX ids of the permissive licences a bundled project may carry.
PERMISSIVE = frozenset({"MIT", "BSD-2-Clause", "BSD-3-Clause", "Apache-2.0", "ISC", "PSF-2.0"})
#: File-level copyleft licences a project may carry too. MPL-2.0's conditions bind each covered file,
#: not the work it sits in (its section 3.3): the sdist is redistributed unmodified with its licence
#: files, and a task's bugged copy of a file is source that keeps its notice, under the same licence
#: (sections 3.1 and 3.4). GPL and LGPL reach further and are not allowed (docs/swesynth.md, "Licences a project may carry").
FILE_COPYLEFT = frozenset({"MPL-2.0"})
#: Every licence a project folder may carry.
ALLOWED_LICENCES = PERMISSIVE | FILE_COPYLEFT


class ProjectError(ValueError):
    """A project manifest or sdist is wrong; the message names the project and the field."""


class TestEnvMissing(RuntimeError):
    """A project's test environment has not been provisioned on this machine (the message says how)."""

    __test__ = False  # not a pytest test class


@dataclass(frozen=True)
class Deselected:
    """A test left out of the project's suite, and why (flaky, slow, needs network or a missing tool)."""

    test: str
    reason: str


@dataclass(frozen=True)
class Project:
    """One bundled project (the fields of ``project.toml``; see the module docstring)."""

    name: str
    version: str
    sdist: str
    sha256: str
    license: str
    license_files: tuple[str, ...]
    domain: str
    description: str
    source_dirs: tuple[str, ...]
    test_dirs: tuple[str, ...]
    test_command: str
    test_requirements: tuple[str, ...]
    test_hashes: tuple[tuple[str, str], ...]
    folder: Path
    python_path: tuple[str, ...] = ()
    deselect: tuple[Deselected, ...] = ()
    protected_files: tuple[str, ...] = ()
    lines: int | None = None
    tests: int | None = None
    suite_seconds: float | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def sdist_path(self) -> Path:
        return self.folder / self.sdist

    @property
    def lock_hash(self) -> str:
        """A digest of what the test environment holds (lock, hashes, target interpreter, layout)."""
        text = json.dumps([TESTENV_LAYOUT, TARGET_PYTHON, sorted(self.test_requirements),
                           sorted(self.test_hashes)])
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def pytest_version(self) -> str:
        """The pytest the test environment pins."""
        for line in self.test_requirements:
            name, _, version = line.partition("==")
            if normalise_name(name) == "pytest":
                return version
        return ""

    def repos_entry(self) -> dict[str, Any]:
        """What a suite's ``repos`` entry resolves to (test settings of :class:`TaskRecord`)."""
        return {"project": self.name, "test_command": self.test_command, "source_dirs": list(self.source_dirs),
                "test_dirs": list(self.test_dirs)}


def normalise_name(name: str) -> str:
    """A package name as the index compares it (PEP 503: runs of ``-_.`` are one ``-``, lower case)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _need(data: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = data.get(key)
    if value is None:
        raise ProjectError(f"{where}: missing {key!r}")
    if not isinstance(value, kind):
        raise ProjectError(f"{where}: {key!r} must be a {kind.__name__}, got {type(value).__name__}")
    return value


def _strings(data: dict[str, Any], key: str, where: str, required: bool = True) -> tuple[str, ...]:
    value = data.get(key, [] if not required else None)
    if value is None:
        raise ProjectError(f"{where}: missing {key!r}")
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ProjectError(f"{where}: {key!r} must be a list of non-empty strings")
    return tuple(value)


def load_project(folder: str | Path) -> Project:
    """Read and check one project folder (``project.toml`` and the files it names)."""
    folder = Path(folder)
    path = folder / "project.toml"
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProjectError(f"{folder}: no project.toml") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProjectError(f"{where}: not valid TOML ({exc})") from None
    for key in _REQUIRED:
        if key not in data:
            raise ProjectError(f"{where}: missing {key!r}")
    name = _need(data, "name", str, where)
    if name != folder.name:
        raise ProjectError(f"{where}: name {name!r} differs from its folder {folder.name!r}")
    license_id = _need(data, "license", str, where)
    if license_id not in ALLOWED_LICENCES:
        raise ProjectError(f"{where}: license {license_id!r} is not one of the licences a project may carry "
                           f"({', '.join(sorted(ALLOWED_LICENCES))})")
    sha = _need(data, "sha256", str, where)
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise ProjectError(f"{where}: 'sha256' must be 64 lowercase hex digits")
    requirements = _strings(data, "test_requirements", where)
    for line in requirements:
        if not _PINNED.match(line):
            raise ProjectError(f"{where}: test requirement {line!r} is not pinned as 'pkg==version'")
    hashes = _need(data, "test_hashes", dict, where)
    pinned = {normalise_name(line.split("==")[0]) for line in requirements}
    for pkg in pinned:
        digest = next((v for k, v in hashes.items() if normalise_name(k) == pkg), None)
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ProjectError(f"{where}: test_hashes has no sha256 for test requirement {pkg!r}")
    stray = sorted(k for k in hashes if normalise_name(k) not in pinned)
    if stray:
        raise ProjectError(f"{where}: test_hashes names packages not in test_requirements: {', '.join(stray)}")
    if "pytest" not in pinned:
        raise ProjectError(f"{where}: test_requirements must pin the pytest the project supports")
    deselect = []
    for n, entry in enumerate(data.get("deselect") or []):
        if not isinstance(entry, dict) or not entry.get("test") or not entry.get("reason"):
            raise ProjectError(f"{where}: deselect[{n}] needs 'test' and 'reason'")
        deselect.append(Deselected(str(entry["test"]), str(entry["reason"])))
    sdist = _need(data, "sdist", str, where)
    if "/" in sdist or not (folder / sdist).is_file():
        raise ProjectError(f"{where}: sdist {sdist!r} is not a file in {folder}")
    license_files = _strings(data, "license_files", where)
    for lf in license_files:
        if "/" in lf or not (folder / lf).is_file():
            raise ProjectError(f"{where}: licence file {lf!r} is missing from {folder}")
    style = data.get("test_style", "pytest")
    if style not in ("unittest", "pytest", "mixed"):
        raise ProjectError(f"{where}: test_style {style!r} must be 'unittest', 'pytest' or 'mixed'")
    known = set(_REQUIRED) | {"python_path", "deselect", "protected_files", "lines", "tests", "suite_seconds"}
    return Project(
        name=name, version=_need(data, "version", str, where), sdist=sdist, sha256=sha, license=license_id,
        license_files=license_files, domain=_need(data, "domain", str, where),
        description=_need(data, "description", str, where), source_dirs=_strings(data, "source_dirs", where),
        test_dirs=_strings(data, "test_dirs", where), test_command=_need(data, "test_command", str, where),
        test_requirements=requirements, test_hashes=tuple(sorted((normalise_name(k), v) for k, v in hashes.items())),
        folder=folder, python_path=_strings(data, "python_path", where, required=False),
        deselect=tuple(deselect), protected_files=_strings(data, "protected_files", where, required=False),
        lines=data.get("lines"), tests=data.get("tests"), suite_seconds=data.get("suite_seconds"),
        extra={k: v for k, v in data.items() if k not in known},
    )


_loaded: dict[Path, dict[str, Project]] = {}
_lock = threading.Lock()


def project_roots() -> list[Path]:
    """The project sets searched by name: the bundled one, then each folder of
    :data:`PROJECTS_PATH_ENV` (an entry that is not a directory is an error naming it)."""
    roots = [PROJECTS_DIR]
    for entry in filter(None, os.environ.get(PROJECTS_PATH_ENV, "").split(os.pathsep)):
        path = Path(entry).expanduser().resolve()
        if not path.is_dir():
            raise ProjectError(f"${PROJECTS_PATH_ENV} names {entry!r}, which is not a directory of project folders")
        if path not in roots:
            roots.append(path)
    return roots


def load_projects(root: str | Path | None = None) -> dict[str, Project]:
    """Every project under ``root`` (default: the bundled ones and those of every folder in
    :data:`PROJECTS_PATH_ENV`), by name, checked. A name found in two sets is an error naming both."""
    if root is None:
        merged: dict[str, Project] = {}
        for one_root in project_roots():
            for name, project in load_projects(one_root).items():
                if name in merged:
                    raise ProjectError(f"project {name!r} is in two project sets: {merged[name].folder} and "
                                       f"{project.folder} (${PROJECTS_PATH_ENV})")
                merged[name] = project
        return merged
    root = Path(root)
    with _lock:
        if root in _loaded:
            return dict(_loaded[root])
    if not root.is_dir():
        raise ProjectError(f"no projects directory at {root}")
    projects = {p.name: load_project(p) for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith(".")}
    with _lock:
        _loaded[root] = projects
    return dict(projects)


def get_project(name: str, root: str | Path | None = None) -> Project:
    """One project by name; the error lists the known names."""
    projects = load_projects(root)
    if name not in projects:
        raise ProjectError(f"no SWE-SYNTH project {name!r}; known: {', '.join(sorted(projects)) or '(none)'}")
    return projects[name]


def _as_project(project: str | Project) -> Project:
    return project if isinstance(project, Project) else get_project(project)


# -- the clean tree --------------------------------------------------------------------------------


def cache_root() -> Path:
    """termgym's SWE-SYNTH cache (``$TERMGYM_CACHE_DIR/swesynth``, default ``~/.cache/termgym/swesynth``)."""
    base = os.environ.get("TERMGYM_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "termgym")
    return Path(base) / "swesynth"


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sdist(project: str | Project) -> Path:
    """The project's sdist, after checking its sha256 against the manifest."""
    project = _as_project(project)
    actual = file_sha256(project.sdist_path)
    if actual != project.sha256:
        raise ProjectError(f"project {project.name}: {project.sdist} has sha256 {actual}, the manifest says "
                           f"{project.sha256}")
    return project.sdist_path


#: Dropped from an unpacked tree: build metadata and caches that are not part of the project's code.
_DROPPED = re.compile(r"(^|/)(__pycache__|[^/]*\.egg-info|\.pytest_cache)(/|$)|\.py[co]$")
_trees: dict[tuple[str, str], Path] = {}


def project_tree(name: str | Project, cache: str | Path | None = None) -> Path:
    """The project's clean source tree, unpacked from its verified sdist once into the cache.

    The sdist's top folder is stripped (the tree's root holds ``pyproject.toml``), egg-info and
    byte-code are dropped, every member must stay inside the tree (no links out, no devices), and
    Python files get LF line endings (:func:`lf_endings`).
    Treat the result as read-only: every task of the project starts from it.
    """
    project = _as_project(name)
    cache = Path(cache) if cache is not None else cache_root()
    key = (str(cache), project.sha256)
    with _lock:
        known = _trees.get(key)
    if known is not None and known.is_dir():
        return known
    target = cache / "projects" / f"{project.name}-{project.version}-{project.sha256[:12]}"
    marker = target / ".termgym-tree"
    if marker.is_file() and marker.read_text().split()[1:] != [_TREE_FORMAT]:
        lf_endings(target)  # unpacked before Python files were given LF endings: given them in place
        marker.write_text(f"{project.sha256} {_TREE_FORMAT}\n")
    if not marker.is_file():
        verify_sdist(project)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{project.name}-", dir=target.parent))
        try:
            _unpack(project, tmp)
            tree = tmp / "tree"
            lf_endings(tree)
            (tree / ".termgym-tree").write_text(f"{project.sha256} {_TREE_FORMAT}\n")
            try:
                os.rename(tree, target)
            except OSError:
                if not (target / ".termgym-tree").is_file():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    with _lock:
        _trees[key] = target
    return target


#: What a tree's marker says after its sha256: its Python files have LF line endings (:func:`lf_endings`).
_TREE_FORMAT = "lf"


def lf_endings(tree: Path) -> list[Path]:
    """Give every Python file under ``tree`` LF line endings (``\\r\\n`` -> ``\\n``); the files changed.

    Bug and fix patches are made from file texts read with universal newlines, so their lines end
    in ``\\n``; ``git apply`` of such a patch fails on a file whose lines end in ``\\r\\n``
    (mistletoe 1.6.0 ships 45 such files: each of its candidate bugs that got as far as the behaviour
    check failed there, and none became a task). Python
    reads both the same, so the project's code and tests behave as the sdist's do."""
    changed = []
    for path in sorted(tree.rglob("*.py")):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\r\n" in data:
            tmp = path.with_name(f".{path.name}.lf")
            tmp.write_bytes(data.replace(b"\r\n", b"\n"))
            os.chmod(tmp, path.stat().st_mode & 0o777)
            os.replace(tmp, path)
            changed.append(path)
    return changed


def _unpack(project: Project, dest: Path) -> None:
    tree = dest / "tree"
    tree.mkdir()
    with tarfile.open(project.sdist_path, "r:*") as tar:
        members = tar.getmembers()
        tops = {PurePosixPath(m.name).parts[0] for m in members if PurePosixPath(m.name).parts}
        if len(tops) != 1:
            raise ProjectError(f"project {project.name}: {project.sdist} has no single top folder ({sorted(tops)[:5]})")
        top = tops.pop()
        for member in members:
            rel = PurePosixPath(member.name).relative_to(top)
            if not rel.parts or _DROPPED.search(rel.as_posix()):
                continue
            if ".." in rel.parts or rel.is_absolute():
                raise ProjectError(f"project {project.name}: {project.sdist} member {member.name!r} leaves the tree")
            out = tree / rel
            if not lands_inside(out.parent, tree):
                raise ProjectError(f"project {project.name}: {project.sdist} member {member.name!r} goes through a "
                                   "link out of the tree")
            if member.isdir():
                out.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                out.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(member) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                os.chmod(out, 0o755 if member.mode & 0o111 else 0o644)
            elif member.issym():
                # pyparsing's docs/CONTRIBUTING.md -> ../CONTRIBUTING.md stays inside: judged where it lands
                link = PurePosixPath(member.linkname)
                target = posixpath.normpath((rel.parent / link).as_posix())
                if link.is_absolute() or target == ".." or target.startswith("../"):
                    raise ProjectError(f"project {project.name}: symlink {member.name!r} points outside the tree")
                out.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(member.linkname, out)
                if not lands_inside(out, tree):  # through a link made before it
                    out.unlink()
                    raise ProjectError(f"project {project.name}: symlink {member.name!r} points outside the tree")
            else:
                raise ProjectError(f"project {project.name}: {project.sdist} member {member.name!r} is not a "
                                   "file, folder or link")


# -- test environments -----------------------------------------------------------------------------


def testenv_root() -> Path:
    """Where provisioned test environments live: ``$TERMGYM_TESTENV_DIR``, else ``testenvs/`` beside
    the task runtime (``/var/lib/termgym/runtime/testenvs`` for root, see
    :func:`termgym.sandbox.runtime.runtime_home`). Not under the cache: a test that points
    ``$TERMGYM_CACHE_DIR`` at a fresh folder still finds what setup provisioned."""
    configured = os.environ.get("TERMGYM_TESTENV_DIR")
    if configured:
        return Path(configured)
    from termgym.sandbox.runtime import runtime_home
    return runtime_home() / "testenvs"


def testenv_dir(project: str | Project) -> Path:
    """The directory the project's test environment is (or would be) provisioned into."""
    project = _as_project(project)
    return testenv_root() / f"{project.name}-{project.lock_hash}"


def testenv_ready(project: str | Project) -> bool:
    return (testenv_dir(project) / MARKER).is_file()


def require_testenv(project: str | Project) -> Path:
    """The provisioned test environment, or :class:`TestEnvMissing` naming the command that builds it."""
    project = _as_project(project)
    path = testenv_dir(project)
    if not (path / MARKER).is_file():
        raise TestEnvMissing(
            f"the test environment of SWE-SYNTH project {project.name!r} is not provisioned on this machine "
            f"(expected at {path}); run `{PROVISION_COMMAND} --project {project.name}` (needs the package "
            "index once; scripts/setup.sh does it for every project)")
    return path


def served_projects(suite_dir: str | Path | None = None) -> list[str]:
    """The bundled projects the default suite serves tasks from (what an episode needs provisioned).

    Read from the suite's ``suite.json`` (``repos``; default: the default real-project suite); in
    the compact layout a project the build tried but kept no task from (an empty or missing
    ``records/<name>.jsonl``) serves none. Every task counts, whatever its behaviour check, since
    ``behaviour="any"`` serves them all. The other bundled projects only feed the factory
    (``termgym swesynth provision --all``). A suite without ``suite.json`` serves none; a broken
    one raises :class:`ProjectError` naming the file.
    """
    path = Path(suite_dir if suite_dir is not None else DEFAULT_SUITE_DIR) / "suite.json"
    if not path.is_file():
        return []
    try:
        repos = json.loads(path.read_text()).get("repos", {})
    except (OSError, ValueError, AttributeError) as exc:
        raise ProjectError(f"{path}: cannot read the suite's projects: {exc}") from exc
    if not isinstance(repos, dict):
        raise ProjectError(f"{path}: 'repos' must be a table of project name -> details, not {type(repos).__name__}")
    known = load_projects()
    records = path.parent / "records"

    def has_tasks(name: str) -> bool:
        if not records.is_dir():  # task folders: suite.json lists the projects with tasks
            return True
        file = records / f"{name}.jsonl"
        return file.is_file() and any(line.strip() for line in file.read_text(encoding="utf-8").splitlines())

    return sorted(name for name in repos if name in known and has_tasks(name))


def missing_testenvs(names: Iterable[str] | None = None) -> list[str]:
    """The projects (all by default) whose test environment is not provisioned here."""
    wanted = list(names) if names is not None else sorted(load_projects())
    return [n for n in wanted if not testenv_ready(get_project(n))]


def _pip_command(target: Path, lock: Path) -> list[str]:
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-deps",
           "--require-hashes", "--only-binary", ":all:", "--target", str(target),
           "--python-version", TARGET_PYTHON, "--implementation", "cp", "--abi",
           "cp" + TARGET_PYTHON.replace(".", "")]
    for platform in TARGET_PLATFORMS:
        cmd += ["--platform", platform]
    return cmd + ["-r", str(lock)]


def provision(names: Sequence[str | Project] | None = None, *, force: bool = False,
              log: Callable[[str], None] = print) -> dict[str, Path]:
    """Build the test environment of each project (all by default); returns ``name -> directory``.

    ``names`` are bundled projects' names or :class:`Project` objects (a folder not yet in the
    project set, as ``termgym swesynth add-project`` checks one).

    Reproducible: the full lock is installed with ``--no-deps --require-hashes`` as wheels for the
    runtime's interpreter (:data:`TARGET_PYTHON`), into a directory named after the lock's digest.
    An environment that is already there is kept (idempotent) unless ``force``. Needs the package
    index (or a pip configuration pointing at a mirror); raises ``RuntimeError`` with pip's output
    when an install fails.
    """
    wanted = list(names) if names else sorted(load_projects())
    out: dict[str, Path] = {}
    for item in wanted:
        project = _as_project(item)
        name = project.name
        target = testenv_dir(project)
        if (target / MARKER).is_file() and not force:
            log(f"{name}: test environment ready at {target}")
            out[name] = target
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
        started = time.monotonic()
        try:
            lock = tmp / "requirements.txt"
            lock.write_text("".join(f"{line} --hash=sha256:{dict(project.test_hashes)[normalise_name(line.split('==')[0])]}\n"
                                    for line in project.test_requirements))
            env_dir = tmp / "env"
            proc = subprocess.run(_pip_command(env_dir, lock), capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"provisioning {name}: pip failed (exit {proc.returncode}):\n"
                                   + (proc.stdout + proc.stderr).strip()[-2000:])
            shutil.rmtree(env_dir / "bin", ignore_errors=True)  # console scripts: not used, python3 -m is
            (env_dir / MARKER).write_text(json.dumps({
                "project": name, "version": project.version, "lock_hash": project.lock_hash,
                "requirements": list(project.test_requirements), "python": TARGET_PYTHON,
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }, indent=2) + "\n")
            _make_read_only(env_dir)
            if force and target.exists():
                shutil.rmtree(target, onerror=_force_remove)
            try:
                os.rename(env_dir, target)
            except OSError:
                if not (target / MARKER).is_file():
                    raise
        finally:
            shutil.rmtree(tmp, onerror=_force_remove)
        log(f"{name}: provisioned {len(project.test_requirements)} packages in {time.monotonic() - started:.1f}s "
            f"at {target}")
        out[name] = target
    return out


def _make_read_only(root: Path) -> None:
    """World-readable, nobody-writable: sandboxes of any uid read it, nothing rewrites it by accident."""
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames:
            p = os.path.join(dirpath, n)
            if not os.path.islink(p):
                os.chmod(p, 0o444)
        for n in dirnames:
            os.chmod(os.path.join(dirpath, n), 0o555)
    os.chmod(root, 0o555)


def _force_remove(func, path, _exc) -> None:
    # read-only directories: give the owner write access back, then retry
    try:
        os.chmod(os.path.dirname(path), 0o755)
        os.chmod(path, 0o755)
        func(path)
    except OSError:
        pass


# -- what a sandbox needs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SandboxParts:
    """What a :class:`~termgym.sandbox.base.SandboxSpec` needs to run a project's tests.

    ``ro_binds`` and ``env`` go into the spec; ``python_path`` is the same path list as
    ``env["PYTHONPATH"]`` (the grader puts it after its own plugin directory), and ``trusted_dirs``
    the read-only directories whose code the grader's plugin treats like installed packages.
    """

    ro_binds: dict[str, str]
    env: dict[str, str]
    python_path: tuple[str, ...]
    trusted_dirs: tuple[str, ...]


def project_sandbox_spec_parts(name: str | Project, workdir: str = "/app") -> SandboxParts:
    """Mount the project's provisioned test environment read-only and put it (and ``src/``) on PYTHONPATH.

    Raises :class:`TestEnvMissing` (naming :data:`PROVISION_COMMAND`) when it is not provisioned.
    """
    project = _as_project(name)
    host = require_testenv(project)
    paths = tuple(f"{workdir.rstrip('/')}/{p.strip('/')}" for p in project.python_path) + (TESTENV_MOUNT,)
    return SandboxParts(ro_binds={str(host): TESTENV_MOUNT}, env={"PYTHONPATH": ":".join(paths)},
                        python_path=paths, trusted_dirs=(TESTENV_MOUNT,))


__all__ = [
    "ALLOWED_LICENCES", "FILE_COPYLEFT", "MARKER", "PERMISSIVE", "PROJECTS_DIR", "PROJECTS_PATH_ENV", "PROVISION_COMMAND", "TESTENV_MOUNT", "Deselected", "Project",
    "CleanRun", "ProjectError", "SandboxParts", "TestEnvMissing", "cache_root", "get_project", "host_pythonpath", "load_project", "load_projects",
    "missing_testenvs", "project_roots", "project_sandbox_spec_parts", "project_tree", "provision", "require_testenv",
    "run_clean_suite", "served_projects",
    "testenv_dir", "testenv_ready", "testenv_root", "verify_sdist",
]


def host_pythonpath(name: str | Project, tree: str | Path) -> str:
    """``PYTHONPATH`` for running the project's tests on the host from ``tree`` (a copy of the clean
    tree): its ``python_path`` directories, then the provisioned test environment (which holds the
    pinned pytest, so ``python3 -m pytest`` is that one). Same order as in a sandbox."""
    project = _as_project(name)
    env = require_testenv(project)
    return ":".join([*(str(Path(tree) / p) for p in project.python_path), str(env)])


# -- checking a project ---------------------------------------------------------------------------


@dataclass
class CleanRun:
    """The project's unmodified suite run under the grader in a sandbox (what a task's grading does)."""

    project: str
    backend: str
    seconds: float
    outcomes: dict[str, str]
    exit_code: int
    tamper: list[str]
    log_tail: str
    versions: dict[str, str]

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for outcome in self.outcomes.values():
            out[outcome] = out.get(outcome, 0) + 1
        return out

    @property
    def ok(self) -> bool:
        """Every collected test passed or was skipped, nothing voided the run, and pytest exited 0."""
        return (self.exit_code == 0 and not self.tamper and bool(self.outcomes)
                and all(o in ("passed", "skipped") for o in self.outcomes.values()))


def run_clean_suite(name: str | Project, backend: str = "local", timeout: float = 600.0,
                    workdir: str = "/app") -> CleanRun:
    """Run the project's clean suite in a fresh ``backend`` sandbox through termgym's grader.

    The sandbox is what a task of the project gets: the clean tree copied to ``workdir``, the test
    environment mounted read-only, the grader's plugin watching. Raises :class:`TestEnvMissing`
    when the test environment is not provisioned.
    """
    from termgym.sandbox import make_sandbox
    from termgym.sandbox.base import SandboxSpec
    from termgym.tasks.swesynth.grading import run_graded_tests

    project = _as_project(name)
    parts = project_sandbox_spec_parts(project, workdir)
    spec = SandboxSpec(workdir=workdir, copy_dirs={str(project_tree(project)): workdir}, env=dict(parts.env),
                       ro_binds=dict(parts.ro_binds))
    box = make_sandbox(backend, spec)
    try:
        box.start()
        started = time.monotonic()
        # pytest cuts its summary's failure lines to the terminal's width (80 columns here): a wide
        # one keeps whole the messages that add-project shows and writes into reasons
        run = run_graded_tests(box, f"COLUMNS=400 {project.test_command}", workdir, list(project.source_dirs), timeout,
                               python_path=parts.python_path, trusted_dirs=parts.trusted_dirs)
        seconds = time.monotonic() - started
    finally:
        box.close()
    return CleanRun(project=project.name, backend=backend, seconds=round(seconds, 2), outcomes=run.outcomes,
                    exit_code=run.exit_code, tamper=list(run.tamper), log_tail=run.log_tail, versions=run.versions)
