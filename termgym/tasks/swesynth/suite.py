"""The SWE-SYNTH suite: task records from a suite folder (compact per-project JSONL or task folders),
splits held out by project, named suites (``toy``, ``projects``, ``v1``, ``v2``) and the ``difficulty=`` filter.

Each task is a :class:`termgym.tasks.swesynth.task.SweSynthTask`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from termgym.tasks.base import TaskSuite
from termgym.tasks.swesynth.records import RecordError, TaskRecord, read_records_file, read_task
from termgym.tasks.swesynth.store import read_compact
from termgym.tasks.swesynth.task import SweSynthTask
from termgym_data import SWESYNTH_DIR

if TYPE_CHECKING:
    from termgym.tasks.swesynth.distinct import TaskKeys

DIFFICULTIES = ("easy", "medium", "hard")


def _difficulties(value: str | Sequence[str] | None) -> set[str] | None:
    """The ``difficulty=`` option as a set; an unknown tier is an error naming the known ones."""
    if value is None or value == "" or value == "all":
        return None
    wanted = {value} if isinstance(value, str) else set(value)
    unknown = sorted(wanted - set(DIFFICULTIES))
    if unknown:
        raise ValueError(f"difficulty must be one of {', '.join(DIFFICULTIES)} (or a list of them), "
                         f"not {', '.join(map(repr, unknown))}")
    return wanted


#: The toy suite (task folders from the small projects written for termgym).
BUNDLED_DIR = SWESYNTH_DIR / "tasks"
#: The toy suite: tasks from the small projects written for termgym (ledgerly, planwise, textkit).
TOY_DIR = SWESYNTH_DIR / "tasks"
#: The first real-project suite (termgym 0.2's default: 1,323 tasks from 12 projects), ``path="v1"``.
SUITE_V1_DIR = SWESYNTH_DIR / "suite"
#: The v2 real-project suite: every report check enforced at generation, 50 projects, resumable
#: (``termgym swesynth bundle --resume`` continues it), ``path="v2"``.
SUITE_V2_DIR = SWESYNTH_DIR / "suite-v2"
#: The default real-project suite: what ``termgym/SweSynth-v0`` serves, ``path="projects"``, and what
#: ``termgym swesynth bundle|audit|card|summary|provision`` work on when given no suite.
SUITE_DIR = SUITE_V2_DIR
#: Suites known by name: ``SweSynthSuite("toy")``, ``gym.make("termgym/SweSynth-v0", path="toy")``,
#: ``termgym eval termgym/SweSynth-v0 --env-arg path=toy``; ``"projects"`` is the default
#: real-project suite (now ``"v2"``), ``"v1"`` and ``"v2"`` pin a version. A folder of that name is ``./toy``.
NAMED_SUITES: dict[str, Path] = {"toy": TOY_DIR, "projects": SUITE_DIR, "v1": SUITE_V1_DIR, "v2": SUITE_V2_DIR}
#: ``SweSynthSuite(behaviour=...)``: serve only tasks with a behaviour check, or every task.
BEHAVIOUR_POLICIES = ("required", "any")
#: ``fix_size=`` values: every task; only tasks whose fix is more than one token or a release-history
#: revert; only release-history reverts (:func:`~termgym.tasks.swesynth.distinct.fix_rank`).
FIX_SIZES = ("any", "larger", "history")


#: Why a task is not served although its check could decide (:meth:`SweSynthSuite.report_problem`).
REPORT_FAILS = "an example of its report does not show what the report says when run"


def serves_distinct(suite_dir: str | Path | None) -> bool:
    """Whether the suite in ``suite_dir`` leaves near-duplicates out by default (``distinct=None``):
    the default real-project suite does (:data:`SUITE_DIR`); a suite of your own does when asked."""
    return suite_dir is not None and Path(suite_dir).resolve() == SUITE_DIR.resolve()


class UnsafeGradingWarning(UserWarning):
    """A suite is served whose grades its tests alone decide (no task has a behaviour check)."""


class SweSynthSuite(TaskSuite):
    """SWE-SYNTH tasks from a suite directory, a folder of task folders, or a records file.

    ``source`` is a suite name (:data:`NAMED_SUITES`: ``"toy"``), a directory with ``suite.json``
    (what ``termgym swesynth generate`` writes and what ships in the package), a directory of task folders, a single task folder, or a
    ``.json``/``.jsonl`` file of records in the public shape (for example records pointing at
    Docker images). ``bug_types``, ``repos`` and ``difficulty`` (``easy``/``medium``/``hard``, or a
    list of them, from each record's ``difficulty``) keep only matching tasks. A suite directory in
    the compact storage (:mod:`~termgym.tasks.swesynth.store`) is read the same way.

    ``behaviour`` says which tasks the splits serve: ``"required"`` only tasks that carry a
    behaviour check (:mod:`~termgym.tasks.swesynth.behaviour`), whose grade is decided outside the
    graded process, and whose check tells the bug apart on at least one input no test makes (so a
    table of the tests' answers cannot pass it), for every function the bug changes (so fixing one
    of two broken functions cannot pass it; :func:`~termgym.tasks.swesynth.behaviour.servable`); ``"any"`` every task (a task without a check is decided by its tests alone,
    which the agent's code can forge: docs/security.md). The default is ``"required"`` for the
    bundled suites (``source`` ``None`` or a name in :data:`NAMED_SUITES`) and for every suite of your
    own in which any task carries a check that decides alone (``generate`` records one for every
    task it keeps); a suite with none is served as ``"any"`` with an :class:`UnsafeGradingWarning`.
    ``distinct`` (default: on for the default real-project suite, where ``behaviour="required"``)
    serves no near-duplicates (:mod:`~termgym.tasks.swesynth.distinct`): at most three tasks per
    first repro call and per (function, bug type), no ``test_id`` task that is a near-duplicate of a
    ``train`` task (it moves to ``train``), no project above 5 % of the served tasks, no bug type
    above 20 %, fewer than half of them one-line fixes (the median fix spans two or more lines); ``distinct=False``
    serves every task the behaviour policy allows. ``unserved`` counts what each rule left out.
    ``fix_size`` (:data:`FIX_SIZES`): ``"larger"`` serves only tasks whose fix is more than one token
    or a change the project's maintainers made between releases, ``"history"`` only the latter; the
    other rules then apply to what is left (a larger-fix suite of its own, near-duplicates and
    project shares counted within it).
    ``load(task_id)`` still loads any task of the suite by id.
    """

    def __init__(self, source: str | Path | Sequence[TaskRecord] | None = None, *,
                 bug_types: Sequence[str] | None = None, repos: Sequence[str] | None = None,
                 cache_dir: str | Path | None = None, grade_timeout: float | None = None,
                 name: str | None = None, difficulty: str | Sequence[str] | None = None,
                 grade_tests: str = "selected", behaviour: str | None = None,
                 distinct: bool | None = None, fix_size: str = "any") -> None:
        from termgym.tasks.swesynth.selection import GRADE_TESTS

        if grade_tests not in GRADE_TESTS:
            raise ValueError(f"grade_tests must be one of {', '.join(GRADE_TESTS)}, not {grade_tests!r}")
        if behaviour not in (None, *BEHAVIOUR_POLICIES):
            raise ValueError(f"behaviour must be one of {', '.join(BEHAVIOUR_POLICIES)}, not {behaviour!r}")
        if fix_size not in FIX_SIZES:
            raise ValueError(f"fix_size must be one of {', '.join(FIX_SIZES)}, not {fix_size!r}")
        bundled = source is None or (isinstance(source, str) and source in NAMED_SUITES)
        #: None until loaded: then "required" wherever a task has a check that decides alone
        self.behaviour = behaviour or ("required" if bundled else None)
        self.cache_dir = cache_dir
        self.grade_timeout = grade_timeout
        self.grade_tests = grade_tests
        self._splits: dict[str, list[str]] = {}
        self._records: dict[str, TaskRecord] = {}
        self._folders: dict[str, Path] = {}
        self._repos: dict[str, dict[str, Any]] = {}
        self._raw: dict[str, dict[str, Any]] = {}  # compact storage: record dicts, parsed on use
        self._base = None
        self.generation: dict[str, Any] = {}
        self.unchecked = 0  # tasks left out of the splits for want of a behaviour check that decides alone
        self.unserved: dict[str, int] = {}  # why, per reason (behaviour="required", distinct)
        self.moved_to_train: list[str] = []  # test_id near-duplicates of train tasks (distinct)
        self.duplicates = 0  # tasks left out as near-duplicates or over the project share (distinct)
        if source is None:
            source = BUNDLED_DIR
        if isinstance(source, str) and source in NAMED_SUITES:
            source = NAMED_SUITES[source]
        if isinstance(source, (str, Path)):
            self._load_path(Path(source))
            self.name = name or self._name
        else:
            for record in source:
                self._add_record(record, "train")
            self.name = name or "swesynth"
        self._filter(bug_types, repos, _difficulties(difficulty), fix_size)
        if self.behaviour is None:
            self.behaviour = self._default_behaviour()
        if self.behaviour == "required":
            self._keep_checked()
        if distinct is None:
            distinct = self.behaviour == "required" and serves_distinct(self._base)
        #: whether near-duplicates are left out (:mod:`~termgym.tasks.swesynth.distinct`)
        self.distinct = bool(distinct)
        if self.distinct:
            self._keep_distinct()

    # loading ---------------------------------------------------------------------------------

    def _load_path(self, path: Path) -> None:
        self._name = path.stem
        if path.is_file():
            for record in read_records_file(path):
                self._add_record(record, "train")
            return
        if not path.is_dir():
            raise FileNotFoundError(f"SWE-SYNTH suite {path} does not exist (expected a suite directory, "
                                    "a task folder or a .json/.jsonl records file)")
        index = path / "suite.json"
        if index.is_file():
            try:
                data = json.loads(index.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise RecordError(f"{index}: not valid JSON ({exc})") from None
            self._name = data.get("name") or path.name
            self._repos = data.get("repos") or {}
            self._base = path
            self.generation = data.get("generation") or {}
            if data.get("storage") == "compact":
                self._raw, self._splits = read_compact(path, data)
                if not self._splits:
                    raise RecordError(f"{index}: 'splits' is empty")
                return
            splits = data.get("splits") or {}
            if not splits:
                raise RecordError(f"{index}: 'splits' is empty")
            for split, ids in splits.items():
                for tid in ids:
                    folder = path / tid
                    if not (folder / "task.json").is_file():
                        raise RecordError(f"{index}: split {split!r} lists {tid!r} but {folder}/task.json is missing")
                    self._folders[tid] = folder
                    self._splits.setdefault(split, []).append(tid)
            return
        if (path / "task.json").is_file():
            record = read_task(path)
            self._folders[record.task_id] = path
            self._splits["train"] = [record.task_id]
            return
        for folder in sorted(p for p in path.iterdir() if (p / "task.json").is_file()):
            record = read_task(folder)
            self._folders[record.task_id] = folder
            self._splits.setdefault("train", []).append(record.task_id)
        if not self._folders:
            raise RecordError(f"{path}: no suite.json and no task folders (with task.json) inside")

    def _add_record(self, record: TaskRecord, split: str) -> None:
        if record.task_id in self._records:
            raise RecordError(f"duplicate task id {record.task_id!r}")
        self._records[record.task_id] = record
        self._splits.setdefault(split, []).append(record.task_id)

    def record(self, task_id: str) -> TaskRecord:
        """The record of one task (read from disk on first use)."""
        task_id = str(task_id)
        if task_id not in self._records and task_id in self._raw:
            data = dict(self._raw[task_id])
            where = data.pop("_where", "record")
            self._records[task_id] = TaskRecord.from_json(data, where=where, repos=self._repos,
                                                          repos_base=self._base)
        if task_id not in self._records:
            folder = self._folders.get(task_id)
            if folder is None:
                raise KeyError(f"SWE-SYNTH suite {self.name!r} has no task {task_id!r}")
            self._records[task_id] = read_task(folder, repos=self._repos, repos_base=self._base)
        return self._records[task_id]

    def repo_of(self, task_id: str) -> str:
        """The task's repository name (without building its record when compact)."""
        return self._facts(str(task_id))[1]

    def _facts(self, tid: str) -> tuple[list[str], str, str | None]:
        """``(bug types, repo, difficulty)`` of a task, without building its record when compact."""
        raw = self._raw.get(tid)
        if raw is not None:
            return list((raw.get("bug") or {}).get("bug_types") or []), str(raw.get("repo")), raw.get("difficulty")
        rec = self.record(tid)
        return rec.bug_types, rec.repo, rec.difficulty

    def fix_rank(self, task_id: str) -> int:
        """How real the task's fix is (:func:`~termgym.tasks.swesynth.distinct.fix_rank`: release
        history, more than one token, one token), without building its record when compact."""
        from termgym.tasks.swesynth.distinct import fix_rank

        raw = self._raw.get(task_id)
        if raw is not None:
            return fix_rank(raw.get("origin"), raw.get("signals"))
        record = self.record(task_id)
        return fix_rank(record.origin, record.signals)

    def _filter(self, bug_types: Sequence[str] | None, repos: Sequence[str] | None,
                difficulty: set[str] | None = None, fix_size: str = "any") -> None:
        if fix_size != "any":
            from termgym.tasks.swesynth.distinct import HISTORY, ONE_TOKEN

            for split, ids in self._splits.items():
                self._splits[split] = [tid for tid in ids if (self.fix_rank(tid) == HISTORY if fix_size == "history"
                                                             else self.fix_rank(tid) != ONE_TOKEN)]
        if not bug_types and not repos and not difficulty:
            return
        wanted_types = set(bug_types or [])
        wanted_repos = set(repos or [])
        for split, ids in self._splits.items():
            keep = []
            for tid in ids:
                types, repo, tier = self._facts(tid)
                if wanted_types and not wanted_types & set(types):
                    continue
                if wanted_repos and repo not in wanted_repos:
                    continue
                if difficulty and tier not in difficulty:
                    continue
                keep.append(tid)
            self._splits[split] = keep

    def behaviour_check_of(self, task_id: str) -> dict[str, Any] | None:
        """The task's stored behaviour check, or ``None`` (without building its record when compact)."""
        raw = self._raw.get(task_id)
        if raw is not None:
            return raw.get("behaviour") or None
        return self.record(task_id).behaviour or None

    def has_behaviour_check(self, task_id: str) -> bool:
        """Whether the task carries a behaviour check (without building its record when compact)."""
        return bool(self.behaviour_check_of(task_id))

    def has_servable_check(self, task_id: str) -> bool:
        """Whether the task's check tells the bug apart on an input no test makes, for every function
        the bug changes (what ``behaviour="required"`` serves; :func:`~termgym.tasks.swesynth.behaviour.servable`)."""
        from termgym.tasks.swesynth.behaviour import servable

        return servable(self.behaviour_check_of(task_id))

    def report_problem(self, task_id: str) -> str:
        """Why the task's report is not served (``""``: it is): set by ``termgym swesynth reports``
        on a task whose report could not be written again and whose examples, run on the clean and
        the buggy tree, do not show what the report says (the record's ``report_fails``)."""
        raw = self._raw.get(task_id)
        return str((raw or {}).get("report_fails") or "")

    def _default_behaviour(self) -> str:
        """``"required"`` when any task of the suite carries a check that decides alone (a suite
        ``generate`` made records one for every task it keeps); else ``"any"``, said loudly: every
        grade of such a suite is decided by tests the agent's code can forge."""
        total = sum(len(ids) for ids in self._splits.values())
        if any(self.has_servable_check(tid) for ids in self._splits.values() for tid in ids) or not total:
            return "required"
        warnings.warn(f"SWE-SYNTH suite {self.name!r}: none of its {total} tasks carries a behaviour check that "
                      "decides a grade alone, so every task is graded by its tests alone, which the agent's code "
                      "can forge (docs/security.md). Record checks with `termgym swesynth behaviour --suite "
                      "DIR`; pass behaviour='any' to serve such a suite without this warning.",
                      UnsafeGradingWarning, stacklevel=4)
        return "any"

    def _keep_checked(self) -> None:
        from termgym.tasks.swesynth.behaviour import unservable_reason

        total = sum(len(ids) for ids in self._splits.values())
        for split, ids in self._splits.items():
            kept = []
            for tid in ids:
                if self.has_servable_check(tid) and not self.report_problem(tid):
                    kept.append(tid)
                else:
                    why = (unservable_reason(self.behaviour_check_of(tid), name_functions=False)
                           if not self.has_servable_check(tid) else REPORT_FAILS)
                    self.unserved[why] = self.unserved.get(why, 0) + 1
            self._splits[split] = kept
        self.unchecked = total - sum(len(ids) for ids in self._splits.values())
        if total and self.unchecked == total:
            raise RecordError(f"SWE-SYNTH suite {self.name!r}: none of its {total} tasks carries a behaviour check "
                              "that tells the bug apart on an input its tests do not make (record them with "
                              "`termgym swesynth behaviour`, mark older ones with `--heldout`), or pass "
                              "behaviour='any' to serve tasks graded by their tests alone")

    def task_keys(self, task_id: str) -> TaskKeys:
        """What the near-duplicate rule compares the task by (:func:`~termgym.tasks.swesynth.distinct.task_keys`)."""
        from termgym.tasks.swesynth.distinct import task_keys

        raw = self._raw.get(task_id)
        if raw is not None:
            return task_keys(str(raw.get("repo")), raw.get("bug") or {}, origin=raw.get("origin"),
                             signals=raw.get("signals"), fix_patch=str(raw.get("fix_patch") or ""))
        record = self.record(task_id)
        return task_keys(record.repo, {"problem_statement": record.problem_statement, "mutations": record.mutations},
                         origin=record.origin, signals=record.signals, fix_patch=record.fix_patch)

    def _keep_distinct(self) -> None:
        from termgym.tasks.swesynth.distinct import select

        keys = {tid: self.task_keys(tid) for ids in self._splits.values() for tid in ids}
        chosen = select(self._splits, keys)
        for why in chosen.dropped.values():
            self.unserved[why] = self.unserved.get(why, 0) + 1
        self.duplicates = len(chosen.dropped)
        self.moved_to_train = chosen.moved
        self._splits = chosen.splits

    def projects(self) -> dict[str, int]:
        """Task count per project (repo) over every split."""
        counts: dict[str, int] = {}
        for ids in self._splits.values():
            for tid in ids:
                repo = self._facts(tid)[1]
                counts[repo] = counts.get(repo, 0) + 1
        return counts

    # TaskSuite -------------------------------------------------------------------------------

    def splits(self) -> Sequence[str]:
        return tuple(self._splits)

    def task_ids(self, split: str | None = None) -> Sequence[str]:
        if split is None:
            split = "train" if "train" in self._splits else next(iter(self._splits), "train")
        if split == "all":
            return [t for ids in self._splits.values() for t in ids]
        if split not in self._splits:
            raise KeyError(f"SWE-SYNTH suite {self.name!r} has no split {split!r}; splits: {', '.join(self._splits)}")
        return list(self._splits[split])

    def selection_file(self, repo: str) -> Path | None:
        """The project's coverage map for fast grades (``<suite>/selection/<repo>.json``), if any."""
        if self._base is None:
            return None
        path = Path(self._base) / "selection" / f"{repo}.json"
        return path if path.is_file() else None

    def load(self, task_id: str) -> SweSynthTask:
        record = self.record(task_id)
        return SweSynthTask(record, cache_dir=self.cache_dir, grade_timeout=self.grade_timeout,
                            grade_tests=self.grade_tests, selection_file=self.selection_file(record.repo))
