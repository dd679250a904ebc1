"""The full SWE-SYNTH sweep: the oracle scores 1 and a do-nothing agent 0 on every bundled task.

Not a CI test (hours on a 2-core box for a thousand tasks); CI checks a sample
(``tests/swesynth/test_real_suite.py``). Each task is graded twice through the real grader
(:meth:`~termgym.tasks.swesynth.task.SweSynthTask.grade_patch`, fresh sandboxes of the prepared
workspace, the whole required set of tests): with the oracle fix (must pass every test) and with
no change (must not). Results go to a JSON file, one entry per task, and a summary per project::

    python -m benchmarks.swesynth_sweep                       # every task of the bundled suite
    python -m benchmarks.swesynth_sweep --suite DIR -j 2 --project toolz --limit 20 --backend docker
    python -m benchmarks.swesynth_sweep --offset 20 -j 2       # the tasks after each project's first 20
    python -m benchmarks.swesynth_sweep --resume -j 2          # go on with a sweep that was stopped
    python -m benchmarks.swesynth_sweep --served -j 2 --out served.json  # what gym.make serves by default

Each graded task is also appended to ``OUT.progress.jsonl`` as it finishes, so a sweep stopped part
way (hours, across sessions) loses nothing: ``--resume`` keeps the tasks that behaved in ``OUT`` or
its progress file and grades the others again; the final report counts them all. Each entry
carries the ``digest`` of what was graded (the record and its behaviour check, :func:`task_digest`):
a task whose record or check changed since, or an entry without one, is graded again.

The exit status is 0 only when every graded task behaved.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def task_digest(record) -> str:
    """What a grade of the task depends on in the suite's data: its record and its behaviour check."""
    blob = json.dumps({"record": record.to_json(), "behaviour": record.behaviour or None},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def sweep_task(suite, task_id: str, backend: str) -> dict:
    """Grade one task's oracle and its unfixed repository; the verdict and the reason if bad."""
    from termgym.sandbox import FreshSandboxes

    task = suite.load(task_id)
    started = time.monotonic()
    entry = {"task_id": task_id, "repo": task.record.repo, "difficulty": task.record.difficulty,
             "digest": task_digest(task.record)}
    try:
        with FreshSandboxes(backend) as new_sandbox:
            oracle = task.grade_patch(task.record.fix_patch, new_sandbox)
        with FreshSandboxes(backend) as new_sandbox:
            nop = task.grade_patch("", new_sandbox)
    except Exception as exc:  # reported per task: one broken task must not hide the others
        entry.update(ok=False, reason=f"{type(exc).__name__}: {exc}"[:500])
        return entry
    problems = []
    if not oracle["all_passed"] or oracle.get("infra_error") or oracle.get("tamper"):
        problems.append(f"oracle {oracle['all_result']} {oracle.get('infra_error') or ''} "
                        f"{oracle.get('failed_tests', [])[:3]}")
    if nop["all_passed"] or nop.get("infra_error"):
        problems.append(f"nop {nop['all_result']} {nop.get('infra_error') or ''}")
    entry.update(ok=not problems, oracle=oracle["all_result"], nop=nop["all_result"],
                 seconds=round(time.monotonic() - started, 1), reason="; ".join(problems))
    return entry


def progress_path(out: Path) -> Path:
    """Where the per-task entries of a running sweep are appended."""
    return out.with_name(out.name + ".progress.jsonl")


def earlier_results(out: Path) -> dict[str, dict]:
    """The entries an earlier sweep to ``out`` left (its report, then its progress file), by task id."""
    found: dict[str, dict] = {}
    if out.exists():
        try:
            report = json.loads(out.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise SystemExit(f"swesynth_sweep: --resume cannot read the earlier report {out}: {exc}") from exc
        found.update({e["task_id"]: e for e in report.get("results", [])})
    progress = progress_path(out)
    if progress.exists():
        for n, line in enumerate(progress.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                # the line a killed sweep was writing: that task is graded again
                print(f"swesynth_sweep: {progress}:{n} is cut short; its task is graded again", file=sys.stderr)
                continue
            found[entry["task_id"]] = entry
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default=None,
                        help="suite directory or name (default: the bundled real-project suite)")
    parser.add_argument("--backend", default="local")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--project", action="append", default=None, help="only these projects")
    parser.add_argument("--served", action="store_true",
                        help="only the tasks gym.make serves by default (behaviour='required'), not every task")
    parser.add_argument("--limit", type=int, default=None, help="at most this many tasks per project")
    parser.add_argument("--offset", type=int, default=0,
                        help="skip the first this many tasks of each project (continue an earlier --limit run)")
    parser.add_argument("--out", default="swesynth-sweep.json", help="where the per-task results go")
    parser.add_argument("--resume", action="store_true",
                        help="keep the tasks an earlier sweep to --out graded and grade only the others")
    args = parser.parse_args(argv)

    from termgym.factory.swesynth.bundle import SUITE_DIR
    from termgym.tasks.swesynth.suite import SweSynthSuite

    suite = SweSynthSuite(args.suite if args.suite else SUITE_DIR, behaviour="any")
    served = (set(SweSynthSuite(args.suite if args.suite else SUITE_DIR, behaviour="required").task_ids("all"))
              if args.served else None)
    out = Path(args.out)
    # a task that misbehaved (or whose grading broke), or whose record or check changed since, is graded again
    kept = {tid: e for tid, e in earlier_results(out).items() if e.get("ok")} if args.resume else {}
    chosen: list[str] = []
    per_project: dict[str, int] = {}
    seen: dict[str, int] = {}
    for tid in suite.task_ids("all"):
        repo = suite.record(tid).repo
        if (args.project and repo not in args.project) or (served is not None and tid not in served):
            continue
        seen[repo] = seen.get(repo, 0) + 1
        if seen[repo] <= args.offset:
            continue
        if args.limit is not None and per_project.get(repo, 0) >= args.limit:
            continue
        per_project[repo] = per_project.get(repo, 0) + 1
        chosen.append(tid)
    stale = [tid for tid in chosen if tid in kept and kept[tid].get("digest") != task_digest(suite.record(tid))]
    for tid in stale:
        del kept[tid]
    if stale:
        print(f"{len(stale)} earlier entries are of a record or check that changed since (or carry no digest); "
              f"graded again", file=sys.stderr)
    earlier = [kept[tid] for tid in chosen if tid in kept]
    todo = [tid for tid in chosen if tid not in kept]
    if earlier:
        print(f"{len(earlier)} tasks kept from the earlier sweep to {out}; grading {len(todo)}", file=sys.stderr)
    progress = progress_path(out)
    if not args.resume:
        progress.unlink(missing_ok=True)
    lock = threading.Lock()

    def grade(tid: str) -> dict:
        entry = sweep_task(suite, tid, args.backend)
        with lock, progress.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")
        return entry

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        fresh = dict(zip(todo, pool.map(grade, todo)))
    results = [fresh[tid] if tid in fresh else kept[tid] for tid in chosen]
    summary: dict[str, dict] = {}
    for entry in results:
        row = summary.setdefault(entry["repo"], {"tasks": 0, "ok": 0, "bad": []})
        row["tasks"] += 1
        row["ok"] += int(entry["ok"])
        if not entry["ok"]:
            row["bad"].append(f"{entry['task_id']}: {entry['reason']}")
    seconds = round(time.monotonic() - started, 1)
    report = {"suite": suite.name, "backend": args.backend, "seconds": seconds, "tasks": len(results),
              "graded_now": len(fresh), "kept_from_earlier": len(earlier),
              "ok": sum(e["ok"] for e in results), "projects": summary, "results": results}
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    progress.unlink(missing_ok=True)  # every entry is in the report now
    for repo, row in sorted(summary.items()):
        print(f"{repo:16} {row['ok']}/{row['tasks']} ok" + (f"  first bad: {row['bad'][0]}" if row["bad"] else ""))
    print(f"{report['ok']}/{report['tasks']} tasks: oracle 1 and do-nothing 0 ({len(fresh)} graded in {seconds:.0f} s, "
          f"{len(earlier)} kept from the earlier sweep; {args.backend}); details in {out}")
    return 0 if report["ok"] == report["tasks"] else 1


if __name__ == "__main__":
    sys.exit(main())
