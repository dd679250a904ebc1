"""Process rewards: a wrapper that turns each step into reward events, paying only for progress.

``ProcessReward(env)`` replaces the env's reward (0 on every step, the grade's score on the last)
with the sum of the events that fired on the step, and lists them in ``info["reward_events"]``.
Two tables ship, chosen by name (``ProcessReward(env, table="seed000")``):

``"progress"`` (the default) pays for progress on the bug and nothing else in the end:

================  ============  ===============================================================
event             default       fires when
================  ============  ===============================================================
valid_command     +0.01         the message parsed into a new command that ran (not refused)
command_success   +0.02         that command exited 0 without timing out
code_modified     +0.03         a tracked source file got content it never had in this episode
tests_discovered  +0.02         the agent found the task's tests (listed, read) or ran them
invalid_format    -0.05         the message could not be parsed into an action
timeout           -0.02         the command timed out and was killed
target_tests      +1.0 × t      final: ``t`` = share of the target (fail-to-pass) tests passing
regressions       -1.0 × r      final: ``r`` = share of the other tests (they passed before the
                                bug) that fail now; the outcome never drops below 0
clawback          -S × (1-p)    final: takes back the positive shaping ``S`` paid so far, except
                                the share ``p`` = outcome / target weight that was earned
================  ============  ===============================================================

Every table then reconciles with the final grade: when a grade by tests did not pass, the episode keeps
at most ``failed_cap`` (0.3) × the solved-task reward of positive reward, and a ``reconcile`` event
takes back the rest (tests can pass without a fix; see :class:`RewardTable`).

So an episode's return is ``outcome + p × S + penalties``: shaping is a provisional, dense signal
that is kept only in proportion to real progress. Submitting at once, listing files, editing and
reverting, or running any script that does not make a target test pass returns 0 (less
penalties); the oracle returns 1 + its shaping. Grades without target tests (LIVEWEB, Harbor)
count their ``score`` as ``t``.

``"seed000"`` is seed 000's table verbatim: the same step events, never clawed back, and the
outcome ``all_tests_pass`` (+1.0) or ``partial_pass`` (+0.5 × the grade's pass rate over *all*
tests). Kept for comparison: a buggy repository already passes most tests, so doing nothing earns
≈ 0.5 and farming shaping on top comes close to the oracle (see docs/rewards.md) — unless reconciled,
as it is by default (``failed_cap``).

Shaping is capped in both tables. Each positive event kind has a per-episode cap on how many times it
pays (:data:`DEFAULT_CAPS`); past the cap it is still listed, with reward 0 and ``"capped": True``.
A command identical to one already run earns no ``valid_command``/``command_success`` again. The
largest total shaping one episode can earn, :meth:`RewardTable.max_shaping` (0.47 by default), must
stay below the outcome reward; :class:`ProcessReward` refuses a table where it does not. Penalties
are never capped nor clawed back.

Detection is real, not a guess from the command text:

* ``code_modified`` — at reset the wrapper records every *tracked* source file of the workspace
  (one ``find`` in the sandbox: size, mtime, md5). After each command it lists sizes and mtimes
  again (one cheap ``exec``) and hashes only the files whose size or mtime moved, so ``touch`` or
  rewriting the same bytes is not a modification, and neither is going back to a content the file
  already had (write/revert cycles pay once). Files created after reset are not tracked, and
  the task's test files never count (editing tests is not fixing code).
* ``tests_discovered`` — the task's test files are those under ``task.metadata["test_paths"]``
  (workspace-relative files or directories) or, without that key, files that look like tests
  (``test_*.py``, ``*_test.go``, ``tests/…``). The event fires when a command's output names one of
  them (``ls tests``, ``grep -rn``, a test run's report), when a successful command names one
  (``cat tests/test_x.py``), or when the command runs a test runner (``pytest``, ``go test``, … or
  the task's ``task.metadata["test_command"]``).
* ``target_tests`` / ``regressions`` — from the grade: ``target_result`` (``"2/3"``: target tests
  passing) and ``all_result`` (``"230/233"``: required tests passing; the target tests are among
  them), so the failing non-target tests are ``(N - p) - (n - k)``.

The last step's sandbox is gone when the wrapper sees it (the env grades and closes it inside
``step``), so a modification made by the very last command is not detected; its outcome event is.
An episode ended from outside (a trainer's token budget) ends the one way every episode ends: the
driver steps ``env.step(Truncate(reason))`` (:class:`termgym.env.Truncate`), a last step this
wrapper settles (outcome and clawback) like any other.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium as gym

if TYPE_CHECKING:
    from termgym.sandbox.base import Sandbox
    from termgym.tasks.base import Task

#: Seed 000's process-reward table, verbatim. ``partial_pass`` is multiplied by the pass rate.
SEED000_TABLE: Mapping[str, float] = MappingProxyType({
    "valid_command": 0.01,
    "command_success": 0.02,
    "code_modified": 0.03,
    "tests_discovered": 0.02,
    "invalid_format": -0.05,
    "timeout": -0.02,
    "all_tests_pass": 1.0,
    "partial_pass": 0.5,
})

#: Weights of the progress outcome: credit per share of target tests, penalty per share of regressions.
PROGRESS_WEIGHTS: Mapping[str, float] = MappingProxyType({"target_tests": 1.0, "regressions": 1.0})

#: Events decided per step (shaping) and on the final step (outcome).
STEP_EVENTS = ("valid_command", "command_success", "code_modified", "tests_discovered", "invalid_format", "timeout")
OUTCOME_EVENTS = ("all_tests_pass", "partial_pass", "target_tests", "regressions")
#: Reported on the final step of a settling table; its amount is computed, not weighted.
CLAWBACK = "clawback"
#: Reported on the final step of a failed, test-graded episode whose return went past the table's
#: ``failed_cap``: the excess is taken back (computed, not weighted).
RECONCILE = "reconcile"
#: The default ``failed_cap``: what an episode whose final grade failed may keep, as a share of the
#: reward for solving the task. Below half, so no non-fix earns half of what a fix earns.
DEFAULT_FAILED_CAP = 0.3
EVENTS = STEP_EVENTS + OUTCOME_EVENTS
#: How the outcome is computed: ``progress`` (target tests minus regressions) or ``pass_rate`` (seed 000).
SCORINGS = ("progress", "pass_rate")

#: How many times per episode each shaping event pays; ``None`` means unlimited (penalties).
DEFAULT_CAPS: Mapping[str, int | None] = MappingProxyType({
    "valid_command": 10,
    "command_success": 10,
    "code_modified": 5,
    "tests_discovered": 1,
    "invalid_format": None,
    "timeout": None,
})

#: Task metadata keys the wrapper reads (suites set them; see docs/rewards.md).
TEST_PATHS_KEY = "test_paths"
TEST_COMMAND_KEY = "test_command"

#: File name patterns that count as source code (``find -name`` globs).
DEFAULT_SOURCE_PATTERNS = (
    "*.py", "*.pyi", "*.pyx", "*.c", "*.h", "*.cc", "*.cpp", "*.cxx", "*.hpp", "*.go", "*.rs", "*.js", "*.mjs",
    "*.cjs", "*.jsx", "*.ts", "*.tsx", "*.java", "*.kt", "*.scala", "*.rb", "*.php", "*.sh", "*.bash", "*.cs",
    "*.swift", "*.lua", "*.pl", "*.r", "*.R", "*.sql", "*.toml", "*.cfg", "*.ini", "*.yaml", "*.yml",
)
#: Directories never looked into (caches, VCS metadata, environments, build output).
DEFAULT_IGNORED_DIRS = (
    ".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox", ".nox",
    ".venv", "venv", "node_modules", "build", "dist", "target", "*.egg-info",
)

_TEST_RUNNER = re.compile(
    r"(?<![\w.-])(?:pytest|py\.test|nosetests|tox|nox|jest|mocha|vitest|ctest|phpunit|rspec)(?![\w.-])"
    r"|python[\d.]*\s+(?:-\w+\s+)*-m\s+(?:pytest|unittest|nose)\b"
    r"|\b(?:npm|yarn|pnpm)\s+(?:run\s+)?test\b|\bgo\s+test\b|\bcargo\s+test\b|\bmake\s+(?:test|check)\b"
    r"|\bmvn\s+test\b|\bgradlew?\s+test\b"
)
_TEST_FILE = re.compile(
    r"^(?:test_[\w.-]*\.py|[\w.-]+_test\.(?:py|go)|[\w.-]+\.(?:test|spec)\.[cm]?[jt]sx?|Test\w*\.java|\w+Test\.java)$"
)
_TEST_DIRS = {"test", "tests", "testing", "__tests__", "spec", "specs"}
_MD5_LINE = re.compile(r"^\\?([0-9a-f]{32})  (.*)$")
#: What GNU find (LC_ALL=C) says about a directory it may not read.
_UNREADABLE = re.compile(r"^find: '(.*)': Permission denied$", re.M)
#: Reported (reward 0) on a step whose workspace snapshot could not read some directories.
SNAPSHOT_UNREADABLE = "snapshot_unreadable"
_FRACTION = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class Progress:
    """What a final grade says about progress: shares of target tests passing and of regressions."""

    target: float
    regressions: float
    target_result: str | None = None
    regressed: int = 0
    how: str = "tests"


def _fraction(value: Any, key: str) -> tuple[int, int] | None:
    if value is None:
        return None
    match = _FRACTION.fullmatch(value) if isinstance(value, str) else None
    if match is None or int(match.group(1)) > int(match.group(2)):
        raise ValueError(f"grade {key} must look like 'passed/total', got {value!r}")
    return int(match.group(1)), int(match.group(2))


def progress_of(grade: Mapping[str, Any]) -> Progress:
    """The progress a final grade records (see the module docstring).

    With ``target_result`` (``"k/n"``) and ``all_result`` (``"p/N"``, the target tests among the
    ``N``): ``target = k/n`` and ``regressions = ((N-p) - (n-k)) / (N-n)``. Without target tests
    (suites graded by a score), ``target`` is the grade's ``score`` and there are no regressions.
    """
    target = _fraction(grade.get("target_result"), "target_result")
    if target is None:
        passed = grade.get("all_passed", grade.get("passed")) is True
        score = grade.get("score", 0.0)
        try:
            score = float(score)
        except (TypeError, ValueError):
            raise ValueError(f"grade score must be a number, got {score!r}") from None
        return Progress(1.0 if passed else min(max(score, 0.0), 1.0), 0.0, how="score")
    k, n = target
    everything = _fraction(grade.get("all_result"), "all_result") or (k, n)
    p, total = everything
    others = total - n
    regressed = max(0, (total - p) - (n - k)) if others > 0 else 0
    return Progress(k / n if n else 0.0, regressed / others if others > 0 else 0.0, f"{k}/{n}", regressed)


@dataclass(frozen=True)
class RewardTable:
    """Reward weights per event, per-episode caps and how the outcome settles: the table as data.

    ``weights`` maps names in :data:`EVENTS` to a reward (``partial_pass`` is multiplied by the
    pass rate, ``target_tests``/``regressions`` by their shares); ``caps`` maps shaping events to how
    many times per episode they pay (``None``: always). ``scoring`` is ``"progress"`` (target tests
    minus regressions, floored at 0) or ``"pass_rate"`` (seed 000: all tests pass, else 0.5 × the
    pass rate). ``settle`` claws back, on the final step, the positive shaping not matched by
    progress. ``repeat_commands_pay`` lets a command identical to an earlier one earn
    ``valid_command``/``command_success`` again (off by default: repeating is how shaping is farmed).

    ``failed_cap`` reconciles what tests passing paid with the final grade: when a grade that
    reports tests (``target_result``/``all_result``) did not pass, the episode keeps at most
    ``failed_cap`` × :meth:`max_outcome` of positive reward (outcome and shaping together); the
    rest is taken back by a ``reconcile`` event. Target tests can pass without a fix (an
    always-equal return value, a wrapper that swallows exceptions): only the final grade says
    the bug is fixed. ``None`` turns the reconciliation off (:class:`ProcessReward` then refuses
    the table unless ``allow_farmable=True``).
    """

    weights: Mapping[str, float] = field(default_factory=dict)
    caps: Mapping[str, int | None] = field(default_factory=lambda: dict(DEFAULT_CAPS))
    repeat_commands_pay: bool = False
    scoring: str = "progress"
    settle: bool = True
    failed_cap: float | None = DEFAULT_FAILED_CAP

    def __post_init__(self) -> None:
        weights = {**SEED000_TABLE, **PROGRESS_WEIGHTS, **dict(self.weights)}
        caps = {**DEFAULT_CAPS, **dict(self.caps)}
        unknown = sorted(set(weights) - set(EVENTS))
        if unknown:
            raise ValueError(f"unknown reward event(s) {unknown} in weights; events are: {', '.join(EVENTS)}")
        unknown = sorted(set(caps) - set(STEP_EVENTS))
        if unknown:
            raise ValueError(f"unknown reward event(s) {unknown} in caps; capped events are: {', '.join(STEP_EVENTS)}")
        for name, value in weights.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise TypeError(f"reward weight {name!r} must be a number, got {value!r}")
        for name, cap in caps.items():
            if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 0):
                raise ValueError(f"cap for {name!r} must be a non-negative integer or None, got {cap!r}")
        if self.scoring not in SCORINGS:
            raise ValueError(f"reward table scoring must be one of {', '.join(SCORINGS)}, got {self.scoring!r}")
        cap = self.failed_cap
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float)) or not 0 <= cap <= 1):
            raise ValueError(f"reward table failed_cap must be a share between 0 and 1 of the solved-task reward, "
                             f"or None (no reconciliation); got {cap!r}")
        if self.scoring == "progress" and (weights["target_tests"] <= 0 or weights["regressions"] < 0):
            raise ValueError("a progress table needs target_tests > 0 and regressions >= 0 "
                             f"(got {weights['target_tests']} and {weights['regressions']})")
        object.__setattr__(self, "weights", MappingProxyType({k: float(v) for k, v in weights.items()}))
        object.__setattr__(self, "caps", MappingProxyType(caps))

    @classmethod
    def named(cls, name: str) -> RewardTable:
        """A shipped table by name: ``"progress"`` (default) or ``"seed000"``."""
        try:
            return TABLES[name]
        except KeyError:
            raise ValueError(f"unknown reward table {name!r}; tables: {', '.join(TABLES)}") from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RewardTable:
        """A table from ``{"weights", "caps", "repeat_commands_pay", "scoring", "settle", "failed_cap"}``
        (all optional).

        ``"base": "seed000"`` starts from a named table instead of the default.
        """
        keys = {"weights", "caps", "repeat_commands_pay", "scoring", "settle", "failed_cap", "base"}
        unknown = sorted(set(data) - keys)
        if unknown:
            raise ValueError(f"unknown reward table key(s) {unknown}; expected {', '.join(sorted(keys))}")
        base = cls.named(str(data.get("base", "progress")))
        return cls(weights={**base.weights, **dict(data.get("weights") or {})},
                   caps={**base.caps, **dict(data.get("caps") or {})},
                   repeat_commands_pay=bool(data.get("repeat_commands_pay", base.repeat_commands_pay)),
                   scoring=str(data.get("scoring", base.scoring)), settle=bool(data.get("settle", base.settle)),
                   failed_cap=data.get("failed_cap", base.failed_cap))

    def to_dict(self) -> dict[str, Any]:
        return {"weights": dict(self.weights), "caps": dict(self.caps), "repeat_commands_pay": self.repeat_commands_pay,
                "scoring": self.scoring, "settle": self.settle, "failed_cap": self.failed_cap}

    def max_shaping(self) -> float:
        """The most shaping reward one episode can earn (``inf`` if a positive event is uncapped)."""
        total = 0.0
        for name in STEP_EVENTS:
            weight = self.weights[name]
            if weight <= 0:
                continue
            cap = self.caps.get(name)
            if cap is None:
                return float("inf")
            total += weight * cap
        return total

    def reconciles(self, grade: Mapping[str, Any]) -> bool:
        """Whether ``grade`` is a failed grade by tests, so the ``failed_cap`` applies to the episode."""
        if self.failed_cap is None or not ("target_result" in grade or "all_result" in grade):
            return False
        return grade.get("all_passed", grade.get("passed")) is not True

    def max_outcome(self) -> float:
        """The outcome reward of a fully solved task."""
        return self.weights["target_tests"] if self.scoring == "progress" else self.weights["all_tests_pass"]

    def outcome_events(self, grade: Mapping[str, Any]) -> tuple[list[dict[str, Any]], float]:
        """The final events of ``grade`` and the share ``p`` (0..1) of positive shaping they let the agent keep."""
        if self.scoring == "pass_rate":
            name, rate, reward = self.pass_rate_outcome(grade)
            return [{"event": name, "reward": reward, "pass_rate": rate}], 1.0 if name == "all_tests_pass" else rate
        progress = progress_of(grade)
        credit = self.weights["target_tests"] * progress.target
        # Regressions can take back at most the credit: failing at a fix never scores below doing nothing.
        penalty = min(self.weights["regressions"] * progress.regressions, credit)
        events = [{"event": "target_tests", "reward": credit, "share": progress.target, "how": progress.how}]
        if progress.target_result is not None:
            events[0]["target_result"] = progress.target_result
            events.append({"event": "regressions", "reward": -penalty, "share": progress.regressions,
                           "failing": progress.regressed})
        return events, (credit - penalty) / self.weights["target_tests"]

    def outcome(self, grade: Mapping[str, Any]) -> tuple[str, float, float]:
        """``(event, share, reward)`` summing up the outcome of ``grade``.

        Seed 000's scoring: ``("all_tests_pass", 1.0, 1.0)`` or ``("partial_pass", pass_rate, 0.5 × pass_rate)``.
        Progress scoring: ``("target_tests", p, net outcome reward)`` with ``p`` the kept share of shaping.
        """
        if self.scoring == "pass_rate":
            return self.pass_rate_outcome(grade)
        events, kept = self.outcome_events(grade)
        return "target_tests", kept, sum(e["reward"] for e in events)

    def pass_rate_outcome(self, grade: Mapping[str, Any]) -> tuple[str, float, float]:
        """Seed 000's outcome ``(event, pass_rate, reward)`` (see :func:`pass_rate_of`)."""
        all_passed = grade.get("all_passed", grade.get("passed"))
        if all_passed is True:
            return "all_tests_pass", 1.0, self.weights["all_tests_pass"]
        rate = pass_rate_of(grade)
        return "partial_pass", rate, self.weights["partial_pass"] * rate


#: The default: pays for progress on the target tests, claws back shaping not matched by progress.
PROGRESS_TABLE = RewardTable()
#: Seed 000's table with its caps: outcome from the pass rate over all tests, shaping never clawed back.
SEED000 = RewardTable(weights=dict(SEED000_TABLE), scoring="pass_rate", settle=False)
TABLES: Mapping[str, RewardTable] = MappingProxyType({"progress": PROGRESS_TABLE, "seed000": SEED000})
DEFAULT_TABLE = PROGRESS_TABLE


def pass_rate_of(grade: Mapping[str, Any]) -> float:
    """The fraction of tests passing according to a grade dict (seed 000's ``partial_pass``).

    ``pass_rate`` when the grade has it; else ``all_result`` parsed as ``"passed/total"``; else the
    grade's ``score`` (for suites without tests, the score is the closest thing to a pass rate).
    """
    rate = grade.get("pass_rate")
    if rate is None and isinstance(grade.get("all_result"), str):
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", grade["all_result"])
        if match and int(match.group(2)) > 0:
            rate = int(match.group(1)) / int(match.group(2))
    if rate is None:
        rate = grade.get("score", 0.0)
    try:
        rate = float(rate)
    except (TypeError, ValueError):
        raise ValueError(f"grade pass_rate must be a number, got {rate!r}") from None
    return min(max(rate, 0.0), 1.0)


# -- workspace snapshots ----------------------------------------------------------------------------


@dataclass
class FileState:
    """What the wrapper knows about one tracked file."""

    size: int
    mtime: str
    md5: str | None = None


def _find_filter(patterns: tuple[str, ...], ignored_dirs: tuple[str, ...]) -> str:
    prune = " -o ".join(f"-name {shlex.quote(d)}" for d in ignored_dirs)
    match = " -o ".join(f"-name {shlex.quote(p)}" for p in patterns)
    return f"\\( {prune} \\) -prune -o -type f \\( {match} \\)"


def _isolated(argv: str) -> str:
    """Run a command with a clean environment, bypassing the agent's aliases and shell functions.

    ``env`` execs the tool directly (no extra shell), so a snapshot costs one process start.
    """
    return f"command env -i PATH=/usr/local/bin:/usr/bin:/bin LC_ALL=C {argv}"


class WorkspaceSnapshot:
    """Tracks the source files of a sandbox workspace between steps (see the module docstring)."""

    def __init__(self, sandbox: Sandbox, workdir: str, patterns: tuple[str, ...] = DEFAULT_SOURCE_PATTERNS,
                 ignored_dirs: tuple[str, ...] = DEFAULT_IGNORED_DIRS, timeout: float = 30.0) -> None:
        self.sandbox = sandbox
        self.root = workdir.rstrip("/") or "/"
        self.filter = _find_filter(patterns, ignored_dirs)
        self.timeout = timeout
        self.files: dict[str, FileState] = {}
        #: Workspace-relative directories the last listing could not read (``chmod 000`` by the agent:
        #: root in a sandbox has no ``CAP_DAC_OVERRIDE``). Files under them keep their last known state.
        self.unreadable: list[str] = []

    def start(self) -> None:
        """Record every source file with its size, mtime and hash (one ``exec``)."""
        out = self._run(f"find {shlex.quote(self.root)} {self.filter} -printf 'S\\t%s\\t%T@\\t%P\\n' "
                        f"-exec md5sum -- {{}} +", listing=True)
        stats, hashes = self._parse_stats(out), self._parse_md5(out)
        self.files = {path: FileState(size, mtime, hashes.get(path)) for path, (size, mtime) in stats.items()}

    def changed(self) -> list[str]:
        """Tracked files whose content changed (or that vanished) since the last call; updates the state.

        A file under a directory the listing could not read is neither changed nor gone: unknown,
        it keeps its last known state (see :attr:`unreadable`).
        """
        stats = self._parse_stats(self._run(f"find {shlex.quote(self.root)} {self.filter} "
                                            f"-printf 'S\\t%s\\t%T@\\t%P\\n'", listing=True))
        moved = [p for p, state in self.files.items() if p in stats and stats[p] != (state.size, state.mtime)]
        gone = sorted(p for p in self.files if p not in stats and not _under(p, self.unreadable))
        hashes: dict[str, str] = {}
        if moved:
            # A file may vanish between the two calls: md5sum then fails for it, the rest still print.
            paths = " ".join(shlex.quote(self._abs(p)) for p in moved)
            hashes = self._parse_md5(self._run(f"md5sum -- {paths} 2>/dev/null", check=False))
        changed = []
        for path in moved:
            state = self.files[path]
            state.size, state.mtime = stats[path]
            new = hashes.get(path)
            if new != state.md5:
                changed.append(path)
                state.md5 = new
        for path in gone:
            del self.files[path]
        return sorted(changed + gone)

    def _abs(self, path: str) -> str:
        return f"{self.root}/{path}" if self.root != "/" else f"/{path}"

    def _run(self, argv: str, check: bool = True, listing: bool = False) -> str:
        """Run ``argv`` in the sandbox. A ``listing`` (``find``) that could not read some directories
        still counts (exit 1, each one named on its own line): they are kept in :attr:`unreadable`."""
        result = self.sandbox.exec(_isolated(argv), timeout=self.timeout)
        if listing:
            prefix = self.root.rstrip("/") + "/"
            self.unreadable = sorted({m.group(1)[len(prefix):] for m in _UNREADABLE.finditer(result.output)
                                      if m.group(1).startswith(prefix)})
            if result.exit_code == 1 and self.unreadable and not result.timed_out and not result.truncated:
                return result.output
        if result.timed_out or result.truncated or (check and result.exit_code != 0):
            why = "timed out" if result.timed_out else ("output was truncated" if result.truncated
                                                        else f"exit code {result.exit_code}")
            raise RuntimeError(f"workspace snapshot of {self.root} failed ({why}): {result.output[-300:]}")
        return result.output

    @staticmethod
    def _parse_stats(out: str) -> dict[str, tuple[int, str]]:
        stats = {}
        for line in out.splitlines():
            parts = line.split("\t", 3)
            if len(parts) == 4 and parts[0] == "S" and parts[1].isdigit():
                stats[parts[3]] = (int(parts[1]), parts[2])
        return stats

    def _parse_md5(self, out: str) -> dict[str, str]:
        prefix = self.root.rstrip("/") + "/"
        hashes = {}
        for line in out.splitlines():
            match = _MD5_LINE.match(line)
            if match and match.group(2).startswith(prefix):
                hashes[match.group(2)[len(prefix):]] = match.group(1)
        return hashes


def is_test_path(path: str) -> bool:
    """Whether a workspace-relative path looks like a test file (used without ``test_paths`` metadata)."""
    parts = path.split("/")
    return bool(_TEST_FILE.match(parts[-1])) or any(p in _TEST_DIRS for p in parts[:-1])


def _under(path: str, roots: list[str]) -> bool:
    for root in roots:
        root = root.strip("/").removeprefix("./")
        if not root or path == root or path.startswith(root + "/"):
            return True
    return False


def _test_metadata(task: Task | None) -> tuple[list[str] | None, str | None]:
    metadata = getattr(task, "metadata", None) or {}
    paths = metadata.get(TEST_PATHS_KEY)
    if paths is not None:
        if isinstance(paths, str):
            paths = [paths]
        if not isinstance(paths, (list, tuple)) or not all(isinstance(p, str) for p in paths):
            raise TypeError(f"task {getattr(task, 'task_id', '?')!r}: metadata[{TEST_PATHS_KEY!r}] must be a list of "
                            f"workspace-relative paths, got {paths!r}")
        paths = list(paths)
    command = metadata.get(TEST_COMMAND_KEY)
    if command is not None and not isinstance(command, str):
        raise TypeError(f"task {getattr(task, 'task_id', '?')!r}: metadata[{TEST_COMMAND_KEY!r}] must be a string, "
                        f"got {command!r}")
    return paths, command


class TestFinder:
    """Decides whether a command found or ran the task's tests."""

    __test__ = False  # not a pytest class

    def __init__(self, test_files: list[str], all_files: list[str], test_command: str | None) -> None:
        self.test_files = sorted(test_files)
        basenames: dict[str, int] = {}
        for path in all_files:
            name = path.rsplit("/", 1)[-1]
            basenames[name] = basenames.get(name, 0) + 1
        # A test file is recognised by its name when no other file shares it (``tests/__init__.py``
        # must not match every ``__init__.py``), else by its relative path.
        needles = sorted({p.rsplit("/", 1)[-1] if basenames.get(p.rsplit("/", 1)[-1], 0) == 1 else p
                          for p in self.test_files}, key=len, reverse=True)
        self.pattern = (re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, needles)) + r")(?![\w-])")
                        if needles else None)
        self.test_command = " ".join(test_command.split()) if test_command else None

    def check(self, command: str, output: str, exit_code: int) -> dict[str, Any] | None:
        """Evidence that ``command`` found or ran the tests, or ``None``."""
        if exit_code not in (126, 127):  # 126/127: the runner could not be started
            normalized = " ".join(command.split())
            if self.test_command and self.test_command in normalized:
                return {"how": "ran", "evidence": self.test_command}
            runner = _TEST_RUNNER.search(command)
            if runner:
                return {"how": "ran", "evidence": runner.group(0)}
        if self.pattern is not None:
            hit = self.pattern.search(output)
            if hit:
                return {"how": "listed", "evidence": hit.group(0)}
            hit = self.pattern.search(command)
            if hit and exit_code == 0:
                return {"how": "read", "evidence": hit.group(0)}
        return None


# -- the wrapper --------------------------------------------------------------------------------------


class ProcessReward(gym.Wrapper):
    """Replace the env's reward with process rewards (see the module docstring).

    Args:
        env: a termgym env (``gym.make("termgym/...")`` or a :class:`~termgym.env.TerminalEnv`).
        table: a table name (``"progress"``, the default, or ``"seed000"``), a :class:`RewardTable`
            or its dict form; ``weights``/``caps`` override single entries.
        source_patterns / ignored_dirs: what counts as a tracked source file.
        detect_code: set ``False`` to skip the workspace snapshots (no ``code_modified`` events).
        allow_farmable: accept a table whose :meth:`~RewardTable.max_shaping` reaches the outcome reward.

    Each step's ``info`` gains ``reward_events`` (a list of ``{"event", "reward", "count", "capped", ...}``),
    ``env_reward`` (what the env itself returned) and, on the last step, ``process_reward`` with the
    episode's ``shaping`` (kept after any clawback), ``outcome``, ``return`` and per-event ``counts``.
    Snapshot failures are reported in ``info["reward_warnings"]`` and disable ``code_modified`` for
    the rest of the episode. End an episode from outside with ``env.step(Truncate(reason))``.
    The task and sandbox are read through ``get_wrapper_attr``, so any wrappers may sit below.
    """

    def __init__(
        self,
        env: gym.Env,
        table: str | RewardTable | Mapping[str, Any] | None = None,
        *,
        weights: Mapping[str, float] | None = None,
        caps: Mapping[str, int | None] | None = None,
        source_patterns: tuple[str, ...] = DEFAULT_SOURCE_PATTERNS,
        ignored_dirs: tuple[str, ...] = DEFAULT_IGNORED_DIRS,
        detect_code: bool = True,
        snapshot_timeout: float = 30.0,
        allow_farmable: bool = False,
    ) -> None:
        super().__init__(env)
        if table is None:
            table = DEFAULT_TABLE
        elif isinstance(table, str):
            table = RewardTable.named(table)
        elif isinstance(table, Mapping):
            table = RewardTable.from_dict(table)
        elif not isinstance(table, RewardTable):
            raise TypeError(f"table must be a table name ({', '.join(TABLES)}), a RewardTable or a dict, not {table!r}")
        if weights or caps:
            table = RewardTable(weights={**table.weights, **dict(weights or {})},
                                caps={**table.caps, **dict(caps or {})},
                                repeat_commands_pay=table.repeat_commands_pay, scoring=table.scoring,
                                settle=table.settle, failed_cap=table.failed_cap)
        if not allow_farmable and table.max_shaping() >= table.max_outcome():
            raise ValueError(
                f"this reward table can be farmed: its maximum shaping per episode ({table.max_shaping():.3f}) "
                f"reaches the reward for solving the task ({table.max_outcome()}); lower the caps or "
                f"weights, or pass allow_farmable=True")
        if not allow_farmable and (table.failed_cap is None or table.failed_cap >= 0.5):
            raise ValueError(
                f"this reward table pays non-fixes: with failed_cap={table.failed_cap} an episode whose final grade "
                f"failed can keep {'any share' if table.failed_cap is None else f'{table.failed_cap:g}'} of the "
                f"reward for solving the task (tests can pass without a fix); set failed_cap below 0.5 "
                f"(default {DEFAULT_FAILED_CAP}), or pass allow_farmable=True")
        self.table = table
        self.source_patterns = tuple(source_patterns)
        self.ignored_dirs = tuple(ignored_dirs)
        self.detect_code = detect_code
        self.snapshot_timeout = snapshot_timeout
        self._reset_state()

    def _reset_state(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(EVENTS, 0)
        self.shaping = 0.0
        self.positive_shaping = 0.0  # what a settling table may claw back (less what it did)
        self.reconciled = 0.0  # what the failed_cap took back on the final step (<= 0)
        self._commands_seen: set[str] = set()
        self._contents_seen: dict[str, set[str | None]] = {}
        self._snapshot: WorkspaceSnapshot | None = None
        self._finder: TestFinder | None = None
        self._warnings: list[str] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the env and take the workspace snapshot the first step is compared with."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._reset_state()
        task, sandbox = _wrapper_attr(self.env, "task"), _wrapper_attr(self.env, "sandbox")
        test_paths, test_command = _test_metadata(task)
        files: list[str] = []
        if sandbox is not None:
            snapshot = WorkspaceSnapshot(sandbox, sandbox.workdir, self.source_patterns, self.ignored_dirs,
                                         self.snapshot_timeout)
            try:
                snapshot.start()
                files = sorted(snapshot.files)
                self._snapshot = snapshot if self.detect_code else None
            except RuntimeError as exc:
                self._warnings.append(str(exc))
        tests = [p for p in files if _under(p, test_paths)] if test_paths is not None else \
            [p for p in files if is_test_path(p)]
        if self._snapshot is not None:
            for path in tests:  # editing the tests is never "code modified"
                self._snapshot.files.pop(path, None)
            self._contents_seen = {path: {state.md5} for path, state in self._snapshot.files.items()}
        self._finder = TestFinder(tests, files, test_command)
        if self._warnings:
            info["reward_warnings"] = list(self._warnings)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env and replace its reward with this step's events (listed in ``info["reward_events"]``)."""
        obs, env_reward, terminated, truncated, info = self.env.step(action)
        events: list[dict[str, Any]] = []
        warnings: list[str] = []
        submitted = terminated and info.get("end_reason", "submitted") == "submitted"
        act = info.get("action") or {}
        exec_info = info.get("exec")
        if act.get("kind") == "format_error":
            self._event(events, "invalid_format")
        elif act.get("kind") == "command" and exec_info is not None and not info.get("refused") and not submitted:
            command = act.get("command") or ""
            fresh = self.table.repeat_commands_pay or command not in self._commands_seen
            self._commands_seen.add(command)
            exit_code, timed_out = int(exec_info.get("exit_code", 1)), bool(exec_info.get("timed_out"))
            if fresh:
                self._event(events, "valid_command")
                if exit_code == 0 and not timed_out:
                    self._event(events, "command_success")
            if timed_out:
                self._event(events, "timeout")
            tests_cap = self.table.caps["tests_discovered"]
            if self._finder is not None and (tests_cap is None or self.counts["tests_discovered"] < tests_cap):
                evidence = self._finder.check(command, str(exec_info.get("output", "")), exit_code)
                if evidence:
                    self._event(events, "tests_discovered", **evidence)
            if self._snapshot is not None and not (terminated or truncated):
                self._detect_code(events, warnings)
        reward = sum(e["reward"] for e in events)
        self.shaping += reward
        if "grade" in info:
            reward += self._settle(events, info)
        info["reward_events"] = events
        info["env_reward"] = float(env_reward)
        if warnings:
            info["reward_warnings"] = warnings
        return obs, reward, terminated, truncated, info

    def _settle(self, events: list[dict[str, Any]], info: dict[str, Any]) -> float:
        """Append the final events (outcome, clawback) for ``info["grade"]``; returns their reward."""
        outcome_events, kept = self.table.outcome_events(info["grade"])
        reward = 0.0
        for event in outcome_events:
            self.counts[event["event"]] += 1
            events.append({**event, "count": 1, "capped": False})
            reward += event["reward"]
        outcome = reward
        kept_shaping = self.positive_shaping
        if self.table.settle and self.positive_shaping > 0 and kept < 1.0:
            clawback = -self.positive_shaping * (1.0 - max(kept, 0.0))
            events.append({"event": CLAWBACK, "reward": clawback, "count": 1, "capped": False,
                           "kept_share": max(kept, 0.0), "paid": round(self.positive_shaping, 10)})
            reward += clawback
            self.shaping += clawback
            kept_shaping += clawback
        reward += self._reconcile(events, info["grade"], outcome, kept_shaping)
        info["process_reward"] = {"shaping": round(self.shaping, 10), "outcome": outcome,
                                  "return": round(self.shaping + self.reconciled + outcome, 10),
                                  "reconciled": round(self.reconciled, 10),
                                  "counts": {k: v for k, v in self.counts.items() if v}}
        return reward

    def _detect_code(self, events: list[dict[str, Any]], warnings: list[str]) -> None:
        """``code_modified`` for this step's new contents; a snapshot that fails never raises out of
        ``step``: it is reported (and, if it cannot list the workspace at all, switched off)."""
        assert self._snapshot is not None
        try:
            changed = self._snapshot.changed()
        except Exception as exc:  # noqa: BLE001 - whatever the agent did to its workspace, step goes on
            warnings.append(f"{exc}; code_modified is off for the rest of this episode")
            self._snapshot = None
            return
        if self._snapshot.unreadable:
            paths = self._snapshot.unreadable[:20]
            events.append({"event": SNAPSHOT_UNREADABLE, "reward": 0.0, "count": len(self._snapshot.unreadable),
                           "capped": False, "paths": paths})
            warnings.append(f"the workspace snapshot cannot read {', '.join(paths)}: files there count as unchanged")
        novel = self._novel_contents(changed)
        if novel:
            self._event(events, "code_modified", files=novel[:20])

    def _reconcile(self, events: list[dict[str, Any]], grade: Mapping[str, Any], outcome: float,
                   kept_shaping: float) -> float:
        """Take back what a failed, test-graded episode earned beyond the table's ``failed_cap``
        (its positive outcome and the positive shaping left after any clawback; penalties stay)."""
        if not self.table.reconciles(grade):
            return 0.0
        assert self.table.failed_cap is not None
        limit = self.table.failed_cap * self.table.max_outcome()
        kept = max(outcome, 0.0) + max(kept_shaping, 0.0)
        if kept <= limit:
            return 0.0
        self.reconciled = limit - kept
        events.append({"event": RECONCILE, "reward": self.reconciled, "count": 1, "capped": False,
                       "kept": round(kept, 10), "limit": limit})
        return self.reconciled

    def _novel_contents(self, changed: list[str]) -> list[str]:
        """Files among ``changed`` whose content was never seen in this episode (write/revert pays once)."""
        assert self._snapshot is not None
        novel = []
        for path in changed:
            state = self._snapshot.files.get(path)
            content = state.md5 if state is not None else None  # None: the file is gone
            seen = self._contents_seen.setdefault(path, set())
            if content not in seen:
                seen.add(content)
                novel.append(path)
        return novel

    def _event(self, events: list[dict[str, Any]], name: str, **detail: Any) -> None:
        self.counts[name] += 1
        cap = self.table.caps.get(name)
        capped = cap is not None and self.counts[name] > cap
        reward = 0.0 if capped else self.table.weights[name]
        if reward > 0:
            self.positive_shaping += reward
        events.append({"event": name, "reward": reward, "count": self.counts[name], "capped": capped, **detail})


def _wrapper_attr(env: gym.Env, name: str) -> Any:
    """``env.get_wrapper_attr(name)``, or ``None`` where no env of the stack has it."""
    try:
        return env.get_wrapper_attr(name)
    except AttributeError:
        return None


__all__ = [
    "DEFAULT_CAPS",
    "DEFAULT_FAILED_CAP",
    "DEFAULT_TABLE",
    "EVENTS",
    "PROGRESS_TABLE",
    "RECONCILE",
    "SEED000",
    "SEED000_TABLE",
    "SNAPSHOT_UNREADABLE",
    "TABLES",
    "ProcessReward",
    "Progress",
    "RewardTable",
    "TestFinder",
    "WorkspaceSnapshot",
    "is_test_path",
    "pass_rate_of",
    "progress_of",
]
