"""The bug factory: from a repository whose tests pass to validated SWE-SYNTH tasks.

:func:`generate` runs the pipeline; every test run happens in a sandbox of the task runtime:

1. copy the repository (a path or a git URL, cloned shallowly) to a scratch tree;
2. the project's baseline (:mod:`~termgym.factory.swesynth.screen`, cached per tree hash): the
   required tests, the lines each executes, the clean tree graded twice by the real grader (a test
   that fails once, in reverse order, or, a timing test, under CPU load, is left out:
   :mod:`~termgym.factory.swesynth.flaky`);
3. scan the source files for candidate mutations (:mod:`~termgym.factory.swesynth.inject`) and draw
   attempts from the seed (bug types take turns);
4. screen attempts in parallel, one long-lived sandbox per worker, running only the tests that
   execute the changed lines, keeping the first ``n`` kept attempts *in plan order*, so the output
   does not depend on the number of workers;
5. write a user-style report for each (:mod:`~termgym.factory.swesynth.report`), validate each task
   in the sandbox it will use (:func:`validate_in_sandbox`) and write the suite (task folders, or
   the compact per-project storage of :mod:`~termgym.tasks.swesynth.store`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from termgym.factory.swesynth.adapters import (
    attach_project,
    difficulty_tier,
    names_module,
    task_signals,
)
from termgym.factory.swesynth.audit import example_runner
from termgym.factory.swesynth.bugs.signals import count_changed_tokens
from termgym.factory.swesynth.flaky import CANDIDATE_RUNS
from termgym.factory.swesynth.inject import (
    Attempt,
    InjectionError,
    Mutation,
    check_bug_types,
    mutate_files,
    plan_attempts,
    scan_repository,
    units,
)
from termgym.factory.swesynth.known import MAX_TASKS_PER_FUNCTION, KnownBugs, cap_keys, fix_size, known_bugs
from termgym.factory.swesynth.patches import make_patch, patch_files
from termgym.factory.swesynth.plausible import implausible_failure
from termgym.factory.swesynth.quality import report_quality, repro_check
from termgym.factory.swesynth.report import check_report, write_report, write_report_llm
from termgym.factory.swesynth.screen import Baseline, ProjectEnv, ScreenWorker, StatementMap, project_baseline
from termgym.factory.swesynth.validate import max_failures
from termgym.tasks.swesynth import pyparse
from termgym.tasks.swesynth.behaviour import servable
from termgym.tasks.swesynth.grading import default_source_dirs, refused_paths
from termgym.tasks.swesynth.records import RECORD_VERSION, TaskRecord, write_task
from termgym.tasks.swesynth.selection import select_command
from termgym.tasks.swesynth.store import write_compact
from termgym.tasks.swesynth.tree import copy_tree, is_source_path, is_test_path, list_source_files

GENERATOR_VERSION = 1
#: Candidates in a row whose judging crashed before the run gives up (a broken sandbox or tree,
#: not one odd candidate): one crash rejects its candidate only.
MAX_ERRORS_IN_A_ROW = 20
#: How a crashed candidate's rejection reason starts (the summary keeps the first few whole).
INTERNAL_ERROR = "internal error"


def candidate_error(exc: BaseException) -> str:
    """The rejection reason of a candidate whose judging raised: the error's type and first line,
    short enough to group in the generation summary (``ast.unparse`` refusing a backslash in an
    f-string on 3.11, a bug patch the recording sandbox cannot apply)."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{INTERNAL_ERROR}, {type(exc).__name__}: {first[:80]}".rstrip(": ")


Progress = Callable[["Stats"], None]


@dataclass
class Stats:
    """Counters of one generation run (also what the progress bar shows)."""

    wanted: int
    attempted: int = 0
    kept: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    baseline_seconds: float = 0.0
    setup_seconds: float = 0.0
    candidates: int = 0
    required_tests: int = 0
    runs: int = 0  # candidates that ran tests (the others were screened out by coverage)
    full_runs: int = 0  # of which ran the whole required set (import-time changes)
    tests_run: int = 0
    run_seconds: float = 0.0
    timed_out_runs: int = 0  # runs ended by a timeout or a test's budget (looping bugs)
    timed_out_seconds: float = 0.0
    stopped: str = ""
    finished: float | None = None
    errors: list[str] = field(default_factory=list)  # the first few crashed candidates' messages, whole
    coverage_map: str = ""  # where the project's fast-grade map went (compact storage), or why none
    #: the first whole reason behind each ``rejected`` count whose count key leaves details out
    #: ("no clean bug report" -> "no clean bug report: no failing test shows a concrete call, ...")
    examples: dict[str, str] = field(default_factory=dict)

    @property
    def elapsed(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    def count_run(self, full: bool, tests: int, seconds: float, timed_out: bool = False) -> None:
        self.runs += 1
        self.full_runs += int(full)
        self.tests_run += tests
        self.run_seconds += seconds
        self.timed_out_runs += int(timed_out)
        self.timed_out_seconds += seconds if timed_out else 0.0

    @property
    def yield_rate(self) -> float:
        return self.kept / self.attempted if self.attempted else 0.0

    @property
    def tasks_per_minute(self) -> float:
        return 60.0 * self.kept / self.elapsed if self.elapsed > 0 else 0.0

    def reject(self, reason: str) -> None:
        key = re.sub(r"\d+ tests fail, more than the limit of \d+", "too many tests fail", reason)
        key = re.sub(r"[:(].*", "", key).strip()
        self.rejected[key] = self.rejected.get(key, 0) + 1
        if reason.strip() != key and key not in self.examples:
            self.examples[key] = reason.strip()[:300]
        if reason.startswith(INTERNAL_ERROR) and reason not in self.errors and len(self.errors) < 5:
            self.errors.append(reason)

    def to_dict(self) -> dict[str, Any]:
        return {"wanted": self.wanted, "attempted": self.attempted, "kept": self.kept,
                "yield": round(self.yield_rate, 3), "tasks_per_minute": round(self.tasks_per_minute, 2),
                "elapsed_seconds": round(self.elapsed, 1), "baseline_seconds": round(self.baseline_seconds, 2),
                "setup_seconds": round(self.setup_seconds, 1), "candidates": self.candidates,
                "required_tests": self.required_tests, "runs": self.runs, "full_runs": self.full_runs,
                "tests_run": self.tests_run, "run_seconds": round(self.run_seconds, 1), "timed_out_runs": self.timed_out_runs,
                "timed_out_seconds": round(self.timed_out_seconds, 1), "stopped": self.stopped,
                **({"errors": self.errors} if self.errors else {}),
                "rejected": dict(sorted(self.rejected.items(), key=lambda kv: -kv[1])),
                **({"rejected_examples": dict(sorted(self.examples.items()))} if self.examples else {})}

    def rejection_lines(self) -> list[str]:
        """What ``generate`` prints of its rejections: the counts, then one whole reason of each where the
        count's key leaves the details out (which rule a report broke, which name was undefined)."""
        if not self.rejected:
            return []
        lines = ["rejected: " + ", ".join(f"{k} ×{v}" for k, v in sorted(self.rejected.items()))]
        lines += [f"  e.g. {reason}" for _, reason in sorted(self.examples.items())]
        return lines


@dataclass
class GenerationResult:
    """What :func:`generate` made: the records (in plan order), the suite directory and the stats."""

    records: list[TaskRecord]
    out: Path
    stats: Stats


def is_git_url(repo: str) -> bool:
    return bool(re.match(r"^(https?|git|ssh)://|^git@|^file://", repo)) or (
        repo.endswith(".git") and not os.path.isdir(repo))


def fetch_repo(repo: str, dest: Path) -> Path:
    """A local directory for ``repo``: the path itself, or a shallow clone of a git URL into ``dest``."""
    if is_git_url(repo):
        proc = subprocess.run(["git", "clone", "--depth", "1", "--quiet", repo, str(dest)], capture_output=True,
                              text=True, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
        if proc.returncode != 0:
            raise RuntimeError(f"git clone {repo} failed: {proc.stderr.strip()}")
        return dest
    path = Path(repo).expanduser().resolve()
    if not path.is_dir():
        raise FileNotFoundError(f"repository {repo!r} is neither a directory nor a git URL")
    return path


def split_for(task_id: str, test_fraction: float) -> str:
    """The fixed split of a task: a hash of its id, so adding tasks never moves old ones."""
    bucket = int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "test" if bucket < test_fraction else "train"


class _Workspaces:
    """One scratch copy of the clean repository per worker, handed out through a queue."""

    def __init__(self, src: Path, count: int, parent: Path) -> None:
        self.pool: queue.Queue[Path] = queue.Queue()
        for i in range(count):
            tree = parent / f"work{i}"
            copy_tree(src, tree)
            self.pool.put(tree)


def generate(repo: str | Path, test_command: str, *, n: int, seed: int = 0, out: str | Path,
             name: str | None = None, bug_types: Sequence[str] | None = None, max_bugs: int = 1,
             workers: int = 1, max_attempts: int | None = None, source_dirs: Sequence[str] = (),
             test_dirs: Sequence[str] = (), sandbox_test_command: str | None = None,
             repo_dir_ref: str | None = None, test_fraction: float = 0.1, writer=None, breaker=None,
             progress: Progress | None = None, suite_name: str | None = None,
             sandbox_check: bool = True, backend: str = "local", project_env: ProjectEnv | None = None,
             project: str | None = None, storage: str = "folders", max_named_share: float | None = None,
             exclude_tests: Sequence[str] = (), import_time: str = "auto", time_budget: float | None = None,
             split: str | None = None, stall_limit: int | None = None, resume: bool = False,
             early_stop: bool = True, max_per_function: int | None = None, sizes_apart: bool = True,
             flaky_check: bool = True, served_only: bool = False,
             extends: str | Path | None = None,
             extends_load: Callable[[dict[str, Any]], bool] | None = None) -> GenerationResult:
    """Generate up to ``n`` validated tasks from ``repo`` into the suite directory ``out``.

    Every test run happens in a sandbox of the task runtime (``backend``), never on the host:
    ``sandbox_test_command`` (default ``test_command``; the host command is accepted for
    compatibility and not run) is a pytest command run from the repository root there.

    1. :func:`~termgym.factory.swesynth.screen.project_baseline` (cached per tree hash): the required
       tests and which lines each executes, the clean tree graded twice by the real grader; tests
       that do not pass every clean run, and with ``flaky_check`` those that fail in a run in
       reverse order and the timing tests that fail when run again under CPU load
       (:func:`~termgym.factory.swesynth.flaky.unstable_tests`), are left out of the required set
       (``exclude_tests`` too: a project's deselected tests);
    2. candidates from the seed (bug types take turns); each runs only the required tests that
       execute its changed lines (:meth:`~termgym.factory.swesynth.screen.Baseline.tests_for_change`),
       in a long-lived sandbox per worker; import-time changes need a full run (``import_time``:
       ``"run"``, ``"skip"``, or ``"auto"`` = run when a full run takes under 20 s);
    3. kept candidates get a user-style report and, with ``sandbox_check``, are graded in the
       sandbox the task will use (:func:`validate_in_sandbox`): the oracle restores the clean
       tree byte for byte (whose grade is the baseline's) and the do-nothing agent scores 0 with the
       real grader on the failing tests, each of which must fail again.

    ``storage`` is ``"folders"`` (one folder per task) or ``"compact"`` (one JSONL of records per
    project plus its baseline, for suites of thousands of tasks). ``project`` names a bundled
    project (records then find the tree through :mod:`~termgym.tasks.swesynth.projects`).
    ``max_named_share`` caps the kept tasks whose failing test file is named after the buggy module
    at that share of ``n`` (a suite-wide share is enforced by the bundler). ``time_budget`` (seconds) stops early with what validated. ``split`` puts every
    task of this project in one split (held out by project); otherwise ``test_fraction`` of the
    tasks (by id hash) go to ``test``. ``stall_limit`` stops after that many candidates in a row
    that ran tests without giving a task. ``max_per_function`` caps the kept tasks that break any one
    function with a fix of one size, one token or larger (a task counts for every function its bugs
    change; a candidate with a function full at its size is skipped before it runs, and acceptance
    checks again in plan order); ``sizes_apart=False`` caps a function's tasks over both sizes
    (release history: two reverts of one function are near-duplicates whatever their size).

    ``served_only`` (needs ``sandbox_check``) keeps only tasks whose behaviour check decides a grade
    alone (:func:`~termgym.tasks.swesynth.behaviour.servable`), the tasks ``gym.make`` serves by
    default; the others are rejected ("no behaviour check tells the bug apart") instead of kept for
    ``behaviour="any"``.

    ``early_stop`` ends a candidate's run as soon as its verdict is sealed: when one test outlives
    its budget (:meth:`~termgym.factory.swesynth.screen.Baseline.test_budgets`: a multiple of its
    clean duration plus a margin; the run counts as timed out, as it would have at the timeout), so
    a bug that makes a test loop costs seconds, not the whole run's timeout; and once more tests
    than the limit have failed (the candidate is rejected as breaking too many tests whatever the
    others do).

    ``resume`` (compact storage only) continues this project's earlier run in ``out`` with the same
    seed: its tasks are kept as they are, the candidates it judged are not judged again (the plan is
    the same sequence, so the run picks up where the last one stopped) and ``n`` counts the kept
    tasks of both; the generation summary adds up both runs.

    ``extends`` names the compact suite this batch is made for (``termgym swesynth merge OUT --into
    SUITE``): a candidate whose bug that suite holds already (same bug patch, so same task id) is
    skipped before any test runs, and its tasks count against ``max_per_function`` (default then:
    the bundled suite's cap, the one merging checks), so the batch spends its runs on bugs the merge
    will take. ``extends_load`` picks which of that suite's tasks (record lines) count against the
    cap (default: all; release-history mining counts only its own kind, :func:`~termgym.factory.swesynth.history.mine_history`).
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    pyparse.serialise_every_parse()  # worker threads parse; so may the standard library in them
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if storage not in ("folders", "compact"):
        raise ValueError(f"storage must be 'folders' or 'compact', not {storage!r}")
    if resume and storage != "compact":
        raise ValueError("resume needs storage='compact' (it continues a project's records file)")
    if import_time not in ("auto", "run", "skip"):
        raise ValueError(f"import_time must be 'auto', 'run' or 'skip', not {import_time!r}")
    if max_per_function is not None and max_per_function < 1:
        raise ValueError(f"max_per_function must be at least 1 (None turns the cap off), got {max_per_function}")
    # a candidate source that makes a kind of bug of its own (release history) names its types
    types = list(getattr(breaker, "bug_types", ())) or check_bug_types(bug_types, allow_llm=breaker is not None)
    out = Path(out)
    name = name or re.sub(r"\.git$", "", Path(str(repo).rstrip("/")).name) or "repo"
    known = KnownBugs()
    if extends is not None:
        try:
            known = known_bugs(extends, name, load_of=extends_load)
        except ValueError as exc:
            raise ValueError(f"--extends: {exc}") from None
        max_per_function = MAX_TASKS_PER_FUNCTION if max_per_function is None else max_per_function
    stats = Stats(wanted=n)
    command = sandbox_test_command or test_command
    project_env = project_env or ProjectEnv(backend=backend)
    with tempfile.TemporaryDirectory(prefix="termgym-swesynth-") as tmp_name:
        tmp = Path(tmp_name)
        src = fetch_repo(str(repo), tmp / "clone")
        pristine = tmp / "pristine"
        copy_tree(src, pristine)
        # Bugs go only where graders take fixes from: the project's packages unless told otherwise.
        source_dirs = list(source_dirs) or default_source_dirs(pristine, test_dirs)
        sources = list_source_files(pristine, source_dirs, test_dirs)
        if not sources:
            raise RuntimeError(f"no Python source files found in {repo} (source_dirs={list(source_dirs)})")
        t0 = time.monotonic()
        base = project_baseline(pristine, command, source_dirs, project_env, exclude=exclude_tests,
                                load_runs=CANDIDATE_RUNS if flaky_check else 0, order_check=flaky_check)
        # Doctests collected from source files (``--doctest-modules``) live in what the agent edits:
        # a fix could rewrite the expected output, so they never decide a grade.
        required = [t for t in base.tests if not is_source_path(t.split("::", 1)[0], source_dirs, test_dirs)]
        if not required:
            raise RuntimeError(f"every test that passes in {repo} lives in its source files (doctests); "
                               "a grade needs tests the agent cannot edit")
        required_set = set(required)
        stats.baseline_seconds = base.seconds
        stats.setup_seconds = time.monotonic() - t0
        stats.required_tests = len(required)
        # Tests that pass in about a second must not wait a minute for a bug that loops forever.
        run_timeout = max(10.0, 3 * base.seconds + 5)
        full_runs_ok = import_time == "run" or (import_time == "auto" and base.seconds <= 20.0)
        limit = max_failures(len(required))
        previous = _previous_run(out, name, seed, required) if resume else None
        # a source that proposes every candidate itself (split bugs) has procedural types but no scan
        procedural = [] if getattr(breaker, "proposes_all", False) else [t for t in types if t in _procedural()]
        files, candidates = scan_repository(pristine, sources, procedural)
        if breaker is not None:
            candidates = candidates + breaker.propose(files, [t for t in types if t not in procedural] or types,
                                                      seed=seed)
        stats.candidates = len(candidates)
        attempts = plan_attempts(candidates, seed, files=files, bug_types=types, max_bugs=max_bugs,
                                 limit=max_attempts or max(50, 25 * n))
        statements: dict[str, StatementMap] = {}
        workers_pool: queue.Queue[ScreenWorker] = queue.Queue()
        # the import path a report's example runs with: the tree's import roots, the tree, the environment
        wd = project_env.workdir.rstrip("/")
        env_path = list(project_env.grader_kwargs.get("python_path") or ())
        example_path = [p for p in env_path if p == wd or p.startswith(wd + "/")] + [wd] + [
            p for p in env_path if not (p == wd or p.startswith(wd + "/"))]
        opened: list[ScreenWorker] = []
        ws_cache = tmp / "workspaces"

        def worker() -> ScreenWorker:
            try:
                return workers_pool.get_nowait()
            except queue.Empty:
                box = ScreenWorker(pristine, command, source_dirs, project_env)
                opened.append(box)
                return box

        def evaluate(attempt: Attempt) -> tuple[Attempt, Any]:
            try:
                mutated = mutate_files(files, attempt.mutations)
            except InjectionError as exc:
                return attempt, str(exc)
            bad = [p for p in mutated if is_test_path(p, test_dirs)]
            if bad:
                return attempt, f"the bug touches test files: {', '.join(bad)}"
            patch = make_patch({p: files[p] for p in mutated}, mutated)
            if known.task_ids and task_id_of(name, patch) in known.task_ids:
                return attempt, "the suite it extends has this bug already"
            full = functions_full(attempt.mutations, fix_size(count_changed_tokens(patch)))
            if full:
                return attempt, f"the function quota is full ({full})"
            selected: set[str] | None = set()
            for path, text in mutated.items():
                if path not in statements:
                    statements[path] = StatementMap(files[path])
                picked = base.tests_for_change(path, files[path], text, statements[path])
                if picked is None:
                    selected = None
                    break
                selected.update(t for t in picked if t in required_set)
            if selected is None and not full_runs_ok:
                return attempt, "changes code that runs at import time (a full run would be needed; skipped)"
            if selected is not None and not selected:
                return attempt, "no required test executes the changed lines"
            tests = required if selected is None else [t for t in required if t in selected]
            if (max_named_share is not None and counts["named"] >= max_named_share * n
                    and names_module(tests, list(mutated))):
                # The quota of tasks found through a test file named after the module is full, and
                # every test this change can fail is such a file: not worth running.
                return attempt, "test file named after the module (over the suite's share)"
            budgets = base.test_budgets(tests) if early_stop else None
            box = worker()
            ran.add(attempt.index)
            try:
                # past ``limit`` failures the candidate is rejected whatever the other tests do
                run = box.run(mutated, None if selected is None else tests, timeout=run_timeout, budgets=budgets,
                              stop_after_failures=limit if early_stop else None)
            finally:
                workers_pool.put(box)
            stats.count_run(selected is None, len(tests), run.duration, run.timed_out)
            if run.timed_out:
                return attempt, "the test run timed out"
            if run.exit_code not in (0, 1):
                return attempt, f"the bug stops pytest before the tests run (exit {run.exit_code}: collection error)"
            failed = run.failed_among(tests)
            if not failed:
                return attempt, "no required test fails"
            if run.stopped_early:
                ran_failed = [t for t in tests if run.outcomes.get(t) == "failed"]
                return attempt, f"{len(ran_failed)} tests fail, more than the limit of {limit} (run stopped there)"
            if len(failed) > limit:
                return attempt, f"{len(failed)} tests fail, more than the limit of {limit}"
            kind = implausible_failure(run.messages, failed, attempt.bug_types)
            if kind:
                return attempt, f"implausible bug, {kind}"
            groups = [sorted(failed)]
            bugs = units(attempt.mutations)
            if len(bugs) > 1:
                # each bug of the combination must break a required test on its own, or the grade
                # asks for a fix of something no report can describe
                groups = []
                for unit in bugs:
                    box = worker()
                    try:
                        alone = box.run(mutate_files(files, unit), None if selected is None else tests,
                                        timeout=run_timeout, budgets=budgets)
                    finally:
                        workers_pool.put(box)
                    stats.count_run(selected is None, len(tests), alone.duration, alone.timed_out)
                    own = sorted(set(alone.failed_among(tests)) & set(failed))
                    if not own:
                        return attempt, "quality check failed, a bug of the combination breaks no required test alone"
                    # only tests that fail at the same call with the other bugs present show this bug's
                    # symptom as the user of the buggy tree sees it; another bug may mask the rest
                    own = [t for t in own if _same_call(t, run.messages, alone.messages, pristine)]
                    if not own:
                        return attempt, "quality check failed, report names every symptom"
                    groups.append(own)
            record = _make_record(attempt, files, mutated, sorted(failed), run.messages, groups)
            if isinstance(record, str):
                return attempt, record
            if sandbox_check:
                # The report's repro first (two short runs in one sandbox): the validation grades the
                # failing tests and records the behaviour check, many times the cost, and a task whose
                # repro does not show the bug is rejected either way.
                repro: dict[str, Any] = {}
                if repro_check(record, backend=project_env.backend, cache_dir=ws_cache, keep=repro):
                    return attempt, "quality check failed, repro shows the difference"
                problem = validate_in_sandbox(record, files, base, backend=project_env.backend,
                                              cache_dir=ws_cache)
                if problem:
                    return attempt, problem
                record.validation["repro"] = repro
                if served_only and not servable(record.behaviour):
                    return attempt, ("no behaviour check tells the bug apart (--served-only): "
                                     f"{record.validation.get('behaviour', '')}")
            return attempt, record

        def _make_record(attempt, files, mutated, target_tests, messages, groups) -> TaskRecord | str:
            originals = {p: files[p] for p in mutated}
            bug_patch = make_patch(originals, mutated)
            fix_patch = make_patch(mutated, originals)
            # where a candidate source's bug came from (release history: the versions and the kind)
            origin = breaker.origin(attempt.mutations, target_tests) if hasattr(breaker, "origin") else {}
            request = origin.get("kind") == "feature"  # a report that asks for the feature, not a bug report
            # with the sandbox check, every example of the report runs on the clean and the buggy tree
            # as it is written: stated as it runs, and dropped when it shows no difference
            box = worker() if sandbox_check else None
            try:
                if writer is not None and not request:
                    statement = write_report_llm(writer, target_tests, messages, bug_patch, repo=pristine,
                                                 seed=seed, groups=groups, source_dirs=source_dirs)
                else:
                    statement = write_report(target_tests, messages, bug_patch, repo=pristine, seed=seed,
                                             groups=groups, source_dirs=source_dirs, request=request,
                                             run=example_runner(box, mutated, example_path) if box else None)
            except ValueError as exc:  # ReportError: no wording of any failing test passed check_report
                return f"no clean bug report: {exc}"
            finally:
                if box is not None:
                    workers_pool.put(box)
            problems = check_report(statement, target_tests=target_tests, patch=bug_patch, repo=pristine)
            if problems:
                return "no clean bug report: " + "; ".join(problems)
            failed_check = report_quality(statement, groups, messages, pristine, source_dirs)
            if failed_check:
                return f"quality check failed, {failed_check}"
            task_id = task_id_of(name, bug_patch)
            mutations = [_mutation_summary(m) for m in attempt.mutations]
            signals = task_signals(bug_patch=bug_patch, target_tests=target_tests, messages=messages,
                                   mutations=mutations, repo=pristine)
            record = TaskRecord(
                task_id=task_id, repo=name, test_command=command,
                bug_patch=bug_patch, bug_types=attempt.bug_types, problem_statement=statement,
                target_tests=target_tests, all_tests=list(required), fix_patch=fix_patch,
                source_dirs=list(source_dirs), test_dirs=list(test_dirs),
                test_timeout=max(120.0, round(10 * base.seconds)), mutations=mutations,
                generator={"version": GENERATOR_VERSION, "seed": seed, "attempt": attempt.index},
                repo_dir=pristine,
            )
            attach_project(record, project)
            record.origin = origin
            record.signals = signals
            record.difficulty = difficulty_tier(signals)
            return record

        # the cap counts a function's tasks by the size of their fix (known.function_load), or over
        # both sizes where they are not kept apart
        def slot(key: tuple[str, str, str]) -> tuple[str, str, str]:
            return key if sizes_apart else (key[0], key[1], "any size")

        def slots(mutations, size: str) -> set[tuple[str, str, str]]:
            # the cap slots a task with these bugs and a fix of this size fills, once each
            return {slot((*function_key(m), size)) for m in mutations}

        per_function: Counter[tuple[str, str, str]] = Counter()
        for key, count in known.load.items():
            per_function[slot(key)] += count

        def functions_full(mutations, size: str) -> str | None:
            # one full function is enough: the task would push it past the cap
            if max_per_function is None:
                return None
            for key in sorted(slots(mutations, size)):
                if per_function[key] >= max_per_function:
                    return f"{key[0]}:{key[1]} has {per_function[key]} tasks" + (
                        f" with a fix of {size}" if sizes_apart else "")
            return None

        kept: list[TaskRecord] = []
        results: dict[int, Any] = {}
        order: list[int] = []
        next_pos = 0
        seen_ids: set[str] = set()
        counts = {"named": 0, "since_kept": 0, "errors_in_a_row": 0}
        prior_lines: list[dict[str, Any]] = []
        skip = 0
        if previous is not None:
            prior_lines, skip = previous.lines, previous.attempted
            seen_ids = {line["task_id"] for line in prior_lines}
            counts["named"] = sum(bool((line.get("signals") or {}).get("test_file_names_module"))
                                  for line in prior_lines)
            for line in prior_lines:
                per_function.update(map(slot, cap_keys(line)))
            previous.restore(stats)
        want = n - len(prior_lines)  # tasks this run still has to find
        run_started = time.monotonic()
        ran: set[int] = set()  # candidates that ran tests: only they count towards ``stall_limit``
        try:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="swesynth") as pool:
                in_flight: dict[Future, int] = {}
                exhausted = False
                attempt_iter = itertools.islice(attempts, skip, None)  # resume: judged before
                while True:
                    out_of_time = time_budget is not None and time.monotonic() - run_started > time_budget
                    stalled = stall_limit is not None and counts["since_kept"] >= stall_limit
                    out_of_time = out_of_time or stalled
                    while (want > 0 and not exhausted and not out_of_time and len(in_flight) < 2 * workers
                           and len(kept) + len(in_flight) < want + workers):
                        try:
                            attempt = next(attempt_iter)
                        except StopIteration:
                            exhausted = True
                            break
                        order.append(attempt.index)
                        in_flight[pool.submit(evaluate, attempt)] = attempt.index
                    if not in_flight:
                        stats.stopped = ("enough tasks" if want <= 0 else
                                         "stalled: no task in the last candidates" if stalled else
                                         "time budget" if out_of_time else "candidates exhausted")
                        break
                    done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                    for fut in done:
                        index = in_flight.pop(fut)
                        try:
                            results[index] = fut.result()[1]
                            counts["errors_in_a_row"] = 0
                        except Exception as exc:  # one candidate's crash is its rejection, not the run's end
                            counts["errors_in_a_row"] += 1
                            if counts["errors_in_a_row"] > MAX_ERRORS_IN_A_ROW:
                                raise
                            results[index] = candidate_error(exc)
                    # Accept strictly in plan order, so the same seed gives the same tasks for any -j.
                    while next_pos < len(order) and order[next_pos] in results and len(kept) < want:
                        index = order[next_pos]
                        outcome = results.pop(index)
                        next_pos += 1
                        stats.attempted += 1
                        if isinstance(outcome, TaskRecord) and outcome.task_id in seen_ids:
                            outcome = "duplicate of a kept task"
                        if isinstance(outcome, TaskRecord) and max_named_share is not None and \
                                outcome.signals.get("test_file_names_module") and \
                                counts["named"] + 1 > max_named_share * n:
                            outcome = "test file named after the module (over the suite's share)"
                        if isinstance(outcome, TaskRecord):
                            outcome_size = fix_size(int(outcome.signals.get("tokens_changed", 0)))
                            full = functions_full(outcome.mutations, outcome_size)
                            if full:
                                outcome = f"the function quota is full ({full})"
                        if isinstance(outcome, TaskRecord):
                            seen_ids.add(outcome.task_id)
                            kept.append(outcome)
                            counts["named"] += bool(outcome.signals.get("test_file_names_module"))
                            per_function.update(slots(outcome.mutations, outcome_size))
                            counts["since_kept"] = 0
                            stats.kept += 1
                        else:
                            stats.reject(outcome)
                            # a candidate screened out before running (import-time code, no test
                            # reaching it, the named quota full) costs nothing: it is no sign of a
                            # project running dry
                            counts["since_kept"] += index in ran
                        if progress:
                            progress(stats)
                    if len(kept) >= want:
                        for fut in in_flight:
                            fut.cancel()
                        stats.stopped = "enough tasks"
                        break
        finally:
            for box in opened:
                box.close()
        stats.finished = time.monotonic()
        if storage == "compact":
            write_compact(out, kept, prior_lines=prior_lines, base_tests=list(required), name=name, project=project,
                          test_command=command,
                          source_dirs=source_dirs, test_dirs=test_dirs, pristine=pristine, repo_dir_ref=repo_dir_ref,
                          test_fraction=test_fraction, split=split, suite_name=suite_name,
                          generation={"seed": seed, "version": GENERATOR_VERSION, **stats.to_dict(),
                                      "baseline": {"tests": len(base.tests), "required": len(required),
                                                   "dropped": base.dropped, "flaky": base.flaky,
                                                   "trace_seconds": base.trace_seconds,
                                                   "runtime": base.runtime}})
            stats.coverage_map = _write_coverage_map(out, name, base, required, pristine, source_dirs, test_dirs,
                                                     backend)
        else:
            _write_suite(out, kept, pristine, name, test_command, command, source_dirs, test_dirs,
                         repo_dir_ref, test_fraction, suite_name, stats, seed)
    return GenerationResult(kept, out, stats)


def _write_coverage_map(out: Path, name: str, base: Baseline, required: Sequence[str], tree: Path,
                        source_dirs: Sequence[str], test_dirs: Sequence[str], backend: str) -> str:
    """Write the project's fast-grade coverage map (``<out>/selection/<name>.json``, from the
    baseline's traced run: :func:`~termgym.factory.swesynth.selection_build.map_from_baseline`) with
    every task's selection, so that grades of the new tasks run only the required tests a patch can
    change. Returns where it went, or why there is none (the tasks then grade on every required
    test; the records are written already, so nothing is lost)."""
    from termgym.factory.swesynth.selection_build import backfill, map_from_baseline
    from termgym.tasks.swesynth.selection import SelectionError

    try:
        traced = {name: map_from_baseline(name, base, required, tree, source_dirs, test_dirs)}
        written = backfill(out, [name], backend=backend, log=lambda _line: None, traced=traced)
    except (RuntimeError, SelectionError, OSError, ValueError) as exc:
        return f"none: {exc}"
    return str(written[name]) if name in written else "none: the project has no task"


@dataclass
class _PreviousRun:
    """What an earlier compact run of a project left: its record lines and generation summary."""

    lines: list[dict[str, Any]]
    generation: dict[str, Any]

    @property
    def attempted(self) -> int:
        return int(self.generation.get("attempted", 0))

    def restore(self, stats: Stats) -> None:
        """Start ``stats`` from the earlier run's counters (the summary then covers both runs)."""
        g = self.generation
        stats.attempted, stats.kept = self.attempted, len(self.lines)
        stats.rejected = dict(g.get("rejected") or {})
        stats.errors = list(g.get("errors") or [])
        for key in ("runs", "full_runs", "tests_run", "timed_out_runs"):
            setattr(stats, key, int(g.get(key, 0)))
        stats.run_seconds = float(g.get("run_seconds", 0.0))
        stats.timed_out_seconds = float(g.get("timed_out_seconds", 0.0))
        stats.started -= float(g.get("elapsed_seconds", 0.0))


def _previous_run(out: Path, name: str, seed: int, required: Sequence[str]) -> _PreviousRun | None:
    """The earlier run of project ``name`` in the compact suite ``out`` (``None``: there is none).
    Refuses to resume a run made with another seed or generator, or against other required tests."""
    from termgym.jsonl import json_lines

    index_path, records_path = out / "suite.json", out / "records" / f"{name}.jsonl"
    if not index_path.is_file() or not records_path.is_file():
        return None
    generation = (json.loads(index_path.read_text(encoding="utf-8")).get("generation") or {}).get(name) or {}
    if generation.get("seed") != seed or generation.get("version") != GENERATOR_VERSION:
        raise ValueError(f"cannot resume {name!r} in {out}: its tasks were made with seed "
                         f"{generation.get('seed')!r} and generator {generation.get('version')!r}, "
                         f"not seed {seed!r} and generator {GENERATOR_VERSION}")
    baseline_path = out / "baselines" / f"{name}.json"
    if json.loads(baseline_path.read_text(encoding="utf-8")).get("tests") != list(required):
        raise ValueError(f"cannot resume {name!r} in {out}: its baseline ({baseline_path}) lists other "
                         "required tests than the project has now")
    lines = []
    for n, data, problem in json_lines(records_path):
        if problem is not None:
            raise ValueError(f"cannot resume {name!r}: {records_path}:{n}: {problem}")
        lines.append(data)
    return _PreviousRun(lines, generation)


def validate_in_sandbox(record: TaskRecord, files: dict[str, str], base: Baseline, *, backend: str = "local",
                        cache_dir: Path | None = None) -> str | None:
    """The per-task check in the sandbox the task will use; returns why it is rejected, or ``None``.

    * the fix touches only files the grader takes from an agent;
    * the oracle: applying the bug patch and then the fix patch to the clean files gives them back
      byte for byte, so the oracle's tree *is* the clean tree, whose grade (every required test
      passing, twice, under the real grader) the project's baseline holds;
    * the do-nothing agent: the real grader (:meth:`SweSynthTask.grade_patch` with an empty patch,
      in a fresh sandbox of the prepared workspace) run on the failing tests scores 0, and every
      one of them fails again (the failure is deterministic).

    On success ``record.validation`` says what ran where.
    """
    from termgym.sandbox import FreshSandboxes
    from termgym.tasks.swesynth.task import SweSynthTask

    fixed = patch_files(record.fix_patch)
    task = SweSynthTask(record, cache_dir=cache_dir)
    ungraded = [p for p in fixed if not is_source_path(p, task.source_dirs, record.test_dirs)]
    ungraded += refused_paths(fixed, task.source_dirs)
    if ungraded:
        return f"the fix touches files the grader does not take from an agent: {', '.join(ungraded[:3])}"
    problem = oracle_restores_clean_tree(record, files)
    if problem:
        return problem
    nop_record = replace(record, test_command=select_command(record.test_command, record.repo_dir,
                                                             record.target_tests),
                         all_tests=list(record.target_tests))
    nop_task = SweSynthTask(nop_record, cache_dir=cache_dir)
    try:
        with FreshSandboxes(backend) as new_sandbox:
            nop = nop_task.grade_patch("", new_sandbox)
            runtimes = {box.runtime for box in new_sandbox.opened}
    finally:
        if cache_dir is not None:
            for tree in Path(cache_dir).glob(f"{record.task_id}-*"):
                _remove_tree(tree)
    if nop.get("infra_error"):
        return f"the tests cannot run in the {backend} sandbox: {nop['infra_error']}"
    if nop.get("tamper"):
        return f"the unfixed repository trips the grader's tamper guard: {nop['tamper'][0]}"
    if nop["all_passed"]:
        return f"the unfixed repository does not fail in the {backend} sandbox ({nop['all_result']})"
    if not nop["target_result"].startswith("0/"):
        return ("the failures differ between two runs (not deterministic): "
                f"{nop['target_result']} failing tests pass under the grader")
    record.validation = {"backend": backend, "runtime": nop.get("runtime", {}) or base.runtime,
                         "runtime_version": next(iter(runtimes)) if len(runtimes) == 1 else sorted(map(str, runtimes)),
                         "oracle": f"{len(record.all_tests)}/{len(record.all_tests)}",
                         "oracle_check": "fix restores the clean tree (sha256 per file); clean tree graded "
                                         "twice by the grader at baseline",
                         "nop": f"{nop['all_result'].split('/')[0]}/{len(record.all_tests)}",
                         "nop_check": f"grader on the {len(record.target_tests)} failing tests: "
                                      f"{nop['target_result']} pass"}
    record_check(record, backend=backend, cache_dir=cache_dir)
    return None


def record_check(record: TaskRecord, *, backend: str = "local", cache_dir: Path | None = None) -> None:
    """Give a validated task its behaviour check (:mod:`~termgym.factory.swesynth.behaviour_record`);
    a task none can be recorded for keeps its tests-only grade and says why in ``validation``."""
    from termgym.factory.swesynth.behaviour_record import NoCheck, record_behaviour

    try:
        record.behaviour = record_behaviour(record, backend=backend, cache_dir=cache_dir)
        record.validation["behaviour"] = f"{len(record.behaviour['inputs'])} inputs, " \
                                         f"{record.behaviour['discriminating']} tell the bug apart"
    except NoCheck as exc:
        record.validation["behaviour"] = f"none: {exc}"
    finally:
        if cache_dir is not None:
            for tree in Path(cache_dir).glob(f"{record.task_id}-*"):
                _remove_tree(tree)


def _remove_tree(path: Path) -> None:
    # Prepared workspaces are read-only git trees: make them writable before removing them.
    for dirpath, dirnames, _files in os.walk(path):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
    shutil.rmtree(path, ignore_errors=True)


def oracle_restores_clean_tree(record: TaskRecord, files: dict[str, str]) -> str | None:
    """``None`` when ``git apply`` of the bug patch then the fix patch gives back the clean files
    (compared by sha256), else why not. ``files`` maps paths to the clean texts."""
    touched = sorted(set(patch_files(record.bug_patch)) | set(patch_files(record.fix_patch)))
    missing = [p for p in touched if p not in files]
    if missing:
        return f"the patches touch files that are not source files of the project: {', '.join(missing[:3])}"
    with tempfile.TemporaryDirectory(prefix="termgym-oracle-") as tmp:
        root = Path(tmp)
        for path in touched:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(files[path], encoding="utf-8")
        for label, patch in (("bug", record.bug_patch), ("fix", record.fix_patch)):
            proc = subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], input=patch, text=True, cwd=root,
                                  capture_output=True)
            if proc.returncode != 0:
                return f"the {label} patch does not apply: {proc.stderr.strip()[-200:]}"
        for path in touched:
            got = hashlib.sha256((root / path).read_bytes()).hexdigest()
            want = hashlib.sha256(files[path].encode("utf-8")).hexdigest()
            if got != want:
                return f"the oracle fix does not restore {path} byte for byte"
    return None

def check_in_sandbox(record: TaskRecord, repo_dir: Path, backend: str = "local") -> str | None:
    """Grade ``record``'s oracle and the unfixed repository in a ``backend`` sandbox, as agents are graded.

    Returns why the task is rejected, or ``None`` and fills ``record.validation`` (backend, the
    interpreter and pytest the sandbox ran, the runtime version, both results).
    """
    from dataclasses import replace

    from termgym.sandbox import FreshSandboxes
    from termgym.tasks.swesynth.task import SweSynthTask

    task = SweSynthTask(replace(record, repo_dir=repo_dir))
    fixed = sorted({line.split(" b/", 1)[-1] for line in record.fix_patch.splitlines() if line.startswith("diff --git ")})
    ungraded = [p for p in fixed if not is_source_path(p, task.source_dirs, record.test_dirs)]
    ungraded += refused_paths(fixed, task.source_dirs)
    if ungraded:
        return f"the fix touches files the grader does not take from an agent: {', '.join(ungraded[:3])}"
    with FreshSandboxes(backend) as new_sandbox:
        oracle = task.grade_patch(record.fix_patch, new_sandbox)
        if oracle.get("infra_error"):
            return f"the tests cannot run in the {backend} sandbox (test dependency coverage missing?): " \
                   f"{oracle['infra_error']}"
        if oracle.get("tamper"):
            return f"the oracle trips the grader's tamper guard in the sandbox: {oracle['tamper'][0]}"
        if not oracle["all_passed"]:
            return (f"the oracle fix does not pass in the {backend} sandbox ({oracle['all_result']}): "
                    f"{', '.join(oracle['failed_tests'][:3])}")
        nop = task.grade_patch("", new_sandbox)
        if nop.get("infra_error") or nop["all_passed"]:
            return f"the unfixed repository does not fail in the {backend} sandbox ({nop['all_result']})"
        runtimes = {box.runtime for box in new_sandbox.opened}  # the task runtime the grades ran on
    record.validation = {"backend": backend, "runtime": oracle.get("runtime", {}),
                         "runtime_version": next(iter(runtimes)) if len(runtimes) == 1 else sorted(map(str, runtimes)),
                         "oracle": oracle["all_result"], "nop": nop["all_result"]}
    return None


def _same_call(test: str, together: dict[str, str], alone: dict[str, str], repo: Path) -> bool:
    """Whether ``test`` fails at the same repro call with every bug of the combination as with one
    bug alone (what the report can say of that bug is what a user of the buggy tree would see)."""
    from termgym.factory.swesynth.failures import read_failure

    call = read_failure(test, alone.get(test, ""), repo).call
    return call is not None and call == read_failure(test, together.get(test, ""), repo).call


def _procedural() -> set[str]:
    from termgym.factory.swesynth.inject import PROCEDURAL_TYPES

    return set(PROCEDURAL_TYPES)


def task_id_of(name: str, bug_patch: str) -> str:
    """A task's id: its project's name and its bug patch's hash (the same bug made twice has one id)."""
    return f"{name}-{hashlib.sha256(bug_patch.encode()).hexdigest()[:10]}"


def function_key(mutation: Mutation | dict[str, Any]) -> tuple[str, str]:
    """The (file, function) a bug changes, from a mutation or its record summary; module-level
    code counts as one function, ``<module>``."""
    if isinstance(mutation, dict):
        path, function = mutation.get("path"), mutation.get("function")
    else:
        path, function = mutation.path, mutation.function
    return str(path), str(function or "<module>")


def _mutation_summary(m: Mutation) -> dict[str, Any]:
    return {"bug_type": m.bug_type, "path": m.path, "line": m.line, "function": m.function,
            "description": m.description}


def _write_suite(out: Path, records: list[TaskRecord], pristine: Path, name: str, test_command: str,
                 sandbox_test_command: str | None, source_dirs, test_dirs, repo_dir_ref: str | None,
                 test_fraction: float, suite_name: str | None, stats: Stats, seed: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    index_path = out / "suite.json"
    index = json.loads(index_path.read_text()) if index_path.is_file() else {}
    if repo_dir_ref is None:
        repo_dir_ref = f"repos/{name}"
        dest = out / repo_dir_ref
        if dest.exists():
            shutil.rmtree(dest)
        copy_tree(pristine, dest)
    repos = index.get("repos") or {}
    repos[name] = {"path": repo_dir_ref, "test_command": sandbox_test_command or test_command,
                   "source_dirs": list(source_dirs), "test_dirs": list(test_dirs)}
    splits: dict[str, list[str]] = {k: list(v) for k, v in (index.get("splits") or {}).items()}
    existing = {t for ids in splits.values() for t in ids}
    for record in records:
        write_task(out / record.task_id, record, repo_dir=f"../{repo_dir_ref}")
        if record.task_id not in existing:
            splits.setdefault(split_for(record.task_id, test_fraction), []).append(record.task_id)
    splits.setdefault("train", [])
    splits.setdefault("test", [])
    generation = index.get("generation") or {}
    generation[name] = {"seed": seed, "version": GENERATOR_VERSION, **stats.to_dict()}
    index.update({"name": suite_name or index.get("name") or out.name, "version": RECORD_VERSION,
                  "repos": repos, "splits": {k: sorted(v) for k, v in splits.items()}, "generation": generation})
    index_path.write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
