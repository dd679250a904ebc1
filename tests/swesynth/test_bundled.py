"""The bundled default suite: size, coverage, stable ids, no leaks, and the oracle solves every task."""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from termgym.factory.swesynth.report import find_leaks
from termgym.sandbox import FreshSandboxes
from termgym.tasks.swesynth import default_suite


@pytest.fixture(scope="module")
def suite():
    return default_suite("toy", behaviour="any")  # every bundled toy task, checked or not


@pytest.fixture(scope="module")
def records(suite):
    return [suite.record(t) for t in suite.task_ids("all")]


def test_bundled_suite_size_types_and_splits(suite, records):
    assert len(records) >= 300
    types = Counter(t for r in records for t in r.bug_types)
    assert len(types) >= 10, types
    train, test = set(suite.task_ids("train")), set(suite.task_ids("test"))
    assert train and test and not train & test and len(train | test) == len(records)
    assert suite.task_ids() == suite.task_ids("train")  # the default split is train
    assert len({r.repo for r in records}) >= 2


def test_task_ids_are_stable_hashes_of_the_bug(records):
    for r in records:
        assert r.task_id == f"{r.repo}-{hashlib.sha256(r.bug_patch.encode()).hexdigest()[:10]}"
        assert r.target_tests and set(r.target_tests) <= set(r.all_tests)
        assert len(r.target_tests) <= max(10, len(r.all_tests) // 5)
        assert r.repo_dir is not None and r.repo_dir.is_dir()


def test_bundled_problem_statements_leak_nothing_from_the_diff(records):
    leaking = {r.task_id: find_leaks(r.problem_statement, r.bug_patch) for r in records}
    assert not {k: v for k, v in leaking.items() if v}
    for r in records:
        assert "What I tried" in r.problem_statement and "What I expected" in r.problem_statement


#: How many toy tasks CI grades with their oracle, drawn per project with a fixed seed. The whole suite
#: (300 tasks, ~4.5 min on 2 cores) is ``python -m benchmarks.swesynth_sweep --suite toy``.
ORACLE_SAMPLE = 100


def oracle_sample(records, n: int = ORACLE_SAMPLE, seed: int = 0):
    """``n`` records, every project in proportion (at least one each), drawn with ``seed``."""
    import random

    by_repo: dict[str, list] = {}
    for r in sorted(records, key=lambda r: r.task_id):
        by_repo.setdefault(r.repo, []).append(r)
    rng = random.Random(seed)
    return [r for repo in sorted(by_repo) for r in rng.sample(by_repo[repo],
                                                              max(1, round(n * len(by_repo[repo]) / len(records))))]


def test_the_oracle_sample_covers_every_project(records):
    sample = oracle_sample(records)
    assert abs(len(sample) - ORACLE_SAMPLE) <= len({r.repo for r in records})
    assert {r.repo for r in sample} == {r.repo for r in records}
    assert [r.task_id for r in sample] == [r.task_id for r in oracle_sample(records)]  # the same draw each run


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 100 test-suite runs in sandboxes: ~1.5 min idle, much longer on a loaded machine
def test_oracle_scores_one_on_bundled_tasks(records, tmp_path_factory, monkeypatch):
    """The reverse patch, graded exactly as an agent's diff is: applied to a fresh copy of the buggy
    repository in a new local sandbox, with the required tests run there (:data:`ORACLE_SAMPLE` tasks)."""
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    suite = default_suite("toy")
    records = oracle_sample(records)

    def grade(record):
        with FreshSandboxes("local") as new_sandbox:  # this grade's sandboxes, closed when it is done
            return record.task_id, suite.load(record.task_id).grade_patch(record.fix_patch, new_sandbox)

    failures = {}
    workers = max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for task_id, details in pool.map(grade, records):
            if not details["all_passed"]:
                failures[task_id] = details["all_result"], details["failed_tests"][:3]
    assert not failures, failures
