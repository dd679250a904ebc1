"""Registered Harbor datasets (``terminal-bench@2.0``): read a registry, fetch a dataset, keep it cached.

A Harbor registry is a JSON list of datasets; each names its tasks by git repository, path in
that repository and commit::

    [{"name": "terminal-bench", "version": "2.0", "description": "...",
      "tasks": [{"name": "hello-world", "git_url": "https://github.com/org/repo.git",
                 "git_commit_id": "0123...", "path": "tasks/hello-world"}, ...],
      "metrics": [...]}]

:func:`download_dataset` fetches every task folder at its commit (one shallow fetch per repository
and commit; a full fetch where a server refuses to serve a commit by id), checks that the commit
it got is the one named, and writes the folders plus a ``manifest.json`` to
``$TERMGYM_CACHE_DIR/harbor/datasets/<name>@<version>/``. The manifest records each task's
repository, path, commit and a hash of its files, so a later run uses the cache without any network
(the registry is not read again) once every task's files still hash to what was fetched.

Every problem names what and where: the registry file and the dataset entry, the task and its
field, the repository and the commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

#: Harbor's public registry (the file ``harbor run -d NAME@VERSION`` reads).
DEFAULT_REGISTRY = "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json"
#: The variable that points termgym at another registry (a path or an http(s)/file URL).
REGISTRY_ENV = "TERMGYM_HARBOR_REGISTRY"
MANIFEST = "manifest.json"
_COMMIT = re.compile(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")


class RegistryError(ValueError):
    """A registry, a dataset entry or a download was wrong; the message names what and where."""


@dataclass(frozen=True)
class RegistryTask:
    """One task of a registered dataset: where its folder lives."""

    name: str
    path: str
    git_url: str | None = None
    git_commit_id: str | None = None  # None: the repository's default branch head


@dataclass
class DatasetSpec:
    """One dataset version of a registry."""

    name: str
    version: str
    description: str = ""
    tasks: list[RegistryTask] = field(default_factory=list)
    metrics: list[Any] = field(default_factory=list)

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


def parse_ref(ref: str) -> tuple[str, str | None]:
    """``"terminal-bench@2.0"`` -> ``("terminal-bench", "2.0")``; no ``@``: the version is ``None``."""
    name, sep, version = str(ref).strip().partition("@")
    if not name or (sep and not version) or "/" in version:
        raise RegistryError(f"dataset reference {ref!r} is not NAME@VERSION (e.g. terminal-bench@2.0)")
    return name, version or None


def registry_source(registry: str | os.PathLike[str] | None = None) -> str:
    """The registry to read: the argument, else ``$TERMGYM_HARBOR_REGISTRY``, else Harbor's public one."""
    return str(registry or os.environ.get(REGISTRY_ENV) or DEFAULT_REGISTRY)


def read_registry(source: str | os.PathLike[str] | None = None, *, timeout: float = 60.0) -> list[DatasetSpec]:
    """Read and check a registry (a local path, a ``file://`` or an ``http(s)://`` URL)."""
    where = registry_source(source)
    try:
        if re.match(r"^https?://", where) or where.startswith("file://"):
            with urllib.request.urlopen(where, timeout=timeout) as response:  # noqa: S310 - a user-given URL
                text = response.read().decode("utf-8")
        else:
            text = Path(where).expanduser().read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise RegistryError(f"cannot read the Harbor registry {where}: {exc} (give another with --registry "
                            f"or ${REGISTRY_ENV}; a downloaded dataset is used from the cache without it)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RegistryError(f"the Harbor registry {where} is not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise RegistryError(f"the Harbor registry {where} must be a JSON list of datasets, got {type(data).__name__}")
    return [_dataset(where, i, item) for i, item in enumerate(data)]


def _dataset(where: str, index: int, item: Any) -> DatasetSpec:
    at = f"{where}: dataset [{index}]"
    if not isinstance(item, dict):
        raise RegistryError(f"{at} must be an object, got {item!r}"[:300])
    for key in ("name", "version"):
        if not isinstance(item.get(key), str) or not item[key].strip():
            raise RegistryError(f"{at}: '{key}' must be a non-empty string, got {item.get(key)!r}")
    at = f"{where}: dataset {item['name']}@{item['version']}"
    tasks = item.get("tasks")
    if not isinstance(tasks, list):
        raise RegistryError(f"{at}: 'tasks' must be a list, got {type(tasks).__name__}")
    spec = DatasetSpec(item["name"], item["version"], str(item.get("description") or ""),
                       metrics=list(item.get("metrics") or []))
    seen: set[str] = set()
    for i, task in enumerate(tasks):
        tat = f"{at}: tasks[{i}]"
        if not isinstance(task, dict):
            raise RegistryError(f"{tat} must be an object, got {task!r}"[:300])
        path = task.get("path")
        if not isinstance(path, str) or not path.strip():
            raise RegistryError(f"{tat}: 'path' must be a path in the repository, got {path!r}")
        parts = PurePosixPath(path).parts
        if PurePosixPath(path).is_absolute() or ".." in parts:
            raise RegistryError(f"{tat}: 'path' {path!r} must stay inside the repository (relative, no '..')")
        name = task.get("name") or PurePosixPath(path).name
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
            raise RegistryError(f"{tat}: 'name' {name!r} is not a folder name")
        if name in seen:
            raise RegistryError(f"{tat}: task name {name!r} is used twice")
        seen.add(name)
        git_url = task.get("git_url")
        commit = task.get("git_commit_id")
        if git_url is not None and (not isinstance(git_url, str) or not git_url.strip()):
            raise RegistryError(f"{tat} ({name}): 'git_url' must be a repository URL, got {git_url!r}")
        if commit is not None:
            if not isinstance(commit, str) or not _COMMIT.match(commit.lower()):
                raise RegistryError(f"{tat} ({name}): 'git_commit_id' must be a full commit hash "
                                    f"(40 hex digits), got {commit!r}")
            commit = commit.lower()
        if git_url is None:
            raise RegistryError(f"{tat} ({name}): no 'git_url' (termgym fetches registered tasks from git; "
                                "a local task folder is run with tasks_dir instead)")
        spec.tasks.append(RegistryTask(name, str(PurePosixPath(path)), git_url, commit))
    return spec


def find_dataset(datasets: list[DatasetSpec], ref: str, where: str = "the registry") -> DatasetSpec:
    """The dataset ``NAME@VERSION`` (without a version: the highest), or an error listing what exists."""
    name, version = parse_ref(ref)
    versions = {d.version: d for d in datasets if d.name == name}
    if not versions:
        known = ", ".join(sorted({d.name for d in datasets})) or "none"
        raise RegistryError(f"no dataset {name!r} in {where} (it has: {known})")
    if version is None:
        version = _highest(list(versions))
    if version not in versions:
        raise RegistryError(f"{where} has no version {version!r} of {name!r} (versions: {', '.join(sorted(versions))})")
    return versions[version]


def _highest(versions: list[str]) -> str:
    if "head" in versions:
        return "head"

    def key(v: str) -> tuple[Any, ...]:
        return tuple((0, int(p)) if p.isdigit() else (-1, p) for p in re.split(r"[.\-]", v))

    return max(versions, key=key)


# -- the cache ----------------------------------------------------------------------------------


def cache_root() -> Path:
    """``$TERMGYM_CACHE_DIR/harbor/datasets`` (default ``~/.cache/termgym/harbor/datasets``)."""
    base = os.environ.get("TERMGYM_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "termgym")
    return Path(base) / "harbor" / "datasets"


def dataset_dir(ref: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    name, version = parse_ref(ref)
    if version is None:
        raise RegistryError(f"dataset reference {ref!r} needs a version for the cache (NAME@VERSION)")
    return Path(cache_dir or cache_root()) / f"{name}@{version}"


def tree_hash(folder: Path) -> str:
    """A hash of a folder's file names, executable bits, link targets and contents."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            digest.update(f"L {rel} {os.readlink(path)}\n".encode())
        elif path.is_file():
            digest.update(f"F {rel} {int(os.access(path, os.X_OK))}\n".encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@dataclass
class DownloadedDataset:
    """A dataset in the cache: its folder (one sub-folder per task) and its manifest."""

    ref: str
    path: Path
    manifest: dict[str, Any]
    fetched: list[str] = field(default_factory=list)  # tasks fetched this time (the others were cached)

    @property
    def task_names(self) -> list[str]:
        return [t["name"] for t in self.manifest["tasks"]]


def cached_dataset(ref: str, cache_dir: str | os.PathLike[str] | None = None) -> DownloadedDataset | None:
    """The dataset from the cache when it is complete and its files unchanged; ``None`` if not cached.

    A cache whose files no longer hash to what was fetched is an error naming the task (it was
    edited or half-deleted: download again with ``force``).
    """
    folder = dataset_dir(ref, cache_dir)
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        return None
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        tasks = manifest["tasks"]
    except (ValueError, KeyError, TypeError) as exc:
        raise RegistryError(f"{manifest_path} is unreadable ({exc}): download {ref} again with --force") from None
    for task in tasks:
        task_dir = folder / task["name"]
        if not task_dir.is_dir() or tree_hash(task_dir) != task.get("tree_hash"):
            raise RegistryError(f"the cached task {task['name']!r} of {ref} ({task_dir}) differs from what was "
                                f"fetched at commit {task.get('commit')}: download it again with --force")
    return DownloadedDataset(ref, folder, manifest)


def download_dataset(
    ref: str,
    *,
    registry: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    force: bool = False,
    task_names: list[str] | None = None,
    log: Any = None,
) -> DownloadedDataset:
    """Fetch the dataset ``NAME@VERSION`` into the cache (or return the cached copy); see the module docstring.

    With a cached copy whose commits are the registry's, nothing is fetched and the registry is not
    read. ``force`` fetches again. ``task_names`` fetches only those tasks (a partial download).
    """
    say = log or (lambda _msg: None)
    name, version = parse_ref(ref)
    if version is not None and not force:
        cached = cached_dataset(ref, cache_dir)
        if cached is not None and (task_names is None or set(task_names) <= set(cached.task_names)):
            return cached
    where = registry_source(registry)
    spec = find_dataset(read_registry(where), ref, where)
    ref = spec.ref
    tasks = spec.tasks
    if task_names is not None:
        unknown = sorted(set(task_names) - {t.name for t in tasks})
        if unknown:
            raise RegistryError(f"{ref} in {where} has no task(s) {', '.join(unknown)}")
        tasks = [t for t in tasks if t.name in set(task_names)]
    folder = dataset_dir(ref, cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    old = {}
    if (folder / MANIFEST).is_file() and not force:
        try:
            old = {t["name"]: t for t in json.loads((folder / MANIFEST).read_text())["tasks"]}
        except (ValueError, KeyError, TypeError):
            old = {}
    entries: dict[str, dict[str, Any]] = {}
    todo: list[RegistryTask] = []
    for task in tasks:
        prior = old.get(task.name)
        if (prior and task.git_commit_id and prior.get("commit") == task.git_commit_id
                and prior.get("git_url") == task.git_url and prior.get("path") == task.path
                and (folder / task.name).is_dir() and tree_hash(folder / task.name) == prior.get("tree_hash")):
            entries[task.name] = prior
        else:
            todo.append(task)
    by_source: dict[tuple[str, str | None], list[RegistryTask]] = {}
    for task in todo:
        by_source.setdefault((str(task.git_url), task.git_commit_id), []).append(task)
    for (git_url, commit), group in by_source.items():
        say(f"fetching {len(group)} task(s) of {ref} from {git_url} at {commit or 'HEAD'}")
        got = _fetch(git_url, commit, group, folder, ref)
        for task in group:
            entries[task.name] = {"name": task.name, "git_url": git_url, "path": task.path, "commit": got,
                                  "requested_commit": commit, "tree_hash": tree_hash(folder / task.name)}
    manifest = {"name": spec.name, "version": spec.version, "description": spec.description,
                "registry": where, "metrics": spec.metrics,
                "tasks": [entries[t.name] for t in tasks if t.name in entries]}
    if task_names is not None and old:  # keep the tasks fetched before that this call did not ask for
        manifest["tasks"] += [t for n, t in old.items() if n not in entries]
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return DownloadedDataset(ref, folder, manifest, fetched=[t.name for t in todo])


def _git(args: list[str], cwd: Path, what: str) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=1800, env=env)
    except FileNotFoundError:
        raise RegistryError("downloading a Harbor dataset needs git (apt-get install git)") from None
    except subprocess.TimeoutExpired:
        raise RegistryError(f"{what}: git {' '.join(args[:2])} ran past 30 minutes") from None
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, ["git", *args], done.stdout, done.stderr)
    return done.stdout.strip()


def _fetch(git_url: str, commit: str | None, tasks: list[RegistryTask], folder: Path, ref: str) -> str:
    """Fetch ``commit`` (or HEAD) of ``git_url`` and copy each task's folder; returns the commit fetched."""
    names = ", ".join(t.name for t in tasks[:5]) + (" ..." if len(tasks) > 5 else "")
    what = f"{ref}: task(s) {names} from {git_url} at {commit or 'HEAD'}"
    with tempfile.TemporaryDirectory(prefix="termgym-harbor-git-") as tmp:
        repo = Path(tmp)
        _git(["init", "-q"], repo, what)
        _git(["remote", "add", "origin", git_url], repo, what)
        target = commit or "HEAD"
        try:
            _git(["fetch", "-q", "--depth", "1", "origin", target], repo, what)
        except subprocess.CalledProcessError as shallow:
            # Some servers do not serve a commit by id; a full fetch finds it if it is reachable.
            try:
                _git(["fetch", "-q", "origin", "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"],
                     repo, what)
            except subprocess.CalledProcessError as full:
                raise RegistryError(f"{what}: cannot fetch the repository: {(full.stderr or shallow.stderr).strip()[-500:]}") from None
            if commit is None:
                raise RegistryError(f"{what}: cannot fetch HEAD: {shallow.stderr.strip()[-500:]}") from None
        resolved = commit if commit is not None else "FETCH_HEAD"
        try:
            got = _git(["rev-parse", "--verify", "--quiet", f"{resolved}^{{commit}}"], repo, what)
        except subprocess.CalledProcessError:
            raise RegistryError(f"{what}: the repository has no commit {commit} (the registry's git_commit_id "
                                "does not exist there, or is not reachable from its branches and tags)") from None
        if commit is not None and got != commit:
            raise RegistryError(f"{what}: fetched commit {got}, not the registry's {commit}")
        for task in tasks:
            dest = folder / task.name
            staging = folder / f".{task.name}.partial"
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
            archive = subprocess.run(["git", "archive", "--format=tar", got, task.path], cwd=repo,
                                     capture_output=True)
            if archive.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                raise RegistryError(f"{ref}: task {task.name!r}: no folder {task.path!r} in {git_url} at commit "
                                    f"{got} ({archive.stderr.decode(errors='replace').strip()[-300:]})")
            extract = subprocess.run(["tar", "-x", "-C", str(staging)], input=archive.stdout, capture_output=True)
            source = staging / task.path
            if extract.returncode != 0 or not source.is_dir():
                shutil.rmtree(staging, ignore_errors=True)
                raise RegistryError(f"{ref}: task {task.name!r}: {task.path!r} in {git_url} at commit {got} is not a "
                                    f"folder")
            shutil.rmtree(dest, ignore_errors=True)
            source.rename(dest)
            shutil.rmtree(staging, ignore_errors=True)
        return got


def manifest_summary(dataset: DownloadedDataset) -> dict[str, Any]:
    """What ``termgym harbor download --json`` prints."""
    return {"dataset": dataset.ref, "path": str(dataset.path), "tasks": len(dataset.manifest["tasks"]),
            "fetched": dataset.fetched, "commits": sorted({t["commit"] for t in dataset.manifest["tasks"]})}


__all__ = ["DEFAULT_REGISTRY", "DatasetSpec", "DownloadedDataset", "RegistryError", "RegistryTask",
           "cached_dataset", "download_dataset", "find_dataset", "parse_ref", "read_registry"]
