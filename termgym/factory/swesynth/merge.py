"""Merging one compact suite into another: tasks mined elsewhere (release history, a new batch of
``generate``) join an existing suite, the default one included, without touching its other tasks.

``termgym swesynth merge SRC --into DST``. For each project of ``SRC``:

* a project ``DST`` lacks comes over whole: its ``suite.json`` entry, baseline, records, behaviour
  sidecar, coverage map and generation/history statistics;
* a project ``DST`` has must be the same project run the same way: the same test command, source
  and test folders, workdir and tree (a bundled project's name, or the same path), and the same
  baseline (the required tests every task's grade runs), else the merge stops and says which of
  them differs and where; its tasks are appended to ``DST``'s records and sidecar, and their test
  selections to ``DST``'s coverage map (taken from ``SRC``'s when both maps were traced alike, else
  computed from ``DST``'s own map);
* a task id ``DST`` already holds is skipped when the record is the same or carries the same bug
  patch (the id is the patch's hash: the same bug made again, with another report), and refused
  otherwise;
* every merged task goes to the split ``DST`` decides for it: ``test`` for a project ``DST`` holds out
  (:func:`~termgym.factory.swesynth.bundle.project_held_out`), else ``test_id`` for the hashed
  share :data:`~termgym.factory.swesynth.bundle.TEST_ID_FRACTION` of ids and ``train`` for the rest;
* no function ends up broken by more than ``max_per_function`` tasks of one fix size, one token
  or larger (default: the bundled
  suite's cap, :data:`~termgym.factory.swesynth.bundle.MAX_TASKS_PER_FUNCTION`): a task that would
  pass it is left out and counted (``over_cap``); a single-bug task split out of a multi-bug one
  stands in for it at the functions it breaks (:func:`function_load`);
* the destination's ``named_share`` (tasks whose test file names the changed module) is counted again;
* per-project ``history`` statistics are kept under the project (a list when ``DST`` had some), and
  the source's generation statistics of a project ``DST`` already had under ``merged_generation``
  (its ``kept`` set to the tasks merged), so the card's generation totals count the merged tasks.

Nothing is written until every project of ``SRC`` has been checked; ``dry_run`` only checks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from termgym.factory.swesynth.known import (
    MAX_TASKS_PER_FUNCTION,
    SuiteError,
    cap_keys,
    function_load,
    suite_index,
)
from termgym.factory.swesynth.known import record_lines as known_record_lines
from termgym.jsonl import write_json, write_json_lines
from termgym.tasks.swesynth.store import locked_index, split_for

#: What a project's ``suite.json`` entry must agree on for its tasks to be merged.
SAME_SETTINGS = ("test_command", "source_dirs", "test_dirs", "workdir", "project", "path")


class MergeError(SuiteError):
    """The suites cannot be merged; the message names the project, the file and what differs."""


@dataclass
class MergeResult:
    added: dict[str, int] = field(default_factory=dict)  # tasks appended, per project
    same: dict[str, int] = field(default_factory=dict)  # tasks DST held already, identical
    new_projects: list[str] = field(default_factory=list)
    selection_missing: dict[str, str] = field(default_factory=dict)  # project -> why no selections merged
    splits: dict[str, int] = field(default_factory=dict)  # merged tasks per split
    over_cap: dict[str, int] = field(default_factory=dict)  # left out: a function would pass the cap
    same_bug: dict[str, int] = field(default_factory=dict)  # left out: DST holds the same bug patch already

    def to_dict(self) -> dict[str, Any]:
        return {"added": self.added, "same": self.same, "new_projects": self.new_projects,
                "selection_missing": self.selection_missing, "splits": self.splits, "over_cap": self.over_cap,
                "same_bug": self.same_bug}


def _index(suite: Path) -> dict[str, Any]:
    try:
        return suite_index(suite)
    except SuiteError as exc:
        raise MergeError(str(exc)) from None


def record_lines(path: Path) -> list[dict[str, Any]]:
    """:func:`~termgym.factory.swesynth.known.record_lines`, its errors a :class:`MergeError`."""
    try:
        return known_record_lines(path)
    except SuiteError as exc:
        raise MergeError(str(exc)) from None


def _baseline(suite: Path, info: dict[str, Any], repo: str) -> list[str]:
    path = suite / info.get("baseline", f"baselines/{repo}.json")
    try:
        return list(json.loads(path.read_text(encoding="utf-8"))["tests"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MergeError(f"{path}: the baseline of {repo} does not read: {exc}") from None


def _differs(ours: list[str], theirs: list[str]) -> str:
    only_ours = [t for t in ours if t not in set(theirs)]
    only_theirs = [t for t in theirs if t not in set(ours)]
    if not only_ours and not only_theirs:
        return "the same tests in another order"
    parts = []
    if only_theirs:
        parts.append(f"{len(only_theirs)} only in the source (first: {only_theirs[0]})")
    if only_ours:
        parts.append(f"{len(only_ours)} only in the destination (first: {only_ours[0]})")
    return "; ".join(parts)


def merge_suites(src: str | Path, dst: str | Path, *, dry_run: bool = False,
                 max_per_function: int | None = None) -> MergeResult:
    """Merge the compact suite ``src`` into ``dst`` (see the module's doc); returns what moved."""
    from termgym.factory.swesynth.bundle import TEST_ID_FRACTION, project_held_out

    cap = MAX_TASKS_PER_FUNCTION if max_per_function is None else max_per_function
    src, dst = Path(src), Path(dst)
    if src.resolve() == dst.resolve():
        raise MergeError(f"{src}: a suite cannot be merged into itself")
    theirs, ours = _index(src), _index(dst)
    result = MergeResult()
    plan = []
    for repo, info in sorted((theirs.get("repos") or {}).items()):
        if "records" not in info:
            raise MergeError(f"{src / 'suite.json'}: project {repo} has no records file")
        lines = record_lines(src / info["records"])
        checks = {line["task_id"]: line for line in record_lines(src / "behaviour" / f"{repo}.jsonl")}
        mine = (ours.get("repos") or {}).get(repo)
        if mine is None:
            plan.append((repo, info, lines, checks, None, []))
            continue
        for key in SAME_SETTINGS:
            if info.get(key) != mine.get(key):
                hint = (f" (where the project now deselects more tests, `termgym swesynth follow-project {repo} "
                        f"--suite {dst}` brings the destination along)" if key == "test_command" else "")
                raise MergeError(f"project {repo}: {key} differs: {info.get(key)!r} in {src / 'suite.json'}, "
                                 f"{mine.get(key)!r} in {dst / 'suite.json'}{hint}")
        base_theirs, base_ours = _baseline(src, info, repo), _baseline(dst, mine, repo)
        if base_theirs != base_ours:
            raise MergeError(f"project {repo}: the baselines differ ({_differs(base_ours, base_theirs)}): "
                             f"{src / info.get('baseline', f'baselines/{repo}.json')} against "
                             f"{dst / mine.get('baseline', f'baselines/{repo}.json')}; generate the tasks "
                             "again with the destination's project settings")
        existing = {line["task_id"]: line for line in record_lines(dst / mine["records"])}
        fresh = []
        load = function_load(list(existing.values()))  # of what the project holds with what is kept so far
        for line in lines:
            held = existing.get(line["task_id"])
            if held is None:
                after = function_load([*existing.values(), *fresh, line])
                # over the cap: the load of a function it breaks grows past the cap
                if cap and any(after.get(key, 0) > load.get(key, 0) and after.get(key, 0) > cap
                               for key in cap_keys(line)):
                    result.over_cap[repo] = result.over_cap.get(repo, 0) + 1
                    continue
                fresh.append(line)
                load = after
            elif held == line:
                result.same[repo] = result.same.get(repo, 0) + 1
            elif (held.get("bug") or {}).get("patch") == (line.get("bug") or {}).get("patch"):
                # the same bug made again (another run, another report): the suite has it already
                result.same_bug[repo] = result.same_bug.get(repo, 0) + 1
            else:
                raise MergeError(f"task {line['task_id']}: {dst / mine['records']} holds another record "
                                 f"under that id than {src / info['records']}")
        plan.append((repo, info, fresh, checks, mine, list(existing.values())))
    if dry_run:
        for repo, _info, lines, _checks, mine, _old in plan:
            result.added[repo] = len(lines)
            if mine is None:
                result.new_projects.append(repo)
        return result

    for repo, info, lines, checks, mine, old in plan:
        held_out = project_held_out(dst, repo)
        records_rel = (mine or info)["records"]
        write_json_lines(dst / records_rel, old + lines)
        new_ids = [line["task_id"] for line in lines]
        sidecar = dst / "behaviour" / f"{repo}.jsonl"
        added_checks = [checks[tid] for tid in new_ids if tid in checks]
        if added_checks:
            write_json_lines(sidecar, record_lines(sidecar) + added_checks, sort_keys=True)
        if mine is None:
            base_rel = info.get("baseline", f"baselines/{repo}.json")
            (dst / base_rel).parent.mkdir(parents=True, exist_ok=True)
            (dst / base_rel).write_text((src / base_rel).read_text(encoding="utf-8"), encoding="utf-8")
            result.new_projects.append(repo)
        with locked_index(dst) as index:
            generation = (theirs.get("generation") or {}).get(repo)
            if mine is None:
                index.setdefault("repos", {})[repo] = info
                if generation is not None:
                    index.setdefault("generation", {})[repo] = generation
            elif generation is not None and lines:
                index.setdefault("merged_generation", {}).setdefault(repo, []).append(
                    {**generation, "kept": len(lines), "merged_from": theirs.get("name") or src.name})
            splits = {k: list(v) for k, v in (index.get("splits") or {}).items()}
            for tid in new_ids:
                split = "test" if held_out else split_for(tid, TEST_ID_FRACTION, "test_id")
                splits.setdefault(split, []).append(tid)
                result.splits[split] = result.splits.get(split, 0) + 1
            index["splits"] = {k: sorted(v) for k, v in splits.items()}
            history = (theirs.get("history") or {}).get(repo)
            if history is not None:
                held = (index.setdefault("history", {})).get(repo)
                index["history"][repo] = ([*held] if isinstance(held, list) else [held] if held else []) + [history]
            if held_out and repo not in (index.get("held_out_projects") or []):
                index["held_out_projects"] = sorted({*(index.get("held_out_projects") or []), repo})
        why = _merge_selection(src, dst, repo, new_ids)  # after the splits: a backfill reads the tasks from them
        if why:
            result.selection_missing[repo] = why
        result.added[repo] = len(lines)
    if "named_share" in ours:  # the share of tasks whose test file names the module, over every task
        from termgym.factory.swesynth.bundle import named_share

        share = named_share(dst)
        with locked_index(dst) as index:
            index["named_share"] = share
    return result


def _merge_selection(src: Path, dst: Path, repo: str, task_ids: list[str]) -> str | None:
    """Add the tasks' test selections to ``dst``'s coverage map of ``repo``; why not, or None."""
    theirs_path, ours_path = src / "selection" / f"{repo}.json", dst / "selection" / f"{repo}.json"
    if not task_ids:
        return None
    if not theirs_path.is_file():
        return "the source has no coverage map for it (its tasks grade on every required test)"
    theirs = json.loads(theirs_path.read_text(encoding="utf-8"))
    if not ours_path.is_file():
        ours_path.parent.mkdir(parents=True, exist_ok=True)
        ours_path.write_text(theirs_path.read_text(encoding="utf-8"), encoding="utf-8")
        return None
    ours = json.loads(ours_path.read_text(encoding="utf-8"))
    for key in ("version", "tree_hash", "tests", "always", "functions"):
        if theirs.get(key) != ours.get(key):
            # the destination's own map gives the new tasks their selections (no new run while it is current)
            from termgym.factory.swesynth.selection_build import backfill

            try:
                backfill(dst, [repo], log=lambda _line: None)
            except (OSError, ValueError, RuntimeError) as exc:
                return (f"the two coverage maps differ in {key!r} and the destination's could not be extended "
                        f"({exc}; its new tasks grade on every required test)")
            return None
    tasks = dict(ours.get("tasks") or {})
    tasks.update({tid: sel for tid, sel in (theirs.get("tasks") or {}).items() if tid in set(task_ids)})
    ours["tasks"] = dict(sorted(tasks.items()))
    write_json(ours_path, ours, separators=(",", ":"))
    return None


__all__ = ["MergeError", "MergeResult", "SAME_SETTINGS", "merge_suites", "record_lines"]
