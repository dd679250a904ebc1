"""Task records: one inspectable folder per SWE-SYNTH task.

A suite directory holds ``suite.json`` (name, repositories, splits) and one folder per task::

    suite.json
    <task_id>/task.json     the record (public shape, below)
    <task_id>/bug.patch     the injected bug, applied to the clean repository
    <task_id>/fix.patch     its reverse: the oracle fix, applied to the buggy repository

``task.json`` follows the public record shape (``task_id``, ``repo``, ``bug.patch``,
``bug.bug_types``, ``bug.problem_statement``, ``bug.target_tests``, ``original.all_tests``,
``fix_patch``), plus how to run the tests. A record either names a clean repository on the host
(``repo_dir``, or ``suite.json``'s ``repos`` entry) or a Docker ``image`` that contains it at
``workdir`` (the bug patch is then applied when the sandbox starts). A ``repos`` entry (or the
record) may name a bundled ``project`` instead of a path: its clean tree and test settings come from
:mod:`termgym.tasks.swesynth.projects`, and its tests run with the project's provisioned test
environment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RECORD_VERSION = 1


class RecordError(ValueError):
    """A task record is malformed; the message names the record and the field."""


@dataclass
class TaskRecord:
    """One SWE-SYNTH task (see the module docstring for the on-disk shape)."""

    task_id: str
    repo: str
    test_command: str
    bug_patch: str
    bug_types: list[str]
    problem_statement: str
    target_tests: list[str]
    all_tests: list[str]
    fix_patch: str
    repo_dir: Path | None = None
    image: str | None = None
    workdir: str = "/app"
    source_dirs: list[str] = field(default_factory=list)
    test_dirs: list[str] = field(default_factory=list)
    test_timeout: float = 300.0
    mutations: list[dict[str, Any]] = field(default_factory=list)
    generator: dict[str, Any] = field(default_factory=dict)
    #: The bundled project (:mod:`termgym.tasks.swesynth.projects`) the repository is, when it is one:
    #: its clean tree comes from the project's sdist and its tests run with the project's
    #: provisioned test environment.
    project: str | None = None
    #: Where generation proved the task (oracle 1, unfixed 0): backend, interpreter and pytest
    #: versions, the runtime version when the sandbox has one. Empty for tasks not checked there.
    validation: dict[str, Any] = field(default_factory=dict)
    #: What makes the bug easy or hard (traceback_shows_line, test_file_names_module, tokens_changed,
    #: files_touched, edits, cross_module, ...) and the tier they give (easy/medium/hard).
    signals: dict[str, Any] = field(default_factory=dict)
    difficulty: str | None = None
    #: The behaviour check recorded at generation (:mod:`termgym.tasks.swesynth.behaviour`): inputs and
    #: the clean code's answers. Stored beside the record (``behaviour.json`` in a task folder,
    #: ``behaviour/<repo>.jsonl`` in a compact suite), never in ``task.json``; empty when the task has none.
    behaviour: dict[str, Any] = field(default_factory=dict)
    #: Where the bug came from when not from the procedural operators: ``{"source": "history",
    #: "from_version", "to_version", "kind", ...}`` for a release-history task
    #: (:mod:`termgym.factory.swesynth.history`). Empty for procedural tasks.
    origin: dict[str, Any] = field(default_factory=dict)

    def to_json(self, repo_dir: str | None = None) -> dict[str, Any]:
        """The public JSON shape; ``repo_dir`` is written as given (relative paths stay portable)."""
        out: dict[str, Any] = {
            "version": RECORD_VERSION,
            "task_id": self.task_id,
            "repo": self.repo,
            "workdir": self.workdir,
            "test_command": self.test_command,
            "test_timeout": self.test_timeout,
            "source_dirs": self.source_dirs,
            "test_dirs": self.test_dirs,
            "bug": {
                "bug_types": self.bug_types,
                "problem_statement": self.problem_statement,
                "target_tests": self.target_tests,
                "patch": self.bug_patch,
                "mutations": self.mutations,
            },
            "original": {"all_tests": self.all_tests},
            "fix_patch": self.fix_patch,
            "generator": self.generator,
        }
        if self.validation:
            out["validation"] = self.validation
        if self.signals:
            out["signals"] = self.signals
        if self.difficulty:
            out["difficulty"] = self.difficulty
        if self.project:
            out["project"] = self.project
        if self.origin:
            out["origin"] = self.origin
        if self.image:
            out["image"] = self.image
        if repo_dir is not None:
            out["repo_dir"] = repo_dir
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any], *, where: str = "record", base_dir: Path | None = None,
                  repos: dict[str, dict[str, Any]] | None = None, repos_base: Path | None = None) -> TaskRecord:
        """Read a record in the public shape (accepting the reference's aliases).

        ``base_dir`` resolves a relative ``repo_dir``; ``repos`` (from ``suite.json``, paths relative
        to ``repos_base``) supplies the repository directory and test settings for records that
        only name their ``repo``.
        """
        if not isinstance(data, dict):
            raise RecordError(f"{where}: expected a JSON object, got {type(data).__name__}")
        bug = data.get("bug") or {}
        original = data.get("original") or {}
        task_id = data.get("task_id", data.get("instance_id"))
        if task_id in (None, ""):
            raise RecordError(f"{where}: missing 'task_id'")
        where = f"{where} (task {task_id})"
        repo = str(data.get("repo") or "")
        repo_info = (repos or {}).get(repo, {})

        def need(value, name):
            if value in (None, ""):
                raise RecordError(f"{where}: missing {name!r}")
            return value

        fix = data.get("fix_patch") or (data.get("fix") or {}).get("patch") or bug.get("fix_patch")
        image = data.get("image") or data.get("docker_image") or data.get("image_name")
        project = data.get("project") or repo_info.get("project")
        project_info: dict[str, Any] = {}
        if project:
            from termgym.tasks.swesynth.projects import ProjectError, get_project
            try:
                project_info = get_project(str(project)).repos_entry()
            except ProjectError as exc:
                raise RecordError(f"{where}: {exc}") from None
            repo_info = {**project_info, **repo_info}
        resolved = None
        for candidate, base in ((repo_info.get("path"), repos_base), (data.get("repo_dir"), base_dir)):
            if candidate:
                resolved = Path(candidate)
                if not resolved.is_absolute():
                    resolved = ((base or Path.cwd()) / resolved).resolve()
                break
        if resolved is None and project and not image:
            from termgym.tasks.swesynth.projects import project_tree
            resolved = project_tree(str(project))
        if resolved is None and not image:
            raise RecordError(f"{where}: needs 'repo_dir' (a clean repository on the host), a 'repos' "
                              f"entry for {repo!r} in suite.json, or a Docker 'image'")
        record = cls(
            task_id=str(task_id),
            repo=repo or (resolved.name if resolved else str(image)),
            test_command=str(need(data.get("test_command") or data.get("test_cmd")
                                  or repo_info.get("test_command"), "test_command")),
            bug_patch=str(need(bug.get("patch") or data.get("bug_patch"), "bug.patch")),
            bug_types=list(bug.get("bug_types") or data.get("bug_types") or []),
            problem_statement=str(need(bug.get("problem_statement") or data.get("problem_statement"),
                                       "bug.problem_statement")),
            target_tests=list(bug.get("target_tests") or data.get("target_tests") or []),
            all_tests=list(need(original.get("all_tests") or data.get("all_tests"), "original.all_tests")),
            fix_patch=str(need(fix, "fix_patch")),
            repo_dir=resolved,
            image=image,
            workdir=str(data.get("workdir") or repo_info.get("workdir") or "/app"),
            source_dirs=list(data.get("source_dirs") or repo_info.get("source_dirs") or []),
            test_dirs=list(data.get("test_dirs") or repo_info.get("test_dirs") or []),
            test_timeout=float(data.get("test_timeout") or repo_info.get("test_timeout") or 300.0),
            mutations=list(bug.get("mutations") or []),
            generator=dict(data.get("generator") or {}),
            validation=dict(data.get("validation") or {}),
            signals=dict(data.get("signals") or {}),
            difficulty=data.get("difficulty") or None,
            project=str(project) if project else None,
            behaviour=dict(data.get("behaviour") or {}),
            origin=dict(data.get("origin") or {}),
        )
        if not record.workdir.startswith("/"):
            raise RecordError(f"{where}: 'workdir' must be an absolute path, got {record.workdir!r}")
        return record


def write_task(folder: str | Path, record: TaskRecord, repo_dir: str | None = None) -> Path:
    """Write one task folder (``task.json``, ``bug.patch``, ``fix.patch``); returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.json").write_text(json.dumps(record.to_json(repo_dir), indent=2) + "\n", encoding="utf-8")
    (folder / "bug.patch").write_text(record.bug_patch, encoding="utf-8")
    (folder / "fix.patch").write_text(record.fix_patch, encoding="utf-8")
    if record.behaviour:
        (folder / "behaviour.json").write_text(json.dumps({"task_id": record.task_id, "behaviour": record.behaviour},
                                                          separators=(",", ":"), sort_keys=True) + "\n", encoding="utf-8")
    return folder


def read_task(folder: str | Path, repos: dict[str, dict[str, Any]] | None = None,
              repos_base: Path | None = None) -> TaskRecord:
    """Read a task folder (or a ``task.json`` path); ``repos``/``repos_base`` come from ``suite.json``."""
    path = Path(folder)
    if path.is_dir():
        path = path / "task.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(f"{path}: no such task record") from None
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: not valid JSON ({exc})") from None
    sidecar = path.parent / "behaviour.json"
    if sidecar.is_file() and "behaviour" not in data:
        try:
            data["behaviour"] = json.loads(sidecar.read_text(encoding="utf-8")).get("behaviour")
        except (ValueError, AttributeError) as exc:
            raise RecordError(f"{sidecar}: not a behaviour file ({exc})") from None
    return TaskRecord.from_json(data, where=str(path), base_dir=path.parent, repos=repos, repos_base=repos_base)


def read_records_file(path: str | Path) -> list[TaskRecord]:
    """Records from a ``.json`` (one object or a list) or ``.jsonl`` file in the public shape."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        items = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    items.append((f"{path}:{n}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise RecordError(f"{path}:{n}: not valid JSON ({exc})") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{path}: not valid JSON ({exc})") from None
        items = [(f"{path}[{i}]", d) for i, d in enumerate(data)] if isinstance(data, list) else [(str(path), data)]
    return [TaskRecord.from_json(d, where=w, base_dir=path.parent) for w, d in items]
