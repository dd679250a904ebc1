"""The Harbor suite: every Harbor or Terminal-Bench task folder under a directory."""


from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from termgym.tasks.base import TaskSuite
from termgym.tasks.harbor.config import TaskFormatError
from termgym.tasks.harbor.loader import discover
from termgym.tasks.harbor.task import HarborTask
from termgym_data import HARBOR_SAMPLES_DIR

SAMPLES_DIR = HARBOR_SAMPLES_DIR


class HarborSuite(TaskSuite):
    """Every task folder under ``tasks_dir`` (default: the bundled samples), ids sorted by folder name.

    Tasks that fail to load are kept out of :meth:`task_ids` and listed in :attr:`broken`
    (id -> error naming the file and field); loading one raises :class:`TaskFormatError`.

    ``backend`` is a hint: with ``"local"``, only local-eligible tasks are listed (``split="all"``
    still lists every task, and loading one that needs Docker fails with a clear error rather than
    trying to build an image). ``task_ids`` optionally restricts the suite to some ids.
    """

    name = "harbor"

    def __init__(
        self,
        tasks_dir: str | Path | None = None,
        *,
        backend: str | None = None,
        task_ids: Sequence[str] | None = None,
    ) -> None:
        self.tasks_dir = Path(tasks_dir).expanduser() if tasks_dir is not None else SAMPLES_DIR
        self.backend = backend
        found = discover(self.tasks_dir, backend=backend)
        self._tasks = found.tasks
        self.broken: dict[str, str] = found.broken
        if task_ids is not None:
            unknown = [t for t in task_ids if t not in self._tasks and t not in self.broken]
            if unknown:
                raise KeyError(f"no task(s) {', '.join(map(repr, unknown))} in {self.tasks_dir}")
            keep = set(task_ids)
            self._tasks = {k: v for k, v in self._tasks.items() if k in keep}
            self.broken = {k: v for k, v in self.broken.items() if k in keep}
        if not self._tasks and not self.broken:
            raise ValueError(f"no Harbor or Terminal-Bench tasks (folders with task.toml or task.yaml) in {self.tasks_dir}")

    def task_ids(self, split: str | None = None) -> Sequence[str]:
        if split in (None, "train", "test"):
            if self.backend == "local":
                return [tid for tid, task in self._tasks.items() if task.local_ok]
            return list(self._tasks)
        if split == "all":
            return list(self._tasks)
        if split == "local":
            return [tid for tid, task in self._tasks.items() if task.local_ok]
        raise KeyError(f"suite {self.name!r} has no split {split!r}; splits: train, all, local")

    def splits(self) -> Sequence[str]:
        return ("train", "all", "local")

    def load(self, task_id: str) -> HarborTask:
        task_id = str(task_id)
        if task_id in self._tasks:
            return self._tasks[task_id]
        if task_id in self.broken:
            raise TaskFormatError(self.tasks_dir / task_id, f"task {task_id!r} is broken: {self.broken[task_id]}")
        raise KeyError(f"suite {self.name!r} ({self.tasks_dir}) has no task {task_id!r}")
