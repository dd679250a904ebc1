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

    ``dataset="terminal-bench@2.0"`` serves a registered dataset instead of a folder: it is
    downloaded into termgym's cache on first use (:mod:`termgym.tasks.harbor.registry`; ``registry``
    names another registry file or URL) and read from there offline afterwards.

    Run options, as Harbor's job flags: ``force_build`` builds each task's image from its
    Dockerfile even when it names a prebuilt ``docker_image`` (``harbor run --force-build``);
    ``timeout_multiplier`` scales the agent, verifier and build timeouts (``--timeout-multiplier``);
    ``network="off"`` runs every sandbox without network and refuses the tasks whose verifier or
    image build needs it (``"task"``, the default, follows each task's ``allow_internet``).
    """

    name = "harbor"

    def __init__(
        self,
        tasks_dir: str | Path | None = None,
        *,
        backend: str | None = None,
        task_ids: Sequence[str] | None = None,
        dataset: str | None = None,
        registry: str | None = None,
        force_build: bool = False,
        timeout_multiplier: float = 1.0,
        network: str = "task",
    ) -> None:
        if dataset is not None and tasks_dir is not None:
            raise ValueError("give tasks_dir (a folder of tasks) or dataset (a registered NAME@VERSION), not both")
        if isinstance(timeout_multiplier, bool) or not isinstance(timeout_multiplier, (int, float)) \
                or timeout_multiplier <= 0:
            raise ValueError(f"timeout_multiplier must be a positive number, got {timeout_multiplier!r}")
        if network not in ("task", "off"):
            raise ValueError(f"network must be 'task' (each task's allow_internet) or 'off', got {network!r}")
        self.source: str | None = None
        if dataset is not None:
            from termgym.tasks.harbor.registry import download_dataset

            downloaded = download_dataset(dataset, registry=registry)
            tasks_dir, self.source = downloaded.path, downloaded.ref
        self.tasks_dir = Path(tasks_dir).expanduser() if tasks_dir is not None else SAMPLES_DIR
        self.backend = backend
        self.run_options = {"force_build": bool(force_build), "timeout_multiplier": float(timeout_multiplier),
                            "network": network, "source": self.source}
        found = discover(self.tasks_dir, backend=backend)
        for task in found.tasks.values():
            task.configure_run(**self.run_options)
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
        if split in (None, "train", "test"):  # one set of tasks: train and test are the same
            if self.backend == "local":
                return [tid for tid, task in self._tasks.items() if task.local_ok]
            return list(self._tasks)
        if split == "all":
            return list(self._tasks)
        if split == "local":
            return [tid for tid, task in self._tasks.items() if task.local_ok]
        raise KeyError(f"suite {self.name!r} has no split {split!r}; splits: {', '.join(self.splits())}")

    def splits(self) -> Sequence[str]:
        return ("train", "test", "all", "local")

    def load(self, task_id: str) -> HarborTask:
        task_id = str(task_id)
        if task_id in self._tasks:
            return self._tasks[task_id]
        if task_id in self.broken:
            raise TaskFormatError(self.tasks_dir / task_id, f"task {task_id!r} is broken: {self.broken[task_id]}")
        raise KeyError(f"suite {self.name!r} ({self.tasks_dir}) has no task {task_id!r}")
