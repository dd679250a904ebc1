"""The bug factory: from a repository whose tests pass to validated SWE-SYNTH task folders.

:func:`generate` runs the whole pipeline on the host:

1. copy the repository (a path or a git URL, cloned shallowly) into one scratch tree per worker;
2. run the tests twice on the clean tree: the tests passing both times are the required set;
3. scan the source files for candidate mutations (:mod:`~termgym.tasks.swesynth.inject`) and draw
   attempts from the seed (bug types take turns);
4. validate attempts in parallel (:func:`~termgym.tasks.swesynth.validate.judge`), keeping the first
   ``n`` kept attempts *in plan order*, so the output does not depend on the number of workers;
5. write a user-style report for each (:mod:`~termgym.tasks.swesynth.report`) and the task folders.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from termgym.tasks.swesynth.grading import default_source_dirs, refused_paths
from termgym.tasks.swesynth.inject import (
    Attempt,
    InjectionError,
    Mutation,
    check_bug_types,
    mutate_files,
    plan_attempts,
    scan_repository,
)
from termgym.tasks.swesynth.patches import make_patch
from termgym.tasks.swesynth.records import RECORD_VERSION, TaskRecord, write_task
from termgym.tasks.swesynth.report import check_report, write_report, write_report_llm
from termgym.tasks.swesynth.validate import (
    baseline,
    copy_tree,
    is_source_path,
    judge,
    list_source_files,
    run_tests,
)

GENERATOR_VERSION = 1
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
    candidates: int = 0
    required_tests: int = 0

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def yield_rate(self) -> float:
        return self.kept / self.attempted if self.attempted else 0.0

    @property
    def tasks_per_minute(self) -> float:
        return 60.0 * self.kept / self.elapsed if self.elapsed > 0 else 0.0

    def reject(self, reason: str) -> None:
        key = re.sub(r"\d+ tests fail, more than the limit of \d+", "too many tests fail", reason)
        key = re.sub(r":.*", "", key)
        self.rejected[key] = self.rejected.get(key, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return {"wanted": self.wanted, "attempted": self.attempted, "kept": self.kept,
                "yield": round(self.yield_rate, 3), "tasks_per_minute": round(self.tasks_per_minute, 2),
                "elapsed_seconds": round(self.elapsed, 1), "baseline_seconds": round(self.baseline_seconds, 2),
                "candidates": self.candidates, "required_tests": self.required_tests, "rejected": self.rejected}


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
             sandbox_check: bool = True, backend: str = "local") -> GenerationResult:
    """Generate up to ``n`` validated tasks from ``repo`` into the suite directory ``out``.

    ``test_command`` is a pytest command run from the repository root (a junit report is added to
    it); ``sandbox_test_command`` is what graders run inside the sandbox (default: the same).
    The clean repository is copied to ``out/repos/<name>`` unless ``repo_dir_ref`` names where the
    records should find it (a path relative to ``out``, as the bundled suite does). ``writer`` (a
    :class:`~termgym.tasks.swesynth.llm.ChatClient`) writes the reports with a model instead;
    ``breaker`` (an :class:`~termgym.tasks.swesynth.breaker.LLMBreaker`) adds LLM-made candidates.
    ``sandbox_check`` (default on) grades every kept task's oracle (must score 1) and the unfixed
    repository (must score 0) in the ``backend`` sandbox the task will run in, with the grader
    agents get (:func:`check_in_sandbox`); tasks that fail are rejected with the reason.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    types = check_bug_types(bug_types, allow_llm=breaker is not None)
    out = Path(out)
    stats = Stats(wanted=n)
    with tempfile.TemporaryDirectory(prefix="termgym-swesynth-") as tmp_name:
        tmp = Path(tmp_name)
        src = fetch_repo(str(repo), tmp / "clone")
        name = name or re.sub(r"\.git$", "", Path(str(repo).rstrip("/")).name) or "repo"
        pristine = tmp / "pristine"
        copy_tree(src, pristine)
        # Bugs go only where graders take fixes from: the project's packages unless told otherwise.
        source_dirs = list(source_dirs) or default_source_dirs(pristine, test_dirs)
        sources = list_source_files(pristine, source_dirs, test_dirs)
        if not sources:
            raise RuntimeError(f"no Python source files found in {repo} (source_dirs={list(source_dirs)})")
        t0 = time.monotonic()
        required, first = baseline(pristine, test_command)
        # Doctests collected from source files (``--doctest-modules``) live in what the agent edits:
        # a fix could rewrite the expected output, so they never decide a grade.
        required = [t for t in required if not is_source_path(t.split("::", 1)[0], source_dirs, test_dirs)]
        if not required:
            raise RuntimeError(f"every test that passes in {repo} lives in its source files (doctests); "
                               "a grade needs tests the agent cannot edit")
        stats.baseline_seconds = (time.monotonic() - t0) / 2
        stats.required_tests = len(required)
        run_timeout = max(60.0, 5 * stats.baseline_seconds)
        procedural = [t for t in types if t in _procedural()]
        files, candidates = scan_repository(pristine, sources, procedural)
        if breaker is not None:
            candidates = candidates + breaker.propose(files, [t for t in types if t not in procedural] or types,
                                                      seed=seed)
        stats.candidates = len(candidates)
        attempts = plan_attempts(candidates, seed, files=files, bug_types=types, max_bugs=max_bugs,
                                 limit=max_attempts or max(50, 25 * n))
        workspaces = _Workspaces(pristine, workers, tmp)

        def evaluate(attempt: Attempt) -> tuple[Attempt, Any]:
            try:
                mutated = mutate_files(files, attempt.mutations)
            except InjectionError as exc:
                return attempt, str(exc)
            tree = workspaces.pool.get()
            try:
                for path, text in mutated.items():
                    (tree / path).write_text(text, encoding="utf-8")
                first_run = run_tests(tree, test_command, timeout=run_timeout)
                verdict = judge(required, first_run, touched=list(mutated), test_dirs=test_dirs)
                if verdict.kept:
                    second = run_tests(tree, test_command, timeout=run_timeout)
                    verdict = judge(required, first_run, second, touched=list(mutated), test_dirs=test_dirs)
                if not verdict.kept:
                    return attempt, verdict.reason
                record = _make_record(attempt, files, mutated, verdict, first_run.messages)
                if sandbox_check and isinstance(record, TaskRecord):
                    problem = check_in_sandbox(record, pristine, backend)
                    if problem:
                        return attempt, problem
                return attempt, record
            finally:
                for path in mutated:
                    (tree / path).write_text(files[path], encoding="utf-8")
                workspaces.pool.put(tree)

        def _make_record(attempt, files, mutated, verdict, messages) -> TaskRecord | str:
            originals = {p: files[p] for p in mutated}
            bug_patch = make_patch(originals, mutated)
            fix_patch = make_patch(mutated, originals)
            try:
                if writer is not None:
                    statement = write_report_llm(writer, verdict.target_tests, messages, bug_patch, repo=pristine,
                                                 seed=seed)
                else:
                    statement = write_report(verdict.target_tests, messages, bug_patch, repo=pristine, seed=seed)
            except ValueError as exc:  # ReportError: no wording of any failing test passed check_report
                return f"no clean bug report: {exc}"
            problems = check_report(statement, target_tests=verdict.target_tests, patch=bug_patch, repo=pristine)
            if problems:
                return "no clean bug report: " + "; ".join(problems)
            task_id = f"{name}-{hashlib.sha256(bug_patch.encode()).hexdigest()[:10]}"
            return TaskRecord(
                task_id=task_id, repo=name, test_command=sandbox_test_command or test_command,
                bug_patch=bug_patch, bug_types=attempt.bug_types, problem_statement=statement,
                target_tests=verdict.target_tests, all_tests=list(required), fix_patch=fix_patch,
                source_dirs=list(source_dirs), test_dirs=list(test_dirs),
                test_timeout=max(120.0, round(10 * stats.baseline_seconds)),
                mutations=[_mutation_summary(m) for m in attempt.mutations],
                generator={"version": GENERATOR_VERSION, "seed": seed, "attempt": attempt.index},
            )

        kept: list[TaskRecord] = []
        results: dict[int, Any] = {}
        order: list[int] = []
        next_pos = 0
        seen_ids: set[str] = set()
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="swesynth") as pool:
            in_flight: dict[Future, int] = {}
            exhausted = False
            attempt_iter = iter(attempts)
            while True:
                while not exhausted and len(in_flight) < 2 * workers and len(kept) + len(in_flight) < n + workers:
                    try:
                        attempt = next(attempt_iter)
                    except StopIteration:
                        exhausted = True
                        break
                    order.append(attempt.index)
                    in_flight[pool.submit(evaluate, attempt)] = attempt.index
                if not in_flight:
                    break
                done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for fut in done:
                    results[in_flight.pop(fut)] = fut.result()[1]
                # Accept strictly in plan order, so the same seed gives the same tasks for any -j.
                while next_pos < len(order) and order[next_pos] in results and len(kept) < n:
                    outcome = results.pop(order[next_pos])
                    next_pos += 1
                    stats.attempted += 1
                    if isinstance(outcome, TaskRecord) and outcome.task_id not in seen_ids:
                        seen_ids.add(outcome.task_id)
                        kept.append(outcome)
                        stats.kept += 1
                    else:
                        stats.reject(outcome if isinstance(outcome, str) else "duplicate")
                    if progress:
                        progress(stats)
                if len(kept) >= n:
                    for fut in in_flight:
                        fut.cancel()
                    break
        _write_suite(out, kept, pristine, name, test_command, sandbox_test_command, source_dirs, test_dirs,
                     repo_dir_ref, test_fraction, suite_name, stats, seed)
    return GenerationResult(kept, out, stats)


def check_in_sandbox(record: TaskRecord, repo_dir: Path, backend: str = "local") -> str | None:
    """Grade ``record``'s oracle and the unfixed repository in a ``backend`` sandbox, as agents are graded.

    Returns why the task is rejected, or ``None`` and fills ``record.validation`` (backend, the
    interpreter and pytest the sandbox ran, the runtime version, both results).
    """
    from dataclasses import replace

    from termgym.sandbox import FreshSandboxes
    from termgym.tasks.swesynth.suite import SweSynthTask

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


def _procedural() -> set[str]:
    from termgym.tasks.swesynth.inject import PROCEDURAL_TYPES

    return set(PROCEDURAL_TYPES)


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
