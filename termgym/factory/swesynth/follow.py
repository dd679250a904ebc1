"""A compact suite follows its project's newer deselections (``termgym swesynth follow-project``).

A project's ``project.toml`` can leave tests out after a suite was built from it: ``termgym swesynth
flaky`` finds a wall-clock test that fails under load and adds it to ``[[deselect]]`` and to the
``--deselect`` options of its ``test_command``. A suite built before still grades with the old
command and still requires that test, so its oracle can fail on a busy machine, and ``merge``
refuses the project's newer tasks (``test_command differs``). :func:`follow_project` brings one
project of a suite to the project's current command without running anything:

* the new command must be the old one with ``--deselect`` options added (and none taken away):
  a test selected again, or any other change, has no recorded baseline here and is refused
  (generate the tasks again);
* the required tests the added options leave out (:func:`~termgym.factory.swesynth.screen.excluded`,
  as pytest reads a node id, a class or a parametrised test) leave the baseline, each task's
  ``target_tests`` and the coverage map (:meth:`~termgym.tasks.swesynth.selection.CoverageMap.without`:
  a test's coverage does not depend on which others run, so nothing is traced again);
* a task whose every target test is left out can no longer show its bug and is refused by name:
  nothing is written while one remains;
* ``suite.json`` keeps what was followed under the project (``followed``: the tests deselected and
  how many required tests and targets that dropped).

The records' generation-time ``validation`` stays as measured; ``python -m
benchmarks.swesynth_sweep --resume`` grades the changed tasks again with the new command.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from termgym.factory.swesynth.merge import MergeError, record_lines
from termgym.factory.swesynth.screen import excluded
from termgym.jsonl import write_json, write_json_lines
from termgym.tasks.swesynth.selection import CoverageMap, SelectionError
from termgym.tasks.swesynth.store import locked_index


class FollowError(Exception):
    """The suite cannot follow the project; the message names the project, the file and why."""


@dataclass
class FollowResult:
    repo: str
    old_command: str
    new_command: str
    deselected: list[str] = field(default_factory=list)  # the --deselect entries added
    dropped_tests: list[str] = field(default_factory=list)  # required tests they leave out
    targets: dict[str, list[str]] = field(default_factory=dict)  # task -> target tests dropped from it
    written: bool = False

    @property
    def changed(self) -> bool:
        return self.old_command != self.new_command

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "old_command": self.old_command, "new_command": self.new_command,
                "deselected": self.deselected, "dropped_tests": self.dropped_tests, "targets": self.targets,
                "written": self.written}


def split_deselects(command: str, where: str) -> tuple[list[str], list[str]]:
    """``command``'s words without its ``--deselect`` options, and the node ids those options name."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise FollowError(f"{where}: the test command does not parse ({exc}): {command!r}") from None
    rest: list[str] = []
    deselects: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--deselect="):
            deselects.append(word.split("=", 1)[1])
        elif word == "--deselect":
            if i + 1 >= len(words):
                raise FollowError(f"{where}: --deselect without a test at the end of {command!r}")
            deselects.append(words[i + 1])
            i += 1
        else:
            rest.append(word)
        i += 1
    return rest, deselects


def follow_project(suite_dir: str | Path, repo: str, *, write: bool = False, project=None) -> FollowResult:
    """Bring ``repo`` of the compact suite ``suite_dir`` to its project's current test command
    (see the module's doc); ``project`` defaults to the project set's project of that name.
    Without ``write`` only checks and says what would change."""
    from termgym.tasks.swesynth.projects import ProjectError, load_projects

    suite_dir = Path(suite_dir)
    index_path = suite_dir / "suite.json"
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FollowError(f"{index_path}: no readable suite.json ({exc})") from None
    repos = index.get("repos") or {}
    info = repos.get(repo)
    if info is None:
        raise FollowError(f"{index_path}: no project {repo!r}; known: {', '.join(sorted(repos)) or 'none'}")
    if project is None:
        name = info.get("project", repo)
        try:
            project = load_projects().get(name)
        except ProjectError as exc:
            raise FollowError(str(exc)) from None
        if project is None:
            raise FollowError(f"project {name!r} of {index_path} is not in the project set "
                              "(bundled, or --projects-dir)")
    old, new = str(info.get("test_command", "")), project.test_command
    result = FollowResult(repo=repo, old_command=old, new_command=new)
    if old == new:
        return result
    old_rest, old_ids = split_deselects(old, f"{index_path}: {repo}")
    new_rest, new_ids = split_deselects(new, f"project {project.name}")
    if old_rest != new_rest:
        raise FollowError(f"project {repo}: the test command changed beyond --deselect options "
                          f"({old!r} in {index_path}, {new!r} in the project): generate the tasks again")
    again = [t for t in old_ids if t not in new_ids]
    if again:
        raise FollowError(f"project {repo}: {again[0]} is selected again by the project's command; the suite "
                          f"has no baseline run for it: generate the tasks again")
    result.deselected = [t for t in new_ids if t not in old_ids]

    baseline_path = suite_dir / info.get("baseline", f"baselines/{repo}.json")
    try:
        baseline = json.loads(baseline_path.read_text(encoding="utf-8"))
        tests = list(baseline["tests"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FollowError(f"{baseline_path}: the baseline of {repo} does not read: {exc}") from None
    result.dropped_tests = [t for t in tests if excluded(t, result.deselected)]
    gone = set(result.dropped_tests)
    records_path = suite_dir / info.get("records", f"records/{repo}.jsonl")
    try:
        lines = record_lines(records_path)
    except MergeError as exc:
        raise FollowError(str(exc)) from None
    lost = []
    for line in lines:
        targets = list((line.get("bug") or {}).get("target_tests") or [])
        dropped = [t for t in targets if excluded(t, result.deselected)]
        if dropped:
            result.targets[line["task_id"]] = dropped
            if len(dropped) == len(targets):
                lost.append(line["task_id"])
    if lost:
        raise FollowError(f"project {repo}: {len(lost)} task(s) fail only tests the project now deselects "
                          f"(first: {lost[0]} in {records_path}); they cannot be graded without them: "
                          "remove them from the suite or generate the tasks again")

    selection_path = suite_dir / "selection" / f"{repo}.json"
    cmap = None
    if selection_path.is_file():
        try:
            cmap = CoverageMap.from_json(json.loads(selection_path.read_text(encoding="utf-8")),
                                         where=str(selection_path))
        except (ValueError, SelectionError) as exc:
            raise FollowError(f"{selection_path}: {exc}") from None
    if not write:
        return result

    for line in lines:
        dropped = set(result.targets.get(line["task_id"], ()))
        if dropped:
            line["bug"]["target_tests"] = [t for t in line["bug"]["target_tests"] if t not in dropped]
    write_json_lines(records_path, lines)
    baseline["tests"] = [t for t in tests if t not in gone]
    write_json(baseline_path, baseline, indent=0)  # as the store writes it: one test a line
    if cmap is not None:
        write_json(selection_path, cmap.without(gone).to_json(), separators=(",", ":"))
    with locked_index(suite_dir) as locked:
        entry = locked["repos"][repo]
        entry["test_command"] = new
        entry.setdefault("followed", []).append({
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "deselected": result.deselected,
            "required_tests_dropped": len(result.dropped_tests), "tasks_with_targets_dropped": len(result.targets)})
    result.written = True
    return result


__all__ = ["FollowError", "FollowResult", "follow_project", "split_deselects"]
