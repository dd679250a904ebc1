"""Re-writing a suite's bug reports with the current writer (``termgym swesynth reports``).

A report is written once, at generation, from the failing tests' output. When the writer improves
(every bug with a runnable example of its own, outcomes stated as they run, varied wording), the
stored reports can be written again without generating the tasks again, in one long-lived sandbox
per project (the project's test environment, the clean tree), with no model and no network.

* From the report itself (:func:`rewrite_from_report`, the cheap way, no test run): its examples are
  taken again (a call it wrote inline gets the imports its test module makes), each runs on the
  clean and the buggy tree (one batch per tree, twice: a value that changes between runs is not
  quoted), another bug's example must give the same outcome with that bug alone, and
  :func:`~termgym.factory.swesynth.report.compose_report` words them again, seeded by the task id.
* From the tests (:func:`rewrite_task`, where the report's own examples cannot stand alone): the
  target tests run on the buggy tree and with each bug alone (the bug patch split by bug, as the
  audit splits it), and :func:`~termgym.factory.swesynth.report.write_report` writes the report from
  their failures, running each example.

Either way the report passes the report checker (the no-leak rule included) and every example
shows what its text claims. Only the report changes: :func:`replace_statements` rewrites
``bug.problem_statement`` in the records (and marks as not served, ``report_fails``, a task whose
report could not be written again and whose examples do not show its bugs) and leaves every other
field of every line as it was.
"""

from __future__ import annotations

import ast
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from termgym.factory.swesynth.audit import (
    bug_units,
    buggy_files,
    example_runner,
    static_problem,
    unit_files,
    unnamed_symptoms,
)
from termgym.factory.swesynth.examples import examples
from termgym.factory.swesynth.failures import (
    CHAIN_TAIL,
    Failure,
    call_behaviour,
    chained_behaviour,
    helper_behaviour,
    read_failure,
)
from termgym.factory.swesynth.report import (
    ExampleRuns,
    ReportError,
    changed_names,
    compose_report,
    write_report,
)
from termgym.tasks.swesynth import pyparse


def rewrite_task(task, worker, *, avoid: Collection[str] = ()) -> tuple[str | None, str]:
    """``(new report, "")`` for one task, or ``(None, why)`` when no report passes (``avoid``:
    first repro calls the report must not open with, :func:`~termgym.factory.swesynth.report.write_report`)."""
    from termgym.factory.swesynth.generate import _same_call
    from termgym.tasks.swesynth.behaviour import task_sys_path

    record = task.record
    repo = Path(record.repo_dir)
    tests = list(record.target_tests)
    timeout = max(60.0, float(record.test_timeout or 0))
    files = buggy_files(record)
    together = worker.run(files, tests, timeout=timeout)
    failed = together.failed_among(tests)
    if together.timed_out or not failed:
        return None, "the target tests do not fail on the buggy tree" + (" (timed out)" if together.timed_out else "")
    groups = None
    symptoms = []  # per bug, what its target tests show with it alone: the audit's "names every symptom" reads them
    if len(bug_units(record)) > 1:
        split = unit_files(record, repo)
        if split is None:
            return None, "two bugs share a hunk (they cannot be run alone)"
        groups = []
        for i, unit in enumerate(split, 1):
            alone = worker.run(unit, tests, timeout=timeout)
            own = sorted(set(alone.failed_among(tests)) & set(failed))
            own = [t for t in own if _same_call(t, together.messages, alone.messages, repo)]
            if not own:
                return None, f"bug {i} of {len(split)} breaks no target test alone at the call it breaks with the others"
            groups.append(own)
            symptoms.append([read_failure(t, alone.messages.get(t, ""), repo) for t in alone.failed_among(tests)])
    request = (record.origin or {}).get("kind") == "feature"
    try:
        statement = write_report(sorted(failed), together.messages, record.bug_patch, repo=repo, seed=record.task_id,
                                 groups=groups, source_dirs=task.source_dirs, request=request,
                                 run=example_runner(worker, files, task_sys_path(task)), avoid=avoid)
    except ReportError as exc:
        return None, str(exc)
    unnamed = unnamed_symptoms(statement, symptoms)
    if unnamed:  # the audit would fail it (boltons-734c9d70a9, reopened in session 35, stated one bug of two)
        return None, f"the new report fails a check: report names every symptom: {unnamed}"
    return statement, ""


#: How the earlier writer introduced another bug's symptom (the sentence goes on with `behaviour`: ...),
#: and how the current one leads into another bug's block (:data:`~.report._FURTHER_LEADS`).
_OTHER_BUG = re.compile(r"(?:There is a second problem, too\.|Something else also looks wrong\.)\s*`([^`]+)`")
_FURTHER_BUG = re.compile(r"(?:second problem|[Ss]eparately|is off too|also looks wrong|separate problem|"
                          r"second issue|one more, in|third problem|also misbehaves)[^`\n]*`([^`]+)`|"
                          r"`([^`]+)` (?:misbehaves as well|is off too|also misbehaves)")
_EXCEPTION = re.compile(r"^[A-Za-z_]\w*(?:Error|Exception|Warning|Exit)$|^StopIteration$")


def _behaviour(statement: str) -> str | None:
    """The API a report's opening names (as written there: ``URL.navigate()``, ``Node.height``)."""
    first = statement.strip().split("\n\n", 1)[0]
    spans = [x for x in re.findall(r"`([^`\n]+)`", first) if not _EXCEPTION.match(x)]
    named = [x for x in spans if re.fullmatch(rf"[A-Za-z_][\w.]*(?:{CHAIN_TAIL})?(?:\(\))?", x)]
    return next((x for x in named if x.endswith("()") or "." in x), named[0] if named else None)


def _from_code(code: str, behaviour: str | None, methods: Collection[str] = ()) -> Failure | None:
    """A failure whose example is ``code`` (imports, setup, then the call as its last expression)."""
    try:
        tree = pyparse.parse(code)
    except (SyntaxError, ValueError):
        return None
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return None
    segment = [ast.get_source_segment(code, node) for node in tree.body]
    if any(x is None for x in segment):
        return None
    imports = [x for node, x in zip(tree.body[:-1], segment) if isinstance(node, (ast.Import, ast.ImportFrom))]
    setup = [x for node, x in zip(tree.body[:-1], segment) if not isinstance(node, (ast.Import, ast.ImportFrom))]
    defined = {node.name: node for node in tree.body[:-1] if isinstance(node, ast.FunctionDef)}
    if behaviour and behaviour.removesuffix("()") in defined:  # an earlier report named the example's own helper
        behaviour = helper_behaviour(tree.body[-1].value, defined) or behaviour
    return Failure(test="", call=segment[-1], setup=setup,
                   behaviour=_qualified(behaviour, tree.body[-1].value, segment[-1], methods), imports=imports)


def _qualified(named: str | None, call: ast.expr, source: str = "", methods: Collection[str] = ()) -> str | None:
    """``named`` as the call itself names it where an earlier report left its class out or named
    only the call a method was chained to: a report that said ``explain()`` of
    ``Frame.explain(...)`` names ``Frame.explain()`` now, one that said ``parse()`` of
    ``parse('foo').update_or_create({}, 42)`` names ``parse(...).update_or_create()``
    (:func:`~termgym.factory.swesynth.failures.chained_behaviour`; ``methods``: the names of the
    functions the bug changes)."""
    found = call_behaviour(call)
    if named and found and found.endswith("." + named):
        named = found
    return chained_behaviour(source, named, methods) or named


def failures_of_report(task, statement: str) -> tuple[list[Failure], list[Failure], str]:
    """The examples an earlier report gives, as failures the writer words again: ``(failures of the
    first bug, one failure per further bug, "")``, or ``([], [], why)`` when one cannot be made a
    runnable example of its own (a call needing a name only its test defines). A call the report
    wrote inline gets the imports its test module makes (:func:`~.quality.import_lines`); what it
    gives is read again from its runs, not from the earlier text."""
    from termgym.factory.swesynth.quality import import_lines, project_packages, read_test_module

    record = task.record
    repo = Path(record.repo_dir)
    behaviour = _behaviour(statement)
    found = examples(statement)
    if not found:
        return [], [], "the report shows no example"
    methods = changed_names(record.bug_patch, repo)
    first = _from_code(found[0].code, behaviour, methods)
    if first is None:
        return [], [], "the first example is not imports, statements and a call"
    packages = project_packages(repo, task.source_dirs)
    modules = []
    for test in dict.fromkeys(t.split("::", 1)[0] for t in record.target_tests):
        modules.append(read_test_module(test, repo))
        if len(modules) == 8:
            break
    same: list[Failure] = [first]
    other: list[Failure] = []
    for i, example in enumerate(found[1:], 2):
        if example.inline:
            lead = _OTHER_BUG.search(example.text[:example.text.find(example.code.strip())])
            named = lead.group(1) if lead else None
        else:  # a block: its lead-in paragraph says whether it is another bug's
            head = example.text.split("```", 1)[0]
            lead = _FURTHER_BUG.search(head)
            named = (lead.group(1) or lead.group(2)) if lead else None
        if not example.inline:
            g = _from_code(example.code, named or behaviour, methods)
        else:
            code = example.code.strip()
            try:
                lines = next((x for x in (import_lines(code, m, packages) for m in modules) if x is not None), None)
            except SyntaxError:
                lines = None
            g = Failure(test="", call=code, behaviour=chained_behaviour(code, named or behaviour, methods)
                        or named or behaviour, imports=lines or [])
            if lines is None:
                if lead:
                    return [], [], f"example {i} uses a name only its test defines"
                continue  # one more example of the first bug: the report does without it
        if g is None:
            continue
        (other if lead else same).append(g)
    return same, other, ""


def rewrite_from_report(task, worker, statement: str | None = None,
                        clean: dict[str, Any] | None = None) -> tuple[str | None, str]:
    """``(new report, "")`` worded again from the task's own report (``statement``, else the
    record's): its examples, made runnable on their own and stated as they run on the clean and the
    buggy tree; another bug's example must show the difference with that bug alone too (the bug
    patch split by bug). ``(None, why)`` when that fails (:func:`rewrite_task` then runs the tests).
    ``clean``: the clean tree's outcomes known so far (shared by the tasks of a project)."""
    from termgym.factory.swesynth.audit import _run_code
    from termgym.tasks.swesynth.behaviour import task_sys_path

    record = task.record
    statement = statement or record.problem_statement
    same, other, why = failures_of_report(task, statement)
    if why:
        return None, why
    files = buggy_files(record)
    sys_path = task_sys_path(task)
    runs = ExampleRuns(example_runner(worker, files, sys_path, clean))
    runs.prefill([*same, *other])
    split = unit_files(record, Path(record.repo_dir)) if other else None
    for i, g in enumerate(other, 2):
        if not runs.ready(g):
            return None, f"bug {i}'s example shows no difference when run"
        if split is not None and len(split) == len(other) + 1:  # the same outcome with that bug alone
            code = "\n".join([*g.imports, *g.setup, g.call or ""]) + "\n"
            if _run_code(worker, split[i - 1], code, sys_path) != runs(code)[1]:
                return None, f"bug {i}'s example does not show that bug alone"
    request = (record.origin or {}).get("kind") == "feature"
    try:
        report = compose_report(same, other, patch=record.bug_patch, target_tests=record.target_tests,
                                repo=record.repo_dir, seed=record.task_id, request=request, runs=runs)
    except ReportError as exc:
        return None, str(exc)
    return report, ""


def _by_project(suite, task_ids: Sequence[str], backend: str, time_budget: float | None, out: dict[str, Any],
                each: Callable[[str, Any, list[str]], tuple[str | None, str]],
                progress: Callable[[str, str], None] | None, said: Callable[[str, str | None, str], str]) -> None:
    """Run ``each(task id, worker, the project's ids)`` for ``task_ids``, project by project, in one
    sandbox per project (its test environment, the clean tree), in the order given within a project.
    A report it returns goes to ``out["written"]``, else its reason to ``out["failed"]`` (an
    exception is that task's failure, not the run's); no task starts after ``time_budget`` seconds
    (``out["skipped"]``). ``said(task id, report, why)`` is what ``progress`` hears of each."""
    from termgym.factory.swesynth.screen import ProjectEnv, ScreenWorker

    started = time.monotonic()
    by_project: dict[str, list[str]] = {}
    for tid in task_ids:
        record = suite.record(tid)
        by_project.setdefault(record.project or record.repo, []).append(tid)

    def late() -> bool:
        return time_budget is not None and time.monotonic() - started > time_budget

    for project in sorted(by_project):
        ids = by_project[project]
        if late():
            out["skipped"] += ids
            continue
        first = suite.load(ids[0])
        env = ProjectEnv.for_project(first.record.project, backend) if first.record.project else ProjectEnv(backend=backend)
        worker = ScreenWorker(Path(first.record.repo_dir), first.record.test_command, first.source_dirs, env)
        try:
            for tid in ids:
                if late():
                    out["skipped"].append(tid)
                    continue
                try:
                    statement, why = each(tid, worker, ids)
                except Exception as exc:  # one task's trouble (a sandbox error) is that task's failure
                    statement, why = None, f"internal error, {type(exc).__name__}: {exc}"
                if statement is not None:
                    out["written"][tid] = statement
                else:
                    out["failed"][tid] = why
                if progress:
                    progress(tid, said(tid, statement, why))
        finally:
            worker.close()
    out["seconds"] = round(time.monotonic() - started, 1)


def _taken(task, statement: str | None, why: str, repros: dict[str, Any], backend: str) -> tuple[str | None, str]:
    """``(statement, why)`` when the new report passes the audit's checks that read a report
    (:func:`_passing`) and its repro, run on both trees in the task's sandbox, shows its difference,
    as at generation; the outcome goes into ``repros`` (the record keeps it as
    ``validation["repro"]``). Else ``(None, why not)``."""
    from termgym.factory.swesynth.quality import repro_check

    statement, why = _passing(task, statement, why)
    if statement is None:
        return None, why
    keep: dict[str, Any] = {}
    problem = repro_check(replace(task.record, problem_statement=statement), backend=backend, keep=keep)
    if problem:
        return None, f"the new report's repro does not show its difference: {problem}"
    repros[task.record.task_id] = keep
    return statement, why


def _passing(task, statement: str | None, why: str) -> tuple[str | None, str]:
    """``(statement, why)`` when the new report passes the audit's checks that read a report
    (:func:`~termgym.factory.swesynth.audit.static_problem`), else ``(None, what it fails)``: a
    report that names a class its own example defines (``MyWeek()``) as the broken API is not one
    to serve."""
    if statement is None:
        return None, why
    problem = static_problem(task, statement)
    return (statement, why) if not problem else (None, f"the new report fails a check: {problem}")


def rewrite_reports(suite, task_ids: Sequence[str], *, backend: str = "local", time_budget: float | None = None,
                    run_tests: bool = False, progress: Callable[[str, str], None] | None = None,
                    statements: dict[str, str] | None = None) -> dict[str, Any]:
    """New reports for ``task_ids`` of ``suite`` (a :class:`~termgym.tasks.swesynth.suite.SweSynthSuite`),
    one sandbox per project: each worded again from its own report (:func:`rewrite_from_report`),
    else, with ``run_tests``, from its target tests' failures (:func:`rewrite_task`, a test run per
    bug). A new report counts only when it passes the audit's checks that read a report
    (:func:`_passing`). A task whose report cannot be written again keeps its report; its examples
    are then run as they stand, and its checks read (``checked``: task -> why an example does not
    show its difference or which check it fails, ``""`` when none).
    Returns ``{"written": {task: report}, "how": {task: "report" | "tests"}, "repro": {task: its
    repro's outcomes on both trees}, "failed": {task: why}, "checked": {...}, "skipped": [...],
    "seconds"}`` (a new report's repro must show its difference when run in the task's sandbox);
    no task starts after ``time_budget`` seconds.
    ``statements`` (task id -> report) are the reports to word again instead of the records' (an
    earlier version of the suite's)."""
    statements = statements or {}
    from termgym.factory.swesynth.audit import run_examples
    from termgym.tasks.swesynth.behaviour import task_sys_path

    out: dict[str, Any] = {"written": {}, "how": {}, "repro": {}, "failed": {}, "checked": {}, "skipped": []}
    clean: dict[str, Any] = {}  # the clean tree's outcome of each example of the project at hand

    project: list[list[str]] = []

    def each(tid: str, worker, ids: list[str]) -> tuple[str | None, str]:
        if not project or project[0] is not ids:  # a new project: its examples' clean outcomes, in one process
            project[:] = [ids]
            clean.clear()
            codes = ["\n".join([*f.imports, *f.setup, f.call or ""]) for t in ids
                     for found in failures_of_report(suite.load(t), statements.get(t)
                                                     or suite.record(t).problem_statement)[:2]
                     for f in found]
            example_runner(worker, {}, task_sys_path(suite.load(ids[0])), clean).many(codes, buggy=False)
        task = suite.load(tid)
        statement, why = _taken(task, *rewrite_from_report(task, worker, statements.get(tid), clean=clean),
                                out["repro"], backend)
        how = "report"
        if statement is None and run_tests:
            statement, why_tests = _taken(task, *rewrite_task(task, worker), out["repro"], backend)
            how, why = "tests", why if statement is None and not why_tests else f"{why}; {why_tests}"
        if statement is None:  # the report stays: do its examples run as they stand, and pass every check?
            runner = example_runner(worker, buggy_files(task.record), task_sys_path(task))
            out["checked"][tid] = (run_examples(task.record.problem_statement, runner)
                                   or static_problem(task, task.record.problem_statement))
        else:
            out["how"][tid] = how
        return statement, why

    _by_project(suite, task_ids, backend, time_budget, out, each, progress,
                lambda tid, statement, why: f"rewritten ({out['how'][tid]})" if statement is not None else f"kept: {why}")
    return out


def reopen_duplicates(suite_dir: str | Path, *, backend: str = "local", projects: Sequence[str] | None = None,
                      time_budget: float | None = None, max_per_key: int | None = None, larger_fixes: bool = False,
                      progress: Callable[[str, str], None] | None = None) -> dict[str, Any]:
    """New reports for the tasks the near-duplicate rule leaves out only for their first repro call
    (:data:`~termgym.tasks.swesynth.distinct.SAME_CALL`: three served tasks of the project already
    open with it), each written from its failing tests (:func:`rewrite_task`) so that it opens with a
    call that is not used up, one sandbox per project.

    The served selection of the compact suite at ``suite_dir`` is computed as the default serves it;
    a task is tried when its functions are not used up too and its project is below the project
    share cap (a task of a capped project would stay out anyway); ``larger_fixes``: only tasks whose
    fix is not a one-token change (:func:`~termgym.tasks.swesynth.distinct.fix_rank`). Tasks are tried in the selection's
    order, and each report written counts against its new call at once, so no call ends up opening
    more than :data:`~termgym.tasks.swesynth.distinct.MAX_PER_KEY` served tasks (``max_per_key``: another
    limit, as :func:`~termgym.tasks.swesynth.distinct.select` takes it). Returns
    ``{"written": {task: report}, "repro": {task: its repro's outcomes}, "failed": {task: why},
    "candidates", "skipped", "seconds"}``: a new report's repro is run on both trees in the task's
    sandbox and must show its difference, as at generation. No task starts after ``time_budget``
    seconds. The records are not changed (:func:`replace_statements` writes both)."""
    from termgym.tasks.swesynth.distinct import MAX_PER_KEY, ONE_TOKEN, PROJECT_SHARE, SAME_CALL, select
    from termgym.tasks.swesynth.repro import first_call
    from termgym.tasks.swesynth.suite import SweSynthSuite

    limit = MAX_PER_KEY if max_per_key is None else max_per_key
    suite = SweSynthSuite(suite_dir, behaviour="required", distinct=False)
    splits = {split: list(suite.task_ids(split)) for split in suite.splits()}
    keys = {tid: suite.task_keys(tid) for ids in splits.values() for tid in ids}
    chosen = select(splits, keys, max_per_key=limit)
    used = Counter(k for ids in chosen.splits.values() for tid in ids for k in keys[tid].all())
    capped = {keys[tid].project for tid, why in chosen.dropped.items() if why == PROJECT_SHARE}
    wanted = set(projects) if projects else None
    candidates = [tid for tid, why in chosen.dropped.items()  # in the selection's order
                  if why == SAME_CALL and keys[tid].project not in capped
                  and (wanted is None or keys[tid].project in wanted)
                  and not (larger_fixes and keys[tid].rank == ONE_TOKEN)]
    out: dict[str, Any] = {"written": {}, "repro": {}, "failed": {}, "candidates": len(candidates), "skipped": []}

    def each(tid: str, worker, _ids: list[str]) -> tuple[str | None, str]:
        project = keys[tid].project
        functions = [k for k in keys[tid].all() if k[1] == "function"]
        if any(used[k] >= limit for k in functions):
            return None, "its functions are used up by tasks served since"
        avoid = {k[2] for k, n in used.items() if k[0] == project and k[1] == "call" and n >= limit}
        task = suite.load(tid)
        statement, why = _taken(task, *rewrite_task(task, worker, avoid=avoid), out["repro"], backend)
        if statement is None:
            return None, why
        used.update([(project, "call", first_call(statement)), *functions])
        return statement, why

    _by_project(suite, candidates, backend, time_budget, out, each, progress,
                lambda tid, statement, why: f"opens with {first_call(statement)!r}" if statement is not None
                else f"kept: {why}")
    return out


def replace_statements(suite_dir: str | Path, statements: dict[str, str],
                       unserved: dict[str, str] | None = None, repros: dict[str, dict[str, Any]] | None = None) -> int:
    """Write ``statements`` (task id -> report) into the compact suite's records, and mark the
    tasks of ``unserved`` (task id -> why) as not served: ``report_fails`` in the record
    (:meth:`~termgym.tasks.swesynth.suite.SweSynthSuite.report_problem`); a task written again
    loses an earlier mark; ``repros`` (task id -> ``{"clean", "buggy"}``) are the new reports' repro
    outcomes, for ``validation["repro"]``. Every other field of every line stays as it was. Returns
    how many lines changed."""
    unserved = unserved or {}
    repros = repros or {}
    changed = 0
    for path in sorted((Path(suite_dir) / "records").glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines()
        out, touched = [], False
        for line in lines:
            if not line.strip():
                continue
            data = json.loads(line)
            tid = data.get("task_id")
            new = statements.get(tid)
            before = json.dumps(data, separators=(",", ":"))
            if new is not None:
                data["bug"]["problem_statement"] = new
                data.pop("report_fails", None)
            if tid in repros:
                data.setdefault("validation", {})["repro"] = repros[tid]
            if tid in unserved:
                data["report_fails"] = unserved[tid]
            after = json.dumps(data, separators=(",", ":"))
            if after != before:
                line = after
                changed += 1
                touched = True
            out.append(line)
        if touched:
            path.write_text("".join(x + "\n" for x in out), encoding="utf-8")
    return changed


__all__ = ["failures_of_report", "reopen_duplicates", "replace_statements", "rewrite_from_report", "rewrite_reports", "rewrite_task"]
