"""``termgym swesynth add-project``: a project folder made from an sdist nobody here wrote a manifest for.

The end-to-end tests build a real sdist from the toy project ``textkit`` (with an MIT licence file),
resolve its test lock from the package index, provision it into a temporary test-environment root
and run its clean suite in a local sandbox under the grader; a sabotaged copy (one source line
broken) must come back refused with the failing tests named, and nothing added.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from termgym.cli import main
from termgym.factory.swesynth.project_add import (
    BASE_LOCK,
    AddProjectError,
    add_project,
    count_lines,
    detect_layout,
    licence_from_text,
    parse_deselect,
    parse_requirement,
    test_command,
    test_style,
)
from termgym.tasks.swesynth import projects as P
from termgym_data import SWESYNTH_DIR

MIT = ("Copyright (c) 2026 Someone\n\nPermission is hereby granted, free of charge, to any person obtaining a copy "
       "of this software, to deal in the Software without restriction.\n")
BSD2 = "Redistribution and use in source and binary forms, with or without modification, are permitted ...\n"
BSD3 = BSD2 + "3. Neither the name of the copyright holder nor the names of its contributors may be used to endorse\n"
APACHE = "                                 Apache License\n                           Version 2.0, January 2004\n"
ISC = ("Permission to use, copy, modify, and/or distribute this software for any purpose with or without fee is "
       "hereby granted\n")
GPL = "GNU GENERAL PUBLIC LICENSE\nVersion 3, 29 June 2007\n"


@pytest.mark.parametrize(("text", "spdx"), [(MIT, "MIT"), (BSD2, "BSD-2-Clause"), (BSD3, "BSD-3-Clause"),
                                            (APACHE, "Apache-2.0"), (ISC, "ISC"), (GPL, None)])
def test_licence_texts_are_recognised(text, spdx):
    assert licence_from_text(text) == spdx


@pytest.mark.parametrize("bad", ["idna", "idna>=3", "idna==", "==3.7", "idna == 3.7 ; python_version"])
def test_requirements_must_be_pinned(bad):
    with pytest.raises(AddProjectError, match="not pinned as 'name==version'"):
        parse_requirement(bad)
    assert parse_requirement("more-itertools==10.2.0") == ("more-itertools", "10.2.0")


def _tree(root: Path, *, licence: str = MIT, src: bool = False, tests: bool = True, unittest: bool = False) -> Path:
    top = root / "demo-1.0"
    pkg = top / ("src/demo" if src else "demo")
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("def double(x):\n    return 2 * x\n\n\ndef half(x):\n    return x / 2\n")
    (top / "LICENSE").write_text(licence)
    (top / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "1.0"\n')
    (top / "docs").mkdir()
    if tests:
        (top / "tests").mkdir()
        body = ("import unittest\nfrom demo import double\n\n\nclass T(unittest.TestCase):\n"
                "    def test_double(self):\n        self.assertEqual(double(2), 4)\n") if unittest else (
                "from demo import double\n\n\ndef test_double():\n    assert double(2) == 4\n")
        (top / "tests" / "test_demo.py").write_text(body)
    return top


def test_layout_is_found_in_flat_and_src_trees(tmp_path):
    flat = detect_layout(_tree(tmp_path / "a"))
    assert (flat.source_dirs, flat.test_dirs, flat.python_path) == (["demo"], ["tests"], [])
    assert (flat.licence, flat.licence_files, flat.protected_files, flat.test_style) == (
        "MIT", ["LICENSE"], ["pyproject.toml"], "pytest")
    src = detect_layout(_tree(tmp_path / "b", src=True, licence=BSD3, unittest=True))
    assert (src.source_dirs, src.python_path, src.licence, src.test_style) == (
        ["src/demo"], ["src"], "BSD-3-Clause", "unittest")
    (tmp_path / "a" / "demo-1.0" / "LICENSE").rename(tmp_path / "a" / "demo-1.0" / "apache-2.0.LICENSE")
    (tmp_path / "a" / "demo-1.0" / "license-demo.ABOUT").write_text("license_expression: mit\n")
    assert detect_layout(tmp_path / "a" / "demo-1.0").licence_files == ["apache-2.0.LICENSE"]
    (tmp_path / "a" / "demo-1.0" / "apache-2.0.LICENSE").rename(tmp_path / "a" / "demo-1.0" / "MIT-LICENSE")
    assert detect_layout(tmp_path / "a" / "demo-1.0").licence_files == ["MIT-LICENSE"]
    assert count_lines(tmp_path / "a" / "demo-1.0", ["demo"], ["tests"]) == 4
    (tmp_path / "a" / "demo-1.0" / "demo" / "_vendor").mkdir()  # bleach's html5lib: not its own lines
    (tmp_path / "a" / "demo-1.0" / "demo" / "_vendor" / "other.py").write_text("x = 1\ny = 2\n")
    assert count_lines(tmp_path / "a" / "demo-1.0", ["demo"], ["tests"]) == 4
    assert test_style(tmp_path / "a" / "demo-1.0", ["tests"]) == "pytest"


def test_a_single_module_project_is_found_with_its_tests_beside_or_below(tmp_path):
    top = _tree(tmp_path / "a")
    shutil.move(top / "demo" / "__init__.py", top / "demo.py")
    (top / "demo").rmdir()
    (top / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (top / "conftest.py").write_text("")
    layout = detect_layout(top)
    assert (layout.source_dirs, layout.test_dirs, layout.python_path) == (["demo.py"], ["tests"], [])
    assert count_lines(top, layout.source_dirs, layout.test_dirs) == 4
    shutil.move(top / "tests" / "test_demo.py", top / "test_demo.py")  # six's layout: test_six.py beside six.py
    (top / "tests").rmdir()
    assert detect_layout(top).test_dirs == ["test_demo.py"]
    (top / "helpers.py").write_text("")  # two modules: the one named after the project is the source
    assert detect_layout(top).source_dirs == ["demo.py"]
    (top / "demo.py").rename(top / "core.py")  # two modules, neither named after it: ask
    with pytest.raises(AddProjectError, match="no single module found; pass --source-dir"):
        detect_layout(top)


def test_test_modules_without_a_folder_are_found_where_projects_keep_them(tmp_path):
    """roman keeps ``src/tests.py`` beside ``src/roman.py``, pyotp a top-level ``test.py``, shortuuid
    ``shortuuid/test_shortuuid.py`` inside its package, decorator a ``src/tests/`` folder beside
    ``src/decorator.py``; a module named like a test that defines none is not one."""
    test = "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_x(self):\n        pass\n"
    top = _tree(tmp_path / "src-module", src=True, tests=False)
    shutil.move(top / "src" / "demo" / "__init__.py", top / "src" / "demo.py")
    (top / "src" / "demo").rmdir()
    (top / "src" / "tests.py").write_text(test)
    layout = detect_layout(top)
    assert (layout.source_dirs, layout.test_dirs, layout.python_path) == (["src/demo.py"], ["src/tests.py"], ["src"])
    (top / "src" / "tests.py").unlink()
    (top / "src" / "tests").mkdir()
    (top / "src" / "tests" / "test.py").write_text(test)
    assert detect_layout(top).test_dirs == ["src/tests"]

    top = _tree(tmp_path / "top-test", src=True, tests=False)
    (top / "test.py").write_text(test)
    (top / "testing_helpers.py").write_text("def helper():\n    return 1\n")  # named like one, defines no test
    assert detect_layout(top).test_dirs == ["test.py"]

    top = _tree(tmp_path / "nested", tests=False)  # aniso8601: a test folder in a subpackage too
    for folder in ("demo/tests", "demo/builders/tests", "demo/builders/tests/data/tests", "demo/t"):
        (top / folder).mkdir(parents=True)
    for folder in ("demo/tests", "demo/builders/tests", "demo/builders/tests/data/tests"):
        (top / folder / "test_x.py").write_text(test)
    assert detect_layout(top).test_dirs == ["demo/builders/tests", "demo/tests"]

    top = _tree(tmp_path / "in-package", tests=False)
    (top / "demo" / "test_demo.py").write_text(test)
    assert detect_layout(top).test_dirs == ["demo/test_demo.py"]
    from termgym.tasks.swesynth.tree import is_source_path

    assert not is_source_path("demo/test_demo.py", ["demo"], ["demo/test_demo.py"])  # never a place for a bug
    (top / "demo" / "test_demo.py").write_text("# no test here\n")  # the sabotage: no test, no test module
    with pytest.raises(AddProjectError, match="holds no test folder"):
        detect_layout(top)


@pytest.mark.parametrize(("kwargs", "edit", "message"), [
    ({}, lambda top: (top / "LICENSE").write_text(GPL), "the licence is none that can be recognised"),
    ({"licence": "GPL-3.0-only"}, lambda top: None, "'GPL-3.0-only' is not one of the licences a project may carry"),
    ({}, lambda top: (top / "LICENSE").unlink(), "no licence file"),
    ({}, lambda top: shutil.rmtree(top / "tests"), "holds no test folder"),
    ({}, lambda top: (top / "demo" / "__init__.py").unlink(), "no package"),
    ({"source_dirs": ["lib"]}, lambda top: None, "source dir 'lib' is neither a folder nor a .py module"),
    ({"test_dirs": ["spec"]}, lambda top: None, "test dir 'spec' is not in the sdist"),
])
def test_what_cannot_be_bundled_is_named(tmp_path, kwargs, edit, message):
    top = _tree(tmp_path)
    edit(top)
    with pytest.raises(AddProjectError, match=message):
        detect_layout(top, **kwargs)


def test_left_out_tests_go_into_the_command_with_their_reason():
    left_out = parse_deselect(["tests/test_a.py::test_net=needs the network, which the sandbox has not",
                               "tests/test_slow.py=takes minutes: stress tests"])
    assert test_command(["tests"], left_out, "-o addopts=") == (
        "python3 -m pytest -q -p no:cacheprovider -o addopts= --deselect=tests/test_a.py::test_net "
        "--ignore=tests/test_slow.py tests")
    for bad in ["tests/test_a.py::test_net", "tests/test_a.py::test_net=flaky", "=a good long reason here"]:
        with pytest.raises(AddProjectError, match="TEST=REASON"):
            parse_deselect([bad])
    with pytest.raises(AddProjectError, match="spaces or quotes"):
        test_command(["tests"], [("tests/t.py::test_x[a b]", "a reason long enough")])


def test_a_left_out_id_the_shell_would_read_reaches_pytest_whole():
    """natsort's parametrized ids hold ``<lambda>``: unquoted, the shell reads it as a redirect and
    pytest collects nothing; the command is run by a shell, so each such id is quoted."""
    ids = ["tests/t.py::test_f[0-<lambda>]", "tests/t.py::test_g[x|y;z]", "tests/t.py::test_h[$HOME*]"]
    command = test_command(["tests"], [(i, "fails on the clean tree: locale") for i in ids])
    args = command.removeprefix("python3 -m pytest -q -p no:cacheprovider ")
    out = subprocess.run(["bash", "-c", f"printf '%s\\n' {args}"], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0 and out.stdout.splitlines() == [*(f"--deselect={i}" for i in ids), "tests"], out


def _textkit_sdist(tmp_path: Path, *, sabotage: bool = False, name: str = "textkit") -> Path:
    top = tmp_path / "build" / f"{name}-0.1.0"
    shutil.copytree(SWESYNTH_DIR / "toy" / "textkit", top)
    (top / "LICENSE").write_text(MIT)
    if sabotage:  # one source line broken: the clean suite fails and the project must be refused
        slug = top / "textkit" / "slug.py"
        text = slug.read_text()
        assert ".lower()" in text
        slug.write_text(text.replace(".lower()", ".upper()", 1))
    sdist = tmp_path / f"{name}-0.1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(top, arcname=top.name)
    return sdist


@pytest.mark.slow
def test_an_unnamed_sdist_becomes_a_checked_project(tmp_path, monkeypatch):
    """From a .tar.gz nobody wrote a manifest for to a loadable, provisioned, measured project folder."""
    monkeypatch.setenv("TERMGYM_TESTENV_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "projects"
    sdist = _textkit_sdist(tmp_path)
    result = add_project(sdist=sdist, domain="text utilities", description="A toy text kit.", root=root,
                         log=lambda _: None)
    assert result.ok and result.folder == root / "textkit"
    project = P.load_project(root / "textkit")
    assert sorted(p.name for p in project.folder.iterdir()) == ["LICENSE", "project.toml", "textkit-0.1.0.tar.gz"]
    assert (project.license, project.source_dirs, project.test_dirs) == ("MIT", ("textkit",), ("tests",))
    assert list(project.test_requirements) == list(BASE_LOCK)
    assert project.tests == result.run.counts["passed"] > 50 and project.lines > 300 and project.suite_seconds > 0
    assert P.testenv_ready(project) and project.extra["test_style"] == "pytest"
    with pytest.raises(AddProjectError, match="exists already"):
        add_project(sdist=sdist, domain="x", description="y", root=root, log=lambda _: None)


@pytest.mark.slow
def test_a_failing_clean_suite_is_refused_with_the_failures_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TERMGYM_TESTENV_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "projects"
    sdist = _textkit_sdist(tmp_path, sabotage=True)
    code = main(["swesynth", "add-project", "--sdist", str(sdist), "--domain", "text", "--description", "toy",
                 "--root", str(root)])
    err = capsys.readouterr().err
    assert code == 1 and not (root / "textkit").exists()
    assert "does not pass under the grader; nothing was added" in err
    assert "tests/test_slug.py::" in err and "--deselect TEST=REASON" in err


@pytest.mark.slow
def test_a_project_its_own_test_lock_installs_is_refused(tmp_path, monkeypatch):
    """pytest needs iniconfig, so a project named iniconfig would be tested against the lock's copy
    (soupsieve, pulled in by beautifulsoup4, was the real case): refused before anything is written."""
    monkeypatch.setenv("TERMGYM_TESTENV_DIR", str(tmp_path / "envs"))
    root = tmp_path / "projects"
    sdist = _textkit_sdist(tmp_path, name="iniconfig")
    with pytest.raises(AddProjectError, match=r"installs the project itself \(iniconfig=="):
        add_project(sdist=sdist, domain="d", description="x", root=root, source_dirs=["textkit"],
                    log=lambda _: None)
    assert not (root / "iniconfig").exists()


def test_cli_names_bad_arguments(capsys, tmp_path):
    assert main(["swesynth", "add-project", "idna>=3", "--domain", "d", "--description", "x"]) == 1
    assert "not pinned as 'name==version'" in capsys.readouterr().err
    assert main(["swesynth", "add-project", "--sdist", str(tmp_path / "none.tar.gz"), "--domain", "d",
                 "--description", "x"]) == 1
    assert "no such file" in capsys.readouterr().err
    zipped = tmp_path / "demo-1.0.zip"
    zipped.write_bytes(b"PK")
    assert main(["swesynth", "add-project", "--sdist", str(zipped), "--domain", "d", "--description", "x"]) == 1
    assert "only .tar.gz sdists" in capsys.readouterr().err
    assert main(["swesynth", "add-project", "idna==3.7", "--sdist", str(zipped), "--domain", "d",
                 "--description", "x"]) == 1
    assert "not both" in capsys.readouterr().err
    top = _tree(tmp_path / "linked")  # a link out of the tree: said by name, no traceback
    (top / "docs" / "escape").symlink_to("../../../etc")
    with tarfile.open(tmp_path / "demo-1.0.tar.gz", "w:gz") as tar:
        tar.add(top, arcname="demo-1.0")
    assert main(["swesynth", "add-project", "--sdist", str(tmp_path / "demo-1.0.tar.gz"), "--domain", "d",
                 "--description", "x", "--root", str(tmp_path / "set")]) == 1
    err = capsys.readouterr().err
    assert "does not unpack safely" in err and "demo-1.0/docs/escape" in err and "Traceback" not in err, err


@pytest.mark.slow
def test_polib_from_pypi_is_added_with_one_flag(tmp_path, monkeypatch):
    """polib 1.2.0 keeps its TestCase classes in tests/tests.py, which pytest's default python_files
    misses (the old add-project collected nothing: pytest exit 5). Its suite now runs; the two tests
    that cannot pass in the sandbox are proposed for --deselect with their failures, and
    ``--deselect-failing`` takes the proposal: the project is added."""
    monkeypatch.setenv("TERMGYM_TESTENV_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    root, printed = tmp_path / "projects", []
    result = add_project("polib==1.2.0", domain="gettext catalogs", description="PO and MO files.", root=root,
                         deselect_failing=True, log=printed.append)
    assert "-o 'python_files=test_*.py *_test.py tests.py'" in result.project.test_command
    assert any("python_files: added tests.py (tests/tests.py" in line for line in printed)
    left_out = sorted(line.split(": ")[2] for line in printed if "left out (--deselect-failing)" in line)
    assert left_out == ["tests/tests.py::TestFunctions::test_is_file",  # isfile(True): fd 1
                        "tests/tests.py::TestPoFile::test_save_as_mofile"]  # distutils
    assert result.ok, result.failures
    assert result.run.counts.get("passed") == 85  # the sabotage: nothing was collected before
    assert (root / "polib").is_dir() and P.load_project(root / "polib").tests == 85


@pytest.mark.slow
def test_pydash_from_pypi_gets_its_dependency_and_loses_its_coverage_options(tmp_path, monkeypatch):
    """pydash 7.0.7 declares typing-extensions and runs pytest with pytest-cov's options and a junit
    report (setup.cfg addopts). The old add-project stopped at pytest's usage error (exit 4), then at
    the missing typing-extensions; now both are read. Its mypy-plugin cases and two wall-clock tests
    are left out."""
    monkeypatch.setenv("TERMGYM_TESTENV_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "projects"
    result = add_project("pydash==7.0.7", domain="functional utilities", description="Lo-Dash-style helpers.",
                         deselect=[("tests/pytest_mypy_testing", "type-checking cases for the pytest-mypy-testing "
                                    "plugin (they run mypy), not runtime tests"),
                                   ("tests/test_functions.py::test_debounce_max_wait", "wall-clock debounce timing: "
                                    "fails when the machine is loaded"),
                                   ("tests/test_functions.py::test_throttle", "wall-clock throttle timing (two "
                                    "millisecond clock reads compared): failed on the clean tree in a loaded CI run, "
                                    "2026-12-04")], root=root, log=lambda _: None,
                         flaky_probe=False)  # what this test is about is read before the probe; it has tests of its own
    assert result.ok, result.failures
    project = P.load_project(root / "pydash")
    assert "typing-extensions" in {P.normalise_name(r.split("==")[0]) for r in project.test_requirements}
    assert project.extra["declared_dependencies"] == ["typing-extensions!=4.6.0,>=3.10"]
    assert "--cov" not in project.test_command and "junitxml" not in project.test_command
    assert "-o 'addopts=--verbose --doctest-modules'" in project.test_command
    (note,) = project.extra["add_project_notes"]
    assert note.startswith("setup.cfg [tool:pytest] addopts: dropped --no-cov-on-fail --cov-fail-under=100")
    assert project.tests > 1800 and project.license == "MIT"


def _clean_run(outcomes: dict[str, str], log_tail: str = "") -> P.CleanRun:
    return P.CleanRun(project="demo", backend="local", seconds=1.0, outcomes=outcomes,
                      exit_code=0 if all(o == "passed" for o in outcomes.values()) else 1, tamper=[],
                      log_tail=log_tail, versions={})


def test_failing_tests_are_proposed_with_their_failure_and_a_whole_failing_file_as_one():
    from termgym.factory.swesynth.project_add import failures_of, proposed_deselects

    run = _clean_run({"tests/test_a.py::test_ok": "passed", "tests/test_a.py::test_clock": "failed",
                      "tests/mypy/test_x.py::test_1": "failed", "tests/mypy/test_x.py::test_2": "failed"},
                     log_tail="FAILED tests/test_a.py::test_clock - AssertionError: took 0.31 s\n"
                              "FAILED tests/mypy/test_x.py::test_1 - ModuleNotFoundError: No module named 'mypy'\n")
    proposed = dict(proposed_deselects(run, failures_of(run)))
    assert set(proposed) == {"tests/test_a.py::test_clock", "tests/mypy/test_x.py"}
    assert "AssertionError: took 0.31 s" in proposed["tests/test_a.py::test_clock"]
    assert proposed["tests/mypy/test_x.py"].startswith("all 2 tests fail") and "mypy" in proposed["tests/mypy/test_x.py"]
    # a run that failed as a whole (nothing per test) proposes nothing
    broken = _clean_run({}, log_tail="ERROR: usage")
    broken.exit_code = 4
    assert proposed_deselects(broken, failures_of(broken)) == []
