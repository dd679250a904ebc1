"""What a compact suite holds of one project already: the bugs its tasks carry and how many of its
tasks break each function, by the size of their fix. Two consumers need it: ``merge`` checks the
per-function cap against it, and a ``generate`` batch made for a suite (``--extends``) skips the
bugs the suite has and counts its tasks against the same cap."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from termgym.factory.swesynth.bugs.signals import count_changed_tokens
from termgym.jsonl import json_lines

#: The most tasks of one fix size (:func:`fix_size`) that may break any one function
#: (near-duplicates by function; issue 26's card). The two sizes are capped apart so that the
#: one-token mutations a function took first leave room for bugs a person would make there
#: (a dropped guard, two statements swapped), which the suite needs more of (issue 42).
MAX_TASKS_PER_FUNCTION = 10

#: The fix sizes the cap counts apart: a fix of at most one token, and any larger one.
FIX_SIZES = ("one token", "larger")


def bug_functions(line: dict[str, Any]) -> set[tuple[str, str]]:
    """The ``(path, function)`` pairs a task's bugs change (a record line); module-level code is
    ``<module>``, as :func:`~termgym.factory.swesynth.generate.function_key` names it."""
    bug = line.get("bug") if isinstance(line.get("bug"), dict) else {}
    return {(str(m.get("path")), str(m.get("function") or "<module>"))
            for m in bug.get("mutations") or [] if isinstance(m, dict)}


def fix_size(tokens: int) -> str:
    """The size class of a fix that changes ``tokens`` tokens (:data:`FIX_SIZES`)."""
    return FIX_SIZES[0] if tokens <= 1 else FIX_SIZES[1]


def line_fix_size(line: dict[str, Any]) -> str:
    """The size class of a task's fix (a record line): its ``signals.tokens_changed``, or counted
    from its bug patch where a record has no signals."""
    tokens = (line.get("signals") or {}).get("tokens_changed")
    if not isinstance(tokens, int):
        tokens = count_changed_tokens(str((line.get("bug") or {}).get("patch") or ""))
    return fix_size(tokens)


def cap_keys(line: dict[str, Any]) -> set[tuple[str, str, str]]:
    """The ``(path, function, fix size)`` slots a task (a record line) takes under the cap."""
    size = line_fix_size(line)
    return {(path, function, size) for path, function in bug_functions(line)}


def function_load(lines: list[dict[str, Any]]) -> dict[tuple[str, str, str], int]:
    """How many of one project's tasks (record lines) break each ``(path, function)`` with a fix of
    each size (:func:`cap_keys`): a task counts once for each function its bugs change, except
    that a multi-bug task stops counting for a function once a task split out of it
    (``origin.split_from``, ``termgym swesynth split``) breaks that function: there the
    single-bug task stands in for it, whatever the sizes. What the per-function cap is checked
    against."""
    stood_in = {(source, key) for line in lines for source in (line.get("origin") or {}).get("split_from") or ()
                for key in bug_functions(line)}
    load: dict[tuple[str, str, str], int] = {}
    for line in lines:
        for key in cap_keys(line):
            if (line["task_id"], key[:2]) not in stood_in:
                load[key] = load.get(key, 0) + 1
    return load


@dataclass(frozen=True)
class KnownBugs:
    """What a compact suite holds of one project: the ``task_ids`` of its tasks (a task id is its
    bug patch's hash, so a candidate with one of these ids is a bug the suite has) and the
    per-function ``load`` (:func:`function_load`)."""

    task_ids: frozenset[str] = frozenset()
    load: dict[tuple[str, str, str], int] = field(default_factory=dict)


class SuiteError(ValueError):
    """A compact suite's file does not read; the message names the file (and line)."""


def suite_index(suite: str | Path) -> dict[str, Any]:
    """A compact suite's ``suite.json``."""
    path = Path(suite) / "suite.json"
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuiteError(f"{path}: no suite.json (a compact suite, as generate and history write them)") from None
    except json.JSONDecodeError as exc:
        raise SuiteError(f"{path}: not JSON: {exc}") from None
    if not isinstance(index, dict) or index.get("storage") != "compact":
        storage = index.get("storage") if isinstance(index, dict) else None
        raise SuiteError(f"{path}: not a compact suite (storage {storage!r}); its tasks need records/*.jsonl")
    return index


def record_lines(path: Path) -> list[dict[str, Any]]:
    """The lines of a compact suite's records or behaviour file (none when it is missing), each with
    its ``task_id``; a malformed line is a :class:`SuiteError` naming the file and line."""
    out = []
    if not path.is_file():
        return out
    for n, data, problem in json_lines(path):
        if problem is not None or not isinstance(data, dict) or not isinstance(data.get("task_id"), str):
            raise SuiteError(f"{path}:{n}: a line needs a 'task_id' ({problem or 'malformed'})")
        out.append(data)
    return out


def known_bugs(suite: str | Path, repo: str, *, load_of: Callable[[dict[str, Any]], bool] | None = None) -> KnownBugs:
    """The bugs the compact suite ``suite`` holds for the project ``repo`` (none when it has no such
    project); a suite that does not read is a :class:`SuiteError`. ``load_of`` picks the tasks (record
    lines) the per-function ``load`` counts (default: all); the ids are every task's."""
    info = (suite_index(suite).get("repos") or {}).get(repo)
    if not info or "records" not in info:
        return KnownBugs()
    lines = record_lines(Path(suite) / info["records"])
    counted = lines if load_of is None else [line for line in lines if load_of(line)]
    return KnownBugs(frozenset(line["task_id"] for line in lines), function_load(counted))
