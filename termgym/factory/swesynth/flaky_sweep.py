"""Sweeping a project set for flaky tests (``termgym swesynth flaky``).

For each project: the static scan of its test files for timing assertions
(:func:`~termgym.factory.swesynth.flaky.timing_candidates`, the files its ``[[deselect]]`` leaves out
skipped), and unless ``static``, the probe (:func:`~termgym.factory.swesynth.flaky.probe`) on its
clean tree in the sandbox its tasks use. A flaky test found there belongs in the project's
``[[deselect]]`` with its reason, as ``add-project`` writes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from termgym.factory.swesynth.flaky import CANDIDATE_RUNS, TIME_BUDGET, probe, timing_candidates
from termgym.factory.swesynth.screen import ProjectEnv, excluded
from termgym.tasks.swesynth.projects import Project, project_tree


def test_files(project: Project) -> list[str]:
    """The ``*.py`` files of the project's test folders (or its test files), relative to its tree,
    less those its ``[[deselect]]`` entries leave out whole."""
    tree = project_tree(project)
    entries = [d.test for d in project.deselect if "::" not in d.test]
    out = []
    for d in project.test_dirs:
        path = tree / d
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            rel = file.relative_to(tree).as_posix()
            if not excluded(rel, entries):
                out.append(rel)
    return out


test_files.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def sweep_project(project: Project, *, static: bool = False, busy: int | None = None,
                  candidate_runs: int = CANDIDATE_RUNS, time_budget: float = TIME_BUDGET, backend: str = "local",
                  log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """One project's sweep as plain data: ``candidates`` (node id -> why) and, unless ``static``, the
    probe's ``summary``, ``flaky`` tests with their reasons, ``notes`` and ``runs``. Raises
    :class:`~termgym.tasks.swesynth.projects.TestEnvMissing` when a probe needs an environment that
    is not provisioned."""
    tree = project_tree(project)
    deselected = [d.test for d in project.deselect]
    if static:
        candidates = timing_candidates(tree, test_files(project))
        return {"project": project.name, "candidates": {t: w for t, w in candidates.items()
                                                        if not excluded(t, deselected)}}
    report = probe(tree, project.test_command, ProjectEnv.for_project(project, backend), busy=busy,
                   candidate_runs=candidate_runs, time_budget=time_budget, log=log)
    return {"project": project.name, "summary": report.summary(), **report.to_json()}


__all__ = ["sweep_project", "test_files"]
