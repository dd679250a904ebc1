"""Projects outside the bundled set: a folder ``add-project --root DIR`` wrote is found by name
through ``--projects-dir DIR`` (``$TERMGYM_SWESYNTH_PROJECTS``) by ``generate`` and ``bundle``,
which make validated tasks from it (real sandboxes, the real grader, the package index once for the
test lock)."""

from __future__ import annotations

import json
import shutil

import pytest

from termgym.cli import main
from termgym.factory.swesynth.project_add import add_project
from termgym.tasks.swesynth import projects as P
from tests.swesynth_projects.test_add_project import _textkit_sdist


def test_project_sets_beyond_the_bundled_one_are_searched_by_name(tmp_path, monkeypatch):
    extra = tmp_path / "more"
    shutil.copytree(P.PROJECTS_DIR / "isodate", extra / "isodate")
    monkeypatch.setattr(P, "PROJECTS_DIR", tmp_path / "bundled")
    (tmp_path / "bundled").mkdir()
    with pytest.raises(P.ProjectError, match="no SWE-SYNTH project 'isodate'"):
        P.get_project("isodate")
    monkeypatch.setenv(P.PROJECTS_PATH_ENV, str(extra))
    assert P.get_project("isodate").folder == extra / "isodate"
    assert P.project_roots() == [tmp_path / "bundled", extra.resolve()]


def test_a_name_in_two_project_sets_and_a_missing_set_are_clear_errors(tmp_path, monkeypatch):
    extra = tmp_path / "more"
    shutil.copytree(P.PROJECTS_DIR / "isodate", extra / "isodate")
    monkeypatch.setenv(P.PROJECTS_PATH_ENV, str(extra))
    with pytest.raises(P.ProjectError, match="'isodate' is in two project sets"):
        P.load_projects()
    monkeypatch.setenv(P.PROJECTS_PATH_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(P.ProjectError, match="not a directory of project folders"):
        P.load_projects()


def test_cli_refuses_a_projects_dir_that_does_not_exist(tmp_path, capsys):
    code = main(["swesynth", "generate", "--project", "textkit", "--projects-dir", str(tmp_path / "none"),
                 "--n", "1", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "--projects-dir" in err and "no such directory" in err


def test_bundle_names_a_share_cap_out_of_range(tmp_path, capsys):
    assert main(["swesynth", "bundle", "--project", "isodate", "--max-named-share", "0", "--out",
                 str(tmp_path / "s")]) == 1
    assert "max_named_share must be in (0, 1]" in capsys.readouterr().err


@pytest.fixture(scope="module")
def added(tmp_path_factory):
    """textkit, added from an sdist into a project set of its own (not the bundled one)."""
    tmp = tmp_path_factory.mktemp("added")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TERMGYM_TESTENV_DIR", str(tmp / "envs"))
        mp.setenv("TERMGYM_CACHE_DIR", str(tmp / "cache"))
        mp.delenv(P.PROJECTS_PATH_ENV, raising=False)
        root = tmp / "projects"
        result = add_project(sdist=_textkit_sdist(tmp), domain="text utilities", description="A toy text kit.",
                             root=root, log=lambda _: None)
        assert result.ok, result.failures
        yield root, tmp


@pytest.mark.slow
def test_generate_and_bundle_make_validated_tasks_from_an_added_project(added, capsys, monkeypatch):
    root, tmp = added
    monkeypatch.setenv("TERMGYM_TESTENV_DIR", str(tmp / "envs"))
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp / "cache"))
    monkeypatch.setenv(P.PROJECTS_PATH_ENV, "")  # recorded (delenv of an unset name is not): undone after the test
    # the sabotage: without the project set the name is unknown
    out = tmp / "generated"
    assert main(["swesynth", "generate", "--project", "textkit", "--n", "1", "--out", str(out)]) == 1
    assert "no SWE-SYNTH project 'textkit'" in capsys.readouterr().err
    code = main(["swesynth", "generate", "--project", "textkit", "--projects-dir", str(root), "--n", "1",
                 "--seed", "5", "--storage", "compact", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    lines = (out / "records" / "textkit.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    assert len(lines) == 1 and record["project"] == "textkit" and record["validation"]["nop"].startswith("0/")
    bundled = tmp / "bundled-suite"
    # every textkit test file is named after its module: with the default share cap (0.5) a suite
    # of textkit alone would be trimmed to nothing; --max-named-share 1 turns the cap off
    code = main(["swesynth", "bundle", "--project", "textkit", "--projects-dir", str(root), "--per-project", "2",
                 "--max-named-share", "1",
                 "--seed", "5", "-j", "1", "--out", str(bundled)])
    assert code == 0, capsys.readouterr().err
    index = json.loads((bundled / "suite.json").read_text())
    gen = index["generation"]["textkit"]
    assert gen["kept"] >= 1 and not any("named after the module" in k for k in gen["rejected"])
    assert index["named_share"]["named"] >= 1
