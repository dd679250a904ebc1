"""Flaky tests: tests whose outcome on the clean tree depends on time, load or order.

A test like that must never reach a task's required set: the oracle's grade is the clean tree's,
and a timing test that fails when the machine is busy scores a correct fix 0 (pydash's
``test_debounce_max_wait`` did, at load above the core count). Two readings find them:

* **a static scan** (:func:`scan_timing`, :func:`timing_candidates`): test functions that read a
  clock and assert on what it measured (``elapsed = time.time() - start; assert elapsed < 1``,
  ``timeit`` results compared), or that wait (``sleep``, ``Event.wait(timeout=...)``) and assert
  afterwards (counts after a sleep). Helpers of the same module that return a clock reading or
  wait count as the calls they make. The scan only names *candidates*: they are run again, the
  scan alone never leaves a test out;
* **the probe** (:func:`probe`): the clean suite run again under the grader in fresh sandboxes,
  once under CPU load above the core count (:func:`cpu_load`: ``cores + 1`` busy processes on the
  host for the length of the run), once in reverse order (a small plugin, :data:`ORDER_PLUGIN`),
  then the static candidates alone, several more times under load (cheap: their node ids only).
  Every test whose outcome differs from the first clean run is reported with what changed it;
* **a second chance for failures** (:func:`recheck_failures`): the few tests a clean run failed,
  run again alone; one that passes there failed by chance, by load or by another test's leftovers.

The report depends only on the runs' outcomes (:func:`compare_runs`: tests sorted, conditions in
the plan's order), and the probe is bounded by a time budget and a number of runs. Reasons read::

    failed under CPU load (3 busy processes on 2 cores) in 4 of 4 runs: assert 0.51 > 0.75
    failed when run in reverse order: AssertionError: assert 'plugin' in []

``termgym swesynth add-project`` leaves every flaky test out (``[[deselect]]`` with ``flaky: <reason>``),
generation runs its required tests once more in reverse order and its timing candidates under load
(:func:`unstable_tests`, from :func:`~.screen.project_baseline`), and
``termgym swesynth flaky`` sweeps project sets.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from termgym.tasks.swesynth import pyparse
from termgym.tasks.swesynth.selection import select_command

if TYPE_CHECKING:
    from termgym.sandbox.base import SandboxSpec
    from termgym.tasks.swesynth.projects import CleanRun

#: Where the order plugin is written in a probe's sandbox, and its module name (``-p``).
PLUGIN_DIR = "/tmp/.tg-flaky"
ORDER_MODULE = "tg_flaky_order"
#: Runs of the timing candidates alone under load, after the full runs.
CANDIDATE_RUNS = 3
#: At most this many static candidates are run again (the first in sorted order; the rest noted).
MAX_CANDIDATES = 100
#: The probe stops planning runs past this many seconds or this many runs (the first one included).
TIME_BUDGET = 900.0
MAX_RUNS = 8
#: A failure message in a reason is cut at this many characters.
MESSAGE_CHARS = 160
#: The terminal width a probe's runs report their failure lines at (whole messages, not "AssertionError...").
SUMMARY_COLUMNS = 400

#: The order plugin, run inside the sandbox in the project's pytest (standard library and pytest
#: only): after every other reordering and the ``--deselect`` options, the collected items are
#: reversed or shuffled with a fixed seed, so a test that needs another to run first shows it.
ORDER_PLUGIN = '''\
"""termgym's flakiness probe: run the collected tests in another order."""
import random

import pytest

ORDER = {order!r}
SEED = {seed!r}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    if ORDER == "reverse":
        items.reverse()
    else:
        random.Random(SEED).shuffle(items)
'''

#: A busy loop that stops by itself at its deadline or when its parent is gone (reparented), so
#: no load outlives the probe even when the probe is killed.
_BUSY_LOOP = ("import os, sys, time\n"
              "end, parent = time.monotonic() + float(sys.argv[1]), os.getppid()\n"
              "while time.monotonic() < end and os.getppid() == parent:\n"
              "    for _ in range(20000):\n"
              "        pass\n")

_FAILED_LINE = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - (.*))?$", re.M)


def summary_messages(log_tail: str) -> dict[str, str]:
    """``test id -> first line of its failure`` from pytest's short summary (``FAILED id - msg``)
    in a run's log; a line without a message maps to ``FAILED`` or ``ERROR``."""
    return {m.group(2): (m.group(3) or m.group(1)).strip() for m in _FAILED_LINE.finditer(log_tail)}


# -- the static scan ---------------------------------------------------------------------------------

#: Calls that read a clock when made without arguments (``time.time()``, ``perf_counter()``).
CLOCK_CALLS = frozenset({"time", "monotonic", "perf_counter", "process_time", "thread_time", "time_ns",
                         "monotonic_ns", "perf_counter_ns", "process_time_ns", "default_timer", "clock"})
#: Calls that read the wall clock whatever their arguments (``datetime.now(tz)``, pydash's ``_.now()``).
DATE_CALLS = frozenset({"now", "utcnow", "today"})
#: Calls that measure time themselves (``timeit.timeit``, ``timeit.repeat``, ``Timer(...).timeit()``).
TIMER_CALLS = frozenset({"timeit"})
#: Calls that wait: ``sleep`` and ``Timer`` always; these with a number argument or a ``timeout=``
#: (``event.wait(0.1)``, ``thread.join(timeout=1)``) ...
WAIT_CALLS = frozenset({"wait", "join", "wait_for"})
#: ... and these only with a ``timeout=`` (``queue.get(timeout=1)``, not ``d.get("k", 0)``).
TIMEOUT_CALLS = frozenset({"get", "acquire", "result"})


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = _call_name(node)
    if name in CLOCK_CALLS:
        # ``time.time()`` or ``time()``, not ``a_datetime.time()``: a method of a value is no clock
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        return not node.args and not node.keywords and (name != "time" or receiver is None
                                                        or isinstance(receiver, ast.Name) and receiver.id == "time")
    if name == "repeat":  # timeit.repeat, not itertools.repeat
        return isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and node.func.value.id == "timeit"
    return name in DATE_CALLS or name in TIMER_CALLS


def _is_wait_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = _call_name(node)
    if name == "sleep" or name == "Timer":
        return True
    timeout = any(k.arg == "timeout" for k in node.keywords)
    if name in WAIT_CALLS:  # one number: ``event.wait(0.1)``, not ``toolz.join(0, a, 0, b)``
        return timeout or (len(node.args) == 1 and isinstance(node.args[0], ast.Constant)
                           and isinstance(node.args[0].value, (int, float)) and not isinstance(node.args[0].value, bool))
    return name in TIMEOUT_CALLS and timeout


def _is_assertion(node: ast.AST) -> bool:
    return isinstance(node, ast.Assert) or (isinstance(node, ast.Call) and _call_name(node).startswith("assert"))


def _names(targets: Iterable[ast.AST]) -> set[str]:
    out: set[str] = set()
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                out.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                out.add(f"self.{node.attr}")
    return out


def _mentions(node: ast.AST, tainted: set[str], clock_helpers: set[str]) -> ast.AST | None:
    """The first sub-node of ``node`` that reads a clock (a clock call, a call of a clock helper, a
    name holding a clock reading), or None."""
    for sub in ast.walk(node):
        if _is_clock_call(sub) or (isinstance(sub, ast.Call) and _call_name(sub) in clock_helpers):
            return sub
        if isinstance(sub, ast.Name) and sub.id in tainted:
            return sub
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self" \
                and f"self.{sub.attr}" in tainted:
            return sub
    return None


def _clock_names(func: ast.AST, clock_helpers: set[str]) -> set[str]:
    """Names (and ``self.x`` attributes) of ``func`` that hold a clock reading: assigned from an
    expression that reads a clock, assigned under a loop or branch whose test reads one, or nested
    functions that return one. Grown to a fixed point."""
    tainted: set[str] = set()
    nodes = list(ast.walk(func))
    while True:
        before = len(tainted)
        for node in nodes:
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if _mentions(node.value, tainted, clock_helpers):
                    tainted |= _names(targets)
            elif isinstance(node, (ast.While, ast.If)) and _mentions(node.test, tainted, clock_helpers):
                for stmt in node.body:
                    for sub in ast.walk(stmt):
                        if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                            tainted |= _names(sub.targets if isinstance(sub, ast.Assign) else [sub.target])
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not func:
                returns = [r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value is not None]
                if any(_mentions(r, tainted, clock_helpers) for r in returns):
                    tainted.add(node.name)
        if len(tainted) == before:
            return tainted


def _label(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _timing_reason(func: ast.AST, clock_helpers: set[str], wait_helpers: set[str]) -> str | None:
    """Why ``func`` is a timing candidate (see the module docstring), or None."""
    tainted = _clock_names(func, clock_helpers)
    first_wait = None
    for node in ast.walk(func):
        if _is_wait_call(node) or (isinstance(node, ast.Call) and _call_name(node) in wait_helpers):
            if first_wait is None or node.lineno < first_wait.lineno:
                first_wait = node
    asserts = sorted((n for n in ast.walk(func) if _is_assertion(n)), key=lambda n: (n.lineno, n.col_offset))
    for node in asserts:
        reading = _mentions(node, tainted, clock_helpers)
        if reading is not None:
            return f"asserts on a clock reading (line {node.lineno}: {_label(reading)})"
    for node in asserts:
        if first_wait is not None and node.lineno > first_wait.lineno:
            return f"asserts after waiting (line {first_wait.lineno}: {_label(first_wait)})"
    return None


def _helpers(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Names of the module's functions and methods (not those nested in a function: a test's own
    ``def func()`` is judged where it is used) that return a clock reading, and of those that wait."""
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    bodies = [tree.body]
    while bodies:
        for node in bodies.pop():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(node)
            elif isinstance(node, ast.ClassDef):
                bodies.append(node.body)
    clock: set[str] = set()
    wait: set[str] = set()
    while True:
        before = (len(clock), len(wait))
        for func in functions:
            if func.name.startswith("test"):
                continue
            tainted = _clock_names(func, clock)
            returns = [r.value for r in ast.walk(func) if isinstance(r, ast.Return) and r.value is not None]
            if any(_mentions(r, tainted, clock) for r in returns):
                clock.add(func.name)
            if any(_is_wait_call(n) or (isinstance(n, ast.Call) and _call_name(n) in wait) for n in ast.walk(func)):
                wait.add(func.name)
        if (len(clock), len(wait)) == before:
            return clock, wait


def _is_test_class(node: ast.ClassDef) -> bool:
    return node.name.startswith("Test") or any(
        (b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "").endswith("TestCase")
        for b in node.bases)


def _tests_of(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, ast.AST]]:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            yield f"{prefix}::{node.name}", node
        elif isinstance(node, ast.ClassDef) and _is_test_class(node):
            yield from _tests_of(node.body, f"{prefix}::{node.name}")


def scan_timing(text: str, path: str) -> dict[str, str]:
    """``node id -> why`` for the tests of one module (``path`` relative to the tree's root) that
    read a clock and assert on the reading, or wait and assert afterwards. A module that does not
    parse has none."""
    try:
        tree = pyparse.parse(text)
    except (SyntaxError, ValueError):
        return {}
    clock, wait = _helpers(tree)
    out: dict[str, str] = {}
    for node_id, func in _tests_of(tree.body, path):
        reason = _timing_reason(func, clock, wait)
        if reason:
            out[node_id] = reason
    return out


def timing_candidates(tree: Path, files: Iterable[str]) -> dict[str, str]:
    """:func:`scan_timing` over ``files`` (paths relative to ``tree``; missing ones and files that
    are not Python are skipped), in sorted order."""
    out: dict[str, str] = {}
    for rel in sorted(set(files)):
        path = tree / rel
        if rel.endswith(".py") and path.is_file():
            out.update(scan_timing(path.read_text(encoding="utf-8", errors="replace"), rel))
    return out


def matches(test_id: str, node_id: str) -> bool:
    """Whether ``test_id`` (as a run reports it) is ``node_id`` or one of its parametrisations."""
    return test_id == node_id or test_id.startswith(node_id + "[")


def rerun_ids(candidates: Iterable[str], tests: Sequence[str], tree: Path) -> list[str]:
    """The node ids that run the timing ``candidates`` again, given the ``tests`` a run reported: a
    candidate itself when one of them is it or its pytest parametrisation; else the tests made from
    it under longer names (``parameterized.expand``'s ``test_x_0_name``, whose own name is never
    collected) whose file is in ``tree``. A candidate no reported test stems from is not run."""
    out: list[str] = []
    for candidate in candidates:
        if any(matches(t, candidate) for t in tests):
            out.append(candidate)
        else:
            out += [t for t in tests if t.startswith(candidate + "_") and (tree / t.split("::", 1)[0]).is_file()]
    return out


# -- CPU load and order -------------------------------------------------------------------------------


def cores() -> int:
    """The CPUs this process may run on (what the load must outnumber)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_busy() -> int:
    """Busy processes of the load phase: one more than the cores."""
    return cores() + 1


@contextmanager
def cpu_load(processes: int, *, seconds: float = TIME_BUDGET + 60) -> Iterator[int]:
    """``processes`` busy-loop processes on the host for the body of the ``with`` (yields how many).

    Each stops when the block ends (killed and reaped), at the latest after ``seconds``, and as soon
    as its parent is gone, so a killed probe leaves no load behind.
    """
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(processes):
            procs.append(subprocess.Popen([sys.executable, "-I", "-S", "-c", _BUSY_LOOP, str(seconds)],
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, start_new_session=True))
        yield processes
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def load_condition(busy: int, ncores: int | None = None) -> str:
    """How a reason names the load phase: ``under CPU load (3 busy processes on 2 cores)``."""
    ncores = cores() if ncores is None else ncores
    return f"under CPU load ({busy} busy process{'es' * (busy != 1)} on {ncores} core{'s' * (ncores != 1)})"


def order_condition(order: str, seed: int = 0) -> str:
    """How a reason names the order phase: ``when run in reverse order``."""
    return "when run in reverse order" if order == "reverse" else f"when run in shuffled order (seed {seed})"


def order_plugin(order: str, seed: int = 0) -> str:
    """The source of :data:`ORDER_PLUGIN` for ``order`` (``reverse`` or ``shuffle``)."""
    if order not in ("reverse", "shuffle"):
        raise ValueError(f"order must be 'reverse' or 'shuffle', not {order!r}")
    return ORDER_PLUGIN.format(order=order, seed=seed)


# -- runs ----------------------------------------------------------------------------------------------


class RunEnv(Protocol):
    """How a project's tests run in a sandbox: what a probe needs of
    :class:`~termgym.factory.swesynth.screen.ProjectEnv`."""

    backend: str
    workdir: str
    grader_kwargs: dict[str, Any]

    def spec(self, tree: Path) -> SandboxSpec:
        """The sandbox holding ``tree`` at ``workdir``, with the project's test environment."""
        ...


@dataclass
class ProbeRun:
    """One run of (part of) a clean suite under the grader, and the condition it ran under."""

    label: str  # "first", "load", "order", "again", "candidates under load"
    condition: str  # "" for the first run, else how a reason names it ("under CPU load (...)")
    outcomes: dict[str, str]
    messages: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    exit_code: int = 0
    timed_out: bool = False
    problems: list[str] = field(default_factory=list)

    @classmethod
    def from_clean_run(cls, run: CleanRun) -> ProbeRun:
        """The first run of a probe, from the clean run add-project already made."""
        return cls(label="first", condition="", outcomes=dict(run.outcomes), messages=summary_messages(run.log_tail),
                   seconds=run.seconds, exit_code=run.exit_code, problems=list(run.tamper))

    def to_json(self) -> dict[str, Any]:
        """The run as plain data: its outcomes counted, not listed."""
        counts: dict[str, int] = {}
        for outcome in self.outcomes.values():
            counts[outcome] = counts.get(outcome, 0) + 1
        return {"label": self.label, "condition": self.condition, "counts": counts, "seconds": self.seconds,
                "exit_code": self.exit_code, "timed_out": self.timed_out, "problems": self.problems}


def graded_run(tree: Path, test_command: str, project_env: RunEnv, *, label: str, condition: str = "",
               busy: int = 0, order: str | None = None, seed: int = 0, node_ids: Sequence[str] | None = None,
               timeout: float = 600.0) -> ProbeRun:
    """Run ``test_command`` (only ``node_ids`` when given) on ``tree`` in a fresh sandbox of
    ``project_env`` under the real grader, with ``busy`` processes loading the host while it runs
    and the tests in ``order`` (``reverse``, ``shuffle``; None: as collected)."""
    from termgym.sandbox import FreshSandboxes
    from termgym.tasks.swesynth.grading import run_graded_tests

    command = select_command(test_command, tree, list(node_ids)) if node_ids is not None else test_command
    # pytest cuts the short summary's failure lines to the terminal's width (80 columns in a
    # sandbox); the grader starts the command under ``env``, which takes the variable first
    command = f"COLUMNS={SUMMARY_COLUMNS} {command}"
    kwargs = dict(project_env.grader_kwargs)
    if order:
        command += f" -p {ORDER_MODULE}"
        kwargs["python_path"] = (PLUGIN_DIR, *kwargs.get("python_path", ()))
    with FreshSandboxes(project_env.backend) as new_sandbox:
        box = new_sandbox(project_env.spec(tree))
        if order:
            box.write_file(f"{PLUGIN_DIR}/{ORDER_MODULE}.py", order_plugin(order, seed), mode=0o444)
        with cpu_load(busy, seconds=timeout + 30) if busy else nullcontext():
            started = time.monotonic()
            run = run_graded_tests(box, command, project_env.workdir, [], timeout, **kwargs)
            seconds = time.monotonic() - started
    problems = list(run.tamper) + ([] if run.started else ["pytest never started: " + run.log_tail.strip()[-300:]])
    return ProbeRun(label=label, condition=condition, outcomes=dict(run.outcomes),
                    messages=summary_messages(run.log_tail), seconds=round(seconds, 2), exit_code=run.exit_code,
                    timed_out=run.timed_out, problems=problems)


# -- judging -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlakyTest:
    """A test whose outcome changed against the first clean run, and what changed it."""

    test: str
    reason: str
    first: str  # its outcome on the first run
    conditions: tuple[str, ...]  # the conditions it changed under, in the plan's order


_VERB = {"failed": "failed", "skipped": "was skipped", "passed": "passed"}


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 3] + "..."


def compare_runs(first: ProbeRun, runs: Sequence[ProbeRun]) -> list[FlakyTest]:
    """Every test of ``first`` whose outcome differs in one of ``runs``, sorted by id.

    A test a later run did not report (not selected, the run cut short) counts for nothing. Each
    condition the test changed under gives one part of the reason, in the order the conditions
    first appear in ``runs``: what it did there (the first differing run's outcome and failure
    line) and, when the condition ran more than once, in how many of those runs.
    """
    conditions: list[str] = []
    for run in runs:
        if run.condition not in conditions:
            conditions.append(run.condition)
    out = []
    for test in sorted(first.outcomes):
        base = first.outcomes[test]
        parts, changed = [], []
        for condition in conditions:
            ran = [r for r in runs if r.condition == condition and test in r.outcomes]
            differ = [r for r in ran if r.outcomes[test] != base]
            if not differ:
                continue
            outcome = differ[0].outcomes[test]
            times = f" in {len(differ)} of {len(ran)} runs" if len(ran) > 1 else ""
            text = f"{_VERB.get(outcome, outcome)} {condition}{times}"
            if base != "passed":
                before = _first_line(first.messages.get(test, "")) if base == "failed" else ""
                text += f" ({base} on the first run{f': {before}' if before not in ('', 'FAILED', 'ERROR') else ''})"
            message = _first_line(differ[0].messages.get(test, "")) if outcome == "failed" else ""
            parts.append(text + (f": {message}" if message and message not in ("FAILED", "ERROR") else ""))
            changed.append(condition)
        if parts:
            out.append(FlakyTest(test=test, reason="; ".join(parts), first=base, conditions=tuple(changed)))
    return out


@dataclass
class FlakyReport:
    """What :func:`probe` ran and found."""

    runs: list[ProbeRun]
    candidates: dict[str, str]  # static timing candidates: node id -> why
    flaky: list[FlakyTest]
    notes: list[str] = field(default_factory=list)
    rerun: list[str] = field(default_factory=list)  # node ids of the candidates re-run under load (:func:`rerun_ids`)
    busy: int = 0
    cores: int = 0
    seconds: float = 0.0

    def deselect(self) -> list[tuple[str, str]]:
        """``(test, reason)`` for a project's ``[[deselect]]`` (``flaky: <reason>``). A parametrised
        id that a command line cannot carry (spaces, quotes) is left out as its whole test."""
        out: dict[str, str] = {}
        for f in self.flaky:
            test = f.test
            if any(c in test for c in " '\"") and "[" in test:
                test = test.split("[", 1)[0]
            out.setdefault(test, f"flaky: {f.reason}")
        return list(out.items())

    def summary(self) -> str:
        """One line for a manifest or a log: what ran after the first run, and what it found."""
        groups: dict[tuple[str, str], int] = {}
        for run in self.runs[1:]:
            groups[(run.label, run.condition)] = groups.get((run.label, run.condition), 0) + 1
        rerun = len(self.rerun)
        parts = [(f"{rerun} timing candidate{'s' * (rerun != 1)} " if label == "candidates under load" else "the suite ")
                 + condition + (f", {n} times" if n > 1 else "") for (label, condition), n in groups.items()]
        found = len(self.flaky)
        return (f"{len(self.runs) - 1} runs after the clean one in {self.seconds:.0f}s ({'; '.join(parts) or 'none'}): "
                f"{found or 'no'} flaky test{'s' * (found != 1)}")

    def to_json(self) -> dict[str, Any]:
        """The report as plain data (``termgym swesynth flaky --json``)."""
        return {"busy": self.busy, "cores": self.cores, "seconds": self.seconds,
                "runs": [r.to_json() for r in self.runs], "candidates": self.candidates, "rerun": self.rerun,
                "flaky": [{"test": f.test, "reason": f.reason, "first": f.first} for f in self.flaky],
                "notes": self.notes}


def probe(tree: Path, test_command: str, project_env: RunEnv, *, first: ProbeRun | None = None,
          busy: int | None = None, order: str = "reverse", seed: int = 0, load_runs: int = 1, order_runs: int = 1,
          again_runs: int = 0, candidate_runs: int = CANDIDATE_RUNS, max_candidates: int = MAX_CANDIDATES,
          time_budget: float = TIME_BUDGET, max_runs: int = MAX_RUNS,
          log: Callable[[str], None] = lambda _: None) -> FlakyReport:
    """Run the clean suite of ``tree`` again under changed conditions and report the flaky tests.

    ``first`` is the clean run to compare with (made here when None). The plan, in order:
    ``load_runs`` full runs with ``busy`` processes loading the host (default :func:`default_busy`),
    ``order_runs`` full runs in ``order`` (``reverse``; ``shuffle`` with ``seed``), ``again_runs``
    plain full runs, then ``candidate_runs`` runs under load of the static timing candidates that
    passed in ``first`` (:func:`timing_candidates` over the files of its tests, at most
    ``max_candidates``). A run is started only while fewer than ``max_runs`` ran and the budget
    leaves it time; each may take ``max(60, 10 x the first run)`` seconds. What was skipped or went
    wrong is in the report's ``notes``.
    """
    started = time.monotonic()
    busy = default_busy() if busy is None else busy
    ncores = cores()
    notes: list[str] = []

    def left() -> float:
        return time_budget - (time.monotonic() - started)

    if first is None:
        first = graded_run(tree, test_command, project_env, label="first", timeout=max(60.0, min(left(), 1800.0)))
        log(f"first clean run in {first.seconds:.1f}s: {len(first.outcomes)} tests")
    runs: list[ProbeRun] = [first]
    per_run = max(60.0, 10 * first.seconds)
    files = {t.split("::", 1)[0] for t in first.outcomes}
    candidates = timing_candidates(tree, files)
    passed = [t for t, o in first.outcomes.items() if o == "passed"]
    rerun = rerun_ids(candidates, passed, tree)
    if len(rerun) > max_candidates:
        notes.append(f"{len(rerun)} timing candidates passed the first run; the first {max_candidates} are re-run")
        rerun = rerun[:max_candidates]
    load = load_condition(busy, ncores)
    plan: list[tuple[str, str, dict[str, Any]]] = (
        [("load", load, {"busy": busy})] * load_runs
        + [("order", order_condition(order, seed), {"order": order, "seed": seed})] * order_runs
        + [("again", "when run again", {})] * again_runs
        + ([("candidates under load", load, {"busy": busy, "node_ids": rerun})] * candidate_runs if rerun else []))
    for n, (label, condition, kwargs) in enumerate(plan):
        if len(runs) >= max_runs or left() < min(per_run, 30.0):
            skipped = [p[0] for p in plan[n:]]
            notes.append(f"stopped before {len(skipped)} planned runs ({', '.join(skipped)}): "
                         + (f"{max_runs} runs made" if len(runs) >= max_runs else f"the {time_budget:.0f}s budget is spent"))
            break
        run = graded_run(tree, test_command, project_env, label=label, condition=condition,
                         timeout=min(per_run, max(left(), 10.0)), **kwargs)
        runs.append(run)
        changed = sum(1 for t, o in run.outcomes.items() if first.outcomes.get(t, o) != o)
        log(f"run {len(runs) - 1} ({label}, {condition}): {len(run.outcomes)} tests in {run.seconds:.1f}s, "
            f"{changed} changed" + (" (timed out)" if run.timed_out else ""))
        if run.timed_out:
            notes.append(f"the {label} run timed out after {run.seconds:.0f}s; tests it did not report count for nothing")
        notes += [f"the {label} run: {p}" for p in run.problems[:2]]
    return FlakyReport(runs=runs, candidates=candidates, flaky=compare_runs(first, runs[1:]), notes=notes,
                       rerun=rerun, busy=busy, cores=ncores, seconds=round(time.monotonic() - started, 2))


def recheck_failures(tree: Path, test_command: str, project_env: RunEnv, first: ProbeRun, *, runs: int = 1,
                     timeout: float = 300.0) -> list[FlakyTest]:
    """The tests that failed in ``first`` but pass when run again (``runs`` runs of the failing tests
    alone, by node id, no load): flaky, whether by time, load or another test that ran before them.
    Reasons read ``passed when run again (failed on the first run: <its failure>)``."""
    failing = sorted(t for t, o in first.outcomes.items() if o == "failed")
    if not failing or runs < 1:
        return []
    done = [graded_run(tree, test_command, project_env, label="failures again", condition="when run again",
                       node_ids=failing, timeout=timeout) for _ in range(runs)]
    only = ProbeRun(label=first.label, condition="", outcomes={t: "failed" for t in failing},
                    messages=first.messages)
    return [f for f in compare_runs(only, done) if "passed" in {r.outcomes.get(f.test) for r in done}]


def unstable_tests(tree: Path, test_command: str, project_env: RunEnv, tests: Sequence[str], *,
                   load_runs: int = CANDIDATE_RUNS, order: bool = True, busy: int | None = None,
                   timeout: float = 300.0, max_candidates: int = MAX_CANDIDATES) -> dict[str, str]:
    """``test -> reason`` for the ``tests`` (which passed every clean run) that do not pass when run
    again: generation's check of its required set. With ``order``, one full run in reverse order;
    then ``load_runs`` runs under CPU load of those ``tests`` that are static timing candidates
    (nothing runs when none is). Reasons as :func:`compare_runs` writes them."""
    first = ProbeRun(label="first", condition="", outcomes={t: "passed" for t in tests})
    done: list[ProbeRun] = []
    if order and tests:
        done.append(graded_run(tree, test_command, project_env, label="order", condition=order_condition("reverse"),
                               order="reverse", timeout=timeout))
    candidates = timing_candidates(tree, {t.split("::", 1)[0] for t in tests})
    rerun = rerun_ids(candidates, tests, tree)[:max_candidates]
    if rerun and load_runs > 0:
        busy = default_busy() if busy is None else busy
        done += [graded_run(tree, test_command, project_env, label="candidates under load",
                            condition=load_condition(busy), busy=busy, node_ids=rerun, timeout=timeout)
                 for _ in range(load_runs)]
    return {f.test: f.reason for f in compare_runs(first, done)}


__all__ = ["CANDIDATE_RUNS", "MAX_CANDIDATES", "MAX_RUNS", "ORDER_PLUGIN", "TIME_BUDGET", "FlakyReport", "FlakyTest",
           "ProbeRun", "RunEnv", "compare_runs", "cores", "cpu_load", "default_busy", "graded_run", "load_condition", "matches",
           "order_condition", "order_plugin", "probe", "recheck_failures", "rerun_ids", "scan_timing", "summary_messages", "timing_candidates",
           "unstable_tests"]
