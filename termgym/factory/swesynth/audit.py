"""``termgym swesynth audit``: the task-quality checks over a whole suite, per project.

For each task (all, or a sample drawn by a seed) the static checks of
:mod:`~termgym.factory.swesynth.quality` read its report, and, with ``run``, one long-lived sandbox
per project (the project's test environment, the clean tree) runs:

* the report's repro as written, on the clean tree and with the bug patch swapped in;
* for a multi-bug task, the target tests with each bug alone (the bug patch split by bug): each
  must break at least one, and the report must show the call of one test each bug breaks.

The result counts, per project and over the suite, the tasks passing each check
(:data:`~termgym.factory.swesynth.quality.CHECKS`); a check that cannot be decided for a task (a
multi-bug patch whose bugs share a hunk) is counted as undecided, not as passed.
"""

from __future__ import annotations

import json
import random
import re
import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from termgym.factory.swesynth.failures import read_failure
from termgym.factory.swesynth.quality import (
    _RUNNER,
    CHECKS,
    _outcome,
    import_lines,
    project_packages,
    read_test_module,
    repro_code,
    shows_difference,
    static_checks,
)

#: Not a check: whether the repro shows the difference once the imports the test module makes are
#: added in front (what the report writer now does), for suites written before it did.
WITH_IMPORTS = "repro shows the difference with imports added"
COLUMNS = (*CHECKS, WITH_IMPORTS)

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def split_patch(patch: str) -> list[tuple[str, int, int, list[str]]]:
    """A unified diff's hunks: ``(path, old start line, old line count, body lines)``."""
    out: list[tuple[str, int, int, list[str]]] = []
    path = None
    current: list[str] | None = None
    for line in patch.splitlines():
        if line.startswith("+++ "):
            path = line[4:].strip()
            path = path[2:] if path.startswith("b/") else path
            current = None
            continue
        if line.startswith(("--- ", "diff ")):
            current = None
            continue
        m = _HUNK.match(line)
        if m and path is not None:
            current = []
            out.append((path, int(m.group(1)), int(m.group(2) or 1), current))
        elif current is not None:
            current.append(line)
    return out


def apply_hunks(text: str, hunks: Sequence[tuple[str, int, int, list[str]]]) -> str:
    """``text`` with the given hunks (of one file) applied, bottom first."""
    lines = text.splitlines(keepends=True)
    for _, start, count, body in sorted(hunks, key=lambda h: -h[1]):
        new = [b[1:] + "\n" for b in body if b[:1] in (" ", "+")]
        old = [b[1:] for b in body if b[:1] in (" ", "-")]
        begin = start - 1 if count else start
        if [x.rstrip("\n") for x in lines[begin:begin + len(old)]] != old:
            raise ValueError(f"a hunk at line {start} does not match the clean file")
        lines[begin:begin + len(old)] = new
    return "".join(lines)


def bug_units(record) -> list[list[dict[str, Any]]]:
    """The record's bugs: one per mutation, except that a coordinated bug's edits are one bug."""
    units: dict[str, list[dict[str, Any]]] = {}
    for i, m in enumerate(record.mutations or []):
        key = m["bug_type"] if str(m.get("bug_type", "")).startswith("coordinated") else f"#{i}"
        units.setdefault(key, []).append(m)
    return list(units.values())


def unit_files(record, repo: Path) -> list[dict[str, str]] | None:
    """The mutated files of each bug alone (``None``: two bugs share a hunk, they cannot be split)."""
    hunks = split_patch(record.bug_patch)
    owner: dict[int, int] = {}
    units = bug_units(record)
    for u, unit in enumerate(units):
        for m in unit:
            for h, (path, start, count, _) in enumerate(hunks):
                if path == m["path"] and start <= m["line"] < start + max(count, 1):
                    if owner.get(h, u) != u:
                        return None
                    owner[h] = u
    if len(owner) != len(hunks):
        return None
    out = []
    for u in range(len(units)):
        chosen = [hunks[h] for h, o in owner.items() if o == u]
        files: dict[str, str] = {}
        for path in {h[0] for h in chosen}:
            files[path] = apply_hunks((repo / path).read_text(encoding="utf-8"), [h for h in chosen if h[0] == path])
        out.append(files)
    return out


def _run_code(worker, files: dict[str, str], code: str, sys_path: Sequence[str], timeout: float = 60.0):
    """Run ``code`` in the worker's sandbox with ``files`` swapped in (then restored)."""
    box, wd = worker.box, worker.workdir
    originals = {p: (worker.tree / p).read_text(encoding="utf-8") for p in files}
    box.exec("mkdir -p /tmp/.tg-repro", timeout=30)
    box.write_file("/tmp/.tg-repro/runner.py", _RUNNER)
    box.write_file("/tmp/.tg-repro/repro.py", code)
    for path, text in files.items():
        box.write_file(f"{wd}/{path}", text)
    try:
        result = box.exec(f"cd {shlex.quote(wd)} && env -u PYTHONSTARTUP PYTHONPATH={shlex.quote(':'.join(sys_path))} "
                          f"PYTHONHASHSEED=0 python3 -B /tmp/.tg-repro/runner.py /tmp/.tg-repro/repro.py 2>&1 "
                          "| tail -c 8000", timeout=timeout)
    finally:
        for path, text in originals.items():
            box.write_file(f"{wd}/{path}", text)
    return _outcome(result.output)


def audit_task(task, worker=None) -> dict[str, str | None]:
    """``{check: ""}`` passed, ``{check: why}`` failed, ``{check: None}`` undecided, for one task."""
    from termgym.factory.swesynth.patches import patch_files
    from termgym.tasks.swesynth.behaviour import task_sys_path

    record = task.record
    repo = Path(record.repo_dir)
    results: dict[str, str | None] = dict(static_checks(record.problem_statement, record.target_tests, repo,
                                                        task.source_dirs))
    units = bug_units(record)
    if len(units) <= 1:
        results["each bug breaks a test"] = ""
        results["report names every symptom"] = ""
    if worker is None:
        results.setdefault("each bug breaks a test", None)
        results.setdefault("report names every symptom", None)
        results["repro shows the difference"] = None
        return results
    code = repro_code(record.problem_statement)
    if code is None:
        results["repro shows the difference"] = "the report shows no code to run"
    else:
        buggy_files = {p: apply_hunks((repo / p).read_text(encoding="utf-8"),
                                      [h for h in split_patch(record.bug_patch) if h[0] == p])
                       for p in patch_files(record.bug_patch)}
        sys_path = task_sys_path(task)
        clean = _run_code(worker, {}, code, sys_path)
        buggy = _run_code(worker, buggy_files, code, sys_path)
        results["repro shows the difference"] = shows_difference(record.problem_statement, clean, buggy)
        # not a check (the repro is judged as written): how many would run had the writer added imports
        module = read_test_module(record.target_tests[0], repo)
        needed = import_lines(code, module, project_packages(repo, task.source_dirs))
        if needed and not results["repro shows the difference"] == "":
            code2 = "\n".join(needed) + "\n" + code
            results[WITH_IMPORTS] = shows_difference(record.problem_statement, _run_code(worker, {}, code2, sys_path),
                                                     _run_code(worker, buggy_files, code2, sys_path))
        else:
            results[WITH_IMPORTS] = results["repro shows the difference"] if needed is not None else "test-only names"
    if len(units) > 1:
        split = unit_files(record, repo)
        if split is None:
            results["each bug breaks a test"] = None
            results["report names every symptom"] = None
        else:
            groups = []
            for files in split:
                run = worker.run(files, list(record.target_tests), timeout=max(60.0, record.test_timeout))
                failed = run.failed_among(record.target_tests)
                groups.append([read_failure(t, run.messages.get(t, ""), repo) for t in failed])
            empty = [i + 1 for i, g in enumerate(groups) if not g]
            results["each bug breaks a test"] = "" if not empty else \
                f"bug {', '.join(map(str, empty))} of {len(groups)} breaks no target test alone"
            missing = [i + 1 for i, g in enumerate(groups) if not any(f.call and f.call in record.problem_statement
                                                                       for f in g)]
            results["report names every symptom"] = "" if not missing else \
                f"bug {', '.join(map(str, missing))} of {len(groups)} has no symptom in the report"
    return results


def _audit_project(tasks: dict[str, Any], project_ids: list[str], run: bool, backend: str,
                   tick: Callable[[], None]) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """One project's row of the table and its failures, in one long-lived sandbox."""
    from termgym.factory.swesynth.screen import ProjectEnv, ScreenWorker

    worker = None
    if run:
        first = tasks[project_ids[0]].record
        env = ProjectEnv.for_project(first.project, backend) if first.project else ProjectEnv(backend=backend)
        worker = ScreenWorker(Path(first.repo_dir), first.test_command, tasks[project_ids[0]].source_dirs, env)
    row: dict[str, Any] = {"tasks": len(project_ids), **{c: [0, 0] for c in COLUMNS}}
    failures: list[tuple[str, str, str]] = []
    try:
        for tid in project_ids:
            results = audit_task(tasks[tid], worker)
            for check in COLUMNS:
                why = results.get(check)
                if why is None:
                    continue
                row[check][1] += 1
                row[check][0] += not why
                if why:
                    failures.append((tid, check, why))
            tick()
    finally:
        if worker is not None:
            worker.close()
    return row, failures


def audit(suite, *, sample: int | None = None, seed: int = 0, run: bool = True, backend: str = "local",
          workers: int = 1, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Audit ``suite`` (a :class:`~termgym.tasks.swesynth.suite.SweSynthSuite`), ``workers`` projects
    at once; returns ``{"tasks", "seconds", "projects": {project: {"tasks", check: [passed, decided]}},
    "total": ..., "failures": [(task, check, why) ...]}`` (the same whatever ``workers`` is)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    ids = list(suite.task_ids("all"))  # every split: the held-out projects too
    if sample is not None and sample < len(ids):
        ids = sorted(random.Random(seed).sample(ids, sample))
    by_project: dict[str, list[str]] = {}
    tasks = {}
    for tid in ids:
        task = suite.load(tid)
        tasks[tid] = task
        by_project.setdefault(task.record.project or task.record.repo, []).append(tid)
    started = time.monotonic()
    lock = threading.Lock()
    done = 0

    def tick() -> None:
        nonlocal done
        with lock:
            done += 1
            if progress:
                progress(done, len(ids))

    projects = sorted(by_project)
    # the largest projects first, so that one long project does not start last
    order = sorted(projects, key=lambda p: -len(by_project[p]))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {p: pool.submit(_audit_project, tasks, by_project[p], run, backend, tick) for p in order}
        outcome = {p: futures[p].result() for p in order}
    table = {p: outcome[p][0] for p in projects}
    failures = [f for p in projects for f in outcome[p][1]]
    total: dict[str, Any] = {"tasks": len(ids), **{c: [sum(r[c][0] for r in table.values()),
                                                       sum(r[c][1] for r in table.values())] for c in COLUMNS}}
    return {"tasks": len(ids), "sample": sample, "seed": seed, "run": run, "seconds": round(time.monotonic() - started, 1),
            "projects": table, "total": total, "failures": failures}


def format_audit(result: dict[str, Any]) -> str:
    """The audit as a Markdown table: per project, the share of tasks passing each check."""
    short = {"each bug breaks a test": "bugs break", "report names every symptom": "symptoms",
             "repro has its imports": "imports", "repro uses no test-only names": "no test names",
             "repro calls the project": "calls project", "named API is public": "public API",
             "expected matches the tests": "expected", "repro shows the difference": "repro runs",
             WITH_IMPORTS: "(repro runs with imports)"}
    head = "| project | tasks | " + " | ".join(short[c] for c in COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 2)]

    def cell(pair: list[int]) -> str:
        passed, decided = pair
        return f"{100 * passed / decided:.0f} %" if decided else "n/a"

    for project, row in [*sorted(result["projects"].items()), ("**all**", result["total"])]:
        lines.append(f"| {project} | {row['tasks']} | " + " | ".join(cell(row.get(c, [0, 0])) for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def write_audit(result: dict[str, Any], path: str | Path) -> None:
    """The audit as JSON (what ``--json`` writes)."""
    Path(path).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


__all__ = ["apply_hunks", "audit", "audit_task", "bug_units", "format_audit", "split_patch", "unit_files",
           "write_audit"]
