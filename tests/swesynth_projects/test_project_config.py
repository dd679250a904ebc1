"""What ``add-project`` reads from an sdist the way its maintainers run it (``project_config``):
declared runtime dependencies, the pytest configuration pytest would pick, the ``addopts`` the test
lock cannot satisfy, and unittest files pytest's ``python_files`` misses. Small folders made here;
the probe plugin and the neutralised options are run through a real pytest."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from termgym.factory.swesynth.project_add import (
    AddProjectError,
    add_project,
    detect_layout,
    licence_from_text,
    test_command,
)
from termgym.factory.swesynth.project_config import (
    PROBE_PLUGIN,
    LockPytest,
    ReadingError,
    addopts_overrides,
    declared_dependencies,
    declared_test_dependencies,
    evaluate_marker,
    filterwarnings_overrides,
    imported_modules,
    missed_unittest_files,
    neutralise_addopts,
    parse_declared,
    parse_probe,
    plugin_names,
    python_files_overrides,
    read_pytest_config,
)
from termgym.tasks.swesynth import projects as P
from termgym.tasks.swesynth.selection import select_command

# -- declared runtime dependencies -----------------------------------------------------------------


@pytest.mark.parametrize(("marker", "expected"), [
    ('python_version >= "3.8"', True),
    ('python_version < "3.11"', False),
    ('python_version <= "3.11" and sys_platform == "linux"', True),
    ('sys_platform == "win32" or platform_system == "Darwin"', False),
    ('extra == "dev"', False),
    ('python_version < "3.8" or (os_name == "posix" and extra != "dev")', True),
    ('python_version ~= "3.9"', True),
    ('python_full_version == "3.11.*"', True),
    ('implementation_name == "pypy"', False),
    ('"linux" in sys_platform', True),
    ("platform_machine not in 'arm64 aarch64'", True),
])
def test_markers_are_evaluated_for_the_sandbox_python(marker, expected):
    assert evaluate_marker(marker) is expected


@pytest.mark.parametrize("bad", ['python_version < "3.8" and', 'pythonversion < "3.8"', '(python_version < "3.8"',
                                 'python_version <'])
def test_unreadable_markers_are_named(bad):
    with pytest.raises(ReadingError, match="marker"):
        evaluate_marker(bad)


def test_requirement_lines_keep_name_extras_and_specifier():
    assert parse_declared("typing-extensions (!=4.6.0, >=3.10)") == ("typing-extensions!=4.6.0,>=3.10", None)
    assert parse_declared('requests[socks] >=2.0 ; python_version < "3.12"') == (
        "requests[socks]>=2.0", 'python_version < "3.12"')
    with pytest.raises(ReadingError, match="URL"):
        parse_declared("demo @ https://example.org/demo.tar.gz")


PKG_INFO = """Metadata-Version: 2.1
Name: demo
Version: 1.0
Requires-Dist: typing-extensions!=4.6.0,>=3.10
Requires-Dist: importlib-metadata>=4; python_version < "3.8"
Requires-Dist: tomli>=1.1; python_version < "3.11"
Requires-Dist: colorama; sys_platform == "win32"
Requires-Dist: six (>=1.16)
Requires-Dist: pytest-cov; extra == "dev"
Requires-Dist: demo-helpers[fast]>=2; python_version >= "3.10" and extra != "slow"
"""


def _top(tmp_path: Path, name: str = "demo-1.0") -> Path:
    top = tmp_path / name
    top.mkdir(parents=True)
    return top


def test_pkg_info_requires_dist_without_extras_and_false_markers(tmp_path):
    top = _top(tmp_path)
    (top / "PKG-INFO").write_text(PKG_INFO)
    (top / "setup.cfg").write_text("[options]\ninstall_requires =\n    ignored-because-pkg-info-says-it\n")
    declared = declared_dependencies(top)
    # the sabotage: the old add-project read none of this, and typing-extensions had to come by --dep
    assert declared.source == "PKG-INFO Requires-Dist"
    assert declared.requirements == ["typing-extensions!=4.6.0,>=3.10", "six>=1.16", "demo-helpers[fast]>=2"]
    assert [line.split(";")[0].strip() for line in declared.left_out] == [
        "importlib-metadata>=4", "tomli>=1.1", "colorama"]  # the extra's pytest-cov is no runtime requirement


def test_egg_info_pyproject_and_setup_cfg_are_read_when_pkg_info_declares_nothing(tmp_path):
    top = _top(tmp_path / "egg")
    (top / "PKG-INFO").write_text("Metadata-Version: 1.2\nName: demo\nVersion: 1.0\n")
    (top / "demo.egg-info").mkdir()
    (top / "demo.egg-info" / "requires.txt").write_text(
        "six>=1.10\n\n[:python_version < \"3.8\"]\ntyping-extensions\n\n[dev]\npytest\n\n"
        "[fast:sys_platform == \"linux\"]\nujson\n")
    assert declared_dependencies(top).requirements == ["six>=1.10"]

    top = _top(tmp_path / "pyproject")
    (top / "pyproject.toml").write_text('[project]\nname = "demo"\ndependencies = ["attrs>=22", '
                                        '"exceptiongroup; python_version < \'3.11\'"]\n')
    declared = declared_dependencies(top)
    assert (declared.source, declared.requirements) == ("pyproject.toml [project] dependencies", ["attrs>=22"])

    top = _top(tmp_path / "cfg")
    (top / "setup.cfg").write_text("[options]\ninstall_requires =\n    python-dateutil>=2.7\n"
                                   "    backports.zoneinfo; python_version<\"3.9\"\n")
    assert declared_dependencies(top).requirements == ["python-dateutil>=2.7"]
    (top / "setup.cfg").write_text("[options]\ninstall_requires = six; attrs>=19\n")  # list-semi on one line
    assert declared_dependencies(top).requirements == ["six", "attrs>=19"]
    assert declared_dependencies(_top(tmp_path / "none")).requirements == []


def test_no_dep_must_name_a_declared_dependency(tmp_path, capsys):
    from termgym.cli import main
    from tests.swesynth_projects.test_add_project import _textkit_sdist

    sdist = _textkit_sdist(tmp_path)
    with pytest.raises(AddProjectError, match="--no-dep six: the project declares no such dependency"):
        add_project(sdist=sdist, domain="d", description="x", root=tmp_path / "p", no_deps=["six"],
                    log=lambda _: None)
    assert main(["swesynth", "add-project", "--sdist", str(sdist), "--no-dep", "Six", "--domain", "d",
                 "--description", "x", "--root", str(tmp_path / "p")]) == 1
    assert "--no-dep six: the project declares no such dependency (it declares none)" in (
        capsys.readouterr().err)


# -- declared test dependencies ------------------------------------------------------------------------


def _tests(top: Path, body: str, name: str = "tests/test_demo.py") -> list[Path]:
    path = top / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return [path]


def test_test_extras_join_the_lock_only_when_the_tests_import_them(tmp_path):
    """prettytable declares ``pytest-lazy-fixtures`` in its ``tests`` extra and imports it; the tools
    beside it (pytest-cov, mypy) are no import of a test and stay out, as does what is runtime already."""
    top = _top(tmp_path)
    (top / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: wcwidth\n"
                                  'Requires-Dist: pytest-lazy-fixtures; extra == "tests"\n'
                                  'Requires-Dist: pytest-cov; extra == "tests"\nRequires-Dist: mypy; extra == "dev"\n'
                                  'Requires-Dist: wcwidth; extra == "tests"\nRequires-Dist: pytz; extra == "docs"\n'
                                  'Requires-Dist: freezegun; python_version < "3.8" and extra == "tests"\n')
    files = _tests(top, "import pytest\nimport pytz\nimport freezegun\nfrom pytest_lazy_fixtures import lf\n"
                        "import demo\nimport wcwidth\n")
    found = declared_test_dependencies(top, files, runtime=declared_dependencies(top).requirements)
    assert (found.source, found.requirements) == ("PKG-INFO extra 'tests'", ["pytest-lazy-fixtures"])
    assert found.left_out == ['freezegun; python_version < "3.8" and extra == "tests" '
                              f"(marker false for CPython {P.TARGET_PYTHON} on Linux)"]  # said, not silently dropped
    # the sabotage: without the import filter, every tool of the group would be locked
    assert "pytest-cov" not in found.requirements and "mypy" not in found.requirements


def test_poetry_groups_dependency_groups_extras_and_requirement_files_are_read(tmp_path):
    """iso8601 lists hypothesis and pytz in poetry's dev group (pytz only through ``hypothesis.extra.pytz``);
    parsedatetime's requirements file names unittest2, which its tests import only before Python 2.7."""
    top = _top(tmp_path / "poetry")
    (top / "pyproject.toml").write_text('[tool.poetry.group.dev.dependencies]\npython = "^3.7"\nhypothesis = "*"\n'
                                        'pytz = "^2024"\nblack = "*"\n')
    files = _tests(top, "import hypothesis.extra.pytz\nimport hypothesis.strategies as st\n", "demo/test_demo.py")
    found = declared_test_dependencies(top, files)
    assert found.requirements == ["hypothesis", "pytz"]
    assert found.source == "pyproject.toml [tool.poetry.group.dev.dependencies]"

    top = _top(tmp_path / "groups")
    (top / "pyproject.toml").write_text('[project]\nname = "demo"\n[project.optional-dependencies]\n'
                                        'test = ["attrs>=22"]\n[dependency-groups]\ntests = ["pyyaml>=6", "ruff"]\n')
    files = _tests(top, "import attr\ntry:\n    import yaml\nexcept ImportError:\n    yaml = None\n")
    assert declared_test_dependencies(top, files).requirements == ["attrs>=22", "pyyaml>=6"]

    top = _top(tmp_path / "cfg")
    (top / "setup.cfg").write_text("[options.extras_require]\ntesting =\n    simplejson>=3\n    flake8\n")
    (top / "requirements.testing.txt").write_text("pytest\nunittest2\n-r requirements.txt\n")
    files = _tests(top, "import sys\nif sys.version_info < (2, 7):\n    import unittest2 as unittest\nelse:\n"
                        "    import unittest\nimport simplejson\n")
    found = declared_test_dependencies(top, files)
    assert found.requirements == ["simplejson>=3"]
    assert found.source == "setup.cfg [options.extras_require] testing"
    assert imported_modules(files) == {"sys", "unittest", "simplejson"}  # the Python 2 branch is not followed
    (files[0]).write_text("print 'python 2'\nimport unittest2\n")  # unparsable here: read line by line
    assert "unittest2" in imported_modules(files)

    top = _top(tmp_path / "tox")  # natsort: tox's test environment installs pytest-mock and hypothesis
    (top / "tox.ini").write_text("[tox]\nenvlist = py311\n\n[testenv]\ndeps =\n    coverage\n    pytest-mock\n"
                                 "    py311: hypothesis>=6  # the factor's line\n    -rrequirements.txt\n")
    files = _tests(top, "from hypothesis import given\nfrom pytest_mock import MockerFixture\n")
    assert declared_test_dependencies(top, files).requirements == ["pytest-mock", "hypothesis>=6"]


# -- the pytest configuration ------------------------------------------------------------------------


def test_the_configuration_pytest_picks_is_read(tmp_path):
    top = _top(tmp_path)
    (top / "tests").mkdir()
    (top / "setup.cfg").write_text("[tool:pytest]\naddopts =\n    --verbose\n    --cov=demo\n"
                                   "python_files = check_*.py\n")
    (top / "tox.ini").write_text("[tox]\nenvlist = py311\n")  # no [pytest]: not pytest's file
    (top / "pyproject.toml").write_text('[project]\nname = "demo"\n')  # no ini_options: not pytest's either
    config = read_pytest_config(top, ["tests"])
    assert (config.where, config.addopts, config.python_files) == (
        "setup.cfg [tool:pytest]", ["--verbose", "--cov=demo"], ["check_*.py"])
    (top / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = ["-ra", "--cov", "demo"]\n'
                                        'required_plugins = "pytest-cov>=4"\n')
    config = read_pytest_config(top, ["tests"])
    assert (config.where, config.addopts, config.required_plugins) == (
        "pyproject.toml [tool.pytest.ini_options]", ["-ra", "--cov", "demo"], ["pytest-cov>=4"])
    (top / "pytest.ini").write_text("")  # pytest.ini counts even empty, and comes first
    assert read_pytest_config(top, ["tests"]).addopts == []
    (top / "tests" / "pytest.ini").write_text("[pytest]\naddopts = -x\n")  # nearer the tests wins
    assert read_pytest_config(top, ["tests"]).file == "tests/pytest.ini"
    assert read_pytest_config(_top(tmp_path / "bare"), []) is None


LOCK = LockPytest(options={"-k": "one", "-m": "one", "-p": "one", "-r": "one", "-W": "one", "-v": "none",
                           "--verbose": "none", "-x": "none", "-q": "none", "--tb": "one", "--doctest-modules": "none",
                           "--junitxml": "one", "--strict-markers": "none", "--debug": "optional"},
                  plugins={"xdist": False, "tests.plugin": True, "no:cacheprovider": True}, dists=["pytest-timeout"])


def test_addopts_the_lock_cannot_satisfy_are_dropped_with_their_values():
    addopts = ["--verbose", "--cov", "demo", "--cov-report=term-missing", "-ra", "-n", "4", "-p", "xdist",
               "-p", "tests.plugin", "-pno:cacheprovider", "--tb", "short", "-W", "error::DeprecationWarning",
               "-vx", "-n4", "--no-cov-on-fail", "--strict-markers", "--junitxml=build/junit.xml", "--debug",
               "--timeout", "30", "-k", "not slow"]
    kept, unsatisfied, report_files = neutralise_addopts(addopts, LOCK)
    assert kept == ["--verbose", "-ra", "-p", "tests.plugin", "-pno:cacheprovider", "--tb", "short", "-W",
                    "error::DeprecationWarning", "-vx", "--strict-markers", "-k", "not slow"]
    assert unsatisfied == ["--cov", "demo", "--cov-report=term-missing", "-n", "4", "-p", "xdist", "-n4",
                           "--no-cov-on-fail", "--timeout", "30"]
    assert report_files == ["--junitxml=build/junit.xml", "--debug"]
    assert sorted(kept + unsatisfied + report_files) == sorted(addopts)  # nothing lost, nothing made up
    assert plugin_names(addopts) == ["xdist", "tests.plugin", "no:cacheprovider"]


def test_overrides_name_what_was_dropped_and_turn_off_missing_required_plugins(tmp_path):
    top = _top(tmp_path)
    (top / "setup.cfg").write_text("[tool:pytest]\naddopts = --strict-markers --cov=demo\n"
                                   "required_plugins = pytest-timeout>=2 pytest-cov\n")
    config = read_pytest_config(top, [])
    ini, notes = addopts_overrides(config, LOCK)
    assert ini == ["addopts=--strict-markers", "required_plugins="]
    assert notes == ["setup.cfg [tool:pytest] addopts: dropped --cov=demo (no plugin of the test lock defines them); "
                     "kept --strict-markers",
                     "setup.cfg [tool:pytest] required_plugins: pytest-cov not in the test lock, so not required"]
    (top / "setup.cfg").write_text("[tool:pytest]\naddopts = --strict-markers -q\n")
    assert addopts_overrides(read_pytest_config(top, []), LOCK) == ([], [])  # nothing to drop: untouched


def _run_pytest(cwd: Path, args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd,
                          env={**clean, **(env or {})}, capture_output=True, text=True, timeout=120)


def test_the_probe_reads_a_real_pytest_and_its_overrides_make_the_suite_run(tmp_path):
    """The probe plugin, run by a real pytest on a project whose addopts name a plugin nobody
    installed: it reports the project's own conftest option and local plugin; the suite fails with
    pytest's usage error (exit 4) as the project configures it, and passes with the overrides."""
    top = _top(tmp_path)
    (top / "setup.cfg").write_text("[tool:pytest]\naddopts = -p localplug --run-slow --tg-absent-plugin-opt=3 "
                                   "-p tg_absent_plugin --strict-markers\n")
    (top / "localplug.py").write_text("")
    (top / "tests").mkdir()
    (top / "tests" / "conftest.py").write_text("def pytest_addoption(parser):\n"
                                               "    parser.addoption('--run-slow', action='store_true')\n")
    (top / "tests" / "test_one.py").write_text("def test_one():\n    assert True\n")
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "tg_probe.py").write_text(PROBE_PLUGIN)
    out = tmp_path / "options.json"
    config = read_pytest_config(top, ["tests"])
    run = _run_pytest(top, ["-o", "addopts=", "-o", "required_plugins=", "-p", "tg_probe", "tests"],
                      env={"PYTHONPATH": str(probe), "TG_PROBE_OUT": str(out),
                           "TG_PROBE_PLUGINS": " ".join(plugin_names(config.addopts))})
    assert run.returncode == 0, run.stdout + run.stderr
    lock = parse_probe(out.read_text())
    assert lock.options["--run-slow"] == "none" and lock.options["-k"] == "one" and "--junitxml" in lock.options
    assert lock.plugins == {"localplug": True, "tg_absent_plugin": False}
    ini, _ = addopts_overrides(config, lock)
    assert ini == ["addopts=-p localplug --run-slow --strict-markers"]
    as_configured = _run_pytest(top, ["tests"])
    # the sabotage: as the project configures it, pytest stops with a usage error (exit 4)
    assert as_configured.returncode == 4 and "tg_absent_plugin" in as_configured.stdout + as_configured.stderr
    command = shlex.split(test_command(["tests"], [], "", ini))
    adapted = _run_pytest(top, command[command.index("pytest") + 1:])
    assert adapted.returncode == 0 and "1 passed" in adapted.stdout, adapted.stdout + adapted.stderr


def test_a_warning_filter_naming_a_module_nobody_installed_is_dropped_and_the_rest_still_apply(tmp_path):
    """termcolor and prettytable filter ``coverage.exceptions.CoverageWarning``: without coverage in the
    lock, pytest stops before collecting (exit 4). The entry goes; the other filters keep working, in
    order, through the command line and the shell (an error filter still fails its test)."""
    top = _top(tmp_path)
    (top / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nfilterwarnings = [\n  "error::UserWarning",\n'
        '  "ignore:not here:tg_absent_module.sub.SomeWarning",\n  "ignore::DeprecationWarning",\n]\n')
    (top / "tests").mkdir()
    (top / "tests" / "test_w.py").write_text(
        "import warnings\n\n\ndef test_user():\n    warnings.warn('boom', UserWarning)\n\n\n"
        "def test_deprecated():\n    warnings.warn('old', DeprecationWarning)\n")
    # the sabotage: as the project configures it, the lock's pytest 7.2 stops (exit 4); newer ones warn
    as_configured = _run_pytest(top, ["-q", "tests"])
    assert as_configured.returncode == 4 or "Failed to import filter module" in as_configured.stderr
    config = read_pytest_config(top, ["tests"])
    ini, notes = filterwarnings_overrides(config, {"warnings", "builtins"}.__contains__)
    assert ini == ["filterwarnings=error::UserWarning\nignore::DeprecationWarning"]
    assert "dropped 'ignore:not here:tg_absent_module.sub.SomeWarning'" in notes[0] and "kept 2" in notes[0]
    command = shlex.split(select_command(test_command(["tests"], [], "", ini), top, ["tests/test_w.py"]))
    run = _run_pytest(top, command[command.index("pytest") + 1:])
    assert run.returncode == 1 and "1 failed, 1 passed" in run.stdout, run.stdout + run.stderr
    assert "UserWarning: boom" in run.stdout and "Failed to import filter module" not in run.stdout + run.stderr
    assert filterwarnings_overrides(config, lambda module: True) == ([], [])  # all importable: nothing to do


def test_ini_overrides_survive_the_shell_and_the_selected_command(tmp_path):
    command = test_command(["tests"], [("tests/test_a.py::test_net", "needs the network, which is off")], "-x",
                           ["addopts=--verbose -k 'not slow'", "python_files=test_*.py tests.py"])
    assert command == ("python3 -m pytest -q -p no:cacheprovider -o 'addopts=--verbose -k '\"'\"'not slow'\"'\"'' "
                       "-o 'python_files=test_*.py tests.py' -x --deselect=tests/test_a.py::test_net tests")
    assert shlex.split(command)[6:10] == ["-o", "addopts=--verbose -k 'not slow'", "-o",
                                         "python_files=test_*.py tests.py"]
    (tmp_path / "tests").mkdir()
    selected = shlex.split(select_command(command, tmp_path, ["tests/tests.py::T::test_x"]))
    assert "python_files=test_*.py tests.py" in selected and selected[-1] == "tests/tests.py::T::test_x"
    assert "tests" not in selected


# -- unittest files pytest would miss ----------------------------------------------------------------

UNIT = "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_x(self):\n        self.assertTrue(True)\n"
PLAIN = "def test_x():\n    assert True\n"


def test_unittest_files_pytest_misses_are_found(tmp_path):
    top = _top(tmp_path)
    tests = top / "tests"
    (tests / "sub").mkdir(parents=True)
    (tests / "build").mkdir()
    for name, body in {"tests.py": UNIT, "testformat.py": UNIT, "test_parse.py": UNIT, "sub/checks.py": UNIT,
                       "helpers.py": UNIT, "testplain.py": PLAIN, "build/testold.py": UNIT, "__init__.py": "",
                       "conftest.py": UNIT}.items():
        (tests / name).write_text(body)
    # the sabotage: pytest's own pattern collects none of these, so polib's suite came out empty
    assert missed_unittest_files(top, ["tests"]) == ["tests/testformat.py", "tests/tests.py"]
    (top / "runtests.sh").write_text("python -m unittest tests.sub.checks\n")  # named by the project
    assert missed_unittest_files(top, ["tests"]) == ["tests/sub/checks.py", "tests/testformat.py", "tests/tests.py"]
    assert missed_unittest_files(top, ["tests/tests.py"]) == []  # a file argument is collected anyway
    ini, notes = python_files_overrides(top, ["tests"], None)
    assert ini == ["python_files=test_*.py *_test.py checks.py testformat.py tests.py"]
    assert notes[0].startswith("python_files: added checks.py testformat.py tests.py")
    (top / "tox.ini").write_text("[pytest]\npython_files = test*.py checks.py\n")  # the project's own pattern
    assert python_files_overrides(top, ["tests"], read_pytest_config(top, ["tests"])) == ([], [])


def test_a_test_suite_package_counts_every_module_and_many_names_become_one_pattern(tmp_path):
    """parsedatetime names ``test_suite='tests'`` in setup.py (setuptools runs every module of it) and
    keeps 22 ``Test*.py`` files, which neither pytest's nor unittest's default pattern matches."""
    top = _top(tmp_path)
    (top / "tests").mkdir()
    for name in ("TestUnits.py", "TestPhrases.py", "TestNlp.py"):
        (top / "tests" / name).write_text(UNIT)
    (top / "tests" / "utils.py").write_text("def helper():\n    return 1\n")
    assert missed_unittest_files(top, ["tests"]) == []  # the sabotage: no pattern or runner names them
    (top / "setup.py").write_text("from setuptools import setup\nsetup(name='demo', test_suite='tests')\n")
    assert missed_unittest_files(top, ["tests"]) == ["tests/TestNlp.py", "tests/TestPhrases.py", "tests/TestUnits.py"]
    ini, notes = python_files_overrides(top, ["tests"], None)
    assert ini == ["python_files=test_*.py *_test.py Test*.py"]
    (top / "tests" / "Testdata.py").write_text("DATA = 1\n")  # the pattern would reach a file that is no test
    assert python_files_overrides(top, ["tests"], None)[0] == [
        "python_files=test_*.py *_test.py TestNlp.py TestPhrases.py TestUnits.py"]


def test_python_files_override_makes_pytest_collect_them(tmp_path):
    top = _top(tmp_path)
    (top / "tests").mkdir()
    (top / "tests" / "tests.py").write_text(UNIT)
    assert _run_pytest(top, ["-q", "tests"]).returncode == 5  # the old command: no tests ran
    ini, _ = python_files_overrides(top, ["tests"], None)
    command = shlex.split(test_command(["tests"], [], "", ini))
    run = _run_pytest(top, command[command.index("pytest") + 1:])
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr


# -- licences ----------------------------------------------------------------------------------------

MPL = "Mozilla Public License Version 2.0\n==================================\n\n1. Definitions\n"


def test_mpl_is_allowed_and_recorded_gpl_is_not(tmp_path):
    assert licence_from_text(MPL) == "MPL-2.0"
    assert licence_from_text("This Source Code Form is subject to the terms of the Mozilla Public License, "
                             "v. 2.0.") == "MPL-2.0"
    assert "MPL-2.0" in P.ALLOWED_LICENCES and "MPL-2.0" not in P.PERMISSIVE
    assert not {"GPL-3.0-only", "LGPL-3.0-only", "EPL-2.0"} & P.ALLOWED_LICENCES
    top = _top(tmp_path)
    (top / "demo").mkdir()
    (top / "demo" / "__init__.py").write_text("")
    (top / "tests").mkdir()
    (top / "LICENSE").write_text(MPL)
    layout = detect_layout(top)
    assert (layout.licence, layout.licence_files) == ("MPL-2.0", ["LICENSE"])
    (top / "LICENSE").write_text("Some licence nobody here reads\n")
    (top / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"
                                  "Classifier: License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)\n")
    assert detect_layout(top).licence == "MPL-2.0"
