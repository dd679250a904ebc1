"""`termgym swesynth follow-project`: a suite built before its project deselected tests (sqlparse's
three one-second wall-clock tests) follows the project's current command: the tests leave the
baseline, the tasks' targets and the coverage map, and the tasks still grade oracle 1 / do-nothing 0
in real sandboxes without them; a change it cannot follow is refused and nothing is written.
Sabotaged once each: a map that drops the tests without renumbering the others fails the first
test; a task left with no target allowed through fails the second."""

from __future__ import annotations

import dataclasses
import json
import tarfile
from pathlib import Path

import pytest

from termgym.cli import main
from termgym.factory.swesynth.follow import FollowError, follow_project, split_deselects
from termgym.factory.swesynth.merge import MergeError, merge_suites
from termgym.tasks.swesynth.projects import load_projects
from termgym.tasks.swesynth.selection import CoverageMap, decode_ranges
from termgym.tasks.swesynth.suite import SweSynthSuite
from tests.swesynth.episodes import oracle_and_nop

PROJECT = "sqlparse"
WALL_CLOCK = "under_1s"


#: v2's sqlparse as it was bundled before it followed the project (2026-12-04): the old command,
#: the three wall-clock tests among the required ones, the two tasks that name them as targets and
#: one that does not; with their coverage map.
BEFORE = Path(__file__).with_name("fixtures") / "sqlparse_v2_before_follow.tar.gz"


def _slice(root: Path) -> Path:
    """A compact suite holding v2's sqlparse project as it was before it followed the project."""
    with tarfile.open(BEFORE) as tar:
        tar.extractall(root, filter="data")
    (root / "sqlparse-v2-before-follow").rename(root / "suite")
    return root / "suite"


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _names(cmap: CoverageMap, ranges: list[int]) -> set[str]:
    return {cmap.tests[i] for i in ranges}


@pytest.fixture
def suite_dir(tmp_path):
    return _slice(tmp_path / "dst")


def test_the_suite_follows_the_projects_deselections_and_its_tasks_still_grade(suite_dir, tmp_path, monkeypatch):
    project = load_projects()[PROJECT]
    before = _files(suite_dir)
    old_map = CoverageMap.from_json(json.loads((suite_dir / "selection" / f"{PROJECT}.json").read_text()))
    plan = follow_project(suite_dir, PROJECT)
    assert _files(suite_dir) == before and not plan.written  # a dry run writes nothing
    assert len(plan.deselected) == 3 and all(WALL_CLOCK in t for t in plan.deselected)
    assert sorted(plan.dropped_tests) == sorted(plan.deselected) and len(plan.targets) == 2

    done = follow_project(suite_dir, PROJECT, write=True)
    assert done.written and done.to_dict()["deselected"] == plan.deselected
    info = json.loads((suite_dir / "suite.json").read_text())["repos"][PROJECT]
    assert info["test_command"] == project.test_command
    assert info["followed"][0]["deselected"] == plan.deselected
    baseline = json.loads((suite_dir / info["baseline"]).read_text())["tests"]
    assert not [t for t in baseline if WALL_CLOCK in t] and len(baseline) == len(old_map.tests) - 3
    records = {json.loads(line)["task_id"]: json.loads(line) for line in (suite_dir / info["records"]).read_text().splitlines()}
    for tid in plan.targets:
        targets = records[tid]["bug"]["target_tests"]
        assert targets and not [t for t in targets if WALL_CLOCK in t]
    # the map: every other test keeps exactly the functions and the task selections it had
    new_map = CoverageMap.from_json(json.loads((suite_dir / "selection" / f"{PROJECT}.json").read_text()))
    gone = set(plan.dropped_tests)
    assert new_map.tests == baseline
    for file, fns in old_map.functions.items():
        for name, (imp, ix) in fns.items():
            assert new_map.functions[file][name][0] == imp
            assert _names(new_map, new_map.functions[file][name][1]) == _names(old_map, ix) - gone, (file, name)
    for tid, sel in old_map.tasks.items():
        if sel != "full":
            assert _names(new_map, decode_ranges(new_map.tasks[tid])) == _names(old_map, decode_ranges(sel)) - gone
    assert follow_project(suite_dir, PROJECT).changed is False  # followed: nothing left to do

    # the real grader, both ways a grade can run, on a task that lost targets and kept one
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    tid = sorted(plan.targets)[0]
    for grade_tests in ("full", "selected"):
        suite = SweSynthSuite(suite_dir, behaviour="any", distinct=False, grade_tests=grade_tests)
        assert WALL_CLOCK not in " ".join(suite.record(tid).all_tests)
        oracle, nop, grade = oracle_and_nop(suite, tid, "local")
        assert (oracle, nop) == (1.0, 0.0), (grade_tests, grade.get("all_result"), grade.get("infra_error"))


def test_a_task_left_with_no_target_and_a_command_changed_otherwise_are_refused(suite_dir):
    info = json.loads((suite_dir / "suite.json").read_text())["repos"][PROJECT]
    path = suite_dir / info["records"]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    victim = next(line for line in lines if any(WALL_CLOCK in t for t in line["bug"]["target_tests"]))
    victim["bug"]["target_tests"] = [t for t in victim["bug"]["target_tests"] if WALL_CLOCK in t]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    before = _files(suite_dir)
    with pytest.raises(FollowError, match=f"fail only tests the project now deselects.*{victim['task_id']}"):
        follow_project(suite_dir, PROJECT, write=True)
    assert _files(suite_dir) == before

    project = load_projects()[PROJECT]
    other = dataclasses.replace(project, test_command=project.test_command.replace(" -q ", " -x "))
    with pytest.raises(FollowError, match="changed beyond --deselect options"):
        follow_project(suite_dir, PROJECT, project=other, write=True)
    # a test the suite deselected but the project selects again has no baseline run here
    old = info["test_command"].replace(" tests", " --deselect=tests/test_cli.py::test_main_help tests")
    index = json.loads((suite_dir / "suite.json").read_text())
    index["repos"][PROJECT]["test_command"] = old
    (suite_dir / "suite.json").write_text(json.dumps(index))
    with pytest.raises(FollowError, match="test_main_help is selected again"):
        follow_project(suite_dir, PROJECT, write=True)
    assert split_deselects("pytest --deselect a::b -q --deselect=c tests", "here") == (["pytest", "-q", "tests"],
                                                                                      ["a::b", "c"])
    with pytest.raises(FollowError, match="--deselect without a test"):
        split_deselects("pytest --deselect", "here")


def test_merge_names_the_way_out_and_the_command_line_follows(suite_dir, tmp_path, capsys):
    src = _slice(tmp_path / "newer")
    index = json.loads((src / "suite.json").read_text())
    index["repos"][PROJECT]["test_command"] = load_projects()[PROJECT].test_command
    (src / "suite.json").write_text(json.dumps(index))
    with pytest.raises(MergeError, match="follow-project sqlparse"):
        merge_suites(src, suite_dir, dry_run=True)
    assert main(["swesynth", "follow-project", PROJECT, "--suite", str(suite_dir)]) == 0
    assert "would deselect 3 test(s)" in capsys.readouterr().out
    assert main(["swesynth", "follow-project", PROJECT, "--suite", str(suite_dir), "--write"]) == 0
    assert "now deselects 3 test(s)" in capsys.readouterr().out
    assert main(["swesynth", "follow-project", "nosuch", "--suite", str(suite_dir)]) == 1
    assert "no project 'nosuch'" in capsys.readouterr().err
