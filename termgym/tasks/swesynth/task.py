"""One SWE-SYNTH task: fix an injected bug in a real Python repository.

The agent's workspace (``/app``) is the buggy repository with its history wiped to one
"Initial state" commit and every file time set to the same instant, so neither ``git log`` nor
timestamps point at the bug. For host repositories the prepared tree is built once per task and
cached on disk (``$TERMGYM_CACHE_DIR/swesynth``, default ``~/.cache/termgym/swesynth``); a reset
only copies it in. Records that name a Docker image prepare the same state with setup commands.

Grading never trusts the agent's workspace: it takes the agent's diff of *source* files (test files
and anything outside the project's packages are ignored; files that would shadow the tool chain are
refused), applies it to a fresh copy of the buggy repository in a new sandbox and runs the required
tests there under the grader's own pytest plugin (:mod:`termgym.tasks.swesynth.grading`,
``docs/security.md``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

from termgym.sandbox.base import Sandbox, SandboxSpec
from termgym.tasks.base import Grade, GradingContext, Task
from termgym.tasks.swesynth.behaviour import apply_behaviour_check
from termgym.tasks.swesynth.changes import AgentChanges, read_agent_changes
from termgym.tasks.swesynth.grading import (
    cannot_start_reason,
    default_source_dirs,
    refused_paths,
    run_graded_tests,
)
from termgym.tasks.swesynth.projects import SandboxParts, project_sandbox_spec_parts
from termgym.tasks.swesynth.records import RecordError, TaskRecord
from termgym.tasks.swesynth.selection import (
    GRADE_TESTS,
    MAX_COMMAND_BYTES,
    decode_ranges,
    load_map,
    select_command,
)
from termgym.tasks.swesynth.tree import copy_tree, is_source_path

#: Every file of a prepared workspace gets this modification time (2024-01-01T00:00:00Z).
NORMALISED_MTIME = 1704067200
GIT_DATE = "2024-01-01T00:00:00+0000"
REFUSAL = "Command not permitted in this environment."
#: Commands that would reveal which file changed: checksums and time-based find predicates.
_FORBIDDEN = re.compile(
    r"(?:^|[\s;&|(`$'\"/])(?:md5sum|sha\d*sum|shasum|b2sum|cksum|sum)(?=$|[\s;&|)`'\"])"
    r"|\bfind\b[^;&|]*\s-(?:newer\w*|[acm]min|[acm]time|[acm]newer|used)\b"
)
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "termgym", "GIT_AUTHOR_EMAIL": "termgym@localhost", "GIT_AUTHOR_DATE": GIT_DATE,
    "GIT_COMMITTER_NAME": "termgym", "GIT_COMMITTER_EMAIL": "termgym@localhost", "GIT_COMMITTER_DATE": GIT_DATE,
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
}
#: Git options that keep the agent's repository configuration out of the grader's diff.
_SAFE_GIT = "-c core.quotepath=off -c diff.external= -c core.hooksPath=/dev/null -c core.fsmonitor=false"
#: The grader's ``git diff``: no external diff driver, no textconv, no rename detection.
_GIT_DIFF = f"git {_SAFE_GIT} diff --no-ext-diff --no-textconv --no-renames"
#: The task's initial commit (the agent may have committed since).
_BASE_COMMIT = "$(git rev-list --max-parents=0 HEAD | tail -n 1)"
#: Git inside the sandbox: no ownership complaints whoever owns the copied files.
SANDBOX_ENV = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}

INSTRUCTION = """\
You are working in a Python repository at {workdir}. A user filed the bug report below. Find the cause \
in the repository's source code and fix it, so that the behaviour is what the user expected. You can \
run the repository's tests with `{test_command}`. Do not change the tests: edits to test files are \
ignored when your fix is graded.

<pr_description>
{problem_statement}
</pr_description>"""


def cache_root() -> Path:
    """Where prepared workspaces are cached (``$TERMGYM_CACHE_DIR/swesynth``)."""
    base = os.environ.get("TERMGYM_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "termgym")
    return Path(base) / "swesynth"


_fingerprints: dict[Path, str] = {}
_lock = threading.Lock()


def repo_fingerprint(repo_dir: Path) -> str:
    """A content hash of a clean repository (memoised per process)."""
    with _lock:
        if repo_dir in _fingerprints:
            return _fingerprints[repo_dir]
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(repo_dir):
        dirnames[:] = sorted(d for d in dirnames if d not in {".git", "__pycache__", ".pytest_cache"})
        for name in sorted(filenames):
            if name.endswith(".pyc"):
                continue
            path = Path(dirpath) / name
            digest.update(path.relative_to(repo_dir).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() if not path.is_symlink() else os.readlink(path).encode())
    value = digest.hexdigest()[:16]
    with _lock:
        _fingerprints[repo_dir] = value
    return value


def _git(args: list[str], cwd: Path, stdin: str | None = None) -> None:
    env = {**os.environ, **_GIT_ENV}
    proc = subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args], cwd=cwd,
                          input=stdin, text=True, capture_output=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")


def normalise_mtimes(root: Path) -> None:
    """Give every file and directory under ``root`` the same modification time."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + dirnames:
            os.utime(os.path.join(dirpath, name), (NORMALISED_MTIME, NORMALISED_MTIME), follow_symlinks=False)
    os.utime(root, (NORMALISED_MTIME, NORMALISED_MTIME))


def copy_in_name_order(src: Path, dest: Path) -> None:
    """Copy the tree ``src`` to ``dest`` (new), creating every directory's entries in name order."""
    dest.mkdir(parents=True)
    for entry in sorted(os.listdir(src)):
        source, target = src / entry, dest / entry
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        elif source.is_dir():
            copy_in_name_order(source, target)
        else:
            shutil.copy2(source, target)
    shutil.copystat(src, dest)


def prepare_workspace(record: TaskRecord, cache: Path | None = None) -> Path:
    """The buggy repository of ``record`` as the agent sees it, built once and cached.

    The clean repository is copied (without VCS data and caches), the bug patch applied, the tree
    copied again in name order, a fresh git repository committed as "Initial state" with fixed
    identities and dates, all file times normalised and the git index rebuilt without stat data.
    Safe to call from several processes: the tree is built aside and renamed in place.
    """
    if record.repo_dir is None:
        raise RecordError(f"task {record.task_id}: no host repository to prepare (it uses image {record.image!r})")
    if not record.repo_dir.is_dir():
        raise RecordError(f"task {record.task_id}: repository directory {record.repo_dir} does not exist")
    cache = cache or cache_root()
    key = hashlib.sha256(f"v3\0{repo_fingerprint(record.repo_dir)}\0{record.bug_patch}".encode()).hexdigest()[:20]
    target = cache / f"{record.task_id}-{key}"
    if (target / ".git").is_dir():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=cache))
    try:
        staged, tree = tmp / "staged", tmp / "app"
        copy_tree(record.repo_dir, staged)
        _git(["apply", "--whitespace=nowarn", "-"], staged, stdin=record.bug_patch)
        # Rebuilt in name order: every file gets its inode, ctime and directory slot from this copy,
        # none from being rewritten by the bug patch (which a sandbox's copy of this tree would inherit).
        copy_in_name_order(staged, tree)
        # No template (no sample hooks) and one pack instead of loose objects: every reset copies this
        # tree, and the copy's cost is per file and per directory.
        _git(["init", "-q", "--template="], tree)
        _git(["add", "-A"], tree)
        _git(["commit", "-q", "--no-verify", "-m", "Initial state"], tree)
        _git(["repack", "-a", "-d", "-q"], tree)
        _git(["prune-packed"], tree)
        normalise_mtimes(tree)
        # The index's stat data was taken before the times were normalised: rebuilt from the commit it
        # holds none (all zero for every file), so `git ls-files --debug` cannot tell which files the
        # bug touched. Git refreshes it from the workspace's own (uniform) stat data on first use.
        _git(["read-tree", "HEAD"], tree)
        os.utime(tree / ".git" / "index", (NORMALISED_MTIME, NORMALISED_MTIME))
        try:
            os.rename(tree, target)
        except OSError:
            if not (target / ".git").is_dir():  # lost a race only if the winner finished
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


class SweSynthTask(Task):
    """Fix one injected bug; graded by the repository's tests in a fresh sandbox."""

    def __init__(self, record: TaskRecord, *, cache_dir: str | Path | None = None,
                 grade_timeout: float | None = None, grade_tests: str = "selected",
                 selection_file: str | Path | None = None) -> None:
        instruction = INSTRUCTION.format(workdir=record.workdir, test_command=record.test_command,
                                         problem_statement=record.problem_statement.strip())
        super().__init__(record.task_id, instruction, metadata={
            "repo": record.repo, "bug_types": list(record.bug_types),
            "num_tests": len(record.all_tests), "num_target_tests": len(record.target_tests),
            # read by ProcessReward ("tests discovered") and the offline-sample converters
            "test_paths": list(record.test_dirs), "test_command": record.test_command,
            "problem_statement": record.problem_statement, "fix_patch": record.fix_patch,
            "difficulty": record.difficulty, "signals": dict(record.signals),
        })
        self.record = record
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.grade_timeout = float(grade_timeout or record.test_timeout)
        self._source_dirs: list[str] | None = None
        if grade_tests not in GRADE_TESTS:
            raise ValueError(f"task {record.task_id}: grade_tests must be one of {', '.join(GRADE_TESTS)}, "
                             f"not {grade_tests!r}")
        #: ``"selected"``: the required tests the bug or the patch can change (:mod:`.selection`),
        #: the full set when no coverage map vouches for the change; ``"full"``: every required test.
        self.grade_tests = grade_tests
        self.selection_file = Path(selection_file) if selection_file else None

    @property
    def workdir(self) -> str:
        return self.record.workdir

    def sandbox_spec(self) -> SandboxSpec:
        record = self.record
        if record.repo_dir is not None:
            tree = prepare_workspace(record, self.cache_dir)
            parts = self.test_env_parts()
            return SandboxSpec(workdir=record.workdir, image=record.image, copy_dirs={str(tree): record.workdir},
                               env={**SANDBOX_ENV, **(parts.env if parts else {})},
                               ro_binds=dict(parts.ro_binds) if parts else {})
        wd = shlex.quote(record.workdir)
        date = f"GIT_AUTHOR_DATE='{GIT_DATE}' GIT_COMMITTER_DATE='{GIT_DATE}'"
        ident = "-c user.name=termgym -c user.email=termgym@localhost -c commit.gpgsign=false"
        return SandboxSpec(
            workdir=record.workdir, image=record.image, env=dict(SANDBOX_ENV),
            files={"/tmp/.termgym-bug.patch": record.bug_patch},
            setup_commands=[
                f"cd {wd} && git apply --whitespace=nowarn /tmp/.termgym-bug.patch && rm -f /tmp/.termgym-bug.patch",
                f"cd {wd} && rm -rf .git && git init -q && git add -A && "
                f"{date} git {ident} commit -q --no-verify -m 'Initial state'",
                f"find {wd} -exec touch -h -d @{NORMALISED_MTIME} {{}} +",
                # the index's stat data predates the normalised times: rebuilt without any (see prepare_workspace)
                f"cd {wd} && git read-tree HEAD && touch -d @{NORMALISED_MTIME} .git/index",
            ],
        )

    def test_env_parts(self) -> SandboxParts | None:
        """The read-only test environment of the record's bundled project (``None`` for other repositories).

        Raises :class:`~termgym.tasks.swesynth.projects.TestEnvMissing`, naming the command that
        provisions it, when this machine does not have it.
        """
        if not self.record.project:
            return None
        return project_sandbox_spec_parts(self.record.project, self.record.workdir)

    def check_command(self, command: str) -> str | None:
        return REFUSAL if _FORBIDDEN.search(command) else None

    def oracle_commands(self) -> list[str]:
        return [apply_patch_command(self.record.fix_patch, self.workdir)]

    # -- grading -----------------------------------------------------------------------------

    def agent_patch(self, sandbox: Sandbox) -> tuple[str, list[str], list[str]]:
        """The agent's diff of source files against the initial commit: ``(patch, graded, ignored)``.

        New files count (they are added with intent-to-add first); test files, files outside the
        source tree and non-Python files are listed in ``ignored`` and left out of the patch.
        """
        wd = shlex.quote(self.workdir)
        listing = sandbox.exec(f"cd {wd} && git add -A -N . >/dev/null 2>&1; {_GIT_DIFF} --name-only {_BASE_COMMIT}",
                               timeout=120)
        if listing.exit_code != 0:
            raise RuntimeError(f"cannot read the agent's changes with git: {listing.output.strip()[-300:]}")
        changed = [line for line in listing.output.splitlines() if line.strip()]
        graded = [p for p in changed if is_source_path(p, self.source_dirs, self.record.test_dirs)]
        ignored = [p for p in changed if p not in graded]
        if not graded:
            return "", graded, ignored
        out = f"/tmp/.termgym-agent-{uuid.uuid4().hex}.patch"
        paths = " ".join(shlex.quote(p) for p in graded)
        result = sandbox.exec(f"cd {wd} && {_GIT_DIFF} --binary {_BASE_COMMIT} -- {paths} > {out}", timeout=120)
        if result.exit_code != 0:
            raise RuntimeError(f"git diff failed in the agent's sandbox: {result.output.strip()[-300:]}")
        patch = read_agent_file(sandbox, out).decode("utf-8", "replace")
        sandbox.exec(f"rm -f {out}", timeout=30)
        return patch, graded, ignored

    @property
    def source_dirs(self) -> list[str]:
        """Where graded files may live: the record's ``source_dirs``, else the project's packages."""
        if self._source_dirs is None:
            record = self.record
            if record.source_dirs:
                self._source_dirs = list(record.source_dirs)
            elif record.repo_dir is not None and record.repo_dir.is_dir():
                self._source_dirs = default_source_dirs(record.repo_dir, record.test_dirs)
            else:
                self._source_dirs = []
        return self._source_dirs

    def grade_patch(self, patch: str, new_sandbox) -> dict[str, Any]:
        """Apply ``patch`` to a fresh buggy repository (``new_sandbox(spec)``) and run the tests.

        Returns the grade details (``all_result``, ``all_passed``, ``target_result``, ``pass_rate``,
        and ``tamper`` / ``infra_error`` when the run cannot be trusted or could not happen; see
        :mod:`termgym.tasks.swesynth.grading`). Raises ``ValueError`` when the patch does not apply.
        """
        sandbox = new_sandbox(self.sandbox_spec())
        wd = shlex.quote(self.workdir)
        if patch.strip():
            sandbox.write_file("/tmp/.termgym-grade.patch", patch)
            applied = sandbox.exec(f"cd {wd} && git apply --whitespace=nowarn /tmp/.termgym-grade.patch; "
                                   f"status=$?; rm -f /tmp/.termgym-grade.patch; (exit $status)", timeout=60)
            if applied.exit_code != 0:
                raise ValueError(f"the agent's changes do not apply to a fresh copy: {applied.output.strip()[-300:]}")
        return self.grade_tree(sandbox, patch, new_sandbox)

    def stage_changes(self, sandbox: Sandbox, changes: AgentChanges) -> tuple[str, list[str]]:
        """Write ``changes`` (read from the agent's sandbox by the host) into ``sandbox``, a fresh one
        holding the buggy tree, and let git there make them a patch: ``(patch, graded files)``.

        New source files a ``.gitignore`` of the task's tree matches are left out, as ``git add -A``
        in the agent's tree would (and removed again), so the graded tree is exactly the patch.
        """
        wd = shlex.quote(self.workdir)
        written = {path: data for path, data in changes.files.items() if data is not None}
        deleted = [path for path, data in changes.files.items() if data is None]
        self.clear_for_changes(sandbox, [*deleted, *written])
        for path, data in written.items():
            sandbox.write_file(f"{self.workdir}/{path}", data, mode=changes.modes.get(path, 0o644))
        out = f"/tmp/.termgym-agent-{uuid.uuid4().hex}.patch"
        names = f"{out}.names"
        result = sandbox.exec(
            f"cd {wd} && git add -A -N . >/dev/null 2>&1; "
            f"{_GIT_DIFF} --name-only -z {_BASE_COMMIT} > {names} && {_GIT_DIFF} --binary {_BASE_COMMIT} > {out}",
            timeout=120)
        if result.exit_code != 0:
            raise RuntimeError(f"git could not diff the agent's files in the grading sandbox: "
                               f"{result.output.strip()[-300:]}")
        listed = sandbox.read_file(names).decode("utf-8", "surrogateescape").split("\0")
        graded = sorted(p for p in listed if p)
        dropped = [p for p in written if p not in graded]
        if dropped:
            sandbox.exec(f"cd {wd} && rm -f -- {' '.join(shlex.quote(p) for p in dropped)}", timeout=60)
        patch = sandbox.read_file(out).decode("utf-8", "replace")  # (left in /tmp: it is the agent's own)
        return patch, graded

    def clear_for_changes(self, sandbox: Sandbox, paths: list[str]) -> None:
        """Remove ``paths`` (relative to the workdir) in the grading ``sandbox`` before the agent's
        files are written: deleted files go, and so does whatever stands where a changed file goes.
        So a source file the agent made a directory of (``pkg/mod.py/x.py``) is gone before the
        files below it are written, and a directory the agent made a file of goes whole (nothing
        below it is left in the agent's tree)."""
        if not paths:
            return
        quoted = " ".join(shlex.quote(p) for p in paths)
        result = sandbox.exec(f"cd {shlex.quote(self.workdir)} && for p in {quoted}; do "
                              f"if [ -d \"$p\" ] && [ ! -L \"$p\" ]; then rm -rf -- \"$p\"; else rm -f -- \"$p\"; fi; "
                              f"done", timeout=120)
        if result.exit_code != 0:
            raise RuntimeError(f"could not clear the agent's deleted files in the grading sandbox: "
                               f"{result.output.strip()[-300:]}")

    def grade_tree(self, sandbox: Sandbox, patch: str, new_sandbox) -> dict[str, Any]:
        """Run the tests in ``sandbox`` (a fresh one holding the buggy tree with ``patch`` applied) and
        check the behaviour: the grade details :meth:`grade_patch` returns."""
        record = self.record
        parts = self.test_env_parts()
        paths = {"python_path": parts.python_path, "trusted_dirs": parts.trusted_dirs} if parts else {}
        graded, selection_note = self.tests_to_run(patch)
        command = record.test_command if graded is None else select_command(record.test_command, record.repo_dir,
                                                                              graded)
        run = run_graded_tests(sandbox, command, self.workdir, self.source_dirs, self.grade_timeout, **paths)
        infra = None
        if not run.ran and not run.timed_out and not run.tamper:
            # The tests never ran (or pytest never started): the agent's change (an import error is a
            # legitimate 0), or a sandbox that cannot run this suite at all. Only the unmodified
            # repository in a fresh sandbox nobody else touched (the agent's processes are stopped by
            # now) can show it is not the agent's: then, and only then, it is an infrastructure error.
            # A graded run that timed out is the agent's code's doing: a 0, never retried.
            pristine = run if not patch.strip() else run_graded_tests(
                new_sandbox(self.sandbox_spec()), command, self.workdir, self.source_dirs,
                self.grade_timeout, **paths)
            if not pristine.ran:
                infra = cannot_start_reason(pristine, record.test_command) or (
                    f"the tests do not run on the unmodified repository in this sandbox (pytest exit "
                    f"{pristine.exit_code}{', timed out' if pristine.timed_out else ''}); a test dependency may "
                    f"be missing: " + " | ".join(pristine.log_tail.strip().splitlines()[-5:]))
        outcomes = {} if run.tamper or infra else run.outcomes
        # A required test left out of a selected run executes nothing the bug or the patch changed: it
        # runs as on the clean tree, where it passed at generation (twice, under this grader).
        unchanged = set() if graded is None or not outcomes else set(record.all_tests) - set(graded)
        passed = [t for t in record.all_tests if t in unchanged or outcomes.get(t) == "passed"]
        target_passed = [t for t in record.target_tests if outcomes.get(t) == "passed"]
        n = len(record.all_tests)
        details = {
            "all_result": f"{len(passed)}/{n}",
            "all_passed": len(passed) == n and n > 0,
            "target_result": f"{len(target_passed)}/{len(record.target_tests)}",
            "pass_rate": len(passed) / n if n else 0.0,
            "bug_types": list(record.bug_types),
            "tests_timed_out": run.timed_out,
            "test_exit_code": run.exit_code,
            "runtime": run.versions,
            "failed_tests": [t for t in record.all_tests if t not in unchanged and outcomes.get(t) != "passed"][:50],
            "graded_tests": {"mode": "full" if graded is None else "selected",
                             "ran": len(record.all_tests) if graded is None else len(graded),
                             "why": selection_note},
        }
        if run.tamper:
            details["tamper"] = run.tamper[:10]
        if infra:
            details["infra_error"] = infra
        # The decision outside the graded process: replay recorded inputs, compare with clean answers.
        # The replay reuses this sandbox once the test run's processes are gone (see behaviour_check).
        return apply_behaviour_check(self, patch, new_sandbox, details, graded_sandbox=sandbox)

    def tests_to_run(self, patch: str) -> tuple[list[str] | None, str]:
        """The required tests a grade of ``patch`` runs (``None``: all of them) and why.

        With ``grade_tests="selected"`` and a coverage map for the project (:mod:`.selection`): the
        task's stored selection (the tests the bug broke and those executing a function it changed)
        plus the tests executing a function the patch changes; the full set when the map cannot
        vouch for a change (import-time code, new files) or the selected command would be too long.
        """
        record = self.record
        if self.grade_tests == "full":
            return None, "the full required set was asked for (grade_tests='full')"
        if self.selection_file is None or not self.selection_file.is_file() or record.repo_dir is None:
            return None, "no coverage map for this project"
        cmap = load_map(self.selection_file)
        stored = cmap.tasks.get(record.task_id)
        if cmap.tests != list(record.all_tests):
            return None, "the coverage map lists other required tests than the task"
        if stored is None or stored == "full":
            return None, "the bug changes code the coverage map cannot vouch for"
        chosen = set(decode_ranges(stored, len(cmap.tests), f"{self.selection_file}: {record.task_id}"))
        if patch.strip():
            buggy = prepare_workspace(record, self.cache_dir)

            def buggy_text(path: str) -> str | None:
                file = buggy / path
                return file.read_text(encoding="utf-8") if file.is_file() and not file.is_symlink() else None

            picked, why = cmap.tests_for_patch(patch, buggy_text)
            if picked is None:
                return None, f"the patch changes code the coverage map cannot vouch for ({why})"
            chosen |= picked
        tests = [t for i, t in enumerate(cmap.tests) if i in chosen]
        if len(select_command(record.test_command, record.repo_dir, tests)) > MAX_COMMAND_BYTES:
            return None, "the selected command would be too long"
        return tests, f"{len(tests)} of {len(record.all_tests)} required tests execute what the bug or the patch changes"

    def grade(self, ctx: GradingContext) -> Grade:
        def zero(error: str, **extra: Any) -> Grade:
            return Grade(0.0, False, {"all_result": f"0/{len(self.record.all_tests)}", "all_passed": False,
                                      "pass_rate": 0.0, "bug_types": list(self.record.bug_types), **extra},
                         error=error)

        def refuse(refused: list[str], graded: list[str], ignored: list[str]) -> Grade:
            return zero("the change touches files the grader refuses: " + "; ".join(refused),
                        patch_files=graded, ignored_files=ignored, refused_files=refused)

        try:
            # Every process the agent left running stops before anything is read or graded: nothing
            # changes the tree after this point, and busy loops cannot slow the grade into a timeout.
            ctx.sandbox.halt()
            # The host reads the agent's files (see .changes): no process starts in its sandbox.
            changes = None if self.record.repo_dir is None else read_agent_changes(
                ctx.sandbox, self.workdir, prepare_workspace(self.record, self.cache_dir), self.source_dirs,
                self.record.test_dirs)
            if changes is None:  # the host cannot reach its files: git in the agent's sandbox
                patch, graded, ignored = self.agent_patch(ctx.sandbox)
            else:
                patch, graded, ignored = "", sorted(changes.files), changes.ignored
        except Exception as exc:  # a broken workspace is the agent's failure, not the grader's
            return zero(str(exc))
        refused = refused_paths(graded, self.source_dirs)
        refused += changes.refused if changes is not None else symlinks_in(patch) + unlisted_paths(patch, graded)
        if refused:
            return refuse(refused, graded, ignored)
        try:
            if changes is None:
                details = self.grade_patch(patch, ctx.new_sandbox)
            else:
                sandbox = ctx.new_sandbox(self.sandbox_spec())
                patch, graded = self.stage_changes(sandbox, changes)
                refused = symlinks_in(patch) + unlisted_paths(patch, graded)
                if refused:
                    return refuse(refused, graded, ignored)
                details = self.grade_tree(sandbox, patch, ctx.new_sandbox)
        except ValueError as exc:
            return zero(str(exc), patch_files=graded, ignored_files=ignored)
        details.update({"patch_files": graded, "ignored_files": ignored, "fix_patch": patch})
        if details.get("infra_error"):
            return Grade(0.0, False, details, error=f"infrastructure: {details['infra_error']}")
        if details.get("tamper"):
            return Grade(0.0, False, details, error="the graded code tampered with the test run: "
                         + "; ".join(details["tamper"][:3]))
        passed = bool(details["all_passed"])
        return Grade(1.0 if passed else 0.0, passed, details, error=details.get("behaviour_failure"))


def read_agent_file(sandbox: Sandbox, path: str) -> bytes:
    """A file the grader wrote in the agent's sandbox, read without following a symlink the agent
    may have swapped in meanwhile (on the local backend the host reads the file directly, and a
    link there would point into the host's own file system)."""
    root = getattr(sandbox, "root", None)
    if root is None:
        return sandbox.read_file(path)
    host = Path(root) / path.lstrip("/")
    real_root = os.path.realpath(root)
    if os.path.realpath(host.parent) != real_root and not os.path.realpath(host.parent).startswith(real_root + os.sep):
        raise RuntimeError(f"{path} is no longer inside the agent's sandbox")
    try:
        fd = os.open(host, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise RuntimeError(f"cannot read the agent's diff at {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def unlisted_paths(patch: str, graded: list[str]) -> list[str]:
    """Files a patch touches that are not among the graded ones.

    The agent owns its repository's git configuration (diff drivers, attributes), so the patch
    text is checked against the list of graded files rather than trusted to match it.
    """
    allowed = set(graded)
    out = []
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            names = re.findall(r"(?:^| )[ab]/(\S+)", line[len("diff --git "):])
        elif line.startswith(("--- ", "+++ ")):
            name = line[4:].strip()
            names = [] if name == "/dev/null" else [re.sub(r"^[ab]/", "", name)]
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            names = [line.split(" ", 2)[-1]]
        else:
            continue
        out += [f"{n}: in the patch but not a graded file" for n in names if n not in allowed]
    return sorted(set(out))


def symlinks_in(patch: str) -> list[str]:
    """Files the patch turns into symbolic links (never a source fix; a way to point at other files)."""
    out = []
    current = None
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            current = line.split(" b/", 1)[-1]
        elif line.startswith(("new file mode 120000", "new mode 120000")):
            out.append(f"{current}: becomes a symbolic link")
    return out


def apply_patch_command(patch: str, workdir: str) -> str:
    """One shell command that writes ``patch`` through a quoted heredoc and ``git apply``s it."""
    marker = "TERMGYM_PATCH_EOF"
    while marker in patch:
        marker += "_"
    body = patch if patch.endswith("\n") else patch + "\n"
    return (f"cd {shlex.quote(workdir)} && cat > /tmp/.termgym-fix.patch <<'{marker}'\n{body}{marker}\n"
            f"git apply --whitespace=nowarn /tmp/.termgym-fix.patch && rm -f /tmp/.termgym-fix.patch")


# -- suites --------------------------------------------------------------------------------------------
