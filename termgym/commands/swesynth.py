"""``termgym swesynth``: make SWE-SYNTH tasks from a repository, read them, rebuild the bundled suite."""

from __future__ import annotations

import argparse
import json
import sys
import time

from termgym.tasks.swesynth.inject import BUG_TYPE_DESCRIPTIONS


def register(subparsers) -> None:
    parser = subparsers.add_parser("swesynth", help="SWE-SYNTH bug factory: generate, show and bundle tasks")
    sub = parser.add_subparsers(dest="swesynth_command", metavar="SUBCOMMAND")
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])

    gen = sub.add_parser("generate", help="inject and validate bugs in a Python repository")
    gen.add_argument("--repo", required=True, help="a local directory or a git URL")
    gen.add_argument("--test-cmd", required=True,
                     help="pytest command run from the repository root, e.g. 'python -m pytest -q tests'")
    gen.add_argument("--sandbox-test-cmd", default=None,
                     help="the command graders run in the sandbox (default: --test-cmd)")
    gen.add_argument("--n", type=int, required=True, help="how many validated tasks to make")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--out", required=True, help="suite directory to write (created or extended)")
    gen.add_argument("--name", default=None, help="repository name used in task ids (default: folder name)")
    gen.add_argument("--bug-types", nargs="+", default=None, metavar="TYPE",
                     help=f"restrict to these types (default: every procedural type); known: "
                          f"{', '.join(BUG_TYPE_DESCRIPTIONS)}")
    gen.add_argument("--max-bugs", type=int, default=1, help="bugs per task, 1..3 (each task draws 1..N)")
    gen.add_argument("--workers", "-j", type=int, default=1, help="parallel test runs")
    gen.add_argument("--max-attempts", type=int, default=None, help="stop after this many candidates")
    gen.add_argument("--source-dir", action="append", default=[], help="only inject into these directories")
    gen.add_argument("--test-dir", action="append", default=[], help="extra directories holding tests")
    gen.add_argument("--no-sandbox-check", action="store_true",
                     help="skip grading each task's oracle (must score 1) and the unfixed repository (must score 0) "
                          "in the sandbox it will run in")
    gen.add_argument("--backend", default="local", help="sandbox backend for that check (local or docker)")
    gen.add_argument("--llm-base-url", default=None, help="OpenAI-compatible endpoint for the LLM breaker/writer")
    gen.add_argument("--llm-model", default=None)
    gen.add_argument("--llm-writer", action="store_true", help="let the model write the bug reports too")
    gen.set_defaults(func=cmd_generate)

    show = sub.add_parser("show", help="print one task: a bundled task id or a task folder")
    show.add_argument("task", help="task id of the bundled suite, or a path to a task folder / task.json")
    show.add_argument("--json", action="store_true", help="print the raw record")
    show.add_argument("--suite", default=None, help="suite directory to look the id up in (default: bundled)")
    show.set_defaults(func=cmd_show)

    bundle = sub.add_parser("bundle", help="regenerate the bundled default suite from the corpus")
    bundle.add_argument("--per-project", type=int, default=None)
    bundle.add_argument("--seed", type=int, default=None)
    bundle.add_argument("--workers", "-j", type=int, default=2)
    bundle.add_argument("--project", action="append", default=None, help="only these corpus projects")
    bundle.add_argument("--out", default=None, help="write elsewhere than the package's tasks/ folder")
    bundle.set_defaults(func=cmd_bundle)

    prov = sub.add_parser("provision", help="build the test environments of the bundled real projects "
                                            "(needs the package index once; tasks then run offline)")
    prov.add_argument("--project", action="append", default=None, metavar="NAME",
                      help="only this project (repeatable; default: every bundled project)")
    prov.add_argument("--force", action="store_true", help="rebuild environments that are already there")
    prov.add_argument("--check", action="store_true",
                      help="also run each project's clean suite in a sandbox under the grader (slow)")
    prov.add_argument("--backend", default="local", help="sandbox backend for --check (local or docker)")
    prov.set_defaults(func=cmd_provision)

    projs = sub.add_parser("projects", help="list the bundled real projects and whether their test "
                                            "environments are provisioned here")
    projs.add_argument("--json", action="store_true")
    projs.set_defaults(func=cmd_projects)


class ProgressBar:
    """A one-line progress bar on a terminal; periodic plain lines otherwise (logs, CI)."""

    def __init__(self, stream=None, label: str = "") -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.label = label
        self._last = 0.0

    def __call__(self, stats) -> None:
        done = stats.kept >= stats.wanted
        now = time.monotonic()
        if not self.tty and not done and now - self._last < 10:
            return
        self._last = now
        width = 30
        filled = int(width * min(stats.kept, stats.wanted) / max(stats.wanted, 1))
        line = (f"{self.label}[{'#' * filled}{'.' * (width - filled)}] {stats.kept}/{stats.wanted} tasks, "
                f"{stats.attempted} tried, yield {100 * stats.yield_rate:.0f}%, "
                f"{stats.tasks_per_minute:.1f} tasks/min")
        if self.tty:
            self.stream.write("\r" + line + ("\n" if done else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def cmd_generate(args: argparse.Namespace) -> int:
    from termgym.tasks.swesynth.generate import generate

    breaker = writer = None
    if args.llm_base_url or args.llm_model:
        if not (args.llm_base_url and args.llm_model):
            print("error: --llm-base-url and --llm-model go together", file=sys.stderr)
            return 2
        from termgym.tasks.swesynth.breaker import LLMBreaker
        from termgym.tasks.swesynth.llm import ChatClient

        client = ChatClient(args.llm_base_url, args.llm_model)
        breaker = LLMBreaker(client)
        writer = client if args.llm_writer else None
    bar = ProgressBar()
    try:
        result = generate(args.repo, args.test_cmd, n=args.n, seed=args.seed, out=args.out, name=args.name,
                          bug_types=args.bug_types, max_bugs=args.max_bugs, workers=args.workers,
                          max_attempts=args.max_attempts, source_dirs=args.source_dir, test_dirs=args.test_dir,
                          sandbox_test_command=args.sandbox_test_cmd, writer=writer, breaker=breaker,
                          progress=bar, sandbox_check=not args.no_sandbox_check, backend=args.backend)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    stats = result.stats
    print(f"wrote {stats.kept} task(s) to {result.out} — {stats.attempted} attempted, "
          f"yield {100 * stats.yield_rate:.0f}%, {stats.tasks_per_minute:.1f} tasks/min "
          f"({stats.elapsed:.0f} s, {stats.required_tests} required tests)")
    if stats.rejected:
        print("rejected: " + ", ".join(f"{k} ×{v}" for k, v in sorted(stats.rejected.items())))
    if stats.kept < stats.wanted:
        print(f"warning: only {stats.kept} of {stats.wanted} tasks validated; raise --max-attempts or widen "
              "--bug-types", file=sys.stderr)
    return 0 if stats.kept else 1


def cmd_show(args: argparse.Namespace) -> int:
    from pathlib import Path

    from termgym.tasks.swesynth.records import RecordError, read_task
    from termgym.tasks.swesynth.suite import SweSynthSuite

    path = Path(args.task)
    try:
        if path.exists():
            record = read_task(path)
        else:
            suite = SweSynthSuite(args.suite) if args.suite else SweSynthSuite()
            record = suite.record(args.task)
    except (KeyError, RecordError, FileNotFoundError) as exc:
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(record.to_json(str(record.repo_dir) if record.repo_dir else None), indent=2))
        return 0
    where = record.image or record.repo_dir
    print(f"task      {record.task_id}\nrepo      {record.repo} ({where})\nbug types {', '.join(record.bug_types)}")
    print(f"tests     {len(record.target_tests)} broken of {len(record.all_tests)} required; "
          f"run with: {record.test_command}")
    print("\n--- problem statement ---\n" + record.problem_statement.rstrip())
    print("\n--- target tests ---\n" + "\n".join(record.target_tests))
    print("\n--- bug patch ---\n" + record.bug_patch.rstrip())
    print("\n--- fix patch (oracle) ---\n" + record.fix_patch.rstrip())
    return 0


def cmd_bundle(args: argparse.Namespace) -> int:
    from termgym.tasks.swesynth import bundle

    bars: dict[str, ProgressBar] = {}

    def progress(name, stats):
        bars.setdefault(name, ProgressBar(label=f"{name} "))(stats)

    kwargs = {"workers": args.workers, "projects": args.project, "progress": progress}
    if args.per_project is not None:
        kwargs["per_project"] = args.per_project
    if args.seed is not None:
        kwargs["seed"] = args.seed
    if args.out:
        kwargs["out"] = args.out
    results = bundle.build_default_suite(**kwargs)
    for name, result in results.items():
        s = result.stats
        print(f"{name}: {s.kept} tasks, {s.attempted} attempted, yield {100 * s.yield_rate:.0f}%, "
              f"{s.tasks_per_minute:.1f} tasks/min")
    return 0


def cmd_provision(args: argparse.Namespace) -> int:
    from termgym.tasks.swesynth.projects import ProjectError, load_projects, provision, run_clean_suite

    try:
        names = args.project or sorted(load_projects())
        provision(names, force=args.force)
    except (ProjectError, RuntimeError) as exc:
        print(f"termgym swesynth provision: {exc}", file=sys.stderr)
        return 1
    if not args.check:
        return 0
    failed = 0
    for name in names:
        run = run_clean_suite(name, backend=args.backend)
        counts = ", ".join(f"{v} {k}" for k, v in sorted(run.counts.items()))
        verdict = "ok" if run.exit_code == 0 and not run.tamper else "FAILED"
        failed += verdict != "ok"
        print(f"{name}: {verdict} in {run.seconds:.1f}s ({counts}; pytest exit {run.exit_code})"
              + (f"; grader: {'; '.join(run.tamper[:2])}" if run.tamper else ""))
    return 1 if failed else 0


def cmd_projects(args: argparse.Namespace) -> int:
    from termgym.tasks.swesynth.projects import load_projects, testenv_dir, testenv_ready

    rows = []
    for name, p in sorted(load_projects().items()):
        rows.append({"name": name, "version": p.version, "license": p.license, "domain": p.domain,
                     "lines": p.lines, "tests": p.tests, "suite_seconds": p.suite_seconds,
                     "pytest": p.pytest_version, "provisioned": testenv_ready(p), "testenv": str(testenv_dir(p))})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        print(f"{r['name']:12} {r['version']:9} {r['license']:13} {r['domain']:24} lines {r['lines'] or '?':>6}  "
              f"tests {r['tests'] or '?':>5}  {'provisioned' if r['provisioned'] else 'NOT provisioned'}")
    return 0
