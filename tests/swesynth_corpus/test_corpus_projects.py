"""The bundled SWE-SYNTH corpus: every project is big enough, documented, deterministic and green.

Each project's own suite runs in a temporary copy (so no cache or bytecode lands in the
package tree) with Debian's ``/usr/bin/python3`` — the interpreter the local sandbox
grades with — and with the interpreter running these tests.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from termgym.factory.swesynth.corpus import CORPUS_DIR, PROJECTS, project_path

MIN_LOC = 800
MIN_TESTS = 80
# Budget for one project's suite as pytest reports it (interpreter start-up and plugin loading
# excluded); generous because CI machines are shared. Unloaded, each suite takes about a second.
MAX_SUITE_SECONDS = 60
DEBIAN_PYTHON = "/usr/bin/python3"
# Modules whose use would make a suite depend on the clock, chance, the network or other processes.
NONDETERMINISTIC_IMPORTS = {"random", "time", "socket", "urllib", "http", "subprocess", "threading", "secrets", "uuid"}


def package_files(name: str) -> list[Path]:
    """The ``.py`` files of a project's source dirs."""
    root = project_path(name)
    files: list[Path] = []
    for source in PROJECTS[name]["source_dirs"]:
        files.extend(sorted((root / source).rglob("*.py")))
    return files


def count_loc(files: list[Path]) -> int:
    """Non-blank lines that are not comments."""
    total = 0
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                total += 1
    return total


def interpreters() -> list:
    """Debian's python3 (when it has pytest) and the current interpreter, as pytest params."""
    params = []
    has_debian = os.path.exists(DEBIAN_PYTHON) and subprocess.run(
        [DEBIAN_PYTHON, "-c", "import pytest"], capture_output=True).returncode == 0
    params.append(pytest.param(DEBIAN_PYTHON, id="debian-python3", marks=pytest.mark.skipif(
        not has_debian, reason=f"{DEBIAN_PYTHON} with pytest is not installed")))
    params.append(pytest.param(sys.executable, id="current-python"))
    return params


def test_registry_matches_folders():
    assert CORPUS_DIR.is_dir()
    assert len(PROJECTS) >= 3
    on_disk = sorted(p.name for p in CORPUS_DIR.iterdir() if (p / "pyproject.toml").is_file())
    assert sorted(info["dir"] for info in PROJECTS.values()) == on_disk
    for name, info in PROJECTS.items():
        root = project_path(name)
        for key in ("dir", "package", "test_command", "source_dirs", "test_dirs", "protected_files"):
            assert key in info, f"{name}: registry entry lacks {key!r}"
        for folder in info["source_dirs"] + info["test_dirs"]:
            assert (root / folder).is_dir(), f"{name}: {folder}/ is missing"
        for file in info["protected_files"] + ["README.md"]:
            assert (root / file).is_file(), f"{name}: {file} is missing"
        assert (root / info["package"] / "__init__.py").is_file()
        # pytest's importlib/rootdir-basename rules: the project's tests must not be a package.
        assert not any((root / d / "__init__.py").exists() for d in info["test_dirs"])


def test_project_path_names_unknown_project():
    with pytest.raises(KeyError, match="known: ledgerly"):
        project_path("nope")


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_project_is_large_enough(name):
    loc = count_loc(package_files(name))
    assert loc >= MIN_LOC, f"{name}: {loc} lines of code, want at least {MIN_LOC}"


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_every_function_and_class_has_a_docstring(name):
    missing = []
    for path in package_files(name):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
                if ast.get_docstring(node) is None:
                    missing.append(f"{path.name}:{getattr(node, 'lineno', 1)} {getattr(node, 'name', '<module>')}")
    assert not missing, f"{name}: no docstring on " + ", ".join(missing)


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_projects_use_only_deterministic_stdlib(name):
    root = project_path(name)
    offenders = []
    for path in package_files(name) + sorted((root / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for module in names:
                top = module.split(".")[0]
                if top in NONDETERMINISTIC_IMPORTS:
                    offenders.append(f"{path.relative_to(root)} imports {module}")
                elif top not in sys.stdlib_module_names and top not in {"pytest", PROJECTS[name]["package"]}:
                    offenders.append(f"{path.relative_to(root)} imports third-party {module}")
    assert not offenders, f"{name}: " + "; ".join(offenders)


@pytest.mark.parametrize("python", interpreters())
@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_project_suite_passes(name, python, tmp_path):
    copy = tmp_path / name
    shutil.copytree(project_path(name), copy, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    command = PROJECTS[name]["test_command"].split()
    assert command[0] == "python3"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)
    result = subprocess.run([python, *command[1:]], cwd=copy, capture_output=True, text=True, env=env,
                            timeout=MAX_SUITE_SECONDS * 5)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr
    assert result.returncode == 0, f"{name} with {python}:\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}"
    match = re.search(r"(\d+) passed", summary)
    assert match and not re.search(r"failed|error|skipped", summary), summary
    assert int(match.group(1)) >= MIN_TESTS, f"{name}: only {match.group(1)} tests"
    elapsed = float(re.search(r" in ([0-9.]+)s", summary).group(1))
    assert elapsed < MAX_SUITE_SECONDS, f"{name} took {elapsed:.1f}s with {python}"
    # The test command must leave the workspace as it found it (no cache folders for a diff to pick up).
    assert not list(copy.rglob(".pytest_cache"))
