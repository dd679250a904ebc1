"""Single-bug tasks split out of multi-bug tasks (``termgym swesynth split``).

A task that carries two bugs is served only when each bug alone is told apart by a held-out
input of its behaviour check (the per-bug rule: a half fix must not pass). Many are not: one of
the two bugs shows only through the tests, or the check's calls reach one function only. The bugs
themselves are often good ones, and each is a task of its own when it stands alone.

:class:`SplitBugs` is a candidate source for :func:`~termgym.factory.swesynth.generate.generate`
(its ``breaker``, as release history is): it proposes each bug of the project's multi-bug tasks
alone (:func:`single_bugs`: the bug patch's hunks of that bug, as :func:`~termgym.factory.swesynth.
audit.unit_files` splits them; a coordinated bug's edits stay together), and nothing else.
Everything a task needs is then made again for the single bug, as for any candidate: the
required tests that fail with it alone, its report written and run, its behaviour check recorded,
the sandbox check. A bug some single-bug task of the suite already carries is not proposed again.
The new tasks go into their own compact suite; ``termgym swesynth merge`` brings them into the
default under its per-function cap, and the default suite's rules (distinct tasks, project share)
decide which are served.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from termgym.factory.swesynth.audit import bug_units, buggy_files, unit_files
from termgym.factory.swesynth.bugs.source import Mutation
from termgym.factory.swesynth.card import is_multi_bug


class SplitError(ValueError):
    """A project's tasks cannot be split as asked; the message says why."""


def _span(path: str, clean: str, buggy: str) -> tuple[int, int, str]:
    """The smallest ``(start, end, replacement)`` that turns ``clean`` into ``buggy``."""
    if clean == buggy:
        raise SplitError(f"{path}: the bug leaves the file unchanged")
    start = 0
    limit = min(len(clean), len(buggy))
    while start < limit and clean[start] == buggy[start]:
        start += 1
    end_clean, end_buggy = len(clean), len(buggy)
    while end_clean > start and end_buggy > start and clean[end_clean - 1] == buggy[end_buggy - 1]:
        end_clean -= 1
        end_buggy -= 1
    return start, end_clean, buggy[start:end_buggy]


def single_bugs(record, tree: Path) -> list[tuple[Mutation, ...]]:
    """Each bug of ``record`` alone, as the mutations that make it on the clean ``tree`` (one per
    changed file; the mutations of one bug share a group when it changes several files). ``[]``
    when the record carries one bug, or when its bugs share a hunk of the bug patch (they cannot be
    told apart by place)."""
    units = bug_units(record)
    if len(units) < 2:
        return []
    per_unit = unit_files(record, tree)
    if per_unit is None:
        return []
    out: list[tuple[Mutation, ...]] = []
    for unit, files in zip(units, per_unit):
        first = unit[0]
        edits = []
        for path in sorted(files):
            clean = (tree / path).read_text(encoding="utf-8")
            start, end, replacement = _span(path, clean, files[path])
            line = clean.count("\n", 0, start) + 1
            owner = next((m for m in unit if m["path"] == path), first)
            edits.append((path, start, end, replacement, line, owner))
        group = ""
        if len(edits) > 1:
            key = "|".join(f"{p}:{s}:{e}:{r}" for p, s, e, r, _, _ in edits)
            group = "split-" + hashlib.sha256(key.encode()).hexdigest()[:12]
        out.append(tuple(Mutation(bug_type=owner["bug_type"], path=path, start=start, end=end,
                                  replacement=replacement, line=line, function=owner.get("function"),
                                  description=owner.get("description", ""), group=group)
                         for path, start, end, replacement, line, owner in edits))
    return out


def _bug_key(unit: Sequence[Mutation]) -> tuple:
    return tuple(sorted((m.path, m.start, m.end, m.replacement) for m in unit))


class SplitBugs:
    """The candidate source that proposes the single bugs of a project's multi-bug tasks.

    ``records`` are the project's task records (:class:`~termgym.tasks.swesynth.records.TaskRecord`);
    ``tree`` is the clean tree they were made on; ``only`` (task ids) limits the split to those
    tasks. Bugs that a single-bug record of ``records`` already carries, and bugs two multi-bug
    tasks share, are proposed once. ``generate`` proposes nothing else while this source is in use
    (``proposes_all``)."""

    proposes_all = True

    def __init__(self, records: Iterable, tree: Path, *, only: Iterable[str] | None = None) -> None:
        self.tree = Path(tree)
        wanted = set(only) if only is not None else None
        records = list(records)
        have = set()
        for record in records:
            if not is_multi_bug(record.to_json()):
                units = single_bugs_of_one(record, self.tree)
                if units:
                    have.add(_bug_key(units))
        self.sources: dict[tuple, list[str]] = {}  # bug -> the multi-bug tasks it came from
        self.units: list[tuple[Mutation, ...]] = []
        self.skipped = {"already a task": 0, "bugs share a hunk": 0}
        for record in records:
            if (wanted is not None and record.task_id not in wanted) or not is_multi_bug(record.to_json()):
                continue
            units = single_bugs(record, self.tree)
            if not units:
                self.skipped["bugs share a hunk"] += 1
                continue
            for unit in units:
                key = _bug_key(unit)
                if key in have:
                    self.skipped["already a task"] += 1
                    continue
                if key not in self.sources:
                    self.units.append(unit)
                self.sources.setdefault(key, []).append(record.task_id)
        self.bug_types = tuple(sorted({m.bug_type for unit in self.units for m in unit}))

    def propose(self, files: dict[str, str], bug_types: Sequence[str] = (), *, seed: int = 0) -> list[Mutation]:
        """Every single bug, each checked against ``files`` (the clean texts generate reads): a bug
        whose text no longer matches the tree is left out."""
        same = {path: path in files and files[path] == (self.tree / path).read_text(encoding="utf-8")
                for path in {m.path for unit in self.units for m in unit}}
        return [m for unit in self.units if all(same[x.path] for x in unit) for m in unit]

    def origin(self, mutations: Sequence[Mutation], target_tests: Sequence[str]) -> dict[str, Any]:
        """Where a kept task came from: the multi-bug tasks that carried its bug."""
        return {"split_from": sorted(self.sources.get(_bug_key(mutations), []))}


def single_bugs_of_one(record, tree: Path) -> tuple[Mutation, ...] | None:
    """The mutations of a single-bug record (its one bug, as :func:`single_bugs` writes a bug);
    ``None`` when its patch does not apply to ``tree``."""
    try:
        files = buggy_files(record, tree)
    except (OSError, ValueError):  # a hunk that does not match the tree
        return None
    out = []
    for path in sorted(files):
        try:
            start, end, replacement = _span(path, (tree / path).read_text(encoding="utf-8"), files[path])
        except (OSError, SplitError):
            return None
        out.append(Mutation(bug_type="", path=path, start=start, end=end, replacement=replacement, line=0,
                            function=None, description=""))
    return tuple(out)


def split_project(name: str, out: str | Path, *, suite: str | Path | None = None, only: Iterable[str] | None = None,
                  unserved: bool = True, seed: int = 0, workers: int = 1, backend: str = "local",
                  time_budget: float | None = None, flaky_check: bool = True, served_only: bool = False,
                  log=None, progress=None):
    """Split project ``name``'s multi-bug tasks of the compact ``suite`` (default: the bundled
    default suite) into single-bug tasks, generated into the compact suite ``out``; returns
    ``(GenerationResult, SplitBugs)``. ``unserved`` (the default) splits only the tasks the
    default policy does not serve by their behaviour check (a served multi-bug task is checked bug
    by bug already); ``only`` names the tasks to split instead. ``served_only`` keeps only new
    tasks whose own check decides a grade."""
    from termgym.factory.swesynth.bundle import TEST_ID_FRACTION, project_held_out
    from termgym.factory.swesynth.generate import generate
    from termgym.factory.swesynth.screen import ProjectEnv
    from termgym.tasks.swesynth.projects import get_project, project_tree
    from termgym.tasks.swesynth.store import split_for
    from termgym.tasks.swesynth.suite import SUITE_DIR, SweSynthSuite

    say = log or (lambda _line: None)
    project = get_project(name)
    where = Path(suite) if suite is not None else SUITE_DIR
    source_suite = SweSynthSuite(where, behaviour="any", distinct=False, repos=[project.name])
    ids = source_suite.task_ids("all")
    if not ids:
        raise SplitError(f"the suite {where} holds no task of {project.name}")
    records = [source_suite.record(tid) for tid in ids]
    if only is None and unserved:
        only = [tid for tid in ids if not source_suite.has_servable_check(tid)]
    tree = project_tree(project)
    source = SplitBugs(records, tree, only=only)
    if not source.units:
        raise SplitError(f"{project.name}: no multi-bug task to split ({len(ids)} tasks; skipped: {source.skipped})")
    say(f"{project.name}: {len(source.units)} single bugs from {len({t for v in source.sources.values() for t in v})} "
        f"multi-bug tasks (skipped: {source.skipped})")
    out = Path(out)
    held_out = project_held_out(out, project.name)
    splitter = (lambda tid: "test") if held_out else (lambda tid: split_for(tid, TEST_ID_FRACTION, "test_id"))
    result = generate(tree, project.test_command, n=len(source.units), seed=seed, out=out, name=project.name,
                      source_dirs=list(project.source_dirs), test_dirs=list(project.test_dirs),
                      project_env=ProjectEnv.for_project(project.name, backend=backend), project=project.name,
                      storage="compact", exclude_tests=[d.test for d in project.deselect], breaker=source,
                      workers=workers, time_budget=time_budget, split=splitter, max_attempts=len(source.units),
                      backend=backend, suite_name=f"{project.name}-split", progress=progress,
                      flaky_check=flaky_check, served_only=served_only)
    say(f"{project.name}: {result.stats.kept} single-bug tasks kept of {len(source.units)}")
    return result, source


__all__ = ["SplitBugs", "SplitError", "single_bugs", "single_bugs_of_one", "split_project"]
