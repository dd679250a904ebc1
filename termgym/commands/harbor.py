"""``termgym harbor``: fetch, inspect and validate Harbor / Terminal-Bench task directories.

``termgym harbor download NAME@VERSION`` fetches a registered dataset (``terminal-bench@2.0``) into
termgym's cache; ``termgym harbor list DIR|NAME@VERSION`` shows the tasks (layout, timeouts, local
eligibility, whether the verifier or build needs the internet, load errors; ``--check`` also starts
each task's sandbox); ``termgym harbor check`` runs the ``oracle`` and ``nop`` agents on every task
and reports the broken ones (the oracle must score 1, nop 0). Exit status 1 when any task is broken.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading


def register(subparsers) -> None:
    parser = subparsers.add_parser("harbor", help="list and validate Harbor / Terminal-Bench task directories")
    sub = parser.add_subparsers(dest="harbor_command", metavar="ACTION")

    download = sub.add_parser("download", help="fetch a registered dataset (NAME@VERSION) into termgym's cache",
                              description="Fetch every task of a registered Harbor dataset at the commit the "
                                          "registry names, check the commit, and keep it in termgym's cache "
                                          "($TERMGYM_CACHE_DIR/harbor/datasets). Later runs use the cache offline.")
    download.add_argument("dataset", help="NAME@VERSION, e.g. terminal-bench@2.0")
    download.add_argument("--registry", help="registry JSON (path or URL; default $TERMGYM_HARBOR_REGISTRY or "
                                             "Harbor's public registry)")
    download.add_argument("--force", action="store_true", help="fetch again even when the cache is complete")
    download.add_argument("-t", "--task", action="append", dest="tasks", metavar="NAME",
                          help="fetch only this task (repeatable)")
    download.add_argument("--json", action="store_true", help="print JSON")
    download.set_defaults(func=_download)

    listing = sub.add_parser("list", help="show the tasks in a directory and which backends can run them")
    listing.add_argument("tasks_dir", nargs="?", default=None,
                         help="tasks directory or a downloaded dataset NAME@VERSION (default: the bundled samples)")
    listing.add_argument("--registry", help="registry for a NAME@VERSION not yet downloaded")
    listing.add_argument("--check", action="store_true",
                         help="also start each task's sandbox (pull or build its image) and report the tasks that "
                              "cannot start")
    listing.add_argument("--backend", choices=("docker", "local"), default="docker", help="backend for --check")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(func=_list)

    check = sub.add_parser("check", help="run oracle and nop on every task; report broken tasks")
    check.add_argument("tasks_dir", nargs="?", default=None,
                       help="tasks directory or a dataset NAME@VERSION (default: the bundled samples)")
    check.add_argument("--registry", help="registry for a NAME@VERSION not yet downloaded")
    check.add_argument("--backend", choices=("docker", "local"), default="docker",
                       help="sandbox backend (local skips tasks that need their own image)")
    check.add_argument("--force-build", action="store_true",
                       help="build each image from its Dockerfile even when the task names a prebuilt docker_image")
    check.add_argument("--timeout-multiplier", type=float, default=1.0,
                       help="scale every agent, verifier and build timeout (Harbor's --timeout-multiplier)")
    check.add_argument("-n", "--jobs", type=int, default=1, help="tasks checked in parallel (default 1)")
    check.add_argument("-t", "--task", action="append", dest="tasks", metavar="TASK_ID",
                       help="check only this task (repeatable)")
    check.add_argument("--json", action="store_true", help="print one JSON object per task")
    check.set_defaults(func=_check)

    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _tasks_dir(args: argparse.Namespace):
    """The folder to read: the argument, a dataset NAME@VERSION (downloaded if needed), or the samples."""
    from pathlib import Path

    from termgym.tasks.harbor import SAMPLES_DIR

    target = args.tasks_dir
    if target and "@" in target and not Path(target).exists():
        from termgym.tasks.harbor.registry import download_dataset

        return download_dataset(target, registry=getattr(args, "registry", None),
                                log=lambda m: print(m, file=sys.stderr)).path
    return target or SAMPLES_DIR


def _download(args: argparse.Namespace) -> int:
    from termgym.tasks.harbor.registry import RegistryError, download_dataset, manifest_summary

    try:
        dataset = download_dataset(args.dataset, registry=args.registry, force=args.force, task_names=args.tasks,
                                   log=lambda m: print(m, file=sys.stderr))
    except RegistryError as exc:
        print(f"termgym harbor download: error: {exc}", file=sys.stderr)
        return 2
    summary = manifest_summary(dataset)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        cached = summary["tasks"] - len(dataset.fetched)
        print(f"{dataset.ref}: {summary['tasks']} task(s) in {dataset.path} ({len(dataset.fetched)} fetched, "
              f"{cached} from the cache; commit(s) {', '.join(c[:12] for c in summary['commits'])})")
        print(f"run it: termgym eval termgym/Harbor-v0 --dataset {dataset.ref} --backend docker --agent ...")
    return 0


def _start_check(task, backend: str) -> str | None:
    """Start the task's sandbox (its image pulled or built) and run a command; the error if it cannot."""
    from termgym.sandbox import make_sandbox

    try:
        sandbox = make_sandbox(backend, task.sandbox_spec())
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    try:
        sandbox.start()
        task.setup(sandbox)
        probe = sandbox.exec("mkdir -p /tmp/termgym-probe && cd \"$PWD\" && echo termgym-ok", timeout=60)
        if probe.exit_code != 0 or "termgym-ok" not in probe.output:
            return f"a first command in its sandbox failed (exit {probe.exit_code}): {probe.output.strip()[-300:]}"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        sandbox.close()
    return None


def _list(args: argparse.Namespace) -> int:
    from termgym.tasks.harbor.loader import discover
    from termgym.tasks.harbor.registry import RegistryError

    try:
        found = discover(_tasks_dir(args))
    except (FileNotFoundError, RegistryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = []
    cannot_start = 0
    for tid, task in found.tasks.items():
        needs = task.network_needs()
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
            "docker_image": task.config.docker_image,
            "allow_internet": task.config.allow_internet,
            "needs_network": [n.to_dict() for n in needs],
        })
        if args.check:
            if args.backend == "local" and not task.local_ok:
                rows[-1]["start"] = "skipped: needs the docker backend"
            else:
                problem = _start_check(task, args.backend)
                rows[-1]["start"] = "ok" if problem is None else f"cannot start: {problem}"
                cannot_start += problem is not None
    status = 1 if (found.broken or cannot_start) and args.check else 0
    if args.json:
        print(json.dumps({"tasks": rows, "broken": found.broken}, indent=2))
        return status
    for row in rows:
        where = "local+docker" if row["local_ok"] else "docker"
        agent = "-" if row["agent_timeout_sec"] is None else f"{row['agent_timeout_sec']:g}s"
        phases = sorted({n["phase"] for n in row["needs_network"]})
        net = "net: " + "+".join(phases) if phases else "offline ok"
        print(f"{row['task_id']:<32} {row['layout']:<15} {row['schema_version']:<4} agent {agent:<7} "
              f"verifier {row['verifier_timeout_sec']:g}s  {where:<12} {net}")
        if row["needs_network"]:
            first = row["needs_network"][0]
            more = len(row["needs_network"]) - 1
            print(f"{'':32}   needs the internet: {first['phase']} {first['why']} ({first['file']}:{first['line']})"
                  + (f" and {more} more line(s)" if more else ""))
        if "start" in row and row["start"] != "ok":
            print(f"{'':32}   {row['start']}")
    for tid, error in found.broken.items():
        print(f"{tid:<32} BROKEN  {error}")
    offline = sum(1 for r in rows if not any(n["phase"] == "verifier" for n in r["needs_network"]))
    print(f"{len(rows)} task(s), {len(found.broken)} broken, {len(rows) - offline} need the internet to grade"
          + (f", {cannot_start} cannot start" if args.check else "") + f", in {found.root}")
    return status


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
                             on_result=report, run_options={"force_build": args.force_build,
                                                            "timeout_multiplier": args.timeout_multiplier})
    except (FileNotFoundError, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    broken = [c.task_id for c in checks if not c.ok]
    skipped = [c.task_id for c in checks if c.oracle is None and not c.load_error]
    if not args.json:
        print(f"{len(checks) - len(broken) - len(skipped)} ok, {len(broken)} broken, {len(skipped)} skipped"
              + (f": {', '.join(broken)}" if broken else ""))
    return 1 if broken else 0
