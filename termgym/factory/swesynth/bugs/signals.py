"""What makes a task easy, measured per task, and the difficulty tier derived from it.

The signals are pure functions of the bug patch, the failing tests, the text the failing run
printed (pytest's failure reports: the junit messages or the terminal output) and the repository's
module layout. The generator runs the tests; this module only reads what they printed.

=========================  ===============================================================
signal                     meaning
=========================  ===============================================================
traceback_shows_line       a failing test's report points at a changed line (``file:line``
                           of a frame) or prints a changed line's source text
test_file_names_module     a failing test file's name contains the buggy module's stem
                           (``tests/test_money.py`` for ``ledgerly/money.py``)
tokens_changed             tokens that differ between the buggy and the fixed lines
files_touched              files the bug patch changes
edits                      separate changed blocks in the patch (a coordinated bug has 2-3)
cross_module               no failing test file imports a buggy module directly (following
                           ``__init__`` re-exports): the test exercises it through another one
=========================  ===============================================================

:func:`difficulty_tier` turns them into ``easy``/``medium``/``hard`` with :data:`TIER_POINTS`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from termgym.factory.swesynth.bugs.callgraph import ModuleMap, module_stem
from termgym.factory.swesynth.patches import patch_files

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
#: Frame locations as pytest prints them (``path.py:12: in func`` / ``path.py:12: AssertionError``)
#: and as Python's own tracebacks do (``File "path.py", line 12, in func``).
_PYTEST_LOCATION = re.compile(r"^\s*(?P<path>[^\s:\"'][^:\n\"']*?\.py):(?P<line>\d+):", re.M)
_PYTHON_LOCATION = re.compile(r"File \"(?P<path>[^\"\n]+?\.py)\", line (?P<line>\d+)")
_TOKEN = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|[A-Za-z_]\w*|\d+(?:\.\d+)?"
                    r"|\*\*|//|==|!=|<=|>=|->|\S")
#: A changed line counts as shown by its text alone only when it is this distinctive.
_MIN_SHOWN_CHARS = 8


class SignalError(ValueError):
    """The inputs of :func:`task_signals` are not what it needs (named in the message)."""


# -- reading the bug patch ---------------------------------------------------------------------


def changed_locations(bug_patch: str) -> dict[str, list[tuple[int, str]]]:
    """Per file, the lines of the *buggy* tree the patch changed: ``[(line number, text)]``.

    A block that only deletes lines is located at the line that now follows the gap (where the
    removed code was), with empty text.
    """
    out: dict[str, list[tuple[int, str]]] = {}
    path: str | None = None
    new_line = 0
    pending_delete = False
    for raw in bug_patch.splitlines():
        if raw.startswith("+++ "):
            path = raw[6:] if raw.startswith("+++ b/") else raw[4:]
            out.setdefault(path, [])
            continue
        if raw.startswith("--- ") or raw.startswith("diff --git"):
            continue
        m = _HUNK.match(raw)
        if m:
            new_line = int(m.group(3))
            pending_delete = False
            continue
        if path is None or raw.startswith("\\"):
            continue
        if raw.startswith("+"):
            out[path].append((new_line, raw[1:]))
            new_line += 1
            pending_delete = False
        elif raw.startswith("-"):
            pending_delete = True
        else:
            if pending_delete:
                out[path].append((new_line, ""))
                pending_delete = False
            new_line += 1
    if pending_delete and path is not None:
        out[path].append((new_line, ""))
    return out


def count_edits(bug_patch: str) -> int:
    """Separate changed blocks: maximal runs of removed/added lines, across all hunks and files."""
    edits, inside = 0, False
    for raw in bug_patch.splitlines():
        changed = (raw.startswith("+") and not raw.startswith("+++ ")) or \
                  (raw.startswith("-") and not raw.startswith("--- "))
        if changed and not inside:
            edits += 1
        inside = changed
    return edits


def count_changed_tokens(bug_patch: str) -> int:
    """Tokens not kept between each block's removed and added lines (the larger side counts).

    A string literal is one token; two swapped names count 2 (one of them kept in order).
    """
    total = 0
    removed: list[str] = []
    added: list[str] = []

    def flush() -> int:
        a = _TOKEN.findall("\n".join(removed))
        b = _TOKEN.findall("\n".join(added))
        removed.clear()
        added.clear()
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
        kept = sum(block.size for block in matcher.get_matching_blocks())
        return max(len(a), len(b)) - kept

    for raw in bug_patch.splitlines():
        if raw.startswith("-") and not raw.startswith("--- "):
            removed.append(raw[1:])
        elif raw.startswith("+") and not raw.startswith("+++ "):
            added.append(raw[1:])
        elif removed or added:
            total += flush()
    if removed or added:
        total += flush()
    return total


# -- reading the failure reports ---------------------------------------------------------------


def traceback_locations(text: str) -> list[tuple[str, int]]:
    """Every ``(path, line)`` frame location in pytest or Python traceback text, in order."""
    out = [(m.group("path").strip(), int(m.group("line"))) for m in _PYTEST_LOCATION.finditer(text)]
    out += [(m.group("path"), int(m.group("line"))) for m in _PYTHON_LOCATION.finditer(text)]
    return out


def traceback_source_lines(text: str) -> set[str]:
    """Source lines a failure report prints (pytest's listing, ``>`` marks the failing line)."""
    out = set()
    for line in text.splitlines():
        if line.startswith("E ") or _PYTEST_LOCATION.match(line) or _PYTHON_LOCATION.search(line):
            continue
        stripped = line.lstrip(">").strip()
        if stripped:
            out.add(stripped)
    return out


def _same_file(shown: str, repo_path: str) -> bool:
    shown = shown.replace("\\", "/")
    return shown == repo_path or shown.endswith("/" + repo_path) or repo_path.endswith("/" + shown)


def shows_changed_line(bug_patch: str, failure_text: str) -> bool:
    """True when the failure text points at a changed line (frame location) or prints its source."""
    locations = traceback_locations(failure_text)
    printed = traceback_source_lines(failure_text)
    for path, lines in changed_locations(bug_patch).items():
        wanted = {n for n, _ in lines}
        if any(n in wanted and _same_file(p, path) for p, n in locations):
            return True
        if any(len(t.strip()) >= _MIN_SHOWN_CHARS and t.strip() in printed for _, t in lines):
            return True
    return False


# -- the signals -------------------------------------------------------------------------------


def _test_file(test_id: str) -> str:
    return test_id.split("::", 1)[0]


def _failure_text(failure: str | Mapping[str, str], failing_tests: Sequence[str]) -> str:
    if isinstance(failure, str):
        return failure
    missing = [t for t in failing_tests if t not in failure]
    if missing and len(missing) == len(failing_tests):
        raise SignalError(f"no failure report for any failing test (first: {failing_tests[0]!r}); "
                          f"reports are keyed by: {', '.join(sorted(failure)[:3]) or '(none)'}")
    return "\n".join(failure.get(t, "") for t in failing_tests)


def names_module(test_files: Iterable[str], buggy_files: Iterable[str]) -> bool:
    """True when a test file's name contains a buggy module's stem (``test_money.py`` / ``money.py``)."""
    stems = [module_stem(p).lower() for p in buggy_files]
    return any(stem and stem in Path(t).name.lower() for t in test_files for stem in stems)


def task_signals(bug_patch: str, failing_tests: Sequence[str], failure: str | Mapping[str, str], *,
                 repo: str | Path | None = None, modules: ModuleMap | None = None,
                 test_texts: Mapping[str, str] | None = None) -> dict:
    """The difficulty signals of one task (see the module docstring for their meaning).

    ``failing_tests`` are the ids (``tests/test_x.py::test_y``) that the bug makes fail;
    ``failure`` their failure reports: a mapping test id -> report (junit messages, as
    :class:`~termgym.factory.swesynth.validate.RunResult.messages` holds) or the run's whole output.
    ``repo`` (the clean repository) or ``modules`` plus ``test_texts`` (test file -> source) let
    ``cross_module`` see what the failing test files import; without them it is ``None``.
    """
    if not bug_patch.strip() or not patch_files(bug_patch):
        raise SignalError("the bug patch is empty or not a unified diff (no '+++ b/<path>' line)")
    if not failing_tests:
        raise SignalError("no failing tests: the signals describe how a task's failures point at its bug")
    buggy = patch_files(bug_patch)
    test_files = sorted({_test_file(t) for t in failing_tests})
    text = _failure_text(failure, failing_tests)
    cross: bool | None = None
    if modules is None and repo is not None:
        if not Path(repo).is_dir():
            raise SignalError(f"repository {str(repo)!r} is not a directory")
        modules = ModuleMap.of_directory(repo)
    if modules is not None:
        imported: set[str] = set()
        for tf in test_files:
            if test_texts is not None and tf in test_texts:
                source = test_texts[tf]
            elif repo is not None and (Path(repo) / tf).is_file():
                source = (Path(repo) / tf).read_text(encoding="utf-8", errors="replace")
            else:
                raise SignalError(f"cannot read failing test file {tf!r} (pass repo= or test_texts=)")
            try:
                imported |= modules.imports_of(tf, source)
            except SyntaxError as exc:
                raise SignalError(f"failing test file {tf} does not parse (line {exc.lineno})") from None
        cross = not (imported & set(buggy))
    return {
        "traceback_shows_line": shows_changed_line(bug_patch, text),
        "test_file_names_module": names_module(test_files, buggy),
        "tokens_changed": count_changed_tokens(bug_patch),
        "files_touched": len(buggy),
        "edits": count_edits(bug_patch),
        "cross_module": cross,
        "failing_tests": len(failing_tests),
    }


# -- tiers -------------------------------------------------------------------------------------

#: Points a signal adds to a task's difficulty. The two that hand the agent the location weigh
#: most: a traceback at the changed line, or a test file named after the module to open.
TIER_POINTS: dict[str, int] = {
    "traceback_hides_line": 2,     # traceback_shows_line is False
    "test_file_hides_module": 1,   # test_file_names_module is False
    "cross_module": 1,             # cross_module is True
    "several_edits": 2,            # edits >= 2
    "several_files": 1,            # files_touched >= 2
    "many_tokens": 1,              # tokens_changed >= MANY_TOKENS
}
MANY_TOKENS = 6
#: ``easy``: at most EASY_MAX points; ``hard``: at least HARD_MIN; ``medium`` in between.
EASY_MAX = 1
HARD_MIN = 4
TIERS = ("easy", "medium", "hard")


def difficulty_points(signals: Mapping) -> int:
    """The sum of :data:`TIER_POINTS` that apply to ``signals`` (a :func:`task_signals` dict)."""
    required = ("traceback_shows_line", "test_file_names_module", "tokens_changed", "files_touched", "edits")
    missing = [k for k in required if k not in signals]
    if missing:
        raise SignalError(f"signals lack {', '.join(missing)} (make them with task_signals)")
    points = 0
    points += TIER_POINTS["traceback_hides_line"] * (not signals["traceback_shows_line"])
    points += TIER_POINTS["test_file_hides_module"] * (not signals["test_file_names_module"])
    points += TIER_POINTS["cross_module"] * bool(signals.get("cross_module"))
    points += TIER_POINTS["several_edits"] * (signals["edits"] >= 2)
    points += TIER_POINTS["several_files"] * (signals["files_touched"] >= 2)
    points += TIER_POINTS["many_tokens"] * (signals["tokens_changed"] >= MANY_TOKENS)
    return points


def difficulty_tier(signals: Mapping) -> str:
    """``easy`` (<= 1 point), ``medium`` (2-3) or ``hard`` (>= 4), from :func:`difficulty_points`.

    A one-token bug whose traceback lands on it in ``test_<module>.py`` scores 0 (easy); the same
    bug reached through another module's test with the traceback elsewhere scores 4 (hard); a
    coordinated two-edit bug scores at least 2 (medium).
    """
    points = difficulty_points(signals)
    if points <= EASY_MAX:
        return "easy"
    return "hard" if points >= HARD_MIN else "medium"
