import pytest

from planwise.graph import CycleError
from planwise.scheduler import Assignment, Job, build_graph, earliest_deadline_order, lateness, lower_bound, schedule


def pipeline():
    return [
        Job("fetch", 2),
        Job("compile", 4, needs=["fetch"]),
        Job("lint", 1, needs=["fetch"]),
        Job("docs", 3, needs=["fetch"]),
        Job("package", 1, needs=["compile", "lint"]),
    ]


def test_single_worker_runs_in_dependency_and_rank_order():
    result = schedule(pipeline(), workers=1)
    assert result.worker_timeline(0) == ["fetch", "compile", "docs", "lint", "package"]
    assert result.makespan == 11


def test_two_workers():
    result = schedule(pipeline(), workers=2)
    assert result["fetch"] == Assignment("fetch", 0, 0, 2)
    assert result["compile"] == Assignment("compile", 0, 2, 6)
    assert result["docs"] == Assignment("docs", 1, 2, 5)
    assert result["lint"] == Assignment("lint", 1, 5, 6)
    assert result["package"] == Assignment("package", 0, 6, 7)
    assert result.makespan == 7


def test_worker_waits_for_prerequisite():
    jobs = [Job("a", 5), Job("b", 1, needs=["a"])]
    result = schedule(jobs, workers=2)
    assert result["b"].start == 5
    assert result.idle_gaps(1) == []
    assert result.worker_timeline(1) == []


def test_priority_beats_duration():
    jobs = [Job("long", 5), Job("urgent", 1, priority=2)]
    assert schedule(jobs).worker_timeline(0) == ["urgent", "long"]


def test_name_breaks_remaining_ties():
    jobs = [Job("b", 1), Job("a", 1), Job("c", 1)]
    assert schedule(jobs).worker_timeline(0) == ["a", "b", "c"]


def test_utilization():
    assert schedule(pipeline(), workers=2).utilization() == 0.786
    assert schedule([Job("x", 3)], workers=1).utilization() == 1.0
    assert schedule([], workers=3).utilization() == 0.0


def test_idle_gaps():
    jobs = [Job("a", 2), Job("b", 6), Job("c", 1, needs=["b"]), Job("d", 3, needs=["b"])]
    result = schedule(jobs, workers=2)
    assert result.worker_timeline(0) == ["b", "d"]
    assert result.worker_timeline(1) == ["a", "c"]
    assert result.idle_gaps(1) == [(2, 6)]
    assert result.idle_gaps(0) == []


def test_worker_timeline_bounds():
    result = schedule(pipeline(), workers=2)
    with pytest.raises(IndexError, match="no worker 2"):
        result.worker_timeline(2)
    with pytest.raises(IndexError):
        result.worker_timeline(-1)


def test_job_validation():
    with pytest.raises(ValueError, match="duration"):
        Job("x", 0)
    with pytest.raises(ValueError, match="worker"):
        schedule(pipeline(), workers=0)


def test_build_graph_errors():
    with pytest.raises(KeyError, match="ghost"):
        build_graph([Job("a", 1, needs=["ghost"])])
    with pytest.raises(ValueError, match="unique"):
        build_graph([Job("a", 1), Job("a", 2)])


def test_cycle_refused():
    with pytest.raises(CycleError):
        schedule([Job("a", 1, needs=["b"]), Job("b", 1, needs=["a"])])


def test_lateness():
    jobs = [Job("a", 3, deadline=2), Job("b", 1, deadline=10), Job("c", 1)]
    result = schedule(jobs)
    assert lateness(result, jobs) == {"a": 1, "b": 0.0}


def test_earliest_deadline_order():
    jobs = [Job("x", 1), Job("b", 1, deadline=5), Job("a", 1, deadline=5), Job("c", 1, deadline=0)]
    assert earliest_deadline_order(jobs) == ["c", "a", "b", "x"]


def test_lower_bound():
    assert lower_bound(pipeline(), 2) == 5.5
    assert lower_bound([Job("big", 9), Job("s", 1)], 4) == 9
    assert lower_bound([], 2) == 0.0


def test_schedule_never_beats_lower_bound():
    jobs = pipeline()
    for workers in (1, 2, 3):
        assert schedule(jobs, workers).makespan >= lower_bound(jobs, workers)


def test_default_priority_is_lowest_of_explicit_ones():
    jobs = [Job("a", 5), Job("b", 1, priority=1)]
    assert schedule(jobs).worker_timeline(0) == ["b", "a"]
