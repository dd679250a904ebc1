"""Fast grades: the required tests a patch can change, from the clean tree's per-test coverage.

A grade needs every required test to pass. A required test whose run on the clean tree never enters
a function that the bug or the agent's patch changes runs exactly as it does on the clean tree
(where it passed, twice, at generation), so only the others need to run:

* **the task's selection** (stored at backfill or generation): the tests the bug broke (its
  ``target_tests``) plus every required test that executes a function the bug changes;
* **the patch's selection** (at grading): every required test that executes a function the agent's
  diff changes, found by mapping each hunk to its innermost enclosing function on the buggy tree;
* **tests that start processes** (coverage cannot follow code into a child process): always run.

Anything the map cannot vouch for falls back to the full required set: a changed line outside every
function body (module level, class bodies, ``def`` lines, decorators and defaults run at import), a
function whose body runs at import, a new, deleted, renamed or binary file, a file the map has never
seen. The map is per project (``<suite>/selection/<project>.json``, written by :func:`backfill` from
one traced run of the clean suite in the task runtime)::

    {"version", "project", "tree_hash", "tests": <the baseline's required ids, in order>,
     "always": "<ranges>", "functions": {file: {qualname: [runs_at_import, "<ranges>"]}},
     "tasks": {task_id: "<ranges>" or "full"}}

``<ranges>`` are indices into ``tests`` written as ``"0-3,7,9-12"``.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from termgym.tasks.swesynth import pyparse

SELECTION_VERSION = 1
#: How the required tests of a grade are chosen: the selection (default) or every required test.
GRADE_TESTS = ("selected", "full")
#: A selected command longer than this runs the full set instead (one shell argument stays < 128 KiB).
MAX_COMMAND_BYTES = 100_000


#: pytest options that take a value (the next token is not a test path).
_VALUE_OPTIONS = {"-p", "-k", "-m", "-c", "-o", "-W", "--rootdir", "--deselect", "--ignore", "--ignore-glob",
                  "--confcutdir", "--basetemp", "--override-ini", "--junitxml", "--junit-xml", "--maxfail",
                  "--tb", "-r", "--import-mode", "--durations", "--log-level", "--cov", "--timeout"}


def select_command(test_command: str, tree: Path, node_ids: Sequence[str] | None) -> str:
    """``test_command`` running only ``node_ids``: its test-path arguments replaced by the ids.

    ``None`` keeps the command as it is (the full suite). Path arguments are the tokens after the
    ``pytest`` word that name an existing file or directory of the tree and are not an option's value.
    """
    if node_ids is None:
        return test_command
    tokens = shlex.split(test_command)
    try:
        start = next(i for i, t in enumerate(tokens) if t == "pytest" or t.endswith("/pytest")
                     or t == "py.test") + 1
    except StopIteration:
        raise ValueError(f"the test command {test_command!r} does not run pytest; screening needs a pytest "
                         "command (python3 -m pytest ...)") from None
    kept = tokens[:start]
    for i in range(start, len(tokens)):
        token, before = tokens[i], tokens[i - 1]
        is_value = before in _VALUE_OPTIONS
        if not token.startswith("-") and not is_value and (tree / token.split("::", 1)[0]).exists():
            continue
        kept.append(token)
    return " ".join(shlex.quote(t) for t in kept + list(node_ids))


class SelectionError(ValueError):
    """A selection file is malformed or does not belong to the suite's tests (the message says which)."""


def encode_ranges(indices: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 7]`` -> ``"0-3,7"``."""
    values = sorted(set(indices))
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(parts)


def decode_ranges(text: str, limit: int | None = None, where: str = "selection") -> list[int]:
    """``"0-3,7"`` -> ``[0, 1, 2, 3, 7]``; ``limit`` bounds every index (exclusive)."""
    out: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise SelectionError(f"{where}: {part!r} is not an index or a range of indices")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo or (limit is not None and hi >= limit):
            raise SelectionError(f"{where}: {part!r} is out of range (0..{(limit or 1) - 1})")
        out.extend(range(lo, hi + 1))
    return out


def function_spans(text: str) -> list[tuple[str, int, int]]:
    """``(qualname, first body line, last line)`` of every function of a module, outermost first.

    The body starts at the first statement (or its decorators); the ``def`` line, the signature's
    defaults and the function's own decorators lie outside it (they run where the ``def`` runs)."""
    tree = pyparse.parse(text)
    spans: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                first = child.body[0]
                start = min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", []))])
                spans.append((name, start, child.end_lineno or first.lineno))
                visit(child, f"{name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return spans


def innermost(spans: Sequence[tuple[str, int, int]], line: int) -> list[str]:
    """The functions whose body holds ``line``, innermost first."""
    hits = [(last - first, name) for name, first, last in spans if first <= line <= last]
    return [name for _, name in sorted(hits)]


Hunk = tuple[int, list[str]]  # (first old line, the hunk's body lines with their ' ', '-', '+' prefix)


def parse_patch(patch: str) -> tuple[dict[str, list[Hunk]], str | None]:
    """The hunks of a unified git diff per file: ``(file -> hunks, reason)``; ``reason`` is set when a
    change cannot be mapped onto an existing file (a new, deleted, renamed or binary file)."""
    files: dict[str, list[Hunk]] = {}
    current: str | None = None
    body: list[str] | None = None
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            m = re.match(r"diff --git a/(.+) b/(.+)$", line)
            current, body = (m.group(1) if m else None), None
            if current is None or (m and m.group(1) != m.group(2)):
                return files, f"{line[11:]}: a renamed file or an unreadable header"
            files.setdefault(current, [])
            continue
        m = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", line)
        if m and current is not None:
            start = int(m.group(1)) + (1 if m.group(2) == "0" else 0)  # "-N,0": insert after line N
            body = []
            files[current].append((start, body))
            continue
        if body is None:
            if line.startswith(("new file mode", "deleted file mode", "rename from", "copy from",
                                "GIT binary patch", "Binary files")):
                return files, f"{current}: a new, deleted, renamed or binary file"
            continue
        if line.startswith(("+", "-", " ")) or line == "":
            body.append(line if line else " ")
        elif line.startswith("\\"):
            continue
        else:
            body = None
    return files, None


def apply_hunks(old_text: str, hunks: Sequence[Hunk]) -> tuple[str, set[int], set[int]]:
    """The new text, the old lines the hunks remove and the new lines they add (1-based)."""
    old = old_text.splitlines()
    new: list[str] = []
    removed: set[int] = set()
    added: set[int] = set()
    pos = 1
    for start, body in sorted(hunks, key=lambda h: h[0]):
        while pos < start and pos <= len(old):
            new.append(old[pos - 1])
            pos += 1
        for line in body:
            tag, text = line[0], line[1:]
            if tag == " ":
                new.append(old[pos - 1] if pos <= len(old) else text)
                pos += 1
            elif tag == "-":
                removed.add(pos)
                pos += 1
            else:
                new.append(text)
                added.add(len(new))
    new.extend(old[pos - 1:])
    return "\n".join(new) + "\n", removed, added


@dataclass
class CoverageMap:
    """One project's per-function test map and its tasks' stored selections (see the module docstring)."""

    project: str
    tree_hash: str
    tests: list[str]
    functions: dict[str, dict[str, tuple[bool, list[int]]]]
    always: list[int] = field(default_factory=list)
    tasks: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"version": SELECTION_VERSION, "project": self.project, "tree_hash": self.tree_hash,
                "tests": self.tests, "always": encode_ranges(self.always),
                "functions": {f: {q: [imp, encode_ranges(ix)] for q, (imp, ix) in sorted(fns.items())}
                              for f, fns in sorted(self.functions.items())},
                "tasks": dict(sorted(self.tasks.items()))}

    def without(self, dropped: Iterable[str]) -> CoverageMap:
        """The map with the tests ``dropped`` (required tests no longer run) taken out and every
        index renumbered: a test's coverage does not depend on which other tests run, so the others'
        entries, and each task's selection less the dropped tests, stay as traced."""
        gone = set(dropped)
        renumber = {}
        for i, test in enumerate(self.tests):
            if test not in gone:
                renumber[i] = len(renumber)

        def keep(indices: Iterable[int]) -> list[int]:
            return sorted(renumber[i] for i in indices if i in renumber)

        tasks = {tid: sel if sel == "full" else encode_ranges(keep(decode_ranges(sel, len(self.tests), tid)))
                 for tid, sel in self.tasks.items()}
        return CoverageMap(project=self.project, tree_hash=self.tree_hash,
                           tests=[t for t in self.tests if t not in gone],
                           functions={f: {q: (imp, keep(ix)) for q, (imp, ix) in fns.items()}
                                      for f, fns in self.functions.items()},
                           always=keep(self.always), tasks=tasks)

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "selection") -> CoverageMap:
        if not isinstance(data, dict) or data.get("version") != SELECTION_VERSION:
            raise SelectionError(f"{where}: not a version-{SELECTION_VERSION} selection map")
        try:
            tests = list(data["tests"])
            n = len(tests)
            functions = {f: {q: (bool(v[0]), decode_ranges(v[1], n, f"{where}: {f}::{q}")) for q, v in fns.items()}
                         for f, fns in data["functions"].items()}
            return cls(project=str(data["project"]), tree_hash=str(data["tree_hash"]), tests=tests,
                       functions=functions, always=decode_ranges(data.get("always", ""), n, f"{where}: always"),
                       tasks=dict(data.get("tasks") or {}))
        except (KeyError, TypeError, IndexError) as exc:
            raise SelectionError(f"{where}: malformed selection map ({exc!r})") from None

    def tests_for_patch(self, patch: str, text_of: Callable[[str], str | None]) -> tuple[set[int] | None, str]:
        """Indices of the required tests that execute a function ``patch`` changes.

        Removed lines are placed on the old text (``text_of(path)``, ``None``: no such file), added
        lines on the new one, each in its innermost function the map knows. Returns
        ``(None, reason)`` when only the full set can judge the patch."""
        files, problem = parse_patch(patch)
        if problem:
            return None, problem
        picked: set[int] = set()
        for path, hunks in files.items():
            if not hunks:
                continue
            known = self.functions.get(path)
            old_text = text_of(path)
            if known is None or old_text is None:
                return None, f"{path}: not a file of the coverage map"
            new_text, removed, added = apply_hunks(old_text, hunks)
            for text, lines in ((old_text, removed), (new_text, added)):
                if not lines:
                    continue
                try:
                    spans = function_spans(text)
                except SyntaxError:
                    return None, f"{path}: does not parse"
                for line in sorted(lines):
                    names = [n for n in innermost(spans, line) if n in known]
                    if not names:
                        return None, f"{path}:{line} is outside every known function body (runs at import)"
                    runs_at_import, tests = known[names[0]]
                    if runs_at_import:
                        return None, f"{path}:{line}: {names[0]} runs at import"
                    picked.update(tests)
        return picked, "ok"


def build_map(project: str, tree_hash: str, tests: Sequence[str], sources: dict[str, str],
              lines: dict[str, dict[str, list[int]]], import_lines: dict[str, list[int]],
              spawners: Iterable[str], traced_passed: Iterable[str]) -> CoverageMap:
    """The per-function map from one traced run: ``sources`` (file -> clean text) are the project's
    source files, ``lines`` (test id -> file -> executed lines) the run's per-test coverage."""
    index = {t: i for i, t in enumerate(tests)}
    passed = set(traced_passed)
    # A required test the traced run did not see pass has no trustworthy coverage: always run it.
    always = {index[t] for t in spawners if t in index} | {i for t, i in index.items() if t not in passed}
    per_line: dict[str, dict[int, set[int]]] = {}
    for tid, files in lines.items():
        i = index.get(tid)
        if i is None:
            continue
        for file, executed in files.items():
            target = per_line.setdefault(file, {})
            for line in executed:
                target.setdefault(line, set()).add(i)
    functions: dict[str, dict[str, tuple[bool, list[int]]]] = {}
    for file, text in sources.items():
        try:
            spans = function_spans(text)
        except SyntaxError:
            continue
        covered = per_line.get(file, {})
        imported = set(import_lines.get(file, ()))
        entry: dict[str, tuple[bool, list[int]]] = {}
        for name, first, last in spans:
            tests_here: set[int] = set()
            at_import = False
            for line in range(first, last + 1):
                tests_here |= covered.get(line, set())
                at_import = at_import or line in imported
            before = entry.get(name, (False, []))
            entry[name] = (before[0] or at_import, sorted(set(before[1]) | tests_here))
        functions[file] = entry
    return CoverageMap(project=project, tree_hash=tree_hash, tests=list(tests), functions=functions,
                       always=sorted(always))


def task_selection(cmap: CoverageMap, record) -> str:
    """A task's stored selection: its target tests, the tests of the functions its bug changes and
    the always-run tests, as ranges; ``"full"`` when the map cannot vouch for the bug's change."""
    index = {t: i for i, t in enumerate(cmap.tests)}
    missing = [t for t in record.target_tests if t not in index]
    if missing:
        return "full"
    tree = record.repo_dir

    def clean_text(path: str) -> str | None:
        file = Path(tree) / path
        return file.read_text(encoding="utf-8") if file.is_file() else None

    picked, _reason = cmap.tests_for_patch(record.bug_patch, clean_text)
    if picked is None:
        return "full"
    return encode_ranges(picked | {index[t] for t in record.target_tests} | set(cmap.always))


_loaded: dict[tuple[str, float], CoverageMap] = {}


def load_map(path: str | Path) -> CoverageMap:
    """The selection map at ``path`` (cached per file and modification time)."""
    path = Path(path)
    key = (str(path), path.stat().st_mtime)
    if key not in _loaded:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise SelectionError(f"{path}: not valid JSON ({exc})") from None
        _loaded[key] = CoverageMap.from_json(data, where=str(path))
    return _loaded[key]
