"""Screening candidate bugs in the sandbox runtime, by per-test line coverage.

Running a project's whole suite for every candidate bug is what made generation slow. Instead:

1. :func:`project_baseline` runs the suite once in a sandbox of the task runtime under the
   screening plugin (:mod:`~termgym.factory.swesynth.screen_plugin`), recording which source lines
   each test executes, then twice under the real grader
   (:func:`~termgym.tasks.swesynth.grading.run_graded_tests`) on the clean tree. The tests that
   pass all three times are the required (pass-to-pass) set, less those that fail when run again
   (:func:`~termgym.factory.swesynth.flaky.unstable_tests`: once in reverse order, since a grade
   may run a selection of them; and the static timing candidates a few times under CPU load); the
   clean tree's grade is the
   oracle's grade for every task of the project (an oracle tree is byte-identical to the clean
   tree, which :func:`~termgym.factory.swesynth.generate.oracle_restores_clean_tree` checks per
   task). The baseline is cached per project tree hash, test command and environment.
2. :func:`tests_for_change` maps a candidate's changed lines to the statements they belong to and
   returns the tests that execute them; a change to code that runs at import time (module level,
   class bodies, ``def`` lines, defaults) returns ``None``: only a full run can judge it.
3. :class:`ScreenWorker` keeps one sandbox per worker with the clean tree, writes a candidate's
   files, runs the selected tests (node ids on the command line), reads the outcomes and
   restores the files.

Coverage comes from ``sys.settrace`` in the test process (threads too, not subprocesses): a test
that reaches the changed code only through a subprocess is not selected. That can only make a
task's list of failing tests shorter, never make a task pass validation it should fail: every kept
task is still graded in the sandbox (``validate_task``).
"""

from __future__ import annotations

import ast
import datetime
import difflib
import fnmatch
import hashlib
import json
import os
import re
import shlex
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from termgym.atomic import write_text_atomically
from termgym.factory.swesynth.flaky import CANDIDATE_RUNS, unstable_tests
from termgym.factory.swesynth.validate import RunResult
from termgym.sandbox import FreshSandboxes, make_sandbox
from termgym.sandbox.base import Limits, Sandbox, SandboxSpec
from termgym.tasks.swesynth import pyparse
from termgym.tasks.swesynth.grading import PINNING_SOURCE, run_graded_tests
from termgym.tasks.swesynth.selection import select_command

if TYPE_CHECKING:
    from termgym.tasks.swesynth.projects import Project

#: Bump when the plugin or the baseline's meaning changes (invalidates cached baselines).
SCREEN_VERSION = 6  # 4: tests failing in reverse order, timing tests failing under CPU load leave the required set
# 5: property-based tests pinned (derandomized, no deadline) as in a grade
# 6: a test whose id holds the day it ran (pydash's test_to_string[case7-<today>]) leaves the required set
PLUGIN_SOURCE = Path(__file__).with_name("screen_plugin.py")
PLUGIN_MODULE = "termgym_screen"
PLUGIN_DIR = "/tmp/.termgym-screen"
#: Property-based tests pinned as in a grade (:mod:`termgym.tasks.swesynth.pinned_hypothesis`).
PINNING_MODULE = "termgym_screen_pins"
#: A candidate's test may take this many times its clean (traced) duration, plus the margin and
#: the baseline's costliest fixture work, before its run counts as timed out (a looping bug).
TEST_BUDGET_FACTOR = 10.0
TEST_BUDGET_MARGIN = 2.0

@dataclass
class ProjectEnv:
    """How a project's tests run in a sandbox: the backend and what its :class:`SandboxSpec` adds
    (read-only binds of the project's test environment, environment variables, an image)."""

    backend: str = "local"
    spec_extra: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/app"
    #: What the grader needs to run these tests (``python_path``, ``trusted_dirs``).
    grader_kwargs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def for_project(cls, name: str | Project, backend: str = "local", workdir: str = "/app") -> ProjectEnv:
        """The provisioned test environment of project ``name`` (read-only bind + PYTHONPATH): a
        project of a project set by name, or a :class:`~termgym.tasks.swesynth.projects.Project`
        (one add-project is checking)."""
        from termgym.tasks.swesynth.projects import project_sandbox_spec_parts

        parts = project_sandbox_spec_parts(name, workdir)
        return cls(backend=backend, spec_extra={"ro_binds": dict(parts.ro_binds)}, env=dict(parts.env),
                   workdir=workdir, grader_kwargs={"python_path": tuple(parts.python_path),
                                                   "trusted_dirs": tuple(parts.trusted_dirs)})

    def spec(self, tree: Path) -> SandboxSpec:
        return SandboxSpec(workdir=self.workdir, copy_dirs={str(tree): self.workdir}, env=dict(self.env),
                           limits=Limits(command_timeout=900.0), **self.spec_extra)

    def key(self) -> str:
        return json.dumps([self.backend, sorted(self.env.items()), repr(sorted(self.spec_extra.items())),
                           self.workdir, repr(sorted(self.grader_kwargs.items()))])


@dataclass
class ScreenRun(RunResult):
    """One screened test run: a :class:`RunResult` (outcome and failure text per node id) plus
    the tail of its log, the tool versions it ran with and the lines each test executed."""

    log_tail: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    lines: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    import_lines: dict[str, list[int]] = field(default_factory=dict)
    spawners: list[str] = field(default_factory=list)  # tests that started a process (not traced there)
    durations: dict[str, dict[str, float]] = field(default_factory=dict)  # node id -> phase -> seconds
    overran: str = ""  # the test that outlived its budget (the run then counts as timed out)
    stopped_early: bool = False  # more than ``stop_after_failures`` tests failed; the rest did not run
    #: node id -> the calls its test code made into the project (``run(..., calls=True)``): each
    #: ``{"file", "line", "callee", "locals"}``, locals written as literals (``None``: not one)
    calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def tree_hash(root: Path) -> str:
    """A content hash of a clean tree (paths and bytes; caches and VCS data left out)."""
    from termgym.tasks.swesynth.tree import IGNORED_DIRS

    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS)
        for name in sorted(filenames):
            if name.endswith(".pyc"):
                continue
            path = Path(dirpath) / name
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()


# -- which tests execute a change --------------------------------------------------------------


def changed_lines(original: str, mutated: str) -> set[int]:
    """1-based lines of ``original`` that ``mutated`` changes (both neighbours of an insertion)."""
    a, b = original.splitlines(), mutated.splitlines()
    out: set[int] = set()
    for tag, i1, i2, _j1, _j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if i1 == i2:
            out.update(x for x in (i1, i1 + 1) if 1 <= x <= len(a))
        else:
            out.update(range(i1 + 1, i2 + 1))
    return out


class StatementMap:
    """For each line of a module: the statement lines that trace events can report for it, and
    whether it runs at import time (outside every function body)."""

    def __init__(self, text: str) -> None:
        tree = pyparse.parse(text)
        self.spans: list[tuple[int, int, int, int]] = []  # (first, last, query_first, query_last)
        self.function_bodies: list[tuple[int, int]] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
                self.function_bodies.append((node.body[0].lineno, node.end_lineno or node.lineno))
            if not isinstance(node, ast.stmt):
                continue
            last = node.end_lineno or node.lineno
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                header_last = max(node.lineno, body[0].lineno - 1)
                self.spans.append((node.lineno, header_last, node.lineno, header_last))
                self.spans.append((node.lineno, last, node.lineno, last))  # else:/finally: lines
            else:
                self.spans.append((node.lineno, last, node.lineno, last))

    def runs_at_import(self, line: int) -> bool:
        return not any(first <= line <= last for first, last in self.function_bodies)

    def query_lines(self, line: int) -> range:
        """The lines whose execution means ``line``'s statement ran (the innermost statement)."""
        best = None
        for first, last, q1, q2 in self.spans:
            if first <= line <= last and (best is None or last - first < best[1] - best[0]):
                best = (first, last, q1, q2)
        if best is None:
            return range(line, line + 1)
        return range(best[2], best[3] + 1)


@dataclass
class Baseline:
    """A project's clean run in the sandbox runtime: required tests and who executes which line."""

    key: str
    tree_hash: str
    tests: list[str]  # required: passed under the tracer and twice under the grader, in run order
    coverage: dict[str, dict[int, list[int]]]  # file -> line -> indices into ``tests``
    import_lines: dict[str, list[int]]
    seconds: float  # one full run under the grader (the slower of the two)
    trace_seconds: float
    runtime: dict[str, Any] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)  # why tests were left out of ``tests``
    #: Seconds each required test took in the traced clean run (setup + call + teardown; tracing
    #: makes them longer than an untraced run, never shorter), aligned with ``tests``.
    durations: list[float] = field(default_factory=list)
    #: The costliest fixture work one test paid in that run (largest setup plus largest teardown):
    #: whichever test runs first in a candidate's run pays the session and module fixtures.
    fixture_seconds: float = 0.0
    #: Tests that passed the clean runs but not when run again (in reverse order, or under CPU load),
    #: and why: left out of ``tests``.
    flaky: dict[str, str] = field(default_factory=dict)
    #: Tests that started a process in the traced run (coverage cannot follow code there): a
    #: coverage map built from this baseline always runs them.
    spawners: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"version": SCREEN_VERSION, "key": self.key, "tree_hash": self.tree_hash, "tests": self.tests,
                "spawners": self.spawners,
                "coverage": {f: {str(k): v for k, v in m.items()} for f, m in self.coverage.items()},
                "import_lines": self.import_lines, "seconds": self.seconds, "trace_seconds": self.trace_seconds,
                "runtime": self.runtime, "dropped": self.dropped, "durations": self.durations,
                "fixture_seconds": self.fixture_seconds, "flaky": self.flaky}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Baseline:
        return cls(key=data["key"], tree_hash=data["tree_hash"], tests=list(data["tests"]),
                   coverage={f: {int(k): v for k, v in m.items()} for f, m in data["coverage"].items()},
                   import_lines=data["import_lines"], seconds=data["seconds"], trace_seconds=data["trace_seconds"],
                   runtime=data.get("runtime", {}), dropped=data.get("dropped", {}),
                   durations=list(data.get("durations", [])), fixture_seconds=data.get("fixture_seconds", 0.0),
                   flaky=dict(data.get("flaky", {})),
                   spawners=list(data["spawners"]))  # a baseline cached before it was kept is traced again

    def test_budgets(self, tests: Sequence[str], *, factor: float = TEST_BUDGET_FACTOR,
                     margin: float = TEST_BUDGET_MARGIN) -> dict[str, float]:
        """Seconds each of ``tests`` may take in a candidate's run before the run counts as timed
        out: ``margin`` + the costliest fixture work + ``factor`` x its clean duration. Empty when
        the baseline has no durations (then only the whole run's timeout applies)."""
        if len(self.durations) != len(self.tests):
            return {}
        index = {t: i for i, t in enumerate(self.tests)}
        return {t: round(margin + self.fixture_seconds + factor * self.durations[index[t]], 3)
                for t in tests if t in index}

    def tests_for_change(self, path: str, original: str, mutated: str,
                         statements: StatementMap | None = None) -> list[str] | None:
        """Required tests that execute the statements ``mutated`` changes in ``path``.

        ``None`` when a changed line runs at import time (only a full run can judge it); an empty
        list when no required test executes the change.
        """
        statements = statements or StatementMap(original)
        imported = set(self.import_lines.get(path, ()))
        covered = self.coverage.get(path, {})
        picked: set[int] = set()
        for line in changed_lines(original, mutated):
            if statements.runs_at_import(line):
                return None
            for q in statements.query_lines(line):
                if q in imported:  # executed while importing too: a change there acts before any test
                    return None
                picked.update(covered.get(q, ()))
        return [self.tests[i] for i in sorted(picked)]


def baseline_cache_dir() -> Path:
    base = os.environ.get("TERMGYM_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "termgym")
    return Path(base) / "swesynth-baselines"


def excluded(test_id: str, entries: Sequence[str]) -> bool:
    """Whether ``test_id`` is left out by one of ``entries`` (a project's ``[[deselect]]`` tests):
    as pytest's ``--deselect`` (a node id prefix: a class, a test's parametrisations) and
    ``--ignore`` (a file or a folder) do, or an entry with ``*`` matched as a pattern."""
    path = test_id.split("::", 1)[0]
    for entry in entries:
        if "*" in entry:
            if fnmatch.fnmatchcase(test_id, entry):
                return True
        elif test_id == entry or path == entry.rstrip("/") or path.startswith(entry.rstrip("/") + "/"):
            return True
        elif "::" in entry and test_id.startswith(entry) and test_id[len(entry)] in ":[":
            return True
    return False


_DATE = re.compile(r"(?<!\d)(\d{4})[-_/.]?(\d{2})[-_/.]?(\d{2})(?!\d)")


def dated_test_id(test_id: str, today: datetime.date | None = None) -> bool:
    """Whether a test's parameters hold the day it was collected (pydash's ``test_to_string`` takes
    ``date.today()``: ``test_to_string[case7-2026-12-05]``), within a day either way of ``today``
    (a run over midnight): on another day pytest collects another id, so a grade that requires this
    one fails it then, whatever the code."""
    params = test_id.partition("[")[2]
    if not params:
        return False
    today = today or datetime.date.today()
    for m in _DATE.finditer(params):
        try:
            day = datetime.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            continue
        if abs((day - today).days) <= 1:
            return True
    return False


def project_baseline(tree: Path, test_command: str, source_dirs: Sequence[str], project_env: ProjectEnv,
                     *, exclude: Sequence[str] = (), timeout: float = 1800.0, cache: bool = True,
                     log=None, load_runs: int = CANDIDATE_RUNS, order_check: bool = True,
                     load_busy: int | None = None) -> Baseline:
    """The cached :class:`Baseline` of a clean ``tree`` (see the module docstring).

    ``exclude`` removes test ids (doctests in source files, a project's deselected tests: see
    :func:`excluded`) from the required set. With ``order_check``, a run in reverse order, and
    ``load_runs`` runs of the timing candidates among the required tests under CPU load
    (``load_busy`` busy processes, default one more than the cores) leave out the tests that fail
    there (:func:`~termgym.factory.swesynth.flaky.unstable_tests`; 0 and False: neither runs).
    Raises ``RuntimeError`` with the test output when nothing passes.
    """
    digest = tree_hash(tree)
    key = hashlib.sha256(json.dumps([SCREEN_VERSION, digest, test_command, list(source_dirs), project_env.key(),
                                     sorted(exclude), load_runs, order_check, load_busy]).encode()).hexdigest()[:24]
    path = baseline_cache_dir() / f"{key}.json"
    if cache and path.is_file():
        try:
            return Baseline.from_json(json.loads(path.read_text()))
        except (ValueError, KeyError):
            pass
    t0 = time.monotonic()
    worker = ScreenWorker(tree, test_command, source_dirs, project_env)
    try:
        traced = worker.run({}, None, trace=True, timeout=timeout)
    finally:
        worker.close()
    trace_seconds = time.monotonic() - t0
    if not traced.passed:
        raise RuntimeError(f"the test command {test_command!r} passed no test in the {project_env.backend} "
                           f"sandbox (exit {traced.exit_code}). Its output ended with:\n{traced.log_tail[-2000:]}")
    grader_runs, seconds, runtime = [], 0.0, {}
    with FreshSandboxes(project_env.backend) as new_sandbox:
        for _ in range(2):
            t1 = time.monotonic()
            box = new_sandbox(project_env.spec(tree))
            run = run_graded_tests(box, test_command, project_env.workdir, list(source_dirs), timeout,
                                   **project_env.grader_kwargs)
            seconds = max(seconds, time.monotonic() - t1)
            if run.tamper or not run.started:
                raise RuntimeError(f"the grader could not run {test_command!r} on the clean tree in the "
                                   f"{project_env.backend} sandbox: {run.tamper[:2] or run.log_tail[-1500:]}")
            grader_runs.append(run)
            runtime = dict(run.versions)
            box.close()
    dropped: dict[str, int] = {}
    tests = []
    for tid, outcome in traced.outcomes.items():
        if outcome != "passed":
            reason = f"{outcome} on the clean tree"
        elif excluded(tid, exclude):
            reason = "excluded (doctest in a source file or deselected)"
        elif dated_test_id(tid):
            reason = "its id holds the day it ran (another day's run has no test of that id)"
        elif any(r.outcomes.get(tid) != "passed" for r in grader_runs):
            reason = "did not pass every clean run (flaky or order-dependent)"
        else:
            tests.append(tid)
            continue
        dropped[reason] = dropped.get(reason, 0) + 1
    flaky = unstable_tests(tree, test_command, project_env, tests, load_runs=load_runs, order=order_check,
                           busy=load_busy, timeout=min(timeout, max(60.0, 10 * seconds)))
    if flaky:
        tests = [t for t in tests if t not in flaky]
        dropped["flaky: failed when run again in reverse order or under CPU load"] = len(flaky)
        for tid, why in sorted(flaky.items()):
            if log:
                log(f"left out of the required set: {tid}: {why}")
    index = {t: i for i, t in enumerate(tests)}
    phases = [traced.durations.get(t, {}) for t in tests]
    durations = [round(sum(p.values()), 4) for p in phases]
    fixture_seconds = round(max((p.get("setup", 0.0) for p in phases), default=0.0)
                            + max((p.get("teardown", 0.0) for p in phases), default=0.0), 4)
    coverage: dict[str, dict[int, list[int]]] = {}
    for tid, files in traced.lines.items():
        i = index.get(tid)
        if i is None:
            continue
        for file, lines in files.items():
            per_file = coverage.setdefault(file, {})
            for line in lines:
                per_file.setdefault(line, []).append(i)
    result = Baseline(key=key, tree_hash=digest, tests=tests, coverage=coverage, import_lines=traced.import_lines,
                      seconds=round(seconds, 2), trace_seconds=round(trace_seconds, 2), runtime=runtime,
                      dropped=dropped, durations=durations, fixture_seconds=fixture_seconds, flaky=flaky,
                      spawners=sorted(traced.spawners))
    if cache:
        write_text_atomically(path, json.dumps(result.to_json()))
    return result


class ScreenWorker:
    """One long-lived sandbox holding the clean tree; runs candidates one at a time."""

    def __init__(self, tree: Path, test_command: str, source_dirs: Sequence[str], project_env: ProjectEnv) -> None:
        self.tree = tree
        self.test_command = test_command
        self.source_dirs = list(source_dirs)
        self.project_env = project_env
        self.workdir = project_env.workdir
        self.box: Sandbox = make_sandbox(project_env.backend, project_env.spec(tree))
        self.box.start()
        self.box.write_file(f"{PLUGIN_DIR}/{PLUGIN_MODULE}.py", PLUGIN_SOURCE.read_bytes())
        self.box.write_file(f"{PLUGIN_DIR}/{PINNING_MODULE}.py", PINNING_SOURCE.read_bytes())
        interpreter = shlex.split(test_command)[0]
        if "python" in os.path.basename(interpreter):
            # Hash-checked byte code for the clean sources: unchanged modules load fast, a mutated one
            # never matches its hash, so a stale .pyc can never stand in for the candidate's code.
            dirs = " ".join(shlex.quote(d) for d in self.source_dirs) or "."
            self.box.exec(f"cd {shlex.quote(self.workdir)} && {shlex.quote(interpreter)} -m compileall -q "
                          f"--invalidation-mode checked-hash {dirs} >/dev/null 2>&1", timeout=300)

    def run(self, files: Mapping[str, str], node_ids: Sequence[str] | None, *, trace: bool = False,
            timeout: float = 600.0, budgets: Mapping[str, float] | None = None,
            stop_after_failures: int | None = None, calls: bool = False) -> ScreenRun:
        """Run ``node_ids`` (``None``: the whole suite) with ``files`` (path -> text) swapped in.

        ``calls``: record where each test's code calls into the project and the caller's literal
        locals there (:attr:`ScreenRun.calls`; the report writer's examples for tests that read
        their cases from data files, :mod:`~termgym.factory.swesynth.traced`).

        ``budgets`` (node id -> seconds, from :meth:`Baseline.test_budgets`) ends the run as soon as
        a test outlives its budget: the result is then timed out, as if ``timeout`` had passed, with
        ``overran`` naming the test. ``stop_after_failures`` stops the session once more tests
        than that have failed (``stopped_early``; the tests not run are missing from ``outcomes``,
        which :meth:`~termgym.factory.swesynth.validate.RunResult.failed_among` counts as failed)."""
        originals = {p: (self.tree / p).read_text(encoding="utf-8") for p in files}
        token = uuid.uuid4().hex[:12]
        out, log, config = (f"{PLUGIN_DIR}/{token}.json", f"{PLUGIN_DIR}/{token}.log", f"{PLUGIN_DIR}/{token}.cfg")
        overrun = f"{PLUGIN_DIR}/{token}.overrun"
        roots = [f"{self.workdir.rstrip('/')}/{d.strip('/')}" for d in self.source_dirs] or [self.workdir]
        self.box.write_file(config, json.dumps({"out": out, "trace": trace, "calls": calls, "roots": roots,
                                               "budgets": dict(budgets or {}),
                                               "stop_after_failures": stop_after_failures,
                                               "overrun_file": overrun}))
        for path, text in files.items():
            self.box.write_file(f"{self.workdir}/{path}", text)
        command = select_command(self.test_command, self.tree, node_ids)
        start = time.monotonic()
        try:
            result = self.box.exec(
                f"cd {shlex.quote(self.workdir)} && env -u PYTEST_ADDOPTS TERMGYM_SCREEN_CONFIG={config} "
                f"PYTHONHASHSEED=0 PYTHONPATH={PLUGIN_DIR}${{PYTHONPATH:+:$PYTHONPATH}} {command} "
                f"-p {PLUGIN_MODULE} -p {PINNING_MODULE} -p no:cacheprovider -p no:randomly > {log} 2>&1", timeout=timeout,
                on_timeout="kill_shell")
        finally:
            for path, text in originals.items():
                self.box.write_file(f"{self.workdir}/{path}", text)
        duration = time.monotonic() - start
        try:
            tail = self.box.read_file(log).decode("utf-8", "replace")[-4000:]
        except (FileNotFoundError, OSError):
            tail = result.output[-4000:]
        if result.timed_out:
            return ScreenRun({}, timed_out=True, exit_code=124, duration=duration, log_tail=tail)
        try:
            data = json.loads(self.box.read_file(out))
        except (FileNotFoundError, OSError, ValueError):
            stuck = self._overrun(overrun) if budgets else ""
            self.box.exec(f"rm -f {out} {log} {config} {overrun}", timeout=30)
            if stuck:  # faulthandler ended a test stuck in C code past its budget
                return ScreenRun({}, timed_out=True, exit_code=124, duration=duration, log_tail=tail, overran=stuck)
            return ScreenRun({}, exit_code=result.exit_code, duration=duration, log_tail=tail)
        self.box.exec(f"rm -f {out} {log} {config} {overrun}", timeout=30)
        if data.get("overran"):
            return ScreenRun({}, timed_out=True, exit_code=124, duration=duration, log_tail=tail,
                             overran=str(data["overran"]))
        return ScreenRun(outcomes=data["outcomes"], messages=data.get("messages", {}), exit_code=result.exit_code,
                         duration=duration, log_tail=tail,
                         versions={"python": data.get("python", ""), "pytest": data.get("pytest", "")},
                         lines=data.get("lines", {}), import_lines=data.get("import_lines", {}),
                         spawners=list(data.get("spawners", [])), durations=data.get("durations", {}),
                         stopped_early=bool(data.get("stopped_early")), calls=data.get("calls", {}))

    def _overrun(self, path: str) -> str:
        """The node id faulthandler's timer ended the run in, or ``""`` when it did not fire."""
        try:
            text = self.box.read_file(path).decode("utf-8", "replace")
        except (FileNotFoundError, OSError):
            return ""
        first, _, rest = text.partition("\n")
        return first.strip() if "Timeout (" in rest else ""

    def close(self) -> None:
        self.box.close()


__all__ = ["Baseline", "ProjectEnv", "ScreenRun", "ScreenWorker", "StatementMap", "changed_lines", "dated_test_id",
           "excluded", "project_baseline", "tree_hash"]
