"""What the generator takes from the other SWE-SYNTH parts, each behind one function.

* :func:`task_signals` / :func:`difficulty_tier` — the per-task signals that make a bug easy and
  the tier they give (the bug operators' module provides them; the fallback here computes the same
  signals from the patch, the failing tests and their tracebacks);
* :func:`report_problems` — the report checker (``check_report``) when it is there;
* :func:`attach_project` — makes a record name its bundled project.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from termgym.tasks.swesynth.patches import patch_files

#: Where the bug operators' signals may live (first module that has them wins).
_SIGNAL_MODULES = ("termgym.tasks.swesynth.difficulty", "termgym.tasks.swesynth.signals",
                   "termgym.tasks.swesynth.inject")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|\S")


def _provided(name: str):
    for module in _SIGNAL_MODULES:
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if found is not None:
            return found
    return None


def module_stems(paths: Sequence[str]) -> set[str]:
    """The importable names a set of source paths stands for (``pkg/__init__.py`` is ``pkg``)."""
    out = set()
    for path in paths:
        p = PurePosixPath(path)
        out.add(p.parent.name if p.stem == "__init__" else p.stem)
    return {s.strip("_").lower() for s in out if s}


def stem_of_test_file(test_id: str) -> str:
    """``tests/test_money.py::test_x`` -> ``money`` (also ``money_test.py``, ``test_money_extra.py``)."""
    name = PurePosixPath(test_id.split("::", 1)[0]).stem.lower()
    name = re.sub(r"^tests?_", "", name)
    return re.sub(r"_tests?$", "", name).strip("_")


def names_module(target_tests: Sequence[str], touched: Sequence[str]) -> bool:
    """Whether a failing test's file is named after a module the bug touches."""
    stems = module_stems(touched)
    for test in target_tests:
        stem = stem_of_test_file(test)
        if stem and any(stem == s or stem.startswith(s + "_") or s.startswith(stem + "_") for s in stems):
            return True
    return False


def fallback_signals(*, bug_patch: str, target_tests: Sequence[str], messages: dict[str, str],
                     mutations: Sequence[dict[str, Any]] = (), repo: Path | None = None) -> dict[str, Any]:
    """The difficulty signals computed from the patch and the failing tests' tracebacks."""
    touched = patch_files(bug_patch)
    removed = [line[1:] for line in bug_patch.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in bug_patch.splitlines() if line.startswith("+") and not line.startswith("+++")]
    old_tokens, new_tokens = _TOKEN.findall("\n".join(removed)), _TOKEN.findall("\n".join(added))
    common = 0
    remaining = list(new_tokens)
    for token in old_tokens:
        if token in remaining:
            remaining.remove(token)
            common += 1
    tokens_changed = (len(old_tokens) - common) + len(remaining)
    text = "\n".join(messages.get(t, "") for t in target_tests)
    shown = [line.strip() for line in added + removed if len(line.strip()) >= 8]
    traceback_shows_line = any(line in text for line in shown) or any(
        re.search(re.escape(PurePosixPath(p).name) + r":\d+", text) for p in touched)
    edits = sum(1 for line in bug_patch.splitlines() if line.startswith("@@"))
    test_files = {t.split("::", 1)[0] for t in target_tests}
    named = names_module(target_tests, touched)
    return {"traceback_shows_line": bool(traceback_shows_line), "test_file_names_module": named,
            "tokens_changed": tokens_changed, "files_touched": len(touched), "edits": edits,
            "cross_module": not named, "failing_tests": len(target_tests), "failing_test_files": len(test_files)}


def task_signals(**facts: Any) -> dict[str, Any]:
    """The task's signals: the bug operators' ``task_signals`` when present (completed by the
    fallback's keys it lacks), else :func:`fallback_signals`."""
    base = fallback_signals(**{k: facts[k] for k in ("bug_patch", "target_tests", "messages", "mutations", "repo")
                               if k in facts})
    provided = _provided("task_signals")
    if provided is not None:
        try:
            theirs = dict(provided(**facts))
        except TypeError:
            theirs = {}
        base.update(theirs)
    return base


def difficulty_tier(signals: dict[str, Any]) -> str:
    """``easy``, ``medium`` or ``hard`` (the bug operators' rule when present)."""
    provided = _provided("difficulty_tier")
    if provided is not None and provided is not difficulty_tier:
        tier = provided(signals)
        if tier in ("easy", "medium", "hard"):
            return tier
    easy_marks = sum([bool(signals.get("traceback_shows_line")), bool(signals.get("test_file_names_module")),
                      int(signals.get("tokens_changed", 0)) <= 2, int(signals.get("files_touched", 1)) <= 1
                      and int(signals.get("edits", 1)) <= 1])
    if easy_marks >= 3:
        return "easy"
    if easy_marks <= 1:
        return "hard"
    return "medium"


def report_problems(report: str, bug_patch: str, target_tests: Sequence[str]) -> list[str]:
    """What the report checker finds wrong with ``report`` (empty when it is fine or absent)."""
    try:
        check = getattr(importlib.import_module("termgym.tasks.swesynth.report"), "check_report", None)
    except ImportError:
        check = None
    if check is None:
        return []
    try:
        return list(check(report, patch=bug_patch, target_tests=list(target_tests)))
    except TypeError:
        return list(check(report))


def attach_project(record, project: str | None) -> None:
    """Make ``record`` name its bundled project (its tree and test environment come from there)."""
    if project:
        record.project = project
