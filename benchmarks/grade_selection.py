"""Fast grades: selected-test grading against full-set grading on agent-like patches of the bundled suite.

For a deterministic sample of bundled tasks (projects with a coverage map, ``<suite>/selection/``),
each task gets agent-like patches made on a copy of its buggy tree:

* ``oracle`` — the task's fix; ``nop`` — no change;
* ``partial`` — the fix's first hunk only (tasks whose fix has several hunks);
* ``wrong`` — the fix plus a small edit (an operator, a constant, a boolean) on another line of a
  function the fix touches;
* ``random`` — a small edit of a buggy line itself, the bug left in place.

Every patch is graded twice by :meth:`~termgym.tasks.swesynth.task.SweSynthTask.grade_patch` in fresh
sandboxes: with ``grade_tests="full"`` and ``"selected"``; the two grades must agree. Per task (on the
oracle patch) it also times the full set under the grader plugin as it was before issue 25 (``old``)
and the raw ``python3 -m pytest`` run of the selected tests in a sandbox (``raw``)::

    python -m benchmarks.grade_selection --patches 200 -j 2 --json out.json
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

#: Small edits a policy might make: (pattern, replacement), tried in a seeded order.
EDITS = [(r"==", "!="), (r"!=", "=="), (r"<=", "<"), (r">=", ">"), (r"(?<![<>=!])<(?![<=])", "<="),
         (r"(?<![<>=!-])>(?![>=])", ">="), (r" \+ ", " - "), (r" - ", " + "), (r"\bTrue\b", "False"),
         (r"\bFalse\b", "True"), (r"\b0\b", "1"), (r"\b1\b", "2"), (r"\band\b", "or"), (r"\bor\b", "and"),
         (r"\bnot ", ""), (r"\bNone\b", "0")]


def perturb(line: str, rng: random.Random) -> str | None:
    """``line`` with one small edit (outside its leading indentation), or ``None`` when none applies."""
    order = list(EDITS)
    rng.shuffle(order)
    indent = len(line) - len(line.lstrip())
    body = line[indent:]
    if not body or body.startswith("#"):
        return None
    for pattern, repl in order:
        matches = list(re.finditer(pattern, body))
        if matches:
            m = rng.choice(matches)
            return line[:indent] + body[:m.start()] + repl + body[m.end():]
    return None


def hunks_of(patch: str) -> list[tuple[str, str]]:
    """``(file header, hunk)`` pairs of a git diff."""
    out: list[tuple[str, str]] = []
    header: list[str] = []
    hunk: list[str] = []
    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git "):
            if hunk:
                out.append(("".join(header), "".join(hunk)))
            header, hunk = [line], []
        elif line.startswith("@@"):
            if hunk:
                out.append(("".join(header), "".join(hunk)))
            hunk = [line]
        elif hunk:
            hunk.append(line)
        else:
            header.append(line)
    if hunk:
        out.append(("".join(header), "".join(hunk)))
    return out


def _git(args: list[str], cwd: Path, stdin: str | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()[-300:]}")
    return proc.stdout


def agent_patches(task, work: Path, rng: random.Random) -> dict[str, str]:
    """The agent-like patches of one task (see the module docstring), made in ``work`` (a buggy tree)."""
    record = task.record
    patches = {"oracle": record.fix_patch, "nop": ""}
    hunks = hunks_of(record.fix_patch)
    if len(hunks) > 1:
        patches["partial"] = hunks[0][0] + hunks[0][1]
    added = [(h, line) for h in hunks for line in h[1].splitlines()[1:] if line.startswith("+")]
    removed_at = []  # (file, buggy line number) of the lines the fix replaces
    for header, hunk in hunks:
        path = re.search(r"diff --git a/(\S+)", header).group(1)
        m = re.match(r"@@ -(\d+)", hunk)
        line_no = int(m.group(1))
        for line in hunk.splitlines()[1:]:
            if line.startswith("-"):
                removed_at.append((path, line_no))
            if not line.startswith("+"):
                line_no += 1
    # random: a small edit of a buggy line (the bug stays)
    for path, line_no in rng.sample(removed_at, len(removed_at)):
        lines = (work / path).read_text().splitlines(keepends=True)
        edited = perturb(lines[line_no - 1].rstrip("\n"), rng)
        if edited is not None:
            lines[line_no - 1] = edited + "\n"
            (work / path).write_text("".join(lines))
            patches["random"] = _git(["diff", "--no-ext-diff", "HEAD"], work)
            _git(["checkout", "-q", "--", "."], work)
            break
    # wrong: the fix, then a small edit of another line near it (same function, usually)
    if added:
        _git(["apply", "--whitespace=nowarn", "-"], work, stdin=record.fix_patch)
        header, hunk = hunks[0]
        path = re.search(r"diff --git a/(\S+)", header).group(1)
        start = int(re.search(r"\+(\d+)", hunk.splitlines()[0]).group(1))
        lines = (work / path).read_text().splitlines(keepends=True)
        fixed_lines = {start + i for i, line in enumerate(hunk.splitlines()[1:]) if not line.startswith("-")}
        candidates = [i for i in range(max(1, start - 6), min(len(lines), start + 12)) if i not in fixed_lines]
        for i in rng.sample(candidates, len(candidates)):
            edited = perturb(lines[i - 1].rstrip("\n"), rng)
            if edited is not None:
                lines[i - 1] = edited + "\n"
                (work / path).write_text("".join(lines))
                patches["wrong"] = _git(["diff", "--no-ext-diff", "HEAD"], work)
                break
        _git(["checkout", "-q", "--", "."], work)
    return patches


def timed_grade(task, patch: str, new_sandbox_factory=None) -> tuple[dict[str, Any], float]:
    from termgym.sandbox import FreshSandboxes

    started = time.monotonic()
    with FreshSandboxes("local") as fresh:
        factory = new_sandbox_factory(fresh) if new_sandbox_factory else fresh
        details = task.grade_patch(patch, factory)
    return details, time.monotonic() - started


def old_full_grade(task, old_plugin: Path) -> float:
    """Seconds of the oracle's full-set grade under the pre-issue-25 plugin (NaN unless it passes)."""
    from benchmarks.clean_tree_agreement import _OldKeyfile

    parts = task.test_env_parts()
    trusted = list(parts.trusted_dirs) if parts else []

    def factory(fresh):
        return lambda spec: _OldKeyfile(fresh(spec), old_plugin, task.workdir, task.source_dirs, trusted)

    details, seconds = timed_grade(task, task.record.fix_patch, factory)
    if not details["all_passed"]:
        return float("nan")
    return seconds


def raw_selected_run(task, tests: list[str] | None) -> float:
    """Seconds of ``python3 -m pytest`` over the selected tests on the oracle tree, raw, in a sandbox."""
    from termgym.sandbox import FreshSandboxes
    from termgym.tasks.swesynth.selection import select_command

    record = task.record
    command = select_command(record.test_command, record.repo_dir, tests)
    with FreshSandboxes("local") as fresh:
        box = fresh(task.sandbox_spec())
        box.write_file("/tmp/fix.patch", record.fix_patch)
        box.exec(f"cd {record.workdir} && git apply /tmp/fix.patch", timeout=60)
        started = time.monotonic()
        box.exec(f"cd {record.workdir} && {command} -p no:cacheprovider -q > /tmp/raw.log 2>&1",
                 timeout=record.test_timeout * 3)
        return time.monotonic() - started


_SUITES_LOCK = threading.Lock()


def sample_tasks(suite, projects: list[str], per_project: int, seed: int) -> list[str]:
    """Up to ``per_project`` tasks of each project, drawn from ``seed``, interleaved across projects."""
    rng = random.Random(seed)
    drawn = []
    for project in projects:
        ids = sorted(t for t in suite.task_ids("all") if suite._facts(t)[1] == project)
        drawn.append(rng.sample(ids, min(per_project, len(ids))))
    return [ids[i] for i in range(per_project) for ids in drawn if i < len(ids)]


@functools.lru_cache(maxsize=4)
def _suite(suite_dir: Path, grade_tests: str, cache: Path):
    """The suite graded one way, loaded once per run (the default suite's records take seconds to read)."""
    from termgym.tasks.swesynth.suite import SweSynthSuite

    return SweSynthSuite(suite_dir, grade_tests=grade_tests, cache_dir=cache, behaviour="any")


def run_task(suite_dir: Path, task_id: str, seed: int, old_plugin: Path | None, cache: Path) -> list[dict]:
    from termgym.tasks.swesynth.task import prepare_workspace

    with _SUITES_LOCK:
        full_suite, sel_suite = _suite(suite_dir, "full", cache), _suite(suite_dir, "selected", cache)
    full_task, sel_task = full_suite.load(task_id), sel_suite.load(task_id)
    rng = random.Random(f"{seed}:{task_id}")
    with tempfile.TemporaryDirectory(prefix="termgym-gradesel-") as tmp:
        work = Path(tmp) / "work"
        shutil.copytree(prepare_workspace(full_task.record, cache), work, symlinks=True)
        for path in work.rglob("*"):
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
            elif path.is_file() and not path.is_symlink():
                path.chmod(0o644)
        patches = agent_patches(full_task, work, rng)
    rows = []
    for kind, patch in patches.items():
        row: dict[str, Any] = {"task_id": task_id, "project": full_task.record.repo, "kind": kind}
        try:
            full, full_s = timed_grade(full_task, patch)
            sel, sel_s = timed_grade(sel_task, patch)
        except ValueError as exc:  # the patch does not apply (should not happen)
            row["error"] = str(exc)[:200]
            rows.append(row)
            continue
        row.update(full=full["all_passed"], selected=sel["all_passed"], full_result=full["all_result"],
                   selected_result=sel["all_result"], full_seconds=round(full_s, 2), selected_seconds=round(sel_s, 2),
                   ran=sel["graded_tests"]["ran"], mode=sel["graded_tests"]["mode"], why=sel["graded_tests"]["why"],
                   infra=bool(full.get("infra_error") or sel.get("infra_error")),
                   agree=full["all_passed"] == sel["all_passed"],
                   failed_full=full["failed_tests"][:5], failed_selected=sel["failed_tests"][:5])
        if kind == "oracle":
            tests, _why = sel_task.tests_to_run(patch)
            row["raw_selected_seconds"] = round(raw_selected_run(sel_task, tests), 2)
            if old_plugin is not None:
                row["old_full_seconds"] = round(old_full_grade(full_task, old_plugin), 2)
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    """The per-project agreement and time table (Markdown)."""
    def q(values: list[float], p: float) -> str:
        values = sorted(v for v in values if v == v)
        if not values:
            return "-"
        return f"{values[min(len(values) - 1, int(round(p * (len(values) - 1))))]:.1f}"

    out = ["| project | patches | agree | ran (median of required) | old full s (median/p90) | "
           "new full s | new selected s (median/p90) | raw selected s (median) |",
           "|---|---:|---:|---|---|---|---|---:|"]
    by: dict[str, list[dict]] = {}
    for row in rows:
        if "error" not in row:
            by.setdefault(row["project"], []).append(row)
    for project, rs in sorted(by.items()):
        total = int(rs[0]["full_result"].split("/")[1]) if rs else 0
        old = [r["old_full_seconds"] for r in rs if "old_full_seconds" in r]
        raw = [r["raw_selected_seconds"] for r in rs if "raw_selected_seconds" in r]
        out.append(f"| {project} | {len(rs)} | {sum(r['agree'] for r in rs)}/{len(rs)} | "
                   f"{statistics.median(r['ran'] for r in rs):.0f} of {total} | {q(old, .5)}/{q(old, .9)} | "
                   f"{q([r['full_seconds'] for r in rs], .5)}/{q([r['full_seconds'] for r in rs], .9)} | "
                   f"{q([r['selected_seconds'] for r in rs], .5)}/{q([r['selected_seconds'] for r in rs], .9)} | "
                   f"{q(raw, .5)} |")
    good = [r for r in rows if "error" not in r]
    out += ["", f"{sum(r['agree'] for r in good)}/{len(good)} patches graded alike by the selected and the full set; "
            f"{sum(r['mode'] == 'full' for r in good)} fell back to the full set."]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.clean_tree_agreement import OLD_PLUGIN_REV, old_plugin_file
    from termgym.tasks.swesynth.suite import SUITE_DIR, SweSynthSuite

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default=str(SUITE_DIR))
    parser.add_argument("--patches", type=int, default=200, help="stop after about this many patches")
    parser.add_argument("--per-project", type=int, default=5)
    parser.add_argument("--project", action="append", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--old-plugin", default=OLD_PLUGIN_REV, help="git revision ('' to skip the old timing)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    suite_dir = Path(args.suite)
    suite = SweSynthSuite(suite_dir, behaviour="any")
    projects = sorted(p for p in (args.project or suite.projects()) if suite.selection_file(p) is not None)
    if not projects:
        parser.error(f"no project of {suite_dir} has a coverage map (python -m termgym.factory.swesynth.selection_build)")
    cache = Path(tempfile.mkdtemp(prefix="termgym-gradesel-cache-"))
    old = old_plugin_file(args.old_plugin, cache) if args.old_plugin else None
    ids = sample_tasks(suite, projects, args.per_project, args.seed)
    rows: list[dict] = []
    lock = threading.Lock()

    def one(task_id: str) -> None:
        with lock:
            if len(rows) >= args.patches:
                return
        try:
            got = run_task(suite_dir, task_id, args.seed, old, cache)
        except Exception as exc:  # reported per task
            got = [{"task_id": task_id, "project": task_id.rsplit("-", 1)[0], "kind": "-", "error": repr(exc)[:300]}]
        with lock:
            rows.extend(got)
            for r in got:
                print(json.dumps(r), flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")

    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(one, ids))
    print(table(rows))
    bad = [r for r in rows if "error" not in r and not r["agree"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
