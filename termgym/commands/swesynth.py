"""``termgym swesynth``: make SWE-SYNTH tasks from a repository, read them, rebuild the bundled suite."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time

from termgym.factory.swesynth.inject import BUG_TYPE_DESCRIPTIONS


def register(subparsers) -> None:
    parser = subparsers.add_parser("swesynth", help="SWE-SYNTH bug factory: generate, show and bundle tasks")
    sub = parser.add_subparsers(dest="swesynth_command", metavar="SUBCOMMAND")
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])

    gen = sub.add_parser("generate", help="inject and validate bugs in a Python repository")
    gen.add_argument("--repo", default=None, help="a local directory or a git URL (required without --project)")
    gen.add_argument("--test-cmd", default=None,
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
    gen.add_argument("--backend", default="local", help="sandbox backend for screening and that check (local or docker)")
    gen.add_argument("--no-flaky-check", action="store_true",
                     help="skip the baseline's flaky check: by default the clean suite runs once more in reverse order "
                          "and its timing tests (a clock read and asserted on, a sleep then an assert) 3 more times "
                          "under CPU load, and every test that fails there is left out of the required set")
    gen.add_argument("--served-only", action="store_true",
                     help="keep only tasks gym.make serves by default: their behaviour check tells the bug apart "
                          "on inputs no test makes, for every function the bug changes (the others are kept for "
                          "behaviour='any', graded by their tests alone, unless this is given)")
    gen.add_argument("--storage", choices=("folders", "compact"), default="folders",
                     help="one folder per task, or one JSONL of records per project plus its baseline")
    gen.add_argument("--project", default=None,
                     help="a bundled project: its tree, test command and test environment (--repo/--test-cmd "
                          "then default to the project's)")
    gen.add_argument("--projects-dir", action="append", default=[], metavar="DIR",
                     help="a project set beyond the bundled one (a folder `add-project --root DIR` wrote); "
                          "repeatable, added to $TERMGYM_SWESYNTH_PROJECTS")
    gen.add_argument("--extends", default=None, metavar="SUITE",
                     help="the compact suite this batch is for (a directory, or v2 for the bundled default; "
                          "merge it there with `merge OUT --into SUITE`): skip bugs SUITE holds already and count "
                          "its tasks against the per-function cap")
    gen.add_argument("--max-per-function", type=int, default=None, metavar="N",
                     help="keep no task that makes a function broken by more than N tasks with fixes of its "
                          "size, one token or larger (default: no cap; with --extends, the bundled suite's cap, 10)")
    gen.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                     help="stop taking new candidates after this long; keeps what validated")
    gen.add_argument("--resume", action="store_true",
                     help="with --storage compact: carry on this project's earlier run in --out (same seed): its "
                          "tasks stay, the candidates it judged are not judged again, --n counts both runs")
    gen.add_argument("--llm-base-url", default=None, help="OpenAI-compatible endpoint for the LLM breaker/writer")
    gen.add_argument("--llm-model", default=None)
    gen.add_argument("--llm-writer", action="store_true", help="let the model write the bug reports too")
    gen.set_defaults(func=cmd_generate)

    show = sub.add_parser("show", help="print one task: a bundled task id or a task folder")
    show.add_argument("task", help="task id of the bundled suite, or a path to a task folder / task.json")
    show.add_argument("--json", action="store_true", help="print the raw record")
    show.add_argument("--suite", default=None,
                      help="suite to look the id up in: a directory or a name (toy, projects, v1, v2; default: the default suite)")
    show.set_defaults(func=cmd_show)

    bundle = sub.add_parser("bundle", help="regenerate a bundled suite: the real-project suite (default) or --toy")
    bundle.add_argument("--toy", action="store_true", help="rebuild the toy suite from the toy projects instead")
    bundle.add_argument("--per-project", type=int, default=None,
                        help="tasks wanted per project (default 200 for the real-project suite)")
    bundle.add_argument("--seed", type=int, default=None)
    bundle.add_argument("--workers", "-j", type=int, default=2,
                        help="projects generated at once (real suite) or parallel test runs (toy)")
    bundle.add_argument("--project", action="append", default=None, help="only these projects")
    bundle.add_argument("--held-out", action="append", default=None,
                        help="projects whose tasks form the 'test' split (default: a fixed hash pick of 1/4)")
    bundle.add_argument("--time-budget", type=float, default=None, help="seconds per project; keeps what validated")
    bundle.add_argument("--deadline", type=float, default=None,
                        help="seconds for the whole build: each project gets an equal share of the time left")
    bundle.add_argument("--stall-limit", type=int, default=60,
                        help="stop a project after this many candidates in a row that ran tests without giving a task")
    bundle.add_argument("--projects-dir", action="append", default=[], metavar="DIR",
                        help="a project set beyond the bundled one (a folder `add-project --root DIR` wrote); "
                             "repeatable, added to $TERMGYM_SWESYNTH_PROJECTS")
    bundle.add_argument("--max-named-share", type=float, default=None, metavar="SHARE",
                        help="largest share of tasks whose failing test file is named after the buggy module "
                             "(default 1, no cap: the default suite keeps them; the v1 suite used 0.5)")
    bundle.add_argument("--max-per-function", type=int, default=None, metavar="N",
                        help="most tasks with fixes of one size (one token, or larger) that may break any one "
                             "function (default 10; 0 turns the cap off)")
    bundle.add_argument("--clean", action="store_true", help="empty the suite folder first")
    bundle.add_argument("--resume", action="store_true",
                        help="continue each project's earlier run in the suite (same seed): its tasks stay, the "
                             "candidates it judged are skipped, --per-project counts both runs")
    bundle.add_argument("--out", default=None, help="write elsewhere than the package's suite folder")
    bundle.add_argument("--docs", default=None, help="also rewrite the summary table in this Markdown file")
    bundle.set_defaults(func=cmd_bundle)

    summary = sub.add_parser("summary", help="print the generation summary of a compact suite")
    summary.add_argument("suite", nargs="?", default=None, help="suite directory (default: the bundled one)")
    summary.add_argument("--docs", default=None, help="also rewrite the summary table in this Markdown file")
    summary.set_defaults(func=cmd_summary)

    prov = sub.add_parser("provision", help="build the test environments of the real projects the default suite "
                                            "serves (needs the package index once; tasks then run offline)")
    which = prov.add_mutually_exclusive_group()
    which.add_argument("--project", action="append", default=None, metavar="NAME",
                       help="only this project (repeatable; default: the projects the default suite serves tasks "
                            "from, and every project of a --projects-dir)")
    which.add_argument("--all", action="store_true",
                       help="every project, also the bundled ones that only feed the factory (generation, tests)")
    prov.add_argument("--projects-dir", action="append", default=[], metavar="DIR",
                      help="a project set beyond the bundled one; repeatable, added to $TERMGYM_SWESYNTH_PROJECTS")
    prov.add_argument("--force", action="store_true", help="rebuild environments that are already there")
    prov.add_argument("--check", action="store_true",
                      help="also run each project's clean suite in a sandbox under the grader (slow)")
    prov.add_argument("--backend", default="local", help="sandbox backend for --check (local or docker)")
    prov.set_defaults(func=cmd_provision)

    beh = sub.add_parser("behaviour", help="record behaviour checks (clean answers on replayed and perturbed "
                                           "calls) for the tasks of a suite that have none yet (resumable)")
    beh.add_argument("--suite", default="projects",
                     help="suite directory or name (projects: the bundled real-project suite, toy; default projects)")
    beh.add_argument("--workers", "-j", type=int, default=1, help="tasks recorded at once")
    beh.add_argument("--repo", action="append", default=None, help="only this project (repeatable)")
    beh.add_argument("--limit", type=int, default=None, help="record at most this many tasks this run")
    beh.add_argument("--redo", action="store_true", help="record again tasks that already have a line")
    beh.add_argument("--retry", action="store_true", help="record again tasks whose earlier line has no check")
    beh.add_argument("--reason", default=None, metavar="TEXT",
                     help="with --retry: only tasks whose recorded reason contains TEXT ('does not pickle'); "
                          "with --retry-unserved: only checks whose reason for not being served contains it "
                          "('answers every held-out input alike')")
    beh.add_argument("--verify", action="store_true",
                     help="replay every stored check in a fresh sandbox; record again those that do not reproduce")
    beh.add_argument("--heldout", action="store_true",
                     help="answer stored checks again in the current canonical form and mark which inputs no "
                          "test makes (checks without marks only)")
    beh.add_argument("--retry-unserved", action="store_true",
                     help="record again tasks whose marked check is not served (no held-out input tells the bug "
                          "apart, or each function's bug, or the held-out answers are all alike)")
    beh.add_argument("--drop-clock", action="store_true",
                     help="repair checks holding inputs whose answer hangs on a clock or on chance: arguments "
                          "that hold a clock (a cache timed by datetime.now), a call that reads one "
                          "(time.monotonic inside the function) or draws random numbers (random.shuffle), found "
                          "by replaying every check on the clean tree under a watch: drop those inputs, or "
                          "record the task again when nothing that tells the bug apart is left")
    beh.add_argument("--per-bug", action="store_true",
                     help="for checks of bugs in two or more functions: replay the stored inputs with each "
                          "function's bug alone and store which tell it apart (a task is served only when every "
                          "function's bug alone is told apart by a held-out input); with --redo, measure again")
    beh.add_argument("--state", action="store_true",
                     help="for checks whose held-out inputs hold one outcome (a constructor's None): replay them on "
                          "each tree noting what every call leaves on its arguments, leaf by leaf; a leaf whose clean "
                          "values no constant, buggy body or doing nothing gives serves the check; with --redo, "
                          "measure again")
    beh.add_argument("--backend", default="local", help="sandbox backend (local or docker)")
    beh.add_argument("--quiet", action="store_true", help="no line per task")
    beh.set_defaults(func=cmd_behaviour)

    add = sub.add_parser("add-project", help="add a PyPI project to the project set: download its sdist, resolve "
                                             "its test lock (with its declared runtime dependencies), adapt its "
                                             "pytest configuration to the lock, provision it and run its clean "
                                             "suite under the grader")
    add.add_argument("requirement", nargs="?", default=None, help="name==version on the package index")
    add.add_argument("--sdist", default=None, help="a local .tar.gz sdist instead of downloading one")
    add.add_argument("--domain", required=True, help="what the project is about (a few words, for the tables)")
    add.add_argument("--description", required=True, help="one sentence on what the project does")
    add.add_argument("--dep", action="append", default=[], metavar="PKG==VER",
                     help="a test requirement beyond pytest and the project's declared runtime dependencies, or a "
                          "pin for one of those (repeatable; its dependencies are resolved too)")
    add.add_argument("--no-dep", action="append", default=[], metavar="PKG",
                     help="leave a declared runtime dependency out of the test lock (repeatable)")
    add.add_argument("--deselect", action="append", default=[], metavar="TEST=REASON",
                     help="leave a test (node id) or a test file out, and say why (repeatable)")
    add.add_argument("--deselect-failing", action="store_true",
                     help="leave out every test (or whole file) that fails on the clean tree in the sandbox, each "
                          "with its failure as the reason, and run the suite once more (review what it printed)")
    add.add_argument("--no-flaky-probe", action="store_true",
                     help="skip the flaky-test probe: by default a passing suite runs again under CPU load above the "
                          "core count and in reverse order (its timing tests several more times under load), and every "
                          "test whose outcome changes is left out with the reason 'flaky: <what changed it>'")
    add.add_argument("--pytest-args", default="", help="extra pytest arguments (e.g. -o addopts=)")
    add.add_argument("--source-dir", action="append", default=[], help="where bugs may go (default: the packages)")
    add.add_argument("--test-dir", action="append", default=[], help="the tests (default: tests/, test/ ...)")
    add.add_argument("--python-path", action="append", default=None, help="put on PYTHONPATH (default: src if used)")
    add.add_argument("--license", default=None, help="SPDX id, when the licence text is not recognised")
    add.add_argument("--root", default=None, help="project set to add to (default: the bundled one)")
    add.add_argument("--replace", action="store_true", help="make the folder again if it exists")
    add.add_argument("--timeout", type=float, default=600.0, help="seconds for the clean suite")
    add.set_defaults(func=cmd_add_project)

    aud = sub.add_parser("audit", help="check every task (or a seeded sample) is solvable from its report: "
                                       "per project, the share passing each check")
    aud.add_argument("--suite", default="projects", help="a suite directory or name (default: projects)")
    aud.add_argument("--sample", type=int, default=None, help="audit this many tasks drawn with --seed")
    aud.add_argument("--seed", type=int, default=0)
    aud.add_argument("--static", action="store_true", help="only the checks that read the reports (no sandbox)")
    aud.add_argument("--backend", default="local", help="sandbox backend for the runs (default: local)")
    aud.add_argument("--workers", "-j", type=int, default=1, help="projects audited at once, one sandbox each "
                                                                  "(default 1)")
    aud.add_argument("--drop-failing", action="store_true",
                     help="remove from the suite every audited task that fails a check (counted as rejected "
                          "'audit: <check>' in its project's generation summary)")
    aud.add_argument("--json", default=None, metavar="FILE", help="also write the full result (with every "
                                                                  "failure and why) to FILE")
    aud.add_argument("--served", action="store_true",
                     help="only the tasks served by default (behaviour=\"required\"), not every task of the suite")
    aud.add_argument("--time-budget", type=float, default=None, metavar="S",
                     help="start no task after S seconds (the rest are counted as skipped, not as passed)")
    aud.set_defaults(func=cmd_audit)

    rep = sub.add_parser("reports", help="write a suite's bug reports again with the current writer, each example "
                                         "run on the clean and the buggy tree in the task's sandbox (no model)")
    rep.add_argument("--suite", default="projects", help="a compact suite directory or name (default: projects)")
    rep.add_argument("--all", action="store_true", help="every task, not only those served by default")
    rep.add_argument("--task", action="append", default=None, metavar="ID", help="only this task (repeatable)")
    rep.add_argument("--sample", type=int, default=None, help="only this many tasks drawn with --seed")
    rep.add_argument("--seed", type=int, default=0)
    rep.add_argument("--run-tests", action="store_true",
                     help="where a report cannot be worded again from its own examples, run the task's tests "
                          "(per bug) and write it from their failures")
    rep.add_argument("--new-openings", action="store_true",
                     help="instead: the tasks left out only because three served tasks of their project already "
                          "open their repro with the same call get reports written from their failing tests that "
                          "open with a call not yet used up (so they can be served)")
    rep.add_argument("--project", action="append", default=None, metavar="NAME",
                     help="with --new-openings: only this project (repeatable)")
    rep.add_argument("--larger-fixes", action="store_true",
                     help="with --new-openings: only tasks whose fix is a release-history revert or more than one "
                          "token (what the served set needs more of)")
    rep.add_argument("--time-budget", type=float, default=None, metavar="S", help="start no task after S seconds")
    rep.add_argument("--backend", default="local", help="sandbox backend (default: local)")
    rep.add_argument("--write", action="store_true", help="replace the reports in the suite's records "
                                                          "(without it: only say what would change)")
    rep.add_argument("--json", default=None, metavar="FILE", help="also write every new report and why others "
                                                                  "stayed to FILE")
    rep.set_defaults(func=cmd_reports)

    card = sub.add_parser("card", help="the suite card (projects, splits, difficulty, fix sizes, bug mix, "
                                       "report checks) measured from a compact suite's records")
    card.add_argument("--suite", default="projects", help="a compact suite directory or name (default: projects)")
    card.add_argument("--audit", default=None, metavar="FILE", help="an audit result (`audit --json`) to include")
    card.add_argument("--quotes", type=int, default=0, metavar="N", help="quote N reports drawn at random")
    card.add_argument("--quote-seed", type=int, default=26, help="the seed of that draw (default 26)")
    card.add_argument("--fixes", type=int, default=0, metavar="N",
                      help="show N served history tasks and N procedural ones drawn at random, each with its "
                           "report and fix")
    card.add_argument("--fix-seed", type=int, default=26, help="the seed of that draw (default 26)")
    card.add_argument("--write", default=None, metavar="DOC", help="replace the card section in DOC "
                                                                  "(e.g. docs/swesynth.md) instead of printing it")
    card.set_defaults(func=cmd_card)

    flaky = sub.add_parser("flaky", help="sweep projects for flaky tests: a static scan for timing assertions, and "
                                         "(unless --static) the clean suite run again under CPU load and in reverse "
                                         "order, the timing tests several more times under load")
    which = flaky.add_mutually_exclusive_group(required=True)
    which.add_argument("--project", action="append", default=None, metavar="NAME", help="a project (repeatable)")
    which.add_argument("--all", action="store_true", help="every project of the project sets")
    flaky.add_argument("--projects-dir", action="append", default=[], metavar="DIR",
                       help="a project set beyond the bundled one; repeatable, added to $TERMGYM_SWESYNTH_PROJECTS")
    flaky.add_argument("--static", action="store_true", help="only the static scan (no sandbox, seconds)")
    flaky.add_argument("--busy", type=int, default=None, metavar="N",
                       help="busy processes of the load phase (default: the cores + 1)")
    flaky.add_argument("--candidate-runs", type=int, default=3, metavar="N",
                       help="runs of the timing candidates alone under load (default 3)")
    flaky.add_argument("--budget", type=float, default=900.0, metavar="S", help="seconds per project (default 900)")
    flaky.add_argument("--backend", default="local", help="sandbox backend (local or docker)")
    flaky.add_argument("--json", default=None, metavar="FILE", help="also write every project's report to FILE")
    flaky.set_defaults(func=cmd_flaky)

    projs = sub.add_parser("projects", help="list the bundled real projects and whether their test "
                                            "environments are provisioned here")
    projs.add_argument("--json", action="store_true")
    projs.add_argument("--markdown", action="store_true",
                       help="print the project table of docs/swesynth.md (from the manifests)")
    projs.set_defaults(func=cmd_projects)

    hist = sub.add_parser("history", help="tasks from a project's release history: put functions of the project's "
                                          "release back as earlier releases had them, keep those a test of the "
                                          "release pins (fix, behaviour change or feature)")
    hist.add_argument("name", help="a project of the project set (bundled, or added with add-project)")
    hist.add_argument("--out", required=True, help="compact suite directory to write (created or extended)")
    hist.add_argument("--releases", type=int, default=None, metavar="N",
                      help="mine the N releases just before the project's version (default 3)")
    hist.add_argument("--versions", nargs="+", default=(), metavar="VERSION",
                      help="mine exactly these earlier releases instead")
    hist.add_argument("--n", type=int, default=None, help="stop after this many tasks (default: every candidate "
                                                          "is judged)")
    hist.add_argument("--seed", type=int, default=0)
    hist.add_argument("--workers", "-j", type=int, default=1, help="parallel test runs")
    hist.add_argument("--time-budget", type=float, default=None, help="seconds; keeps what validated")
    hist.add_argument("--max-per-function", type=int, default=1, metavar="N",
                      help="most tasks reverting any one function (default 1: the same function as two releases "
                           "had it, or alone and with its helper, are near-duplicates; 0 turns the cap off)")
    hist.add_argument("--no-groups", action="store_true",
                      help="only single functions (not also functions changed together that call one another)")
    hist.add_argument("--parts-only", action="store_true",
                      help="only partial reverts (one hunk of a release's change to a function, for every function "
                           "whose change spans hunks): what mining a project again after whole reverts were judged adds")
    hist.add_argument("--offline", action="store_true",
                      help="use only the releases already fetched into the cache (no package index)")
    hist.add_argument("--no-flaky-check", action="store_true",
                      help="skip the baseline's flaky check (as generate --no-flaky-check)")
    hist.add_argument("--resume", action="store_true",
                      help="carry on this project's earlier run into --out (same seed): its tasks are kept and the "
                           "candidates it judged are not judged again")
    hist.add_argument("--extends", default=None, metavar="SUITE",
                      help="the compact suite these tasks are for (a directory, or v2 for the bundled default; merge "
                           "them there with `merge OUT --into SUITE`): skip reverts SUITE holds already and count its "
                           "release-history tasks against --max-per-function")
    hist.add_argument("--backend", default="local", help="sandbox backend (local or docker)")
    hist.add_argument("--projects-dir", action="append", default=[], metavar="DIR",
                      help="a project set beyond the bundled one (a folder `add-project --root DIR` wrote); "
                           "repeatable, added to $TERMGYM_SWESYNTH_PROJECTS")
    hist.set_defaults(func=cmd_history)

    split = sub.add_parser("split", help="single-bug tasks from a suite's multi-bug tasks that are not served: each "
                                         "bug alone, validated, reported and checked again as a task of its own")
    split.add_argument("names", nargs="+", metavar="NAME", help="projects of the suite")
    split.add_argument("--out", required=True, help="compact suite directory to write (created or extended)")
    split.add_argument("--suite", default="v2", help="the suite whose tasks are split (default: v2, the bundled default)")
    split.add_argument("--task", nargs="+", default=None, metavar="ID",
                       help="split these tasks (default: every multi-bug task the default policy does not serve)")
    split.add_argument("--served-only", action="store_true",
                       help="keep only new tasks whose own behaviour check decides a grade")
    split.add_argument("--seed", type=int, default=0)
    split.add_argument("--workers", "-j", type=int, default=1, help="parallel test runs")
    split.add_argument("--time-budget", type=float, default=None, help="seconds per project; keeps what validated")
    split.add_argument("--no-flaky-check", action="store_true",
                       help="skip the baseline's flaky check (the project set's suites were checked when added)")
    split.add_argument("--backend", default="local", help="sandbox backend (local or docker)")
    split.set_defaults(func=cmd_split)

    merge = sub.add_parser("merge", help="merge a compact suite (history's or generate's --out) into another, the "
                                         "bundled default included: same projects run the same way, new ones whole")
    merge.add_argument("source", help="the compact suite whose tasks are added")
    merge.add_argument("--into", required=True, help="the compact suite that receives them (a directory, or v2 "
                                                     "for the bundled default)")
    merge.add_argument("--dry-run", action="store_true", help="check everything and say what would move; write nothing")
    merge.add_argument("--max-per-function", type=int, default=None, metavar="N",
                       help="leave out a task that would make a function broken by more than N tasks with fixes "
                            "of its size, one token or larger (default: the bundled suite's cap, 10; 0 turns it off)")
    merge.set_defaults(func=cmd_merge)

    follow = sub.add_parser("follow-project", help="bring a compact suite's project to the tests its project.toml "
                                                   "now deselects: the command, baseline, targets and coverage map "
                                                   "(nothing is run)")
    follow.add_argument("name", help="the project (its name in the suite)")
    follow.add_argument("--suite", default="v2", help="the compact suite (a directory, or v2: the bundled default)")
    follow.add_argument("--write", action="store_true", help="write the changes (without it: only say what would change)")
    follow.add_argument("--projects-dir", action="append", default=[], metavar="DIR",
                        help="a project set beyond the bundled one (repeatable)")
    follow.set_defaults(func=cmd_follow_project)


def use_projects_dirs(dirs: list[str]) -> str | None:
    """Add ``dirs`` (project sets beyond the bundled one) to ``$TERMGYM_SWESYNTH_PROJECTS`` for this
    process and what it starts; returns why not (a folder that is missing), else ``None``."""
    import os
    from pathlib import Path

    from termgym.tasks.swesynth.projects import PROJECTS_PATH_ENV

    missing = [d for d in dirs if not Path(d).expanduser().is_dir()]
    if missing:
        return f"--projects-dir {missing[0]}: no such directory"
    if dirs:
        current = [e for e in os.environ.get(PROJECTS_PATH_ENV, "").split(os.pathsep) if e]
        os.environ[PROJECTS_PATH_ENV] = os.pathsep.join(
            [str(Path(d).expanduser().resolve()) for d in dirs] + current)
    return None


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
    from termgym.factory.swesynth.generate import generate

    breaker = writer = None
    if args.llm_base_url or args.llm_model:
        if not (args.llm_base_url and args.llm_model):
            print("error: --llm-base-url and --llm-model go together", file=sys.stderr)
            return 2
        from termgym.factory.swesynth.breaker import LLMBreaker
        from termgym.factory.swesynth.llm import ChatClient

        client = ChatClient(args.llm_base_url, args.llm_model)
        breaker = LLMBreaker(client)
        writer = client if args.llm_writer else None
    bar = ProgressBar()
    extra = {}
    repo, test_cmd, source_dirs, test_dirs = args.repo, args.test_cmd, args.source_dir, args.test_dir
    extends = _suite_dir(args.extends) if args.extends else None
    problem = use_projects_dirs(args.projects_dir)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        if args.project:
            from termgym.factory.swesynth.screen import ProjectEnv
            from termgym.tasks.swesynth.projects import get_project, project_tree

            project = get_project(args.project)
            repo = repo or project_tree(project.name)
            test_cmd = test_cmd or project.test_command
            source_dirs = source_dirs or list(project.source_dirs)
            test_dirs = test_dirs or list(project.test_dirs)
            extra = {"project": project.name, "project_env": ProjectEnv.for_project(project.name, args.backend),
                     "exclude_tests": [d.test for d in project.deselect]}
        elif not (repo and test_cmd):
            print("error: --repo and --test-cmd are required (or name a bundled project with --project)",
                  file=sys.stderr)
            return 2
        result = generate(repo, test_cmd, n=args.n, seed=args.seed, out=args.out, name=args.name or args.project,
                          bug_types=args.bug_types, max_bugs=args.max_bugs, workers=args.workers,
                          max_attempts=args.max_attempts, source_dirs=source_dirs, test_dirs=test_dirs,
                          sandbox_test_command=args.sandbox_test_cmd, writer=writer, breaker=breaker,
                          progress=bar, sandbox_check=not args.no_sandbox_check, backend=args.backend,
                          storage=args.storage, flaky_check=not args.no_flaky_check,
                          served_only=args.served_only, time_budget=args.time_budget,
                          max_per_function=args.max_per_function or None, extends=extends,
                          resume=args.resume, **extra)
    except (ValueError, FileNotFoundError, RuntimeError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    stats = result.stats
    print(f"wrote {stats.kept} task(s) to {result.out} — {stats.attempted} attempted, "
          f"yield {100 * stats.yield_rate:.0f}%, {stats.tasks_per_minute:.1f} tasks/min "
          f"({stats.elapsed:.0f} s, {stats.required_tests} required tests)")
    print(f"candidates: {stats.candidates} found, {stats.attempted} tried, {stats.runs} ran tests "
          f"({stats.full_runs} full runs, {stats.tests_run} tests), the rest screened out by coverage or refused")
    for line in stats.rejection_lines():
        print(line)
    if result.records and not args.no_sandbox_check:
        print(served_line(result.records))
    if stats.coverage_map:
        print(f"coverage map for fast grades: {stats.coverage_map}")
    if stats.kept < stats.wanted:
        print(f"warning: only {stats.kept} of {stats.wanted} tasks validated; raise --max-attempts or widen "
              "--bug-types", file=sys.stderr)
    return 0 if stats.kept else 1


def served_line(records) -> str:
    """How many of the new tasks ``gym.make`` serves by default, and why the others are not."""
    from collections import Counter

    from termgym.tasks.swesynth.behaviour import servable

    unserved = Counter("a check that does not decide alone" if r.behaviour else
                       str(r.validation.get("behaviour") or "no check recorded").removeprefix("none: ").split(" (")[0]
                       for r in records if not servable(r.behaviour))
    line = (f"served by gym.make by default: {len(records) - sum(unserved.values())} of {len(records)} "
            "(a behaviour check tells the bug apart on inputs no test makes)")
    if unserved:
        line += ("; served only with behaviour='any', graded by their tests alone: "
                 + ", ".join(f"{reason} x{k}" for reason, k in unserved.most_common())
                 + " (--served-only keeps only served tasks)")
    return line


def cmd_show(args: argparse.Namespace) -> int:
    from pathlib import Path

    from termgym.tasks.swesynth import default_suite
    from termgym.tasks.swesynth.records import RecordError, read_task

    path = Path(args.task)
    try:
        if path.exists():
            record = read_task(path)
        else:
            suite = default_suite(args.suite)
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
    from termgym.factory.swesynth import bundle

    bars: dict[str, ProgressBar] = {}

    def progress(name, stats):
        bars.setdefault(name, ProgressBar(label=f"{name} "))(stats)

    if args.toy:
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
    problem = use_projects_dirs(args.projects_dir)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    kwargs = {"jobs": args.workers, "projects": args.project, "progress": progress, "held_out": args.held_out,
              "time_budget": args.time_budget, "clean": args.clean, "resume": args.resume, "deadline": args.deadline,
              "stall_limit": args.stall_limit,
              "log": lambda line: print(line, file=sys.stderr, flush=True)}
    if args.per_project is not None:
        kwargs["per_project"] = args.per_project
    if args.seed is not None:
        kwargs["seed"] = args.seed
    if args.max_named_share is not None:
        kwargs["max_named_share"] = args.max_named_share
    if args.max_per_function is not None:
        kwargs["max_per_function"] = args.max_per_function or None
    out = args.out or str(bundle.SUITE_DIR)
    try:
        results = bundle.build_suite(out, **kwargs)
    except (KeyError, ValueError) as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 1
    print(bundle.summary_markdown(out), end="")
    if args.docs:
        bundle.write_docs_table(out, args.docs)
    return 0 if any(not isinstance(r, str) and r.stats.kept for r in results.values()) else 1


def cmd_summary(args: argparse.Namespace) -> int:
    from pathlib import Path

    from termgym.factory.swesynth import bundle

    suite = Path(args.suite) if args.suite else bundle.SUITE_DIR
    if not (suite / "suite.json").is_file():
        print(f"error: {suite} holds no suite.json (build one with `termgym swesynth bundle`)", file=sys.stderr)
        return 1
    print(bundle.summary_markdown(suite), end="")
    if args.docs:
        bundle.write_docs_table(suite, args.docs)
    return 0


def _suite_dir(value: str):
    from pathlib import Path

    from termgym.tasks.swesynth.suite import NAMED_SUITES

    return Path(NAMED_SUITES.get(value, value))


def cmd_audit(args: argparse.Namespace) -> int:
    from termgym.factory.swesynth.audit import audit, format_audit, write_audit
    from termgym.tasks.swesynth.suite import SweSynthSuite

    folder = _suite_dir(args.suite)
    if not folder.is_dir():
        print(f"termgym swesynth audit: {args.suite!r} is neither a suite directory nor a suite name", file=sys.stderr)
        return 2
    if args.sample is not None and args.sample < 1:
        print(f"termgym swesynth audit: --sample must be at least 1, got {args.sample}", file=sys.stderr)
        return 2
    if args.workers < 1:
        print(f"termgym swesynth audit: --workers must be at least 1, got {args.workers}", file=sys.stderr)
        return 2
    suite = SweSynthSuite(folder, behaviour="required" if args.served else "any")
    result = audit(suite, sample=args.sample, seed=args.seed, run=not args.static, backend=args.backend,
                   workers=args.workers, time_budget=args.time_budget,
                   progress=lambda done, total: print(f"\r{done}/{total}", end="", file=sys.stderr, flush=True))
    print(file=sys.stderr)
    print(format_audit(result), end="")
    skipped = result["total"].get("skipped", 0)
    print(f"{result['tasks']} tasks in {result['seconds']} s" + (f" ({skipped} skipped: time budget)" if skipped else ""))
    if args.json:
        write_audit(result, args.json)
    if args.drop_failing and result["failures"]:
        from termgym.factory.swesynth.bundle import drop_tasks

        reasons: dict[str, str] = {}
        for tid, check, _why in result["failures"]:
            reasons.setdefault(tid, f"audit: {check}")
        gone = drop_tasks(folder, reasons)
        print(f"dropped {sum(gone.values())} tasks that failed a check: {gone}")
    return 0


def cmd_reports(args: argparse.Namespace) -> int:
    import random
    from pathlib import Path

    from termgym.factory.swesynth.report_rewrite import replace_statements, rewrite_reports
    from termgym.tasks.swesynth.suite import SweSynthSuite

    folder = _suite_dir(args.suite)
    if not (folder / "suite.json").is_file():
        print(f"termgym swesynth reports: {args.suite!r} is not a compact suite directory or a suite name",
              file=sys.stderr)
        return 2
    if args.new_openings:
        return _new_openings(args, folder)
    if args.larger_fixes:
        print("termgym swesynth reports: --larger-fixes goes with --new-openings", file=sys.stderr)
        return 2
    if args.project:
        print("termgym swesynth reports: --project goes with --new-openings", file=sys.stderr)
        return 2
    suite = SweSynthSuite(folder, behaviour="any" if args.all else "required")
    ids = sorted(suite.task_ids("all"))
    if args.task:
        unknown = sorted(set(args.task) - set(ids))
        if unknown:
            print(f"termgym swesynth reports: no such task{'s' if len(unknown) > 1 else ''} in the "
                  f"{'suite' if args.all else 'served set (add --all)'}: {', '.join(unknown)}", file=sys.stderr)
            return 2
        ids = sorted(args.task)
    if args.sample is not None:
        ids = sorted(random.Random(args.seed).sample(ids, min(args.sample, len(ids))))
    result = rewrite_reports(suite, ids, backend=args.backend, time_budget=args.time_budget, run_tests=args.run_tests,
                             progress=lambda tid, what: print(f"{tid}: {what}", file=sys.stderr, flush=True))
    failing = sorted(t for t, why in result["checked"].items() if why)
    print(f"{len(result['written'])} of {len(ids)} reports written again, {len(result['failed'])} kept "
          f"({len(failing)} of them with an example that does not show its difference or a failed check), "
          f"{len(result['skipped'])} skipped (time budget), in {result['seconds']} s")
    if args.write:
        unserved = {t: result["checked"][t] for t in failing}
        print(f"{replace_statements(folder, result['written'], unserved, result['repro'])} records changed in {folder}"
              + (f"; {len(unserved)} tasks marked not served (an example does not show the bug, or the "
                 "report fails a check)"
                 if unserved else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


def _new_openings(args: argparse.Namespace, folder) -> int:
    from pathlib import Path

    from termgym.factory.swesynth.report_rewrite import reopen_duplicates, replace_statements
    from termgym.tasks.swesynth.suite import SweSynthSuite

    for flag, given in (("--all", args.all), ("--task", args.task), ("--sample", args.sample is not None),
                        ("--run-tests", args.run_tests)):
        if given:
            print(f"termgym swesynth reports: {flag} does not go with --new-openings (it picks its own tasks "
                  "and always runs their tests)", file=sys.stderr)
            return 2
    before = len(SweSynthSuite(folder, behaviour="required").task_ids("all"))
    result = reopen_duplicates(folder, backend=args.backend, projects=args.project, time_budget=args.time_budget,
                               larger_fixes=args.larger_fixes,
                               progress=lambda tid, what: print(f"{tid}: {what}", file=sys.stderr, flush=True))
    print(f"{len(result['written'])} of {result['candidates']} left-out reports written to open another way, "
          f"{len(result['failed'])} kept, {len(result['skipped'])} skipped (time budget), in {result['seconds']} s")
    if args.write:
        print(f"{replace_statements(folder, result['written'], repros=result['repro'])} records changed in {folder}; "
              "served by default: "
              f"{before} -> {len(SweSynthSuite(folder, behaviour='required').task_ids('all'))}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


def cmd_card(args: argparse.Namespace) -> int:
    from pathlib import Path

    from termgym.factory.swesynth.card import measure, render, write_into

    try:
        card = measure(_suite_dir(args.suite))
    except FileNotFoundError as exc:
        print(f"termgym swesynth card: {exc}", file=sys.stderr)
        return 2
    audit = None
    if args.audit:
        try:
            audit = json.loads(Path(args.audit).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"termgym swesynth card: cannot read the audit {args.audit}: {exc}", file=sys.stderr)
            return 2
    for flag, value in (("--quotes", args.quotes), ("--fixes", args.fixes)):
        if value < 0:
            print(f"termgym swesynth card: {flag} must be 0 or more, got {value}", file=sys.stderr)
            return 2
    section = render(card, audit, quotes=args.quotes, quote_seed=args.quote_seed, fixes=args.fixes,
                     fix_seed=args.fix_seed, doc=args.write)
    if args.write:
        write_into(args.write, section)
    else:
        print(section, end="")
    return 0


def cmd_behaviour(args: argparse.Namespace) -> int:

    from termgym.factory.swesynth.behaviour_record import backfill
    from termgym.tasks.swesynth.suite import NAMED_SUITES

    suite = _suite_dir(args.suite)
    if not suite.is_dir():
        print(f"termgym swesynth behaviour: {args.suite!r} is neither a suite directory nor a suite name "
              f"({', '.join(NAMED_SUITES)})", file=sys.stderr)
        return 1
    if args.workers < 1:
        print(f"termgym swesynth behaviour: --workers must be at least 1, got {args.workers}", file=sys.stderr)
        return 1
    if args.reason is not None and not (args.retry or args.retry_unserved):
        print("termgym swesynth behaviour: --reason chooses among the tasks --retry or --retry-unserved "
              "records again; give one of them too", file=sys.stderr)
        return 1

    def progress(task_id: str, outcome: str) -> None:
        if not args.quiet:
            print(f"{time.strftime('%H:%M:%S')} {task_id}: {outcome}", flush=True)

    stats = backfill(suite, jobs=args.workers, repos=args.repo, limit=args.limit, backend=args.backend,
                     redo=args.redo, retry=args.retry, verify=args.verify, heldout=args.heldout,
                     retry_unserved=args.retry_unserved, clock=args.drop_clock, per_bug=args.per_bug, state=args.state,
                     reason=args.reason,
                     progress=progress)
    print(json.dumps(stats, indent=1))
    return 0


def cmd_provision(args: argparse.Namespace) -> int:
    from pathlib import Path

    from termgym.tasks.swesynth.projects import (
        ProjectError,
        load_projects,
        provision,
        run_clean_suite,
        served_projects,
    )

    problem = use_projects_dirs(args.projects_dir)
    if problem:
        print(f"termgym swesynth provision: {problem}", file=sys.stderr)
        return 2
    try:
        extra = sorted({n for d in args.projects_dir for n in load_projects(Path(d).expanduser().resolve())})
        names = args.project or (sorted(load_projects()) if args.all else sorted({*served_projects(), *extra}))
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


def cmd_add_project(args: argparse.Namespace) -> int:
    from termgym.factory.swesynth.project_add import AddProjectError, add_project, parse_deselect
    from termgym.tasks.swesynth.projects import ProjectError

    try:
        result = add_project(args.requirement, sdist=args.sdist, domain=args.domain, description=args.description,
                             deps=args.dep, no_deps=args.no_dep, deselect=parse_deselect(args.deselect),
                             pytest_args=args.pytest_args,
                             source_dirs=args.source_dir, test_dirs=args.test_dir, python_path=args.python_path,
                             licence=args.license, root=args.root, replace=args.replace, timeout=args.timeout,
                             deselect_failing=args.deselect_failing, flaky_probe=not args.no_flaky_probe)
    except (AddProjectError, ProjectError, RuntimeError) as exc:  # a ProjectError: the sdist does not unpack
        print(f"termgym swesynth add-project: {exc}", file=sys.stderr)
        return 1
    if not result.ok:
        print(f"termgym swesynth add-project: the clean suite of {result.project.name} does not pass under the "
              f"grader; nothing was added (the folder is kept at {result.folder}). Leave out what cannot run "
              "offline in a sandbox with --deselect TEST=REASON:", file=sys.stderr)
        for test, message in sorted(result.failures.items()):
            print(f"  {test}: {message[:300]}", file=sys.stderr)
        if result.proposed:
            print("Proposed (run again with --deselect-failing to take it, each with its failure as the "
                  "reason; or pass your own --deselect):", file=sys.stderr)
            for test, reason in result.proposed:
                print(f"  --deselect {shlex.quote(f'{test}={reason}')}", file=sys.stderr)
        return 1
    p = result.project
    print(f"added {p.name} {p.version} ({p.license}) at {result.folder}: {p.lines} lines, {p.tests} tests passing, "
          f"suite {p.suite_seconds}s, provisioned in {result.provision_seconds:.1f}s"
          + (f"; {len(result.flaky)} flaky test(s) left out (see [[deselect]] in project.toml)" if result.flaky else ""))
    return 0


def cmd_flaky(args: argparse.Namespace) -> int:
    from pathlib import Path

    from termgym.factory.swesynth.flaky_sweep import sweep_project
    from termgym.tasks.swesynth.projects import ProjectError, TestEnvMissing, get_project, load_projects

    problem = use_projects_dirs(args.projects_dir)
    if problem:
        print(f"termgym swesynth flaky: {problem}", file=sys.stderr)
        return 2
    try:
        names = args.project or sorted(load_projects())
        projects = [get_project(n) for n in names]
    except ProjectError as exc:
        print(f"termgym swesynth flaky: {exc}", file=sys.stderr)
        return 1
    reports, found, errors = {}, 0, 0
    for project in projects:
        try:
            report = sweep_project(project, static=args.static, busy=args.busy, candidate_runs=args.candidate_runs,
                                   time_budget=args.budget, backend=args.backend,
                                   log=lambda line, n=project.name: print(f"{n}: {line}", flush=True))
        except (TestEnvMissing, RuntimeError) as exc:
            print(f"{project.name}: not probed: {exc}", file=sys.stderr)
            reports[project.name] = {"error": str(exc)}
            errors += 1
            continue
        reports[project.name] = report
        found += len(report.get("flaky", []))
        candidates = report["candidates"]
        if args.static and not candidates:
            continue
        line = f"{project.name}: {len(candidates)} timing candidate(s)"
        if "summary" in report:
            line += f"; {report['summary']}"
        print(line)
        for test, why in candidates.items():
            print(f"  candidate {test}: {why}")
        for entry in report.get("flaky", []):
            print(f"  FLAKY {entry['test']}: {entry['reason']}")
            print(f"    [[deselect]]\n    test = {json.dumps(entry['test'])}\n    reason = "
                  f"{json.dumps('flaky: ' + entry['reason'])}")
        for note in report.get("notes", []):
            print(f"  note: {note}")
    total = sum(len(r.get("candidates", {})) for r in reports.values())
    print(f"{len(projects)} project(s): {total} timing candidate(s), {found} flaky test(s)"
          + (f", {errors} not probed" if errors else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=1) + "\n", encoding="utf-8")
    return 1 if found or errors else 0


def projects_markdown(projects: dict) -> str:
    """The project table of docs/swesynth.md: one row per project manifest."""
    lines = ["| project | version | licence | domain | suite style | lines of source | tests (passing) | suite s "
             "| deselected |", "|---|---|---|---|---|---:|---:|---:|---:|"]
    for name, p in sorted(projects.items()):
        lines.append(f"| {name} | {p.version} | {p.license} | {p.domain} | {p.extra.get('test_style', 'pytest')} "
                     f"| {p.lines or 0:,} | {p.tests or 0:,} | {p.suite_seconds or 0:.1f} "
                     f"| {len(p.deselect) or '–'} |")
    return "\n".join(lines)


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
    if args.markdown:
        print(projects_markdown(load_projects()))
        return 0
    for r in rows:
        print(f"{r['name']:12} {r['version']:9} {r['license']:13} {r['domain']:24} lines {r['lines'] or '?':>6}  "
              f"tests {r['tests'] or '?':>5}  {'provisioned' if r['provisioned'] else 'NOT provisioned'}")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from termgym.factory.swesynth.merge import MergeError, merge_suites
    from termgym.tasks.swesynth.suite import NAMED_SUITES

    into = NAMED_SUITES.get(args.into, args.into)
    try:
        result = merge_suites(args.source, into, dry_run=args.dry_run, max_per_function=args.max_per_function)
    except MergeError as exc:
        print(f"termgym swesynth merge: {exc}", file=sys.stderr)
        return 1
    total = sum(result.added.values())
    print(f"{'would merge' if args.dry_run else 'merged'} {total} task(s) from {args.source} into {into}: "
          + ", ".join(f"{repo} {n}" for repo, n in sorted(result.added.items())))
    if result.same:
        print("already there, identical: " + ", ".join(f"{repo} {n}" for repo, n in sorted(result.same.items())))
    if result.new_projects:
        print("new projects: " + ", ".join(result.new_projects))
    if result.splits:
        print("splits: " + ", ".join(f"{k} {v}" for k, v in sorted(result.splits.items())))
    if result.same_bug:
        print("already there, the same bug: " + ", ".join(f"{repo} {n}" for repo, n in sorted(result.same_bug.items())))
    if result.over_cap:
        print("left out, a function would be broken by more tasks than the cap: "
              + ", ".join(f"{repo} {n}" for repo, n in sorted(result.over_cap.items())))
    for repo, why in sorted(result.selection_missing.items()):
        print(f"{repo}: no test selections merged: {why}")
    return 0


def cmd_follow_project(args: argparse.Namespace) -> int:
    """``termgym swesynth follow-project NAME``: a suite's project follows the project's newer
    deselections (:func:`termgym.factory.swesynth.follow.follow_project`)."""
    from termgym.factory.swesynth.follow import FollowError, follow_project

    problem = use_projects_dirs(args.projects_dir)
    if problem:
        print(f"termgym swesynth follow-project: {problem}", file=sys.stderr)
        return 2
    suite = _suite_dir(args.suite)
    try:
        result = follow_project(suite, args.name, write=args.write)
    except FollowError as exc:
        print(f"termgym swesynth follow-project: {exc}", file=sys.stderr)
        return 1
    if not result.changed:
        print(f"{args.name}: {suite} already runs the project's test command; nothing to follow")
        return 0
    verb = "now deselects" if result.written else "would deselect"
    print(f"{args.name}: {suite} {verb} {len(result.deselected)} test(s) as the project does: "
          f"{len(result.dropped_tests)} required test(s) leave the baseline and the coverage map, "
          f"{len(result.targets)} task(s) lose target tests (each keeps at least one)")
    for tid, tests in sorted(result.targets.items()):
        print(f"  {tid}: " + ", ".join(tests))
    if not result.written:
        print("(nothing written: --write writes it)")
    else:
        print("grade the changed tasks again: python -m benchmarks.swesynth_sweep --served --resume")
    return 0


def cmd_split(args: argparse.Namespace) -> int:
    """``termgym swesynth split NAME...``: single-bug tasks from multi-bug ones
    (:func:`termgym.factory.swesynth.split.split_project`)."""
    from termgym.factory.swesynth.split import SplitError, split_project
    from termgym.tasks.swesynth.projects import ProjectError

    suite = _suite_dir(args.suite)
    if not (suite / "suite.json").is_file():
        print(f"termgym swesynth split: {args.suite!r} is neither a compact suite directory nor a suite name",
              file=sys.stderr)
        return 2
    if args.workers < 1:
        print(f"termgym swesynth split: --workers must be at least 1, got {args.workers}", file=sys.stderr)
        return 2
    kept = 0
    failed = []
    for name in args.names:
        bar = ProgressBar(label=f"{name} ")
        try:
            result, source = split_project(name, args.out, suite=suite, only=args.task, seed=args.seed,
                                           workers=args.workers, backend=args.backend, time_budget=args.time_budget,
                                           flaky_check=not args.no_flaky_check, served_only=args.served_only,
                                           log=lambda line: print(line, file=sys.stderr, flush=True), progress=bar)
        except (SplitError, ProjectError, ValueError, RuntimeError) as exc:
            print(f"termgym swesynth split: {name}: {exc}", file=sys.stderr)
            failed.append(name)
            continue
        stats = result.stats
        kept += stats.kept
        print(f"{name}: wrote {stats.kept} single-bug task(s) to {result.out} from {len(source.units)} bugs of "
              f"{len({t for v in source.sources.values() for t in v})} multi-bug tasks ({stats.elapsed:.0f} s)")
        for line in stats.rejection_lines():
            print(line)
        if result.records:
            print(served_line(result.records))
    if failed:
        print(f"not split: {', '.join(failed)}", file=sys.stderr)
    return 0 if kept and not failed else 1


def cmd_history(args: argparse.Namespace) -> int:
    """``termgym swesynth history NAME``: tasks from the project's release history
    (:func:`termgym.factory.swesynth.history.mine_history`)."""
    from termgym.factory.swesynth.history import DEFAULT_RELEASES, HistoryError, mine_history
    from termgym.tasks.swesynth.projects import ProjectError

    problem = use_projects_dirs(args.projects_dir)
    if problem:
        print(f"termgym swesynth history: {problem}", file=sys.stderr)
        return 2
    if args.max_per_function < 0:
        print(f"termgym swesynth history: --max-per-function must be 0 or more, got {args.max_per_function}",
              file=sys.stderr)
        return 2
    if args.n is not None and args.n < 1:
        print(f"termgym swesynth history: --n must be at least 1, got {args.n}", file=sys.stderr)
        return 2
    extends = _suite_dir(args.extends) if args.extends else None
    bar = ProgressBar(label=f"{args.name} ")
    try:
        result = mine_history(args.name, args.out, releases=DEFAULT_RELEASES if args.releases is None else args.releases,
                              versions=args.versions, n=args.n,
                              seed=args.seed, workers=args.workers, backend=args.backend,
                              time_budget=args.time_budget, groups=not args.no_groups, parts_only=args.parts_only, offline=args.offline,
                              max_per_function=args.max_per_function or None, flaky_check=not args.no_flaky_check,
                              resume=args.resume, extends=extends, log=lambda line: print(line, file=sys.stderr, flush=True), progress=bar)
    except (HistoryError, ProjectError, ValueError, RuntimeError) as exc:
        print(f"termgym swesynth history: {exc}", file=sys.stderr)
        return 1
    stats = result.generation.stats
    print(f"wrote {stats.kept} task(s) to {result.out} from {len(result.mining.releases)} earlier release(s) "
          f"({', '.join(result.mining.releases)}): {result.candidates} candidates, {stats.attempted} judged, "
          f"{stats.runs} ran tests, {stats.elapsed:.0f} s")
    print("kinds: " + (", ".join(f"{k} {v}" for k, v in sorted(result.kinds.items())) or "none"))
    if result.mining.unfetchable:
        print("releases skipped (could not be fetched): " + ", ".join(result.mining.unfetchable))
    if result.mining.skipped:
        print("not proposed: " + json.dumps(dict(result.mining.skipped)))
    for line in stats.rejection_lines():
        print(line)
    return 0 if stats.kept else 1
