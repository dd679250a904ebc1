"""Building the fast-grade coverage maps of a compact suite (the factory side of :mod:`.selection`).

``python -m termgym.factory.swesynth.selection_build [--suite DIR] [--project NAME ...] [--force]``
traces each project's clean suite once and writes ``<suite>/selection/<project>.json``; resumable.
It lives apart from :mod:`.selection` (what a grade reads) so that the runtime never imports the
suite loader back.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from termgym.jsonl import write_json
from termgym.tasks.swesynth.selection import CoverageMap, SelectionError, build_map, load_map, task_selection

#: A project whose required tests' ids add up to more than this gets no map: its grades run the full
#: set (python_multipart's ids hold a 10 MB parameter; a map would copy them, and a selected command
#: naming one could not be run anyway: :data:`~termgym.tasks.swesynth.selection.MAX_COMMAND_BYTES`).
MAX_MAP_TEST_BYTES = 1_000_000


def too_long_to_map(tests: Sequence[str]) -> str:
    """Why a project with these required tests gets no coverage map (``""``: it gets one)."""
    size = sum(len(t.encode()) for t in tests)
    if size > MAX_MAP_TEST_BYTES:
        return (f"its {len(tests)} required test ids take {size:,} bytes (more than {MAX_MAP_TEST_BYTES:,}): "
                "its grades run every required test")
    return ""


def map_from_baseline(name: str, base, tests: Sequence[str], tree: Path, source_dirs: Sequence[str],
                      test_dirs: Sequence[str] = ()) -> CoverageMap:
    """The coverage map of ``tests`` (a project's required tests, all among the baseline's) from the
    traced clean run a :class:`~termgym.factory.swesynth.screen.Baseline` already holds: what
    ``generate`` writes for its new tasks without tracing the suite again."""
    from termgym.tasks.swesynth.tree import list_source_files

    lines: dict[str, dict[str, list[int]]] = {}
    for file, per_line in base.coverage.items():
        for line, indices in per_line.items():
            for i in indices:
                lines.setdefault(base.tests[i], {}).setdefault(file, []).append(line)
    sources = {p: (tree / p).read_text(encoding="utf-8") for p in list_source_files(tree, source_dirs, test_dirs)}
    return build_map(name, base.tree_hash, list(tests), sources, lines, base.import_lines, base.spawners,
                     base.tests)


def backfill(suite_dir: str | Path, projects: Sequence[str] | None = None, *, force: bool = False,
             backend: str = "local", log: Callable[[str], None] = print,
             traced: Mapping[str, CoverageMap] | None = None) -> dict[str, Path]:
    """Write ``<suite>/selection/<project>.json`` for each project of a compact suite (resumable).

    One traced run of the project's clean suite per project (:class:`~termgym.factory.swesynth.screen.
    ScreenWorker` with line tracing, in a sandbox of the task runtime), unless ``traced`` gives the
    project's map from a run already made (:func:`map_from_baseline`); a project whose map exists
    for the same tree and required tests is skipped unless ``force``; tasks added since are given
    their selection without a new run."""
    from termgym.factory.swesynth.screen import ProjectEnv, ScreenWorker, tree_hash
    from termgym.tasks.swesynth.suite import SweSynthSuite
    from termgym.tasks.swesynth.tree import list_source_files

    suite_dir = Path(suite_dir)
    index = json.loads((suite_dir / "suite.json").read_text(encoding="utf-8"))
    repos = index.get("repos") or {}
    wanted = list(projects) if projects else sorted(repos)
    unknown = [p for p in wanted if p not in repos]
    if unknown:
        raise ValueError(f"{suite_dir}: no project {', '.join(unknown)}; known: {', '.join(sorted(repos))}")
    suite = SweSynthSuite(suite_dir, grade_tests="full", behaviour="any")  # every task gets its map
    out: dict[str, Path] = {}
    for name in wanted:
        info = repos[name]
        ids = [t for t in suite.task_ids("all") if suite._facts(t)[1] == name]
        if not ids:
            continue
        first = suite.record(ids[0])
        tree = first.repo_dir
        tests = list(first.all_tests)
        why_not = too_long_to_map(tests)
        if why_not:
            log(f"{name}: no coverage map: {why_not}")
            continue
        digest = tree_hash(tree)
        target = suite_dir / "selection" / f"{name}.json"
        cmap = None
        if target.is_file() and not force:
            try:
                cmap = load_map(target)
            except SelectionError:
                cmap = None
            if cmap is not None and (cmap.tree_hash != digest or cmap.tests != tests):
                cmap = None
        given = (traced or {}).get(name)
        if cmap is None and given is not None and given.tree_hash == digest and given.tests == tests:
            cmap = given
        if cmap is None:
            started = time.monotonic()
            env = ProjectEnv.for_project(info["project"], backend=backend) if info.get("project") else \
                ProjectEnv(backend=backend)
            source_dirs = list(first.source_dirs) or list(info.get("source_dirs") or [])
            worker = ScreenWorker(tree, first.test_command, source_dirs, env)
            try:
                run = worker.run({}, None, trace=True, timeout=max(600.0, 10 * first.test_timeout))
            finally:
                worker.close()
            if not run.passed:
                raise RuntimeError(f"{name}: the traced clean run passed no test: {run.log_tail[-1500:]}")
            sources = {p: (tree / p).read_text(encoding="utf-8")
                       for p in list_source_files(tree, source_dirs, first.test_dirs)}
            cmap = build_map(name, digest, tests, sources, run.lines, run.import_lines, run.spawners, run.passed)
            log(f"{name}: traced {len(run.outcomes)} tests in {time.monotonic() - started:.0f}s; "
                f"{sum(len(f) for f in cmap.functions.values())} functions, {len(cmap.always)} always-run tests")
        for tid in ids:
            if tid not in cmap.tasks or force:
                cmap.tasks[tid] = task_selection(cmap, suite.record(tid))
        write_json(target, cmap.to_json(), separators=(",", ":"))
        full = sum(v == "full" for v in cmap.tasks.values())
        log(f"{name}: {len(ids)} tasks, {full} need the full set; wrote {target}")
        out[name] = target
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m termgym.factory.swesynth.selection_build [--suite DIR] [--project NAME ...] [--force]``."""

    from termgym.tasks.swesynth.suite import SUITE_DIR

    parser = argparse.ArgumentParser(description="Backfill per-task test selections (fast grades) of a suite.")
    parser.add_argument("--suite", default=str(SUITE_DIR))
    parser.add_argument("--project", action="append", default=None)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    backfill(args.suite, args.project, force=args.force)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
