"""``termgym harbor``: inspect and validate Harbor / Terminal-Bench task directories.

``termgym harbor list DIR`` shows the tasks (layout, timeouts, local eligibility, load errors);
``termgym harbor check DIR`` runs the ``oracle`` and ``nop`` agents on every task and reports the
broken ones (the oracle must score 1, nop 0). Exit status 1 when any task is broken.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading


def register(subparsers) -> None:
    parser = subparsers.add_parser("harbor", help="list and validate Harbor / Terminal-Bench task directories")
    sub = parser.add_subparsers(dest="harbor_command", metavar="ACTION")

    listing = sub.add_parser("list", help="show the tasks in a directory and which backends can run them")
    listing.add_argument("tasks_dir", nargs="?", default=None, help="tasks directory (default: the bundled samples)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(func=_list)

    check = sub.add_parser("check", help="run oracle and nop on every task; report broken tasks")
    check.add_argument("tasks_dir", nargs="?", default=None, help="tasks directory (default: the bundled samples)")
    check.add_argument("--backend", choices=("docker", "local"), default="docker",
                       help="sandbox backend (local skips tasks that need their own image)")
    check.add_argument("-n", "--jobs", type=int, default=1, help="tasks checked in parallel (default 1)")
    check.add_argument("-t", "--task", action="append", dest="tasks", metavar="TASK_ID",
                       help="check only this task (repeatable)")
    check.add_argument("--json", action="store_true", help="print one JSON object per task")
    check.set_defaults(func=_check)

    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _tasks_dir(args: argparse.Namespace):
    from termgym.tasks.harbor import SAMPLES_DIR

    return args.tasks_dir or SAMPLES_DIR


def _list(args: argparse.Namespace) -> int:
    from termgym.tasks.harbor.loader import discover

    try:
        found = discover(_tasks_dir(args))
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = []
    for tid, task in found.tasks.items():
        rows.append({
            "task_id": tid,
            "layout": task.config.layout,
            "schema_version": task.config.schema_version,
            "agent_timeout_sec": task.time_limit,
            "verifier_timeout_sec": task.verifier_timeout,
            "local_ok": task.local_ok,
            "why_docker": task.local_blocker,
            # Listing must not need Docker (a prebuilt docker_image may be absent): look at the files only.
            "oracle": task.solution_commands is not None or task.solution_script is not None
            or bool(task.steps and all(step.solution_dir for step in task.steps)),
            "steps": len(task.steps),
        })
    if args.json:
        print(json.dumps({"tasks": rows, "broken": found.broken}, indent=2))
        return 0
    for row in rows:
        where = "local+docker" if row["local_ok"] else "docker"
        agent = "-" if row["agent_timeout_sec"] is None else f"{row['agent_timeout_sec']:g}s"
        print(f"{row['task_id']:<32} {row['layout']:<15} {row['schema_version']:<4} agent {agent:<7} "
              f"verifier {row['verifier_timeout_sec']:g}s  {where}")
    for tid, error in found.broken.items():
        print(f"{tid:<32} BROKEN  {error}")
    print(f"{len(rows)} task(s), {len(found.broken)} broken, in {found.root}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from termgym.tasks.harbor.trial import TaskCheck, check_tasks

    lock = threading.Lock()

    def report(check: TaskCheck) -> None:
        with lock:
            if args.json:
                print(json.dumps({
                    "task_id": check.task_id,
                    "ok": check.ok,
                    "skipped": check.oracle is None and not check.load_error,
                    "problems": check.problems,
                    "oracle": check.oracle.to_dict() if check.oracle else None,
                    "nop": check.nop.to_dict() if check.nop else None,
                }), flush=True)
                return
            if check.oracle is None and not check.load_error:
                print(f"SKIP   {check.task_id}: needs the docker backend", flush=True)
                return
            status = "OK    " if check.ok else "BROKEN"
            timing = ""
            if check.oracle and check.nop:
                timing = (f" (oracle {check.oracle.score if check.oracle.score is not None else 'error'} in "
                          f"{check.oracle.duration:.1f}s, nop {check.nop.score if check.nop.score is not None else 'error'}"
                          f" in {check.nop.duration:.1f}s)")
            print(f"{status} {check.task_id}{timing}", flush=True)
            for problem in check.problems:
                print(f"       - {problem}", flush=True)
            stand_in = ((check.oracle.grade if check.oracle else None) or {}).get("scores_not_comparable")
            if stand_in:
                print(f"       ! {stand_in}", flush=True)

    try:
        checks = check_tasks(_tasks_dir(args), backend=args.backend, jobs=args.jobs, task_ids=args.tasks,
                             on_result=report)
    except (FileNotFoundError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    broken = [c.task_id for c in checks if not c.ok]
    skipped = [c.task_id for c in checks if c.oracle is None and not c.load_error]
    if not args.json:
        print(f"{len(checks) - len(broken) - len(skipped)} ok, {len(broken)} broken, {len(skipped)} skipped"
              + (f": {', '.join(broken)}" if broken else ""))
    return 1 if broken else 0
