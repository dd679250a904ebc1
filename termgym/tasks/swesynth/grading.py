"""Running the required tests in the grading sandbox and deciding, outside it, what passed.

The grading sandbox holds a fresh copy of the buggy repository with the agent's source diff applied
(:mod:`termgym.tasks.swesynth.task`). Everything in it that decides a grade is out of the graded
code's reach (the threat model and the tests that prove each line: ``docs/security.md``):

* **What may be graded.** Only ``*.py`` files inside the project's packages (``source_dirs``,
  by default the repository's top-level packages). A diff that adds or changes a module that would
  shadow the tool chain or the standard library (``pytest``, ``_pytest``, ``py``, ``pluggy``,
  ``sitecustomize``, ``usercustomize``, ``conftest``, any top-level stdlib name) is refused
  (:func:`refused_paths`); test files, ``conftest.py``, ``.pth`` files and configuration files
  (``setup.cfg``, ``tox.ini``, ``pyproject.toml``, ``pytest.ini``) never leave the agent's sandbox.
* **A read-only tree.** On the local backend the repository is handed to another user and made
  read-only before the tests run; the sandbox has no capabilities, so neither the code under test
  nor anything it spawns can rewrite a test, a conftest, a ``.pyc`` or the grader's files.
* **Outcomes out of band.** The grader's plugin (:mod:`termgym.tasks.swesynth.grader_plugin`) is
  loaded with ``-p`` from a directory the sandbox cannot write, before any project code runs; it
  makes the test process non-dumpable and writes pytest's report of each test phase to an
  HMAC-chained event file whose key file it deletes before the project is imported.
  :func:`read_events` verifies the chain here, on the host, and cross-checks it with the exit status
  the sandbox reported on its own control pipe: a line from a process that never held the key, a
  cut-short session or a disagreeing exit status voids the run. No junit file, no exit code alone,
  no line the tests print is trusted. The code under test shares the plugin's interpreter, so the
  outcomes are what pytest saw, not proof against that code: the plugin denies and checks nothing
  in-process (honest ``unittest`` suites and projects that use frames run as under raw pytest), and
  whether a patch fixes the bug is decided outside the test process (``docs/security.md``).
* **Knowing when it could not run.** A run whose plugin never started (no interpreter, no pytest,
  a usage error) is an *infrastructure* error, as is a run that does not reach the tests on the
  unmodified repository either (a test dependency missing in the sandbox): never a silent 0.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

#: Modules a graded diff may never add or change, wherever they sit.
TOOLCHAIN_MODULES = frozenset({"pytest", "_pytest", "py", "pluggy", "iniconfig", "sitecustomize", "usercustomize",
                               "conftest", "site", "_pytest_plugins"})
#: The uid that owns the read-only grading tree (nobody): the sandbox's root has no capabilities.
TREE_OWNER = 65534
PLUGIN_SOURCE = Path(__file__).with_name("grader_plugin.py")
#: Loaded beside it: property-based tests give the same answer on every run (:mod:`.pinned_hypothesis`).
PINNING_SOURCE = Path(__file__).with_name("pinned_hypothesis.py")
#: pytest exit codes: 0 all passed, 1 some failed, 2 interrupted (collection errors), 3 internal
#: error, 4 usage error, 5 no tests collected.
RAN_EXIT_CODES = (0, 1)
#: How much of the test output is kept (the end of it): a flood stays in a pipe, not on disk.
LOG_BYTES = 64 * 1024


class GradingInfraError(RuntimeError):
    """The tests could not run for a reason that is not the agent's (the message says which)."""


def default_source_dirs(tree: str | Path, test_dirs: tuple[str, ...] | list[str] = ()) -> list[str]:
    """The project's packages: top-level directories with an ``__init__.py`` (``src/<pkg>`` too),
    test and tooling directories excluded. What ``source_dirs`` means when a record has none."""
    from termgym.tasks.swesynth.tree import IGNORED_DIRS, NON_SOURCE_DIRS, is_test_path

    tree = Path(tree)
    found = []
    for base in (tree, tree / "src"):
        if not base.is_dir():
            continue
        for child in sorted(base.iterdir()):
            rel = child.relative_to(tree).as_posix()
            if (child.is_dir() and not child.is_symlink() and (child / "__init__.py").is_file()
                    and child.name not in IGNORED_DIRS and child.name not in NON_SOURCE_DIRS
                    and not child.name.startswith(".") and not is_test_path(rel + "/x.py", test_dirs)
                    and child.name not in TOOLCHAIN_MODULES):
                found.append(rel)
    return found


def refused_paths(paths: list[str], source_dirs: list[str]) -> list[str]:
    """Graded paths that would shadow the tool chain or the standard library, with the reason."""
    stdlib = set(getattr(sys, "stdlib_module_names", ()))
    refused = []
    roots = [PurePosixPath(d.strip("/")) for d in source_dirs if d.strip("/")]
    for path in paths:
        p = PurePosixPath(path)
        stem = p.name[:-3] if p.name.endswith(".py") else p.name
        # The name this file is importable as from a sys.path entry: the part below the
        # directory that holds the top-level package (``src/`` layouts included).
        rel = p
        for root in roots:
            if root.parent != PurePosixPath(".") and p.is_relative_to(root.parent):
                rel = p.relative_to(root.parent)
        top = rel.parts[0] if len(rel.parts) > 1 else stem
        if stem in TOOLCHAIN_MODULES or top in TOOLCHAIN_MODULES or any(part in TOOLCHAIN_MODULES
                                                                        for part in rel.parts[:-1]):
            refused.append(f"{path}: shadows the test tool chain")
        elif top in stdlib:
            refused.append(f"{path}: shadows the standard library module {top!r}")
        elif p.suffix == ".pth":
            refused.append(f"{path}: a .pth file")
    return refused


@dataclass
class GradeRun:
    """One run of the tests in a grading sandbox, as verified on the host."""

    outcomes: dict[str, str]  # test id -> passed / failed / skipped (from verified events only)
    exit_code: int
    timed_out: bool
    started: bool  # the grader's plugin loaded (the interpreter and pytest work)
    finished: bool  # pytest reached the end of the session and reported it
    collected: list[str] = field(default_factory=list)
    tamper: list[str] = field(default_factory=list)  # why the run cannot be trusted
    versions: dict[str, str] = field(default_factory=dict)
    log_tail: str = ""

    @property
    def ran(self) -> bool:
        """The session ran the tests to completion (pytest's exit code 0 or 1)."""
        return self.started and self.finished and self.exit_code in RAN_EXIT_CODES and not self.timed_out


def read_events(data: bytes, key: bytes) -> tuple[list[tuple[str, Any]], list[str]]:
    """Verify the plugin's HMAC chain; returns ``(events, problems)``.

    A line whose MAC does not verify, a gap or repeat in the sequence, or anything after the
    ``finish`` event is a problem: the code under test wrote to the stream or cut it.
    """
    events: list[tuple[str, Any]] = []
    problems: list[str] = []
    previous = b""
    expected = 1
    finished = False
    for raw in data.split(b"\n"):
        if not raw:
            continue
        body, sep, mac = raw.rpartition(b"\t")
        good = hmac.new(key, previous + body, hashlib.sha256).hexdigest().encode()
        if not sep or not hmac.compare_digest(good, mac):
            problems.append("the event stream holds a line the grader did not sign")
            break
        previous = mac
        seq, kind, payload = json.loads(body)
        if seq != expected:
            problems.append(f"event {expected} is missing from the stream")
            break
        if finished:
            problems.append("events were written after the session finished")
            break
        expected += 1
        events.append((kind, payload))
        finished = kind == "finish"
    return events, problems


def outcomes_from(events: list[tuple[str, Any]]) -> tuple[dict[str, str], list[str], list[str]]:
    """Per-test outcomes from verified phase events: ``(outcomes, collected ids, problems)``.

    A test passed when its setup, call and teardown all passed; a skip in setup or call is a skip;
    anything else (or a missing phase) is a failure.
    """
    phases: dict[str, dict[str, str]] = {}
    collected: list[str] = []
    problems: list[str] = []
    seen_collection = False
    for kind, payload in events:
        if kind == "tamper":
            problems.append(str(payload.get("reason")))
        elif kind == "collected":
            if seen_collection:
                problems.append("the test collection was reported twice")
            seen_collection = True
            collected = list(payload["ids"])
        elif kind == "phase":
            entry = phases.setdefault(payload["id"], {})
            if payload["when"] in entry:
                problems.append(f"{payload['id']}: its {payload['when']} phase was reported twice")
            entry[payload["when"]] = payload["outcome"]
    outcomes: dict[str, str] = {}
    for tid, entry in phases.items():
        if "skipped" in (entry.get("setup"), entry.get("call")):
            outcomes[tid] = "skipped"
        elif all(entry.get(w) == "passed" for w in ("setup", "call", "teardown")):
            outcomes[tid] = "passed"
        else:
            outcomes[tid] = "failed"
    if collected:
        stray = [t for t in outcomes if t not in set(collected)]
        if stray:
            problems.append(f"outcomes for tests pytest never collected: {stray[:3]}")
    return outcomes, collected, problems


def _lock_tree(host_root: Path, paths: list[str]) -> None:
    """Hand ``paths`` (sandbox paths) to :data:`TREE_OWNER` and drop every write bit."""
    for sandbox_path in paths:
        top = host_root / sandbox_path.lstrip("/")
        for dirpath, dirnames, filenames in os.walk(top):
            for name in dirnames + filenames:
                full = os.path.join(dirpath, name)
                os.lchown(full, TREE_OWNER, TREE_OWNER)
                if not os.path.islink(full):
                    os.chmod(full, os.stat(full).st_mode & 0o555)
        os.lchown(top, TREE_OWNER, TREE_OWNER)
        os.chmod(top, os.stat(top).st_mode & 0o555)


def run_graded_tests(sandbox, test_command: str, workdir: str, source_dirs: list[str], timeout: float, *,
                     python_path: Sequence[str] = (), trusted_dirs: Sequence[str] = ()) -> GradeRun:
    """Run ``test_command`` in ``sandbox`` (already holding the tree to grade) under the grader's plugin.

    ``python_path`` (sandbox paths) follows the plugin's directory on ``PYTHONPATH``: a project's
    ``src/`` and its read-only test environment (:mod:`termgym.tasks.swesynth.projects`).
    ``source_dirs`` and ``trusted_dirs`` stay in the signature for callers (the project's packages
    and its read-only test dependencies); the plugin no longer judges code by where it lives.
    """
    token = secrets.token_hex(16)
    key = secrets.token_bytes(32)
    grader_dir = f"/tmp/.tg-{token}"
    log = f"{grader_dir}/log"  # in the locked directory: the code under test cannot swap it for a symlink
    module = f"tg_{token[:12]}"
    events_path = f"{grader_dir}/events"
    keyfile = f"/tmp/.tg-k-{token}/key"
    sandbox.write_file(f"{grader_dir}/{module}.py", PLUGIN_SOURCE.read_bytes(), mode=0o444)
    sandbox.write_file(f"{grader_dir}/{module}_pins.py", PINNING_SOURCE.read_bytes(), mode=0o444)
    sandbox.write_file(events_path, b"", mode=0o666)
    sandbox.write_file(log, b"", mode=0o666)
    sandbox.write_file(keyfile, json.dumps({"key": key.hex(), "events": events_path}), mode=0o600)
    host_root = getattr(sandbox, "root", None)
    if host_root is not None:  # local backend: a read-only tree the capability-less root cannot change
        _lock_tree(Path(host_root), [workdir, grader_dir])
        for writable in (events_path, log):  # appendable; forged event lines fail their MAC
            os.chmod(Path(host_root) / writable.lstrip("/"), 0o666)
    env = (f"env -u PYTHONSTARTUP -u PYTHONPATH -u PYTEST_ADDOPTS -u PYTEST_PLUGINS -u PYTHONHOME "
           f"PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0 PYTHONPATH={shlex.quote(':'.join([grader_dir, *python_path]))} "
           f"TERMGYM_GRADER_KEYFILE={shlex.quote(keyfile)}")
    command = (f"cd {shlex.quote(workdir)} && {env} {test_command} -p {module} -p {module}_pins -p no:cacheprovider "
               f"-p no:randomly -o console_output_style=classic 2>&1 | tail -c {LOG_BYTES} > {log}; (exit ${{PIPESTATUS[0]}})")
    result = sandbox.exec(command, timeout=timeout)
    try:
        log_tail = sandbox.read_file(log).decode("utf-8", "replace")[-3000:]
    except (FileNotFoundError, OSError):
        log_tail = result.output[-3000:]
    try:
        data = sandbox.read_file(events_path)
    except (FileNotFoundError, OSError):
        data = b""
    events, problems = read_events(data, key)
    outcomes, collected, more = outcomes_from(events)
    problems += more
    kinds = [k for k, _ in events]
    started = bool(kinds) and kinds[0] == "start"
    finish = next((p for k, p in events if k == "finish"), None)
    if finish is not None and not result.timed_out and int(finish["exitstatus"]) != result.exit_code:
        problems.append(f"the test process exited with {result.exit_code}, but pytest finished with "
                        f"{finish['exitstatus']}")
    return GradeRun(outcomes=outcomes, exit_code=result.exit_code, timed_out=result.timed_out, started=started,
                    finished=finish is not None, collected=collected, tamper=problems,
                    versions=dict(events[0][1]) if started else {}, log_tail=log_tail)


def cannot_start_reason(run: GradeRun, test_command: str) -> str | None:
    """Why the test command never reached pytest's session (an infrastructure error), else ``None``."""
    if run.started or run.timed_out:
        return None
    tail = run.log_tail.strip().splitlines()[-5:]
    return (f"the test command {test_command!r} could not start in the sandbox (exit {run.exit_code}): "
            + " | ".join(tail))
