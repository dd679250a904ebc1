"""Compact suite storage: one JSONL of records and one baseline per project.

A suite of thousands of tasks cannot afford a folder and a 17 KB ``task.json`` per task that
repeats the project's whole pass-to-pass list. The compact layout is::

    suite.json                 name, "storage": "compact", repos (how to test each project and
                               where its records and baseline are), splits, generation summaries
    records/<project>.jsonl    one task record per line (the public shape without ``all_tests``)
    baselines/<project>.json   the project's required tests (``tests``): every record's
                               ``all_tests``; the failing ones are the record's ``target_tests``

The pass-to-pass set of a task is the baseline's tests minus its ``target_tests``. Loading reads
the JSONL lines into dictionaries and builds a :class:`TaskRecord` only when a task is used, so
``termgym list`` and ``gym.make`` stay fast. Writers from several processes (one per project) take
a lock on ``suite.json`` while they merge their part into it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from termgym.jsonl import json_lines, write_json, write_json_lines
from termgym.tasks.swesynth.records import RECORD_VERSION, RecordError, TaskRecord

STORAGE = "compact"


def split_for(task_id: str, test_fraction: float, test_name: str = "test") -> str:
    """The fixed split of a task: a hash of its id, so adding tasks never moves old ones."""
    bucket = int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return test_name if bucket < test_fraction else "train"


@contextmanager
def locked_index(out: Path) -> Iterator[dict[str, Any]]:
    """``suite.json`` of ``out`` as a dictionary, written back on exit, under an exclusive lock."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".suite.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = out / "suite.json"
        index = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        yield index
        write_json(path, index, indent=1)


def record_line(record: TaskRecord) -> dict[str, Any]:
    """A record's JSONL form: the public shape without ``all_tests`` (the baseline holds them)."""
    data = record.to_json()
    data.pop("original", None)
    data["original"] = {"all_tests": "baseline"}
    for key in ("test_command", "source_dirs", "test_dirs", "workdir"):
        data.pop(key, None)  # the same for every task of the project: in suite.json's repos entry
    return data


def write_compact(out: str | Path, records: Sequence[TaskRecord], *, prior_lines: Sequence[dict[str, Any]] = (),
                  base_tests: Sequence[str], name: str,
                  project: str | None, test_command: str, source_dirs: Sequence[str], test_dirs: Sequence[str],
                  pristine: Path, repo_dir_ref: str | None, test_fraction: float = 0.1,
                  split: str | Callable[[str], str] | None = None, suite_name: str | None = None,
                  generation: dict[str, Any] | None = None, workdir: str = "/app") -> None:
    """Write (replace) project ``name``'s records and baseline in the compact suite ``out``.

    The project's tree is named by ``project`` (a bundled project), ``repo_dir_ref`` (a path
    relative to ``out``) or else copied to ``out/repos/<name>``. ``split`` puts every task in one
    split (a name) or decides per task id (a function); by default ``test_fraction`` of the ids
    (by hash) go to ``test``. ``prior_lines`` are record lines an earlier run wrote (``generate``'s
    ``resume``): they are written first, as they are.
    """
    from termgym.tasks.swesynth.tree import copy_tree

    out = Path(out)
    (out / "records").mkdir(parents=True, exist_ok=True)
    (out / "baselines").mkdir(parents=True, exist_ok=True)
    tests = list(base_tests)
    for record in records:
        if record.all_tests != tests:
            raise RecordError(f"task {record.task_id}: all_tests differ from the project's baseline")
    records_path = out / "records" / f"{name}.jsonl"
    write_json_lines(records_path, [*prior_lines, *(record_line(record) for record in records)])
    sidecar = out / "behaviour" / f"{name}.jsonl"
    prior_ids = {str(line.get("task_id")) for line in prior_lines}
    checks = {tid: check for tid, check in _behaviour_lines(sidecar).items() if tid in prior_ids}
    checks.update({record.task_id: record.behaviour for record in records if record.behaviour})
    if checks:  # behaviour checks live beside the records: one line per task
        write_json_lines(sidecar, ({"task_id": task_id, "behaviour": check} for task_id, check in checks.items()),
                         sort_keys=True)
    write_json(out / "baselines" / f"{name}.json", {"repo": name, "tests": tests}, indent=0)
    entry: dict[str, Any] = {"test_command": test_command, "source_dirs": list(source_dirs),
                             "test_dirs": list(test_dirs), "workdir": workdir,
                             "records": f"records/{name}.jsonl", "baseline": f"baselines/{name}.json"}
    if project:
        entry["project"] = project
    elif repo_dir_ref is not None:
        entry["path"] = repo_dir_ref
    else:
        dest = out / "repos" / name
        if not dest.exists():
            copy_tree(pristine, dest)
        entry["path"] = f"repos/{name}"
    decide = split if callable(split) else (lambda tid: split) if split else (
        lambda tid: split_for(tid, test_fraction))
    with locked_index(out) as index:
        index["name"] = suite_name or index.get("name") or out.name
        index["version"] = RECORD_VERSION
        index["storage"] = STORAGE
        repos = index.setdefault("repos", {})
        repos[name] = entry
        prefix = f"{name}-"
        splits = {k: [t for t in v if not t.startswith(prefix)] for k, v in (index.get("splits") or {}).items()}
        for task_id in [*(line["task_id"] for line in prior_lines), *(record.task_id for record in records)]:
            splits.setdefault(decide(task_id), []).append(task_id)
        index["splits"] = {k: sorted(v) for k, v in splits.items()}
        if generation is not None:
            index.setdefault("generation", {})[name] = generation


def read_compact(path: Path, index: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """The raw record dictionaries (by task id, each with its repo's settings and ``all_tests``)
    and the splits of a compact suite. Errors name the file and line."""
    raw: dict[str, dict[str, Any]] = {}
    for repo, info in (index.get("repos") or {}).items():
        if "records" not in info:
            continue
        records_path = path / info["records"]
        baseline_path = path / info.get("baseline", f"baselines/{repo}.json")
        try:
            tests = json.loads(baseline_path.read_text(encoding="utf-8"))["tests"]
        except FileNotFoundError:
            raise RecordError(f"{path / 'suite.json'}: repo {repo!r} names the baseline {baseline_path}, "
                              "which does not exist") from None
        except (ValueError, KeyError) as exc:
            raise RecordError(f"{baseline_path}: not a baseline with 'tests' ({exc})") from None
        if not records_path.is_file():
            raise RecordError(f"{path / 'suite.json'}: repo {repo!r} names the records file {records_path}, "
                              "which does not exist")
        checks = _behaviour_lines(path / info.get("behaviour", f"behaviour/{repo}.jsonl"))
        for n, data, problem in json_lines(records_path):
            if problem is not None:
                raise RecordError(f"{records_path}:{n}: {problem}")
            if not isinstance(data, dict) or not data.get("task_id"):
                raise RecordError(f"{records_path}:{n}: a record needs a 'task_id'")
            data["original"] = {"all_tests": tests}
            data.setdefault("repo", repo)
            data["_where"] = f"{records_path}:{n}"
            check = checks.get(str(data["task_id"]))
            if check:
                data["behaviour"] = check
            raw[str(data["task_id"])] = data
    splits: dict[str, list[str]] = {}
    for split, ids in (index.get("splits") or {}).items():
        for tid in ids:
            if tid not in raw:
                raise RecordError(f"{path / 'suite.json'}: split {split!r} lists {tid!r}, which no records file holds")
            splits.setdefault(split, []).append(tid)
    return raw, splits


def _behaviour_lines(path: Path) -> dict[str, dict[str, Any]]:
    """``task_id -> behaviour check`` from a project's sidecar (tasks recorded without one are left out)."""
    out: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return out
    for n, data, problem in json_lines(path):
        if problem is not None or not isinstance(data, dict) or not isinstance(data.get("task_id"), str):
            raise RecordError(f"{path}:{n}: a behaviour line needs a 'task_id' ({problem or 'malformed'})")
        out[data["task_id"]] = data.get("behaviour")  # the last line of a task wins
    return {tid: check for tid, check in out.items() if check}
