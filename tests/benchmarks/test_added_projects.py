"""The ten-project proof (``benchmarks.added_projects``): what counts as behaved, and the committed run."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.added_projects import PROJECTS, Outcome, _count_tasks, folder_name

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results_added_projects" / "summary.json"


def _outcome(**scores) -> Outcome:
    out = Outcome(name="demo", requirement="demo==1.0", style="pytest", command=[], added=True, generated=2)
    out.oracle, out.nop = {"demo-a": 1.0}, {"demo-a": 0.0}
    out.oracle_any, out.nop_any = {"demo-a": 1.0, "demo-b": 1.0}, {"demo-a": 0.0, "demo-b": 0.0}
    for name, value in scores.items():
        setattr(out, name, value)
    return out


def test_behaved_needs_every_task_oracle_1_and_do_nothing_0_in_both_evals():
    assert _outcome().behaved
    assert _outcome(oracle={}, nop={}).behaved  # no task served by default: said in the summary, not a failure
    # the sabotages: one do-nothing score of 1, one oracle below 1, a task missing from an eval, nothing added
    assert not _outcome(nop_any={"demo-a": 0.0, "demo-b": 1.0}).behaved
    assert not _outcome(oracle={"demo-a": 0.5}).behaved
    assert not _outcome(oracle_any={"demo-a": 1.0}).behaved
    assert not _outcome(added=False).behaved and not _outcome(generated=0).behaved


def test_tasks_are_counted_per_project_and_folders_found_by_normalised_name(tmp_path):
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "suite.json").write_text(json.dumps(
        {"splits": {"train": ["linkify-it-py-1", "roman-2"], "test": ["roman-3"]}}))
    assert (_count_tasks(tmp_path / "suite"), _count_tasks(tmp_path / "suite", "roman")) == (3, 2)
    assert _count_tasks(tmp_path / "nowhere") == 0
    (tmp_path / "projects" / "linkify-it-py").mkdir(parents=True)
    assert folder_name(tmp_path / "projects", "linkify_it_py==2.0.3") == "linkify-it-py"
    assert folder_name(tmp_path / "projects", "roman==4.2") is None


def test_the_committed_run_added_all_ten_and_every_task_behaved_under_load():
    summary = json.loads(RESULTS.read_text())
    assert summary["ok"] and [p["requirement"] for p in summary["projects"]] == [c.requirement for c in PROJECTS]
    assert sum(c.style == "unittest" for c in PROJECTS) == 5
    for project in summary["projects"]:
        flags = project["command"][project["command"].index("--description") + 2:]
        assert project["added"] and (not flags or project["why"]), project["name"]
        assert set(project["oracle_any"].values()) == {1.0} and set(project["nop_any"].values()) == {0.0}
        assert len(project["oracle_any"]) == project["generated"] >= 1
    assert summary["load"]["busy"] > summary["load"]["cores"] and summary["load"]["loadavg_1min"]["median"] > 2
