"""List scheduling of jobs with dependencies on a pool of identical workers."""

from __future__ import annotations

from typing import Iterable, Optional

from .graph import DependencyGraph


class Job:
    """A unit of work: a name, a positive duration, what it needs first, and ranking hints."""

    def __init__(self, name: str, duration: float, needs: Iterable[str] = (), priority: int = 0,
                 deadline: Optional[float] = None) -> None:
        """Describe a job; larger ``priority`` is scheduled first among ready jobs."""
        if duration <= 0:
            raise ValueError(f"job {name!r}: duration must be positive, got {duration}")
        self.name = name
        self.duration = duration
        self.needs = tuple(needs)
        self.priority = priority
        self.deadline = deadline

    def __repr__(self) -> str:
        """Debug form."""
        return f"Job({self.name!r}, {self.duration})"


class Assignment:
    """Where and when one job runs."""

    def __init__(self, job: str, worker: int, start: float, end: float) -> None:
        """Record a placement."""
        self.job = job
        self.worker = worker
        self.start = start
        self.end = end

    def __eq__(self, other: object) -> bool:
        """Field-wise equality."""
        if not isinstance(other, Assignment):
            return NotImplemented
        return (self.job, self.worker, self.start, self.end) == (other.job, other.worker, other.start, other.end)

    def __repr__(self) -> str:
        """``build@w0[0-3]``."""
        return f"{self.job}@w{self.worker}[{self.start}-{self.end}]"


class Schedule:
    """The result of scheduling: assignments in start order plus summary figures."""

    def __init__(self, assignments: list[Assignment], workers: int) -> None:
        """Wrap assignments computed for ``workers`` workers."""
        self.assignments = sorted(assignments, key=lambda a: (a.start, a.worker))
        self.workers = workers
        self._by_job = {a.job: a for a in assignments}

    def __getitem__(self, job: str) -> Assignment:
        """The assignment of ``job``."""
        return self._by_job[job]

    @property
    def makespan(self) -> float:
        """When the last job finishes (0 for an empty schedule)."""
        return max((a.end for a in self.assignments), default=0)

    def utilization(self) -> float:
        """Busy worker-time over available worker-time, rounded to 3 places."""
        if self.makespan == 0:
            return 0.0
        busy = sum(a.end - a.start for a in self.assignments)
        return round(busy / (self.makespan * self.workers), 3)

    def worker_timeline(self, worker: int) -> list[str]:
        """Job names run by one worker, in order."""
        if not 0 <= worker < self.workers:
            raise IndexError(f"no worker {worker}; there are {self.workers}")
        return [a.job for a in self.assignments if a.worker == worker]

    def idle_gaps(self, worker: int) -> list[tuple[float, float]]:
        """Stretches a worker waits between its jobs (before the makespan)."""
        gaps = []
        cursor = 0.0
        for a in self.assignments:
            if a.worker != worker:
                continue
            if a.start > cursor:
                gaps.append((cursor, a.start))
            cursor = a.end
        return gaps


def build_graph(jobs: Iterable[Job]) -> DependencyGraph:
    """The dependency graph of ``jobs``; unknown prerequisites raise ``KeyError``."""
    jobs = list(jobs)
    names = {job.name for job in jobs}
    if len(names) != len(jobs):
        raise ValueError("job names must be unique")
    graph = DependencyGraph()
    for job in jobs:
        graph.add_node(job.name)
        for need in job.needs:
            if need not in names:
                raise KeyError(f"job {job.name!r} needs unknown job {need!r}")
            graph.add_edge(need, job.name)
    return graph


def schedule(jobs: Iterable[Job], workers: int = 1) -> Schedule:
    """Place jobs greedily: whenever a worker is free, start the best ready job.

    A job is ready once all of its prerequisites have finished. Among ready jobs
    the highest ``priority`` wins, then the longest duration, then the name. The
    lowest-numbered free worker takes it. Cycles raise ``CycleError``.
    """
    if workers < 1:
        raise ValueError(f"need at least one worker, got {workers}")
    jobs = list(jobs)
    graph = build_graph(jobs)
    graph.topological_order()
    by_name = {job.name: job for job in jobs}
    finished_at: dict[str, float] = {}
    free_at = [0.0] * workers
    assignments: list[Assignment] = []
    pending = set(by_name)
    while pending:
        worker = min(range(workers), key=lambda w: (free_at[w], w))
        now = free_at[worker]
        ready = [name for name in pending
                 if all(finished_at.get(need, float("inf")) <= now for need in by_name[name].needs)]
        if not ready:
            # Nothing can start yet: wait for the earliest prerequisite to finish.
            upcoming = [t for t in finished_at.values() if t > now]
            free_at[worker] = min(upcoming)
            continue
        ready.sort(key=lambda n: (-by_name[n].priority, -by_name[n].duration, n))
        job = by_name[ready[0]]
        end = now + job.duration
        assignments.append(Assignment(job.name, worker, now, end))
        finished_at[job.name] = end
        free_at[worker] = end
        pending.remove(job.name)
    return Schedule(assignments, workers)


def lateness(result: Schedule, jobs: Iterable[Job]) -> dict[str, float]:
    """How late each job with a deadline finishes (0 when on time)."""
    report = {}
    for job in jobs:
        if job.deadline is None:
            continue
        report[job.name] = max(0.0, result[job.name].end - job.deadline)
    return report


def earliest_deadline_order(jobs: Iterable[Job]) -> list[str]:
    """Names sorted by deadline (jobs without one last), then by name."""
    return [job.name for job in sorted(jobs, key=lambda j: (j.deadline is None, j.deadline or 0, j.name))]


def lower_bound(jobs: Iterable[Job], workers: int) -> float:
    """No schedule can be shorter than the total work spread evenly, nor than the longest job."""
    jobs = list(jobs)
    if not jobs:
        return 0.0
    total = sum(job.duration for job in jobs)
    return max(total / workers, max(job.duration for job in jobs))
