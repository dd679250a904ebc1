"""Tasks and task suites: what one episode is about and how it is graded.

A :class:`Task` says what the sandbox starts as (:meth:`Task.sandbox_spec`), what the agent is
asked (``instruction``), how the result is graded (:meth:`Task.grade`) and, where one exists, how
to solve it (:meth:`Task.oracle_commands`). A :class:`TaskSuite` lists task ids deterministically
and loads one by id; :class:`termgym.TerminalEnv` draws from a suite.
"""

from __future__ import annotations

import hashlib
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from termgym.encodable import encodable, encodable_text

if TYPE_CHECKING:
    from termgym.sandbox.base import Sandbox, SandboxSpec


@dataclass
class Grade:
    """The outcome of one episode.

    ``score`` (0..1 for built-in suites; a Harbor task's unclamped verifier reward) is what RL
    uses; ``passed`` is the suite's notion of success. ``details`` holds suite-specific fields
    (SWE-SYNTH: ``all_result`` like ``"234/236"``, ``all_passed``, ``target_result``,
    ``pass_rate``; LIVEWEB: per-question scores). ``error`` is set when grading
    itself failed (the score is then 0 and the reason is kept here).

    ``details`` and ``error`` often carry the agent's own text (file names, patches, output): every
    string in them is made :func:`~termgym.encodable.encodable_text` here, so a grade always encodes
    wherever it is written.
    """

    score: float
    passed: bool
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def __post_init__(self) -> None:
        # Built-in suites score within 0..1; a Harbor verifier's reward is passed through unclamped,
        # as Harbor reports it, so only a finite number is required here.
        if not math.isfinite(float(self.score)):
            raise ValueError(f"Grade.score must be a finite number, got {self.score!r}")
        self.score = float(self.score)
        self.details = encodable(self.details)
        if self.error is not None:
            self.error = encodable_text(self.error)

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"score": self.score, "passed": self.passed}
        out.update(self.details)
        if self.error is not None:
            out["error"] = self.error
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Grade:
        data = dict(data)
        score, passed, error = data.pop("score"), data.pop("passed"), data.pop("error", None)
        return cls(score=score, passed=passed, details=data, error=error)


@dataclass
class GradingContext:
    """Everything a grader may look at.

    ``sandbox`` is the agent's sandbox after its last step (graders must not trust it blindly:
    restore protected files or use ``new_sandbox``). ``new_sandbox(spec)`` starts a fresh sandbox
    of the same backend, closed automatically after grading. ``submission`` is the text the agent
    submitted (``None`` if it never submitted). ``reason`` is why the episode ended:
    ``"submitted"``, ``"max_steps"``, ``"time_limit"``, ``"context_limit"`` or ``"closed"``.
    """

    sandbox: Sandbox
    new_sandbox: Callable[[SandboxSpec], Sandbox]
    submission: str | None = None
    reason: str = "submitted"
    elapsed: float = 0.0
    commands: list[str] = field(default_factory=list)


class Task(ABC):
    """One task. Subclass it, or use :class:`CommandTask` for the common case."""

    task_id: str
    instruction: str
    metadata: dict[str, Any]
    #: Wall-clock seconds the agent phase may take (e.g. Harbor's ``[agent] timeout_sec``); the env
    #: truncates at the smaller of this and its own ``time_limit``. ``None``: no per-task limit.
    time_limit: float | None = None
    #: Where the agent starts (its shell's working directory). Reading it has no side effects:
    #: protocols show it in prompts; it must equal :meth:`sandbox_spec`'s ``workdir``, which may
    #: do real work (build a workspace, open a LIVEWEB episode) and is called once per episode.
    workdir: str = "/workspace"

    def __init__(self, task_id: str, instruction: str, metadata: dict[str, Any] | None = None) -> None:
        self.task_id = str(task_id)
        self.instruction = instruction
        self.metadata = dict(metadata or {})

    @abstractmethod
    def sandbox_spec(self) -> SandboxSpec:
        """What the agent's sandbox starts as; the env calls it once per episode (it may have side effects)."""

    @abstractmethod
    def grade(self, ctx: GradingContext) -> Grade:
        """Grade the episode (see :class:`GradingContext`)."""

    def setup(self, sandbox: Sandbox) -> None:  # noqa: B027 - optional hook
        """Optional: prepare the started sandbox (after the spec's setup commands)."""

    def teardown(self) -> None:  # noqa: B027 - optional hook
        """Optional: release what :meth:`setup` acquired (called once per episode)."""

    def oracle_commands(self) -> list[str] | None:
        """Shell commands that solve the task, or ``None`` if there is no oracle."""
        return None

    def oracle_submission(self, sandbox: Sandbox) -> str | None:
        """What the oracle submits (for tasks graded on the submitted text); default nothing."""
        return None

    def check_command(self, command: str) -> str | None:
        """Return a refusal message for a command the task forbids, else ``None``."""
        return None

    def check_submission(self, submission: str) -> str | None:
        """Return why a submission is malformed (the episode goes on and the agent is told), else ``None``.

        Only for form, never for correctness: a wrong answer is the grader's business.
        """
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.task_id!r})"


class CommandTask(Task):
    """A task graded by a shell command: exit code 0 means solved.

    ``grade_files`` (e.g. hidden tests) are written into the agent's sandbox only when grading
    starts, overwriting whatever the agent left at those paths, so the agent never sees them and
    cannot tamper with them. ``oracle`` is a list of commands that solve the task.

    >>> task = CommandTask("hello", "Create hello.txt containing 'hi'.",
    ...                    grade_command="grep -qx hi hello.txt", oracle=["echo hi > hello.txt"])
    """

    def __init__(
        self,
        task_id: str,
        instruction: str,
        *,
        grade_command: str,
        files: dict[str, str | bytes] | None = None,
        grade_files: dict[str, str | bytes] | None = None,
        oracle: Sequence[str] | None = None,
        setup_commands: Sequence[str] = (),
        workdir: str = "/workspace",
        image: str | None = None,
        network: bool = False,
        grade_timeout: float = 120.0,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(task_id, instruction, metadata)
        self.grade_command = grade_command
        self.files = dict(files or {})
        self.grade_files = dict(grade_files or {})
        self.oracle = list(oracle) if oracle is not None else None
        self.setup_commands = list(setup_commands)
        self.workdir = workdir
        self.image = image
        self.network = network
        self.grade_timeout = grade_timeout

    def sandbox_spec(self) -> SandboxSpec:
        from termgym.sandbox.base import SandboxSpec

        return SandboxSpec(
            workdir=self.workdir,
            image=self.image,
            files=dict(self.files),
            setup_commands=list(self.setup_commands),
            network=self.network,
        )

    def grade(self, ctx: GradingContext) -> Grade:
        ctx.sandbox.write_files(self.grade_files)
        result = ctx.sandbox.exec(f"cd {self.workdir} && {{ {self.grade_command}\n}}", timeout=self.grade_timeout)
        passed = result.exit_code == 0
        return Grade(
            score=1.0 if passed else 0.0,
            passed=passed,
            details={"exit_code": result.exit_code, "output": result.output[-2000:], "timed_out": result.timed_out},
        )

    def oracle_commands(self) -> list[str] | None:
        return self.oracle


class TaskSuite(ABC):
    """A deterministic, loadable collection of tasks.

    ``task_ids(split)`` must return the same ids in the same order on every call and machine;
    ``reset(seed=s)`` picks ``task_ids()[index_for_seed(s)]``.
    """

    name: str = "suite"

    @abstractmethod
    def task_ids(self, split: str | None = None) -> Sequence[str]:
        """The ids in ``split`` (``None``: the suite's default split)."""

    @abstractmethod
    def load(self, task_id: str) -> Task:
        """Load one task; raises ``KeyError`` naming the id if it does not exist."""

    def splits(self) -> Sequence[str]:
        return ("train",)

    def __len__(self) -> int:
        return len(self.task_ids())

    def __iter__(self):
        for tid in self.task_ids():
            yield self.load(tid)


class ListSuite(TaskSuite):
    """A suite over tasks held in memory, optionally split (``{"train": [...], "test": [...]}``)."""

    def __init__(self, tasks: Iterable[Task] | dict[str, Iterable[Task]], name: str = "custom") -> None:
        self.name = name
        if isinstance(tasks, dict):
            self._splits = {k: list(v) for k, v in tasks.items()}
        else:
            self._splits = {"train": list(tasks)}
        self._by_id: dict[str, Task] = {}
        for split_tasks in self._splits.values():
            for task in split_tasks:
                if task.task_id in self._by_id:
                    raise ValueError(f"duplicate task id {task.task_id!r} in suite {name!r}")
                self._by_id[task.task_id] = task

    def task_ids(self, split: str | None = None) -> Sequence[str]:
        if split is None:
            split = "train" if "train" in self._splits else next(iter(self._splits))
        if split == "all":
            return list(self._by_id)
        if split not in self._splits:
            raise KeyError(f"suite {self.name!r} has no split {split!r}; splits: {', '.join(self._splits)}")
        return [t.task_id for t in self._splits[split]]

    def splits(self) -> Sequence[str]:
        return tuple(self._splits)

    def load(self, task_id: str) -> Task:
        try:
            return self._by_id[str(task_id)]
        except KeyError:
            raise KeyError(f"suite {self.name!r} has no task {task_id!r}") from None


def index_for_seed(seed: int, n: int) -> int:
    """Map a seed to a task index, stable across Python versions and machines."""
    if n <= 0:
        raise ValueError("the suite is empty")
    digest = hashlib.sha256(str(int(seed)).encode()).digest()
    return int.from_bytes(digest[:8], "big") % n
