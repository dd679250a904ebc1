"""`termgym swesynth provision/projects`, the doctor row, and the toy suite asked for by name."""

from __future__ import annotations

import os

import gymnasium as gym

import termgym  # noqa: F401  (registers the ids)
from termgym.cli import main
from termgym.commands.doctor import check_testenvs
from termgym.tasks.swesynth import TOY_DIR, SweSynthSuite, default_suite
from termgym.tasks.swesynth.projects import load_projects


def test_toy_suite_by_name():
    suite = SweSynthSuite("toy")
    ids = suite.task_ids("all")
    assert ids and {i.split("-")[0] for i in ids} <= {"ledgerly", "planwise", "textkit"}
    assert default_suite("toy").task_ids("all") == ids
    env = gym.make("termgym/SweSynth-v0", path="toy")
    try:
        assert list(env.unwrapped.suite.task_ids("all")) == ids
    finally:
        env.close()
    assert (TOY_DIR / "suite.json").is_file()


def test_provision_command_names_a_bad_project(capsys):
    assert main(["swesynth", "provision", "--project", "nosuchproject"]) == 1
    err = capsys.readouterr().err
    assert "no SWE-SYNTH project 'nosuchproject'" in err and "tinydb" in err


def test_projects_command_and_doctor_row(capsys, tmp_path, monkeypatch):
    assert main(["swesynth", "projects"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in load_projects()) and "NOT provisioned" not in out
    ok, detail = check_testenvs()
    assert ok, detail
    monkeypatch.setenv("TERMGYM_TESTENV_DIR", str(tmp_path))
    ok, detail = check_testenvs()
    assert not ok and "run `termgym swesynth provision`" in detail and "the default suite serves" in detail
    assert main(["swesynth", "projects"]) == 0 and "NOT provisioned" in capsys.readouterr().out


def test_projects_markdown_table_has_a_row_per_manifest(capsys):
    assert main(["swesynth", "projects", "--markdown"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    projects = load_projects()
    assert [row.split(" | ")[0].lstrip("| ") for row in rows] == sorted(projects)
    isodate = next(row for row in rows if row.startswith("| isodate |"))
    p = projects["isodate"]
    assert f"| {p.version} | {p.license} | {p.domain} | pytest | {p.lines:,} | {p.tests:,} |" in isodate
    assert sum(" | unittest | " in row for row in rows) >= 5


def test_provision_defaults_to_the_projects_the_default_suite_serves(monkeypatch):
    from termgym.tasks.swesynth import projects as projects_mod
    from termgym.tasks.swesynth.projects import served_projects
    from termgym.tasks.swesynth.suite import SUITE_DIR

    assert projects_mod.DEFAULT_SUITE_DIR == SUITE_DIR  # the default suite, named twice to avoid an import cycle
    served = served_projects()
    every_task = set(default_suite(behaviour="any").projects())  # behaviour="any" serves them all
    assert served == sorted(every_task) and set(default_suite().projects()) <= every_task
    assert set(served) < set(load_projects())  # factory-only projects exist, and tried ones that kept no task
    asked: list[list[str]] = []
    monkeypatch.setattr(projects_mod, "provision", lambda names, force=False: asked.append(list(names)))
    assert main(["swesynth", "provision"]) == 0 and asked[-1] == served
    assert main(["swesynth", "provision", "--all"]) == 0 and asked[-1] == sorted(load_projects())
    assert main(["swesynth", "provision", "--project", "isodate"]) == 0 and asked[-1] == ["isodate"]


def test_served_projects_of_a_broken_suite_file_names_the_file(tmp_path):
    import pytest

    from termgym.tasks.swesynth.projects import ProjectError, served_projects

    assert served_projects(tmp_path) == []  # no suite.json: serves nothing
    (tmp_path / "suite.json").write_text('{"repos": ["isodate"]}')
    with pytest.raises(ProjectError, match=r"suite\.json: 'repos' must be a table"):
        served_projects(tmp_path)
    (tmp_path / "suite.json").write_text("{not json")
    with pytest.raises(ProjectError, match=r"suite\.json: cannot read the suite's projects"):
        served_projects(tmp_path)
    (tmp_path / "suite.json").write_text('{"repos": {"isodate": {}, "not-a-bundled-project": {}}}')
    assert served_projects(tmp_path) == ["isodate"]


def test_provision_with_a_projects_dir_adds_that_sets_projects_to_the_served_ones(tmp_path, monkeypatch):
    import shutil

    from termgym.tasks.swesynth import projects as projects_mod
    from termgym.tasks.swesynth.projects import PROJECTS_DIR, PROJECTS_PATH_ENV, served_projects

    extra = tmp_path / "more"
    shutil.copytree(PROJECTS_DIR / "isodate", extra / "isodate-copy")
    manifest = extra / "isodate-copy" / "project.toml"
    manifest.write_text(manifest.read_text().replace('name = "isodate"', 'name = "isodate-copy"', 1))
    monkeypatch.setenv(PROJECTS_PATH_ENV, "")  # recorded, so the CLI's addition is undone after the test
    asked: list[list[str]] = []
    monkeypatch.setattr(projects_mod, "provision", lambda names, force=False: asked.append(list(names)))
    assert main(["swesynth", "provision", "--projects-dir", str(extra)]) == 0
    assert asked[-1] == sorted([*served_projects(), "isodate-copy"])


def test_a_projects_dir_given_to_the_cli_does_not_outlive_the_test_that_gave_it():
    """The conftest's guard: the previous test's --projects-dir is gone (its set had no test environment)."""
    from termgym.tasks.swesynth.projects import PROJECTS_PATH_ENV

    assert "more" not in os.environ.get(PROJECTS_PATH_ENV, "")
    assert "isodate-copy" not in load_projects()
