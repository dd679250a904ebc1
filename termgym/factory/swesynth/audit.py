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

import ast
import json
import random
import re
import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from termgym.factory.swesynth.examples import claim, examples, private_names, shows_claim, undefined_names
from termgym.factory.swesynth.failures import Failure, read_failure
from termgym.factory.swesynth.quality import (
    _RUNNER,
    CHECKS,
    RUN_EXAMPLE,
    _outcome,
    import_lines,
    project_packages,
    read_test_module,
    shows_difference,
    static_checks,
)
from termgym.tasks.swesynth import pyparse
from termgym.tasks.swesynth.repro import repro_code

#: Not a check: whether the repro shows the difference once the imports the test module makes are
#: added in front (what the report writer now does), for suites written before it did.
WITH_IMPORTS = "repro shows the difference with imports added"
#: Every example of the report (each code block, each call written inline), run as written on the
#: clean and the buggy tree, shows what its text claims (:func:`~.examples.shows_claim`).
EVERY_EXAMPLE = "every example shows its stated difference"
#: Static, per report: every example defines or imports every name it uses; it uses no private
#: name of the project, unless the report says why; each example states a value or an exception
#: (with its type) as what should happen, not only "a normal result".
SELF_CONTAINED = "every example defines its names"
NO_PRIVATE = "no private names (or a reason given)"
CONCRETE = "expected result is concrete"
EXAMPLE_COLUMNS = (SELF_CONTAINED, NO_PRIVATE, CONCRETE, EVERY_EXAMPLE)
COLUMNS = (*CHECKS, WITH_IMPORTS, *EXAMPLE_COLUMNS)

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
    """The record's bugs: one per mutation, except that a coordinated bug's edits are one bug, and so
    are a release-history revert's (``regression``: the functions one change between two releases
    touched; the older ``to_bytes`` of an rfc3986 revert misbehaves only on an encoding no test
    passes, yet it is half of the change the tests pin, not a bug of its own)."""
    units: dict[str, list[dict[str, Any]]] = {}
    for i, m in enumerate(record.mutations or []):
        kind = str(m.get("bug_type", ""))
        key = kind if kind.startswith("coordinated") or kind == "regression" else f"#{i}"
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


def buggy_files(record, repo: Path | None = None) -> dict[str, str]:
    """The files the bug patch changes, as the buggy tree has them (the patch applied to the clean
    tree ``repo``, by default the record's)."""
    from termgym.factory.swesynth.patches import patch_files

    repo = Path(record.repo_dir) if repo is None else Path(repo)
    hunks = split_patch(record.bug_patch)
    return {p: apply_hunks((repo / p).read_text(encoding="utf-8"), [h for h in hunks if h[0] == p])
            for p in patch_files(record.bug_patch)}


#: Runs many examples in one process: the project's modules the examples import are imported once,
#: then each example runs in a child forked from that state (a fresh copy of the imported modules,
#: as in a process of its own), with ``SIGALRM`` as its time limit. Writes ``[outcome or null, ...]``
#: (the :data:`~termgym.factory.swesynth.quality._RUNNER` outcomes) to ``argv[3]``.
_BATCH_RUNNER = r'''
import ast, importlib, json, os, signal, sys
codes = json.load(open(sys.argv[1]))
for name in json.loads(sys.argv[2]):
    try:
        importlib.import_module(name)
    except BaseException:
        pass  # the child imports it again and meets the error there
limit = int(os.environ.get("TG_EXAMPLE_TIMEOUT", "30"))

''' + RUN_EXAMPLE + r'''
results = []
for code in codes:
    sys.stdout.flush()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        sys.argv[:] = ["repro.py"]  # as the single runner gives it
        signal.alarm(limit)
        try:
            data = json.dumps(run(code)).encode()
        except BaseException:
            data = b"null"
        os.write(write, data)
        os._exit(0)
    os.close(write)
    chunks = []
    while True:
        chunk = os.read(read, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    try:
        results.append(json.loads(b"".join(chunks) or b"null"))
    except ValueError:
        results.append(None)
json.dump(results, open(sys.argv[3], "w"))
'''


def _run_codes(worker, files: dict[str, str], codes: Sequence[str], sys_path: Sequence[str],
               timeout: float = 600.0) -> list[dict[str, Any] | None]:
    """Run ``codes`` in one process of the worker's sandbox with ``files`` swapped in (then
    restored): :data:`_BATCH_RUNNER`'s outcomes, ``None`` for one that gave none (all ``None`` when
    the process itself failed)."""
    if not codes:
        return []
    box, wd = worker.box, worker.workdir
    originals = {p: (worker.tree / p).read_text(encoding="utf-8") for p in files}
    folder = "/tmp/.tg-repro"
    modules = sorted({m for code in codes for m in _imported_modules(code)})
    box.exec(f"mkdir -p {folder} && rm -f {folder}/batch-out.json", timeout=30)
    box.write_file(f"{folder}/batch.py", _BATCH_RUNNER)
    box.write_file(f"{folder}/codes.json", json.dumps(list(codes)))
    for path, text in files.items():
        box.write_file(f"{wd}/{path}", text)
    try:
        box.exec(f"cd {shlex.quote(wd)} && env -u PYTHONSTARTUP PYTHONPATH={shlex.quote(':'.join(sys_path))} "
                 f"PYTHONHASHSEED=0 python3 -B {folder}/batch.py {folder}/codes.json "
                 f"{shlex.quote(json.dumps(modules))} {folder}/batch-out.json >/dev/null 2>&1", timeout=timeout)
        try:
            out = json.loads(box.read_file(f"{folder}/batch-out.json"))
        except (FileNotFoundError, OSError, ValueError):
            out = None
    finally:
        for path, text in originals.items():
            box.write_file(f"{wd}/{path}", text)
    return out if isinstance(out, list) and len(out) == len(codes) else [None] * len(codes)


def _imported_modules(code: str) -> set[str]:
    """The modules ``code`` imports (``from a.b import c``: ``a.b``)."""
    try:
        tree = pyparse.parse(code)
    except (SyntaxError, ValueError):
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def _key(code: str) -> str:
    """An example's code as a cache key: blank lines and the ends' whitespace left out (a session
    and a script of the same statements are one example)."""
    return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())


class SandboxExamples:
    """Runs examples in one project's long-lived sandbox (``worker``): on the clean tree and with
    ``files`` (a bug's files) swapped in; ``self(code) -> (clean outcome, buggy outcome)``, the
    report writer's ``run``. Each code runs twice per tree (an outcome that changes between the two is
    marked ``"unstable"``, :func:`_stable`), then comes from the cache; :meth:`many` runs a batch in
    one process per tree and run (:data:`_BATCH_RUNNER`), and the clean outcomes can be shared by
    every bug of the project (``clean``)."""

    def __init__(self, worker, files: dict[str, str], sys_path: Sequence[str],
                 clean: dict[str, dict[str, Any] | None] | None = None) -> None:
        self.worker, self.files, self.sys_path = worker, files, list(sys_path)
        self.clean = clean if clean is not None else {}
        self.buggy: dict[str, dict[str, Any] | None] = {}

    def many(self, codes: Sequence[str], *, buggy: bool = True) -> None:
        """Run the codes not run yet, one process per tree and run (``buggy=False``: the clean tree only)."""
        for cache, files in ((self.clean, {}), (self.buggy, self.files))[:2 if buggy else 1]:
            todo = list(dict.fromkeys(_key(c) for c in codes if _key(c) not in cache))
            texts = [k + "\n" for k in todo]
            runs = zip(_run_codes(self.worker, files, texts, self.sys_path),
                       _run_codes(self.worker, files, texts, self.sys_path))
            for key, (first, again) in zip(todo, runs):
                if first is not None and again is not None:  # else: run alone when asked (a batch failed)
                    cache[key] = _stable(first, again)

    def calls(self, tests: Sequence[str], timeout: float = 120.0) -> dict[str, list[dict[str, Any]]]:
        """Where ``tests``' code calls into the project as they run on the buggy tree, with the
        caller's literal locals (:attr:`~termgym.factory.swesynth.screen.ScreenRun.calls`): the
        report writer's examples for tests whose cases come from data files."""
        return self.worker.run(self.files, list(tests), calls=True, timeout=timeout).calls

    def __call__(self, code: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        key = _key(code)
        for cache, files in ((self.clean, {}), (self.buggy, self.files)):
            if key not in cache:
                cache[key] = _stable(_run_code(self.worker, files, key + "\n", self.sys_path),
                                     _run_code(self.worker, files, key + "\n", self.sys_path))
        return self.clean[key], self.buggy[key]


def _stable(first: dict[str, Any] | None, again: dict[str, Any] | None) -> dict[str, Any] | None:
    """One run's outcome, marked ``"unstable"`` when a second run of the same code on the same tree
    gave another (a clock, a random draw: no value a report can quote)."""
    if first is None or again is None or first == again:
        return first
    return {**first, "unstable": True}


def example_runner(worker, files: dict[str, str], sys_path: Sequence[str],
                   clean: dict[str, dict[str, Any] | None] | None = None) -> SandboxExamples:
    """Run examples in ``worker``'s sandbox on the clean tree, then with ``files`` (the buggy
    tree's) swapped in: ``run(code) -> (clean outcome, buggy outcome)``, the report writer's ``run``
    (:class:`SandboxExamples`; ``clean``: clean outcomes already known, by :func:`_key`)."""
    return SandboxExamples(worker, files, sys_path, clean)


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


def example_checks(statement: str, packages: Sequence[str] = ()) -> dict[str, str]:
    """The static example columns (:data:`EXAMPLE_COLUMNS` but the run) of one report."""
    found = examples(statement)
    undefined = sorted(set().union(*(undefined_names(e) for e in found))) if found else []
    private = sorted(set().union(*(private_names(e, packages) for e in found))) if found else []
    explained = private and re.search(r"\b(?:internal|private) (?:helper|function|method|module|class|name)\b",
                                      statement, re.I)
    vague = sum(claim(e).vague for e in found)
    return {SELF_CONTAINED: "" if found and not undefined else
            f"undefined in an example: {', '.join(undefined)}" if found else "the report shows no example",
            NO_PRIVATE: "" if not private or explained else f"private: {', '.join(private)}",
            CONCRETE: "" if not vague else f"{vague} of {len(found)} examples expect only a normal result"}


def static_problem(task, statement: str) -> str:
    """The first of the audit's checks that read a report (:func:`~termgym.factory.swesynth.quality.static_checks`,
    :func:`example_checks`) that ``statement`` fails as ``task``'s report, as ``"check: why"``; ``""``
    when it passes them all. An expected result stated only as "a normal result" does not count
    here (the card counts those against their own limit)."""
    record = task.record
    repo = Path(record.repo_dir)
    results = dict(static_checks(statement, record.target_tests, repo, task.source_dirs))
    results.update(example_checks(statement, sorted(project_packages(repo, task.source_dirs))))
    results.pop(CONCRETE, None)
    return next((f"{check}: {why}" for check, why in results.items() if why), "")


def run_examples(statement: str, run: Callable[[str], tuple[Any, Any]]) -> str:
    """Run every example of ``statement`` (``run(code) -> (clean outcome, buggy outcome)``); why
    one does not show what its text claims (``""``: each does)."""
    found = examples(statement)
    if not found:
        return "the report shows no example"
    for i, example in enumerate(found):
        why = shows_claim(example, *run(example.code))
        if why:
            return f"example {i + 1} of {len(found)}: {why}"
    return ""


def unnamed_symptoms(statement: str, groups: Sequence[Sequence[Failure]]) -> str:
    """Which bugs ``statement`` shows no symptom of: ``groups`` holds, per bug, the failures of the
    target tests that fail with that bug alone (:func:`~termgym.factory.swesynth.failures.read_failure`);
    a bug counts as stated when the call of one of its failures appears in the report. ``""`` when
    every bug is stated, else ``"bug 2 of 2 has no symptom in the report"``."""
    missing = [i + 1 for i, g in enumerate(groups) if not any(f.call and f.call in statement for f in g)]
    return "" if not missing else f"bug {', '.join(map(str, missing))} of {len(groups)} has no symptom in the report"


def audit_task(task, worker=None) -> dict[str, str | None]:
    """``{check: ""}`` passed, ``{check: why}`` failed, ``{check: None}`` undecided, for one task."""
    from termgym.tasks.swesynth.behaviour import task_sys_path

    record = task.record
    repo = Path(record.repo_dir)
    results: dict[str, str | None] = dict(static_checks(record.problem_statement, record.target_tests, repo,
                                                        task.source_dirs))
    results.update(example_checks(record.problem_statement, sorted(project_packages(repo, task.source_dirs))))
    units = bug_units(record)
    if len(units) <= 1:
        results["each bug breaks a test"] = ""
        results["report names every symptom"] = ""
    if worker is None:
        results.setdefault("each bug breaks a test", None)
        results.setdefault("report names every symptom", None)
        results["repro shows the difference"] = None
        results[EVERY_EXAMPLE] = None
        return results
    buggy = buggy_files(record)
    sys_path = task_sys_path(task)
    results[EVERY_EXAMPLE] = run_examples(record.problem_statement, example_runner(worker, buggy, sys_path))
    code = repro_code(record.problem_statement)
    if code is None:
        results["repro shows the difference"] = "the report shows no code to run"
    else:
        clean = _run_code(worker, {}, code, sys_path)
        buggy_run = _run_code(worker, buggy, code, sys_path)
        results["repro shows the difference"] = shows_difference(record.problem_statement, clean, buggy_run)
        # not a check (the repro is judged as written): how many would run had the writer added imports
        module = read_test_module(record.target_tests[0], repo)
        needed = import_lines(code, module, project_packages(repo, task.source_dirs))
        if needed and not results["repro shows the difference"] == "":
            code2 = "\n".join(needed) + "\n" + code
            results[WITH_IMPORTS] = shows_difference(record.problem_statement, _run_code(worker, {}, code2, sys_path),
                                                     _run_code(worker, buggy, code2, sys_path))
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
            results["report names every symptom"] = unnamed_symptoms(record.problem_statement, groups)
    return results


def _audit_project(tasks: dict[str, Any], project_ids: list[str], run: bool, backend: str,
                   tick: Callable[[], None], deadline: float | None = None
                   ) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """One project's row of the table and its failures, in one long-lived sandbox (tasks whose
    turn comes after ``deadline``, a ``time.monotonic()`` value, are counted in ``skipped``)."""
    from termgym.factory.swesynth.screen import ProjectEnv, ScreenWorker

    if deadline is not None and time.monotonic() > deadline:
        for _ in project_ids:
            tick()
        return {"tasks": 0, "skipped": len(project_ids), **{c: [0, 0] for c in COLUMNS}}, []
    worker = None
    if run:
        first = tasks[project_ids[0]].record
        env = ProjectEnv.for_project(first.project, backend) if first.project else ProjectEnv(backend=backend)
        worker = ScreenWorker(Path(first.repo_dir), first.test_command, tasks[project_ids[0]].source_dirs, env)
    row: dict[str, Any] = {"tasks": 0, "skipped": 0, **{c: [0, 0] for c in COLUMNS}}
    failures: list[tuple[str, str, str]] = []
    try:
        for tid in project_ids:
            if deadline is not None and time.monotonic() > deadline:
                row["skipped"] += 1
                tick()
                continue
            row["tasks"] += 1
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
          workers: int = 1, progress: Callable[[int, int], None] | None = None,
          time_budget: float | None = None, task_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """Audit ``suite`` (a :class:`~termgym.tasks.swesynth.suite.SweSynthSuite`), ``workers`` projects
    at once; returns ``{"tasks", "seconds", "projects": {project: {"tasks", check: [passed, decided]}},
    "total": ..., "failures": [(task, check, why) ...], "measures": ...}`` (the same whatever
    ``workers`` is, within the time budget). ``measures`` are the static report measures of the
    audited tasks (:func:`~termgym.factory.swesynth.examples.report_measures`). With
    ``time_budget`` (seconds) no task starts after it has passed: those left are counted in
    ``skipped``, never as passed. ``task_ids`` audits exactly those tasks (a sample drawn before,
    audited again after a change)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from termgym.factory.swesynth.examples import report_measures

    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    ids = list(task_ids) if task_ids is not None else list(suite.task_ids("all"))  # every split
    if task_ids is None and sample is not None and sample < len(ids):
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
    deadline = started + time_budget if time_budget is not None else None
    pyparse.serialise_every_parse()  # the reports are parsed in each thread; so may the standard library
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {p: pool.submit(_audit_project, tasks, by_project[p], run, backend, tick, deadline) for p in order}
        outcome = {p: futures[p].result() for p in order}
    table = {p: outcome[p][0] for p in projects}
    failures = [f for p in projects for f in outcome[p][1]]
    audited = sum(r["tasks"] for r in table.values())
    total: dict[str, Any] = {"tasks": audited, "skipped": len(ids) - audited,
                             **{c: [sum(r[c][0] for r in table.values()),
                                    sum(r[c][1] for r in table.values())] for c in COLUMNS}}
    measures = report_measures({tid: tasks[tid].record.problem_statement for tid in ids})
    return {"tasks": len(ids), "sample": sample, "seed": seed, "run": run, "seconds": round(time.monotonic() - started, 1),
            "served": getattr(suite, "behaviour", None) == "required", "time_budget": time_budget,
            "projects": table, "total": total, "failures": failures, "measures": measures}


def format_audit(result: dict[str, Any]) -> str:
    """The audit as a Markdown table: per project, the share of tasks passing each check."""
    short = {"each bug breaks a test": "bugs break", "report names every symptom": "symptoms",
             "repro has its imports": "imports", "repro uses no test-only names": "no test names",
             "repro calls the project": "calls project", "named API is public": "public API",
             "expected matches the tests": "expected", "repro shows the difference": "repro runs",
             WITH_IMPORTS: "(repro runs with imports)", SELF_CONTAINED: "names defined",
             NO_PRIVATE: "no private", CONCRETE: "concrete expected", EVERY_EXAMPLE: "every example runs"}
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


__all__ = ["COLUMNS", "EVERY_EXAMPLE", "EXAMPLE_COLUMNS", "SandboxExamples", "apply_hunks", "audit", "audit_task",
           "bug_units", "buggy_files", "example_checks", "example_runner", "format_audit", "run_examples",
           "split_patch", "unit_files", "unnamed_symptoms", "write_audit"]
