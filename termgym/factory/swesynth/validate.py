"""Running a repository's tests and deciding which injected bugs are kept.

Tests run through the repository's own pytest command with a junit-xml report added
(:func:`junit_args`), so every outcome is keyed by a per-test id (``path::Class::test``). Which paths
are tests and which are source is :mod:`termgym.tasks.swesynth.tree`, shared with the runtime.

A candidate bug is kept when (:func:`judge`):

* the test files are untouched (only source files are mutated);
* at least one and at most ``max(10, 20 %)`` of the required tests fail;
* a second run fails exactly the same tests (the failure is deterministic).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from termgym.tasks.swesynth.tree import is_test_path

# -- running tests -------------------------------------------------------------------------------


def junit_args(junit_path: str) -> str:
    """What is appended to the test command: a junit report with file attributes, no cache files."""
    return (f"--junitxml={shlex.quote(junit_path)} -o junit_family=xunit1 -p no:cacheprovider "
            "-p no:randomly -o console_output_style=classic")


@dataclass
class RunResult:
    """One run of the test command: outcome per test id (``passed``/``failed``/``skipped``)."""

    outcomes: dict[str, str]
    messages: dict[str, str] = field(default_factory=dict)  # test id -> failure text (traceback)
    exit_code: int = 0
    duration: float = 0.0
    timed_out: bool = False
    output: str = ""

    @property
    def passed(self) -> set[str]:
        return {t for t, o in self.outcomes.items() if o == "passed"}

    def failed_among(self, required: Iterable[str]) -> list[str]:
        """Required tests that did not pass (missing ones count as failed)."""
        return [t for t in required if self.outcomes.get(t) != "passed"]


def _module_of(file: str) -> str:
    return file[:-3].replace("/", ".") if file.endswith(".py") else file.replace("/", ".")


def node_id(file: str | None, classname: str, name: str) -> str:
    """A pytest-style node id from a junit testcase (xunit1 carries the file)."""
    if file:
        file = file.replace(os.sep, "/")
        module = _module_of(file)
        if classname == module:
            return f"{file}::{name}"
        if classname.startswith(module + "."):
            return f"{file}::{'::'.join(classname[len(module) + 1:].split('.'))}::{name}"
        return f"{file}::{name}" if not classname else f"{file}::{classname.split('.')[-1]}::{name}"
    return f"{classname}::{name}" if classname else name


def parse_junit(xml_text: str | bytes) -> tuple[dict[str, str], dict[str, str]]:
    """Parse a pytest junit-xml report into ``(outcomes, failure messages)`` keyed by test id.

    Collection errors (a ``testcase`` with an empty name) are skipped: the tests they hide are
    simply missing from the outcomes, which callers count as failed.
    """
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ValueError(f"the junit-xml report is not valid XML: {exc}") from None
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for case in root.iter("testcase"):
        name = case.get("name") or ""
        if not name:
            continue
        tid = node_id(case.get("file"), case.get("classname") or "", name)
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
                messages[tid] = ((child.get("message") or "") + "\n" + (child.text or "")).strip()
                break
            if child.tag == "skipped":
                outcome = "skipped"
        if outcomes.get(tid) == "failed":  # a teardown error reported after the call
            continue
        outcomes[tid] = outcome
    return outcomes, messages


def run_tests(workdir: str | Path, test_command: str, *, timeout: float = 600.0,
              env: dict[str, str] | None = None) -> RunResult:
    """Run ``test_command`` (a pytest invocation) in ``workdir`` on the host and parse its report."""
    with tempfile.TemporaryDirectory(prefix="termgym-junit-") as tmp:
        junit = os.path.join(tmp, "junit.xml")
        full_env = dict(os.environ)
        full_env.update({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"})
        full_env.pop("PYTEST_ADDOPTS", None)
        full_env.update(env or {})
        start = time.monotonic()
        try:
            proc = subprocess.run(f"{test_command} {junit_args(junit)}", shell=True, cwd=workdir,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env=full_env, timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired as exc:
            out = exc.output.decode("utf-8", "replace") if exc.output else ""
            return RunResult({}, exit_code=124, duration=time.monotonic() - start, timed_out=True, output=out)
        output = proc.stdout.decode("utf-8", "replace")
        duration = time.monotonic() - start
        if not os.path.exists(junit):
            return RunResult({}, exit_code=proc.returncode, duration=duration, output=output)
        outcomes, messages = parse_junit(Path(junit).read_bytes())
        return RunResult(outcomes, messages, proc.returncode, duration, False, output)


# -- judging candidates --------------------------------------------------------------------------


def max_failures(n_tests: int) -> int:
    """The most tests one bug may break: ``max(10, 20 %)`` of the required tests."""
    return max(10, int(0.2 * n_tests))


@dataclass
class Verdict:
    """Whether a candidate bug is kept, and why not."""

    kept: bool
    reason: str
    target_tests: list[str] = field(default_factory=list)
    run: RunResult | None = None


def judge(required: Sequence[str], first: RunResult, second: RunResult | None = None,
          touched: Sequence[str] = (), test_dirs: Sequence[str] = ()) -> Verdict:
    """Apply the keep rules to one or two runs of a mutated repository (see module docstring).

    Pass ``second=None`` to check only the first run (the caller then decides whether a second run
    is worth it); the verdict is only final with both.
    """
    bad = [p for p in touched if is_test_path(p, test_dirs)]
    if bad:
        return Verdict(False, f"the bug touches test files: {', '.join(bad)}")
    if first.timed_out:
        return Verdict(False, "the test run timed out", run=first)
    failed = first.failed_among(required)
    limit = max_failures(len(required))
    if not failed:
        return Verdict(False, "no required test fails", run=first)
    if len(failed) > limit:
        return Verdict(False, f"{len(failed)} tests fail, more than the limit of {limit}", run=first)
    if second is not None:
        if second.timed_out or sorted(second.failed_among(required)) != sorted(failed):
            return Verdict(False, "the failures differ between two runs (not deterministic)", run=first)
    return Verdict(True, "kept", target_tests=sorted(failed), run=first)


def baseline(workdir: str | Path, test_command: str, *, timeout: float = 600.0) -> tuple[list[str], RunResult]:
    """Run the tests twice on the unmodified repository; return the required set and the first run.

    The required set is every test that passed both times (in report order). Tests that fail or
    flake on the clean repository are left out rather than failing the whole repository; none
    passing at all is an error that says what the test command printed.
    """
    first = run_tests(workdir, test_command, timeout=timeout)
    second = run_tests(workdir, test_command, timeout=timeout)
    stable = second.passed
    required = [t for t, o in first.outcomes.items() if o == "passed" and t in stable]
    if not required:
        tail = re.sub(r"\s+\n", "\n", first.output)[-2000:]
        raise RuntimeError(
            f"the test command {test_command!r} passed no test in {workdir} (exit code {first.exit_code}). "
            f"Check that it is a pytest command that works from the repository root. Its output ended with:\n{tail}"
        )
    return required, first
