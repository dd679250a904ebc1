"""What the generator takes from the other SWE-SYNTH parts, each behind one function.

* :func:`task_signals` / :func:`difficulty_tier` — the per-task signals that make a bug easy and
  the tier they give (the bug operators' module provides them; the fallback here computes the same
  signals from the patch, the failing tests and their tracebacks);
* :func:`attach_project` — makes a record name its bundled project.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from termgym.factory.swesynth.patches import patch_files

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|\S")
_module_maps: dict[str, Any] = {}
_maps_lock = threading.Lock()


def _bug_signals():
    """The bug operators' ``(task_signals, difficulty_tier, ModuleMap)``, or ``None`` without them."""
    try:
        from termgym.factory.swesynth.bugs.callgraph import ModuleMap
        from termgym.factory.swesynth.bugs.signals import difficulty_tier as tier
        from termgym.factory.swesynth.bugs.signals import task_signals as signals
    except ImportError:
        return None
    return signals, tier, ModuleMap


def _module_map(repo: Path, module_map_class) -> Any:
    """One call-graph module map per clean tree (built once, shared by the workers)."""
    key = str(repo)
    with _maps_lock:
        if key not in _module_maps:
            _module_maps[key] = module_map_class.of_directory(repo)
        return _module_maps[key]


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


def task_signals(*, bug_patch: str, target_tests: Sequence[str], messages: dict[str, str],
                 mutations: Sequence[dict[str, Any]] = (), repo: Path | None = None) -> dict[str, Any]:
    """The task's signals: the bug operators' ``task_signals``
    (:mod:`termgym.factory.swesynth.bugs.signals`) over the fallback's extra keys; the fallback alone
    when those operators are not installed."""
    base = fallback_signals(bug_patch=bug_patch, target_tests=target_tests, messages=messages,
                            mutations=mutations, repo=repo)
    provided = _bug_signals()
    if provided is not None:
        signals, _tier, module_map_class = provided
        modules = _module_map(Path(repo), module_map_class) if repo is not None else None
        try:
            base.update(signals(bug_patch, list(target_tests), messages, repo=repo, modules=modules))
        except ValueError as exc:  # SignalError: e.g. a failing doctest file (.md) that is not Python
            base["signals_note"] = f"bug operators' signals unavailable: {exc}"[:200]
    return base


def difficulty_tier(signals: dict[str, Any]) -> str:
    """``easy``, ``medium`` or ``hard``: the bug operators' rule, or the fallback's."""
    provided = _bug_signals()
    if provided is not None:
        return provided[1](signals)
    easy_marks = sum([bool(signals.get("traceback_shows_line")), bool(signals.get("test_file_names_module")),
                      int(signals.get("tokens_changed", 0)) <= 2, int(signals.get("files_touched", 1)) <= 1
                      and int(signals.get("edits", 1)) <= 1])
    if easy_marks >= 3:
        return "easy"
    if easy_marks <= 1:
        return "hard"
    return "medium"


def attach_project(record, project: str | None) -> None:
    """Make ``record`` name its bundled project (its tree and test environment come from there)."""
    if project:
        record.project = project
