"""Distinct tasks: what makes two SWE-SYNTH tasks near-duplicates, and the served selection without them.

Two tasks of a project are near-duplicates when their reports' repros open with the same call
(:func:`~termgym.tasks.swesynth.repro.first_call`: toml's ``load('test.toml')`` opened 61 tasks), or
when they break the same function with the same bug type. A suite that counts such tasks many
times looks bigger than it is, and a ``test_id`` task that is a near-duplicate of a ``train`` task
is not held out: a policy trained on the one has seen the other.

:func:`select` is the rule the default suite serves by (``SweSynthSuite(distinct=True)``):

1. a ``test_id`` task that shares a key with any ``train`` task moves to ``train`` (and so on, until
   no ``test_id`` task shares one);
2. tasks are taken realest fix first (:func:`fix_rank`: a bug from the project's release history,
   then a procedural fix of two or more tokens, then a one-token fix); within a rank, a fix of two
   or more lines before a one-line fix; then a task whose
   commonest bug type is rarer among the tasks offered comes first (so the commonest type,
   wrong-variable, fills fewer of the places a key allows); then in an order fixed by the ids'
   hashes (not by generation order); a task is kept while each of its keys has fewer than
   :data:`MAX_PER_KEY` kept tasks;
3. no project holds more than :data:`MAX_PROJECT_SHARE` of what is kept (applied until it holds,
   and only where it can: with at least ``1 / share`` projects and a cap of at least
   :data:`MIN_PROJECT_TASKS`; the tasks over the cap are the last ones taken, so one-token fixes go
   first); a project below :data:`MIN_PROJECT_TASKS` has no more distinct tasks to give;
4. no bug type makes more than :data:`MAX_TYPE_SHARE` of what is kept (a task counts for each type
   it carries; where there are at least ``1 / share`` types and the cap is at least
   :data:`MIN_PROJECT_TASKS` tasks): of the commonest type above it, its
   smallest fixes are left out first, each from the project holding the most tasks at that point;
5. fewer than :data:`MAX_ONE_LINE_SHARE` of what is kept fix one line (:func:`changed_lines`), so
   that the median served fix spans two or more lines, as the fixes people file do (issue 42: a
   policy that trains on one-line fixes learns to flip an operator next to a failing test): the
   procedural one-line fixes go before release-history ones, each from the project holding the most
   tasks at that point, within it in the order of the ids' hashes, so one-token and larger one-line
   edits keep their mix (applied where at least :data:`MIN_PROJECT_TASKS` kept tasks fix more than
   one line);
   3, 4 and 5 are applied again until all hold.

Where a key lets only three of its tasks be served, which three is a choice: it costs no task to
serve the ones with the larger, realer fixes and the rarer bug types (on v2 the served one-token
share fell from 69 % to 63 % and wrong-variable from 27 % to 22 % of the served tasks, the served
count stayed; a policy learns what the suite serves most).

:func:`near_duplicates` measures a set of tasks by the same keys (the suite card's "before" and
"after"); :func:`held_out_duplicates` counts the ``test_id`` tasks that are near-duplicates of a
``train`` task (0 after :func:`select`).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from termgym.tasks.swesynth.repro import first_call_of, parse_repro, repro_key_of

#: The most served tasks that share one key (a first repro call, or a (function, bug type)).
MAX_PER_KEY = 3
#: The largest share of the served tasks one project may hold.
MAX_PROJECT_SHARE = 0.05
#: The project cap is not applied below this many tasks a project (and a project with fewer served
#: tasks has no more distinct ones to give).
MIN_PROJECT_TASKS = 10
#: The largest share of the served tasks one bug type may hold (a task counts for each type it carries).
MAX_TYPE_SHARE = 0.20
#: The one-line fixes make less than this share of the served tasks (0.5: the median fix spans two
#: or more changed lines).
MAX_ONE_LINE_SHARE = 0.5

#: Why :func:`select` leaves a task out (``SweSynthSuite.unserved`` counts them by these).
SAME_CALL = f"a near-duplicate: {MAX_PER_KEY} served tasks of its project already open their repro with its first call"
SAME_FUNCTION = (f"a near-duplicate: {MAX_PER_KEY} served tasks already break one of its functions with the same "
                 "bug type")
PROJECT_SHARE = f"its project already holds {100 * MAX_PROJECT_SHARE:.0f} % of the served tasks"
TYPE_SHARE = f"its bug type already makes {100 * MAX_TYPE_SHARE:.0f} % of the served tasks"
ONE_LINE_SHARE = f"it fixes one line, and such fixes would make {100 * MAX_ONE_LINE_SHARE:.0f} % or more of the served tasks"

TRAIN, HELD_OUT_IN_DISTRIBUTION = "train", "test_id"

#: The ranks of :func:`fix_rank`, served first to last where a key allows only some tasks.
HISTORY, MULTI_TOKEN, ONE_TOKEN = 0, 1, 2


def from_history(origin: Mapping[str, Any] | None) -> bool:
    """Whether a record's ``origin`` says its bug is a change from the project's release history."""
    return (origin or {}).get("source") == "history"


def fix_rank(origin: Mapping[str, Any] | None, signals: Mapping[str, Any] | None) -> int:
    """How real a task's fix is, from its record's ``origin`` and ``signals``: :data:`HISTORY` (a
    change the project's maintainers made between releases), :data:`ONE_TOKEN` (a procedural fix of
    at most one token, ``signals["tokens_changed"]``), else :data:`MULTI_TOKEN` (a larger fix, or
    one whose size was not recorded)."""
    if from_history(origin):
        return HISTORY
    tokens = (signals or {}).get("tokens_changed")
    if tokens is not None and int(tokens) <= 1:
        return ONE_TOKEN
    return MULTI_TOKEN


def changed_lines(patch: str) -> int:
    """The lines a unified diff changes: per hunk, the larger of its removed and its added lines
    (an edit of one line is 1, a guard of two lines put back is 2)."""
    lines = removed = added = 0
    for line in [*patch.splitlines(), "@@ end"]:
        if line.startswith(("@@", "+++ ", "--- ", "diff ")):
            lines, removed, added = lines + max(removed, added), 0, 0
        elif line.startswith("-"):
            removed += 1
        elif line.startswith("+"):
            added += 1
    return lines


@dataclass(frozen=True)
class TaskKeys:
    """What a task is compared by: its project, its repro's first call (``None``: no repro) and a
    ``(path, function, bug type)`` per bug; ``rank`` (:func:`fix_rank`) and ``lines`` (the lines
    its fix changes, :func:`changed_lines`; ``None``: not known) say which near-duplicates are
    served first, and ``lines`` which count under the one-line share."""

    project: str
    call: str | None
    functions: frozenset[tuple[Any, ...]]
    rank: int = MULTI_TOKEN
    lines: int | None = None

    @property
    def one_line(self) -> bool:
        """Whether the fix is known to change at most one line."""
        return self.lines is not None and self.lines < 2

    def all(self) -> list[tuple[Any, ...]]:
        """Every key, each tagged with the project (keys of two projects never meet)."""
        out: list[tuple[Any, ...]] = [(self.project, "function", *f) for f in sorted(self.functions, key=repr)]
        if self.call is not None:
            out.insert(0, (self.project, "call", self.call))
        return out


def task_keys(project: str, bug: Mapping[str, Any], *, origin: Mapping[str, Any] | None = None,
              signals: Mapping[str, Any] | None = None, fix_patch: str | None = None) -> TaskKeys:
    """The keys of a task from its project and its record's ``bug`` (``problem_statement``,
    ``mutations``), ranked by its record's ``origin`` and ``signals`` (:func:`fix_rank`), sized by
    its ``fix_patch`` (:func:`changed_lines`)."""
    return _keys(project, bug, parse_repro(str(bug.get("problem_statement") or "")), fix_rank(origin, signals),
                 None if fix_patch is None else changed_lines(fix_patch))


def _keys(project: str, bug: Mapping[str, Any], repro: tuple[str | None, list | None],
          rank: int = MULTI_TOKEN, lines: int | None = None) -> TaskKeys:
    functions = frozenset((m.get("path"), m.get("function"), m.get("bug_type")) for m in bug.get("mutations") or ())
    return TaskKeys(project, first_call_of(*repro), functions, rank, lines)


def _order(task_id: str) -> str:
    return hashlib.sha256(task_id.encode()).hexdigest()


def _types(k: TaskKeys) -> set[str]:
    return {str(f[2]) for f in k.functions}


def _taken_order(keys: Mapping[str, TaskKeys]):
    """The order :func:`select` takes tasks in: by rank, then a fix of two or more lines before a
    one-line fix, then the task whose commonest bug type is rarer among all of ``keys`` first, then
    by the hash of the id."""
    common = Counter(t for k in keys.values() for t in _types(k))
    return lambda tid: (keys[tid].rank, keys[tid].one_line, max((common[t] for t in _types(keys[tid])), default=0),
                        _order(tid))


@dataclass
class Selection:
    """What :func:`select` serves: ``splits`` (ids by split), the ``test_id`` ids ``moved`` to
    ``train``, and each task left out with its reason (``dropped``)."""

    splits: dict[str, list[str]]
    moved: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)


def select(splits: Mapping[str, Sequence[str]], keys: Mapping[str, TaskKeys], *, max_per_key: int = MAX_PER_KEY,
           max_project_share: float = MAX_PROJECT_SHARE, max_type_share: float = MAX_TYPE_SHARE,
           max_one_line_share: float = MAX_ONE_LINE_SHARE) -> Selection:
    """The distinct tasks of ``splits`` (module docstring), ``keys`` giving each task's :class:`TaskKeys`."""
    if max_per_key < 1:
        raise ValueError(f"max_per_key must be at least 1, not {max_per_key}")
    if not 0 < max_project_share <= 1:
        raise ValueError(f"max_project_share must be in (0, 1], not {max_project_share}")
    if not 0 < max_type_share <= 1:
        raise ValueError(f"max_type_share must be in (0, 1], not {max_type_share}")
    if not 0 < max_one_line_share <= 1:
        raise ValueError(f"max_one_line_share must be in (0, 1], not {max_one_line_share}")
    split_of = {tid: split for split, ids in splits.items() for tid in ids}
    train_keys = {k for tid, split in split_of.items() if split == TRAIN for k in keys[tid].all()}
    moved: list[str] = []
    while True:  # a task moved to train can make another test_id task its near-duplicate
        now = sorted(tid for tid, split in split_of.items()
                     if split == HELD_OUT_IN_DISTRIBUTION and train_keys.intersection(keys[tid].all()))
        if not now:
            break
        for tid in now:
            split_of[tid] = TRAIN
            train_keys.update(keys[tid].all())
        moved += now
    moved.sort()
    kept: list[str] = []
    dropped: dict[str, str] = {}
    counts: Counter = Counter()
    for tid in sorted(split_of, key=_taken_order(keys)):
        own = keys[tid]
        if own.call is not None and counts[(own.project, "call", own.call)] >= max_per_key:
            dropped[tid] = SAME_CALL
        elif any(counts[k] >= max_per_key for k in own.all()):
            dropped[tid] = SAME_FUNCTION
        else:
            kept.append(tid)
            counts.update(own.all())
    while True:  # the shares, until all hold (leaving tasks out can put a project above its share)
        over = dict.fromkeys(_over_project_share(kept, keys, max_project_share), PROJECT_SHARE) or \
            dict.fromkeys(_over_type_share(kept, keys, max_type_share), TYPE_SHARE) or \
            dict.fromkeys(_over_one_line_share(kept, keys, max_one_line_share), ONE_LINE_SHARE)
        if not over:
            break
        dropped.update(over)
        kept = [tid for tid in kept if tid not in over]
    keep = set(kept)
    out: dict[str, list[str]] = {split: [] for split in splits}
    out.setdefault(TRAIN, [])
    for split, ids in splits.items():  # each split in its own order, moved tasks appended to train
        out[split].extend(tid for tid in ids if tid in keep and split_of[tid] == split)
    out[TRAIN].extend(tid for tid in moved if tid in keep)
    return Selection({split: ids for split, ids in out.items() if ids or split in splits}, moved, dropped)


def _over_project_share(kept: list[str], keys: Mapping[str, TaskKeys], share: float) -> list[str]:
    """The tasks of ``kept`` (in the order taken) over the project share: of each project above it,
    the last ones taken. None where no cap can hold (fewer than ``1 / share`` projects, or a cap
    below :data:`MIN_PROJECT_TASKS`)."""
    cap = int(share * len(kept))
    if len({keys[tid].project for tid in kept}) * share < 1 or cap < MIN_PROJECT_TASKS:
        return []
    seen: Counter = Counter()
    over = []
    for tid in kept:  # already in the order taken: the last taken go first
        seen[keys[tid].project] += 1
        if seen[keys[tid].project] > cap:
            over.append(tid)
    return over


def _over_type_share(kept: list[str], keys: Mapping[str, TaskKeys], share: float) -> list[str]:
    """Tasks of ``kept`` (in the order taken) to leave out so that the commonest bug type holds no
    more than ``share`` of what stays: its smallest fixes first (rank), each from the project that
    holds the most tasks at that point (so the project share does not cut the largest projects
    again once the total shrinks), its last taken first. None where no cap can hold (fewer than
    ``1 / share`` bug types) or the cap would be below :data:`MIN_PROJECT_TASKS` tasks (a pool as
    small as one project's)."""
    counts = Counter(t for tid in kept for t in _types(keys[tid]))
    if not counts or len(counts) * share < 1 or share >= 1 or share * len(kept) < MIN_PROJECT_TASKS:
        return []  # no cap could hold, or one of fewer than ten tasks: a small pool (one project) keeps its mix
    kind, n = counts.most_common(1)[0]
    if n <= share * len(kept):
        return []
    need = math.ceil((n - share * len(kept)) / (1 - share))
    holders = [tid for tid in reversed(kept) if kind in _types(keys[tid])]  # the last taken first
    return _leave_out(kept, keys, holders, need, lambda k: k.rank)


def _over_one_line_share(kept: list[str], keys: Mapping[str, TaskKeys], share: float) -> list[str]:
    """Tasks of ``kept`` (in the order taken) to leave out so that one-line fixes make less than
    ``share`` of what stays: procedural ones before release-history ones, each from the project that
    holds the most tasks at that point, in the order of the ids' hashes (not one-token fixes first:
    what stays keeps the one-line mix, a one-token fix being as common a fix as any other of one
    line). None where fewer than :data:`MIN_PROJECT_TASKS` kept tasks fix more than one line (a
    pool of one-line fixes keeps its mix) or ``share`` is 1."""
    one_line = sum(keys[tid].one_line for tid in kept)
    if share >= 1 or len(kept) - one_line < MIN_PROJECT_TASKS or one_line < share * len(kept):
        return []
    need = math.floor((one_line - share * len(kept)) / (1 - share)) + 1  # the least d: one_line - d < share (n - d)
    holders = sorted((tid for tid in kept if keys[tid].one_line), key=_order)
    return _leave_out(kept, keys, holders, need, lambda k: k.rank != HISTORY)


def _leave_out(kept: list[str], keys: Mapping[str, TaskKeys], holders: Sequence[str], need: int,
               level: Callable[[TaskKeys], int]) -> list[str]:
    """``need`` of ``holders`` (tasks of ``kept``, in the order they go): those of the highest
    ``level`` first, each from the project that holds the most tasks of ``kept`` at that point (so
    the project share does not cut the largest projects again once the total shrinks)."""
    per_project = Counter(keys[tid].project for tid in kept)
    left: dict[tuple[int, str], list[str]] = {}  # (level, project) -> its holders, in the order they go
    for tid in holders:
        left.setdefault((level(keys[tid]), keys[tid].project), []).append(tid)
    out: list[str] = []
    while len(out) < need and left:
        top = max(r for r, _ in left)
        project = max((p for r, p in left if r == top), key=lambda p: (per_project[p], p))
        going = left[(top, project)]
        out.append(going.pop(0))
        per_project[project] -= 1
        if not going:
            del left[(top, project)]
    return out


def held_out_duplicates(splits: Mapping[str, Sequence[str]], keys: Mapping[str, TaskKeys]) -> int:
    """How many ``test_id`` tasks share a key with a ``train`` task of ``splits``."""
    train_keys = {k for tid in splits.get(TRAIN, ()) for k in keys[tid].all()}
    return sum(bool(train_keys.intersection(keys[tid].all())) for tid in splits.get(HELD_OUT_IN_DISTRIBUTION, ()))


def near_duplicates(tasks: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Near-duplicate counts over ``(project, record data)`` pairs:

    * ``function_bug_type`` — tasks with a bug whose (project, file, function, bug type) another
      task's bug shares;
    * ``first_call`` — tasks whose repro opens with the same call as another task of the same
      project, and ``largest_first_call_group`` — the most tasks sharing one;
    * ``either`` — tasks that are one or the other (the near-duplicate share's numerator);
    * ``same_repro`` — tasks whose whole repro (:func:`~termgym.tasks.swesynth.repro.repro_key`) is
      another task's of the project (a first call is often only the setup, ``root = Node('root')``),
      and ``largest_same_repro_group``.
    """
    keys: list[TaskKeys] = []
    repros: list[tuple | None] = []
    for project, data in tasks:
        bug = data.get("bug") if isinstance(data.get("bug"), dict) else {}
        repro = parse_repro(str(bug.get("problem_statement") or ""))  # parsed once for both measures
        keys.append(_keys(project, bug, repro))
        whole = repro_key_of(*repro)
        repros.append((project, whole) if whole else None)
    function_count = Counter((k.project, *f) for k in keys for f in k.functions)
    call_count = Counter((k.project, k.call) for k in keys if k.call is not None)
    by_function = [any(function_count[(k.project, *f)] > 1 for f in k.functions) for k in keys]
    by_call = [k.call is not None and call_count[(k.project, k.call)] > 1 for k in keys]
    repro_count = Counter(r for r in repros if r is not None)
    return {"tasks": len(keys), "function_bug_type": sum(by_function), "first_call": sum(by_call),
            "either": sum(a or b for a, b in zip(by_function, by_call)),
            "largest_first_call_group": max(call_count.values(), default=0),
            "same_repro": sum(r is not None and repro_count[r] > 1 for r in repros),
            "largest_same_repro_group": max(repro_count.values(), default=0)}


__all__ = ["HISTORY", "MAX_ONE_LINE_SHARE", "MAX_PER_KEY", "MAX_PROJECT_SHARE", "MAX_TYPE_SHARE",
           "MIN_PROJECT_TASKS", "MULTI_TOKEN", "ONE_LINE_SHARE", "ONE_TOKEN", "PROJECT_SHARE", "SAME_CALL",
           "SAME_FUNCTION", "TYPE_SHARE", "Selection", "TaskKeys", "changed_lines", "fix_rank", "held_out_duplicates",
           "near_duplicates", "select", "task_keys"]
