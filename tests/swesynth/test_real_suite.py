"""The v1 real-project suite (termgym 0.2's default, ``path="v1"``): its shape (projects, held-out splits, the named-module share,
per-task signals and validation) and a sample graded through the real env and grader — the oracle
scores 1 and a do-nothing agent 0 — for one task of every project on the local backend and two on
Docker. The sweep over every task is ``python -m benchmarks.swesynth_sweep``."""

from __future__ import annotations

import json

import pytest

from termgym.factory.swesynth.bundle import named_share
from termgym.tasks.swesynth.suite import SUITE_V1_DIR, SweSynthSuite
from tests.docker_engine import require_docker
from tests.swesynth.episodes import oracle_and_nop


@pytest.fixture(scope="module")
def suite():
    return SweSynthSuite(SUITE_V1_DIR, behaviour="any")


@pytest.fixture(scope="module")
def index():
    return json.loads((SUITE_V1_DIR / "suite.json").read_text())


def one_per_project(suite) -> dict[str, str]:
    """The first task id (sorted) of each project: a fixed sample."""
    out: dict[str, str] = {}
    for tid in sorted(suite.task_ids("all")):
        out.setdefault(suite.record(tid).repo, tid)
    return out


def test_suite_is_made_of_real_projects_held_out_by_project(suite, index):
    projects = suite.projects()
    assert len(projects) >= 12 and all(projects.values()), projects
    assert len(suite.task_ids("all")) >= 1000
    assert set(suite.splits()) >= {"train", "test", "test_id"}
    repo_of = {tid: suite.record(tid).repo for tid in suite.task_ids("all")}
    train = {repo_of[t] for t in suite.task_ids("train")}
    test = {repo_of[t] for t in suite.task_ids("test")}
    assert test and not train & test, (train, test)  # test projects never seen in train
    assert {repo_of[t] for t in suite.task_ids("test_id")} <= train
    assert test <= set(index["held_out_projects"])  # a held-out project may have yielded no task
    assert sum(index["generation"][p]["kept"] for p in projects) == len(repo_of)


def test_named_module_share_is_at_most_half(suite):
    share = named_share(SUITE_V1_DIR)
    assert share["tasks"] == len(suite.task_ids("all")) and share["share"] <= 0.5, share


def test_every_task_carries_signals_a_tier_and_its_validation(suite):
    for tid in suite.task_ids("all"):
        record = suite.record(tid)
        assert record.difficulty in ("easy", "medium", "hard"), tid
        assert {"traceback_shows_line", "test_file_names_module", "tokens_changed", "files_touched"} <= set(
            record.signals), tid
        v = record.validation
        assert v["backend"] == "local" and v["nop"].split("/")[0] != v["oracle"].split("/")[0], (tid, v)
        assert set(record.target_tests) <= set(record.all_tests) and record.project == record.repo


def test_difficulty_option_through_gym_make():
    import gymnasium as gym

    env = gym.make("termgym/SweSynth-v0", difficulty="hard", split="all")
    try:
        suite = env.unwrapped.suite
        ids = suite.task_ids("all")
        assert ids and all(suite.record(t).difficulty == "hard" for t in ids[:50])
    finally:
        env.close()




def _projects_by_speed() -> list[str]:
    """The suite's projects with tasks, fastest full run first (read at collection time)."""
    try:
        generation = json.loads((SUITE_V1_DIR / "suite.json").read_text())["generation"]
    except (OSError, ValueError, KeyError):
        return []
    return [p for p, g in sorted(generation.items(), key=lambda kv: (kv[1].get("baseline_seconds", 0), kv[0]))
            if g.get("kept")]


@pytest.mark.slow
@pytest.mark.parametrize("project", _projects_by_speed())
def test_sample_oracle_one_nop_zero_local(suite, project, tmp_path, monkeypatch):
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    tid = one_per_project(suite)[project]
    oracle, nop, grade = oracle_and_nop(suite, tid, "local")
    assert (oracle, nop) == (1.0, 0.0), (tid, grade.get("all_result"), grade.get("infra_error"))
    assert not grade.get("infra_error")


@pytest.mark.slow
@pytest.mark.docker
def test_sample_oracle_one_nop_zero_docker(suite, tmp_path, monkeypatch):
    require_docker()
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    for project in _projects_by_speed()[:2]:  # the two fastest projects
        tid = one_per_project(suite)[project]
        oracle, nop, grade = oracle_and_nop(suite, tid, "docker")
        assert (oracle, nop) == (1.0, 0.0), (project, tid, grade.get("all_result"), grade.get("infra_error"))


@pytest.mark.slow
def test_the_sweep_benchmark_grades_the_chosen_tasks(suite, tmp_path, monkeypatch):
    """``python -m benchmarks.swesynth_sweep``: --offset skips each project's first tasks, --limit
    caps the rest; the report names every task it graded and the exit code says all behaved."""
    from benchmarks import swesynth_sweep

    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "sweep.json"
    assert swesynth_sweep.main(["--suite", str(SUITE_V1_DIR), "--project", "parse", "--offset", "1", "--limit", "1",
                                "-j", "1", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    parse_ids = [t for t in suite.task_ids("all") if suite.record(t).repo == "parse"]
    assert [e["task_id"] for e in report["results"]] == [parse_ids[1]]
    assert report["ok"] == report["tasks"] == 1 and report["results"][0]["oracle"] != report["results"][0]["nop"]


@pytest.mark.slow
def test_a_stopped_sweep_resumes_from_its_progress_file(suite, tmp_path, monkeypatch):
    """A sweep killed after one task left only its progress file (and a line cut short): --resume
    keeps that task and grades only the next one; the report counts both. The sabotage, a resume
    that ignores the progress file, grades both again and fails the counts."""
    from benchmarks import swesynth_sweep

    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "sweep.json"
    first = ["--suite", str(SUITE_V1_DIR), "--project", "parse", "--limit", "1", "-j", "1", "--out", str(out)]
    assert swesynth_sweep.main(first) == 0
    done = json.loads(out.read_text())["results"]
    assert not swesynth_sweep.progress_path(out).exists(), "the finished report holds every entry"
    out.unlink()  # as if killed before the report was written
    swesynth_sweep.progress_path(out).write_text(json.dumps(done[0]) + "\n" + '{"task_id": "par')
    assert swesynth_sweep.main([*first[:4], "--limit", "2", "-j", "1", "--out", str(out), "--resume"]) == 0
    report = json.loads(out.read_text())
    assert (report["kept_from_earlier"], report["graded_now"], report["tasks"], report["ok"]) == (1, 1, 2, 2)
    assert report["results"][0] == done[0]
    # An entry of a record or check that changed since (another digest) is graded again. The sabotage,
    # a resume that keeps entries whatever they graded, keeps it and fails the counts.
    out.unlink()
    swesynth_sweep.progress_path(out).write_text(json.dumps({**done[0], "digest": "0" * 16}) + "\n")
    assert swesynth_sweep.main([*first, "--resume"]) == 0
    again = json.loads(out.read_text())
    assert (again["kept_from_earlier"], again["graded_now"], again["ok"]) == (0, 1, 1)
    assert again["results"][0]["digest"] == done[0]["digest"] == swesynth_sweep.task_digest(
        suite.record(done[0]["task_id"]))
