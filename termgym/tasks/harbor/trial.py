"""Validation trials: run the ``oracle`` or ``nop`` agent on a task, then the verifier.

This is Harbor's trial loop without a model: start the task's sandbox, run the agent under the
agent timeout, grade (also after a timeout), close. :func:`check_tasks` runs both agents on every
task of a directory and reports the broken ones (the oracle must score 1, nop must score 0), as
``termgym harbor check`` prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from termgym.tasks.base import Grade, GradingContext
from termgym.tasks.harbor.loader import discover
from termgym.tasks.harbor.task import HarborTask

AGENTS = ("oracle", "nop")


@dataclass
class TrialResult:
    """One agent's run on one task."""

    task_id: str
    agent: str
    score: float | None = None
    grade: dict[str, Any] | None = None
    agent_timed_out: bool = False
    agent_output: str = ""
    error: str | None = None  # the trial itself failed (build, sandbox, no oracle)
    duration: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_trial(
    task: HarborTask,
    agent: str = "oracle",
    *,
    backend: str = "docker",
    sandbox_options: dict[str, Any] | None = None,
    agent_timeout: float | None = None,
) -> TrialResult:
    """Run ``agent`` (``"oracle"`` or ``"nop"``) on ``task`` and grade it; never raises for task faults.

    ``agent_timeout`` overrides the task's ``[agent] timeout_sec`` (``None``: the task's, or no limit).
    """
    from termgym.sandbox import FreshSandboxes, make_sandbox

    if agent not in AGENTS:
        raise ValueError(f"unknown validation agent {agent!r}; choose one of {', '.join(AGENTS)}")
    started = time.monotonic()
    result = TrialResult(task.task_id, agent)
    new_sandbox = FreshSandboxes(backend, **(sandbox_options or {}))  # the verifier's, where it needs its own
    sandbox = None
    try:
        commands: list[str] = []
        if agent == "oracle" and not task.steps:  # a multi-step task's solutions are per step
            oracle = task.oracle_commands()
            if oracle is None:
                raise ValueError("the task has no solution (solution/solve.sh, solution.sh or solution.yaml)")
            commands = oracle
        sandbox = make_sandbox(backend, task.sandbox_spec(), **(sandbox_options or {}))
        sandbox.start()
        if task.steps:
            grade = _run_steps(task, agent, sandbox, result, agent_timeout)
            result.score = grade.score
            result.grade = grade.to_dict()
            return result
        task.setup(sandbox)
        limit = agent_timeout if agent_timeout is not None else task.time_limit
        deadline = None if limit is None else time.monotonic() + limit
        outputs = []
        for command in commands:
            remaining = None if deadline is None else max(0.1, deadline - time.monotonic())
            res = sandbox.exec(command, timeout=remaining)
            outputs.append(res.output)
            if res.timed_out:
                result.agent_timed_out = True
                break
        result.agent_output = "\n".join(outputs)[-4000:]

        ctx = GradingContext(
            sandbox=sandbox,
            new_sandbox=new_sandbox,
            reason="time_limit" if result.agent_timed_out else "submitted",
            elapsed=time.monotonic() - started,
            commands=commands,
        )
        grade: Grade = task.grade(ctx)
        result.score = grade.score
        result.grade = grade.to_dict()
    except Exception as exc:  # a broken task is a finding, not a crash of the whole check
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        for box in [*new_sandbox.opened, sandbox]:
            if box is not None:
                try:
                    box.close()
                except Exception as exc:  # report, but keep the first error
                    result.error = result.error or f"closing the sandbox failed: {exc}"
        task.teardown()
        result.duration = round(time.monotonic() - started, 3)
    return result


def _run_steps(task: HarborTask, agent: str, sandbox: Any, result: TrialResult, agent_timeout: float | None) -> Grade:
    """A multi-step trial, as Harbor's: for each step prepare, run the agent, verify; stop early on
    a step that failed without a reward or fell below its ``min_reward``; then combine the steps."""
    sandbox.agent_user = task.agent_user
    grades: list[Grade | None] = []
    outputs: list[str] = []
    for index, step in enumerate(task.steps):
        problem = task.prepare_step(sandbox, step, first=index == 0)
        if problem:
            outputs.append(problem)
        commands: list[str] = []
        if agent == "oracle":
            commands = task.step_oracle_commands(step) or []
            if not commands:
                raise ValueError(f"step {step.name!r} has no solution (steps/{step.name}/solution/solve.sh)")
        step_limit = step.config.agent_timeout_sec
        limit = agent_timeout if agent_timeout is not None else (
            step_limit * task.timeout_multiplier if step_limit else task.time_limit)
        deadline = None if limit is None else time.monotonic() + limit
        timed_out = False
        for command in commands:
            remaining = None if deadline is None else max(0.1, deadline - time.monotonic())
            res = sandbox.exec(command, timeout=remaining)
            outputs.append(res.output)
            if res.timed_out:
                timed_out = result.agent_timed_out = True
                break
        grade = task.grade_step(sandbox, step, "time_limit" if timed_out else "submitted")
        grades.append(grade)
        if not grade.details.get("reward_valid") or _below(grade.details.get("rewards") or {}, step.config.min_reward):
            break
    result.agent_output = "\n".join(outputs)[-4000:]
    return task.combine_steps(grades)


def _below(rewards: dict[str, float], min_reward: Any) -> bool:
    """Whether a step's rewards miss its ``min_reward`` (a number gates the ``reward`` key)."""
    if min_reward is None:
        return False
    thresholds = {"reward": min_reward} if isinstance(min_reward, (int, float)) else min_reward
    return any(rewards.get(key, float("-inf")) < float(threshold) for key, threshold in thresholds.items())


@dataclass
class TaskCheck:
    """The verdict on one task: its oracle and nop trials, or why it could not load."""

    task_id: str
    oracle: TrialResult | None = None
    nop: TrialResult | None = None
    load_error: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def judge(check: TaskCheck) -> TaskCheck:
    """Fill ``check.problems``: the oracle must score 1.0 and nop 0.0, both without trial errors."""
    if check.load_error:
        check.problems.append(f"does not load: {check.load_error}")
        return check
    for trial, want in ((check.oracle, 1.0), (check.nop, 0.0)):
        if trial is None:
            continue
        if trial.error:
            check.problems.append(f"{trial.agent} trial failed: {trial.error}")
        elif trial.score != want:
            why = (trial.grade or {}).get("error")
            check.problems.append(
                f"{trial.agent} scored {trial.score:g}, expected {want:g}" + (f" ({why})" if why else "")
            )
    return check


def check_tasks(
    tasks_dir: str | Path,
    *,
    backend: str = "docker",
    jobs: int = 1,
    task_ids: list[str] | None = None,
    sandbox_options: dict[str, Any] | None = None,
    on_result: Callable[[TaskCheck], None] | None = None,
    run_options: dict[str, Any] | None = None,
) -> list[TaskCheck]:
    """Run oracle and nop on every task under ``tasks_dir``; return one :class:`TaskCheck` per task.

    With ``backend="local"``, tasks that need Docker are skipped (listed with a problem-free
    ``load_error``-less check and no trials) — see :attr:`HarborTask.local_ok`.
    """
    found = discover(tasks_dir, backend=backend)
    for task in found.tasks.values():  # Harbor's job flags: force_build, timeout_multiplier
        task.configure_run(**(run_options or {}))
    wanted = task_ids or sorted([*found.tasks, *found.broken])
    checks: dict[str, TaskCheck] = {}
    runnable: list[HarborTask] = []
    for tid in wanted:
        if tid in found.broken:
            checks[tid] = judge(TaskCheck(tid, load_error=found.broken[tid]))
        elif tid not in found.tasks:
            checks[tid] = judge(TaskCheck(tid, load_error=f"no task {tid!r} in {found.root}"))
        elif backend == "local" and not found.tasks[tid].local_ok:
            checks[tid] = TaskCheck(tid)  # skipped: needs Docker
        else:
            runnable.append(found.tasks[tid])
    for check in checks.values():
        if on_result:
            on_result(check)

    def one(task: HarborTask) -> TaskCheck:
        # Build once before the two trials so they do not both wait on the same build.
        oracle = run_trial(task, "oracle", backend=backend, sandbox_options=sandbox_options)
        nop = run_trial(task, "nop", backend=backend, sandbox_options=sandbox_options)
        check = judge(TaskCheck(task.task_id, oracle=oracle, nop=nop))
        if on_result:
            on_result(check)
        return check

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for check in pool.map(one, runnable):
            checks[check.task_id] = check
    return [checks[tid] for tid in wanted]
