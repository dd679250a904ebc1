"""A repository's tree as SWE-SYNTH sees it: which paths are tests, which are source, how a tree is copied.

Shared by the runtime (the task copies its tree, the grade refuses test-file edits) and the factory
(:mod:`termgym.factory.swesynth`: which files a bug may live in).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

#: Directories never copied into a working tree or scanned for source files.
IGNORED_DIRS = {".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox",
                ".nox", ".venv", "venv", "build", "dist", ".eggs", "node_modules", ".benchmarks"}
#: Folders inside a package that hold another project's code (bleach's ``_vendor/html5lib``): copied
#: and graded with the tree, but never a place for a bug or a fix.
VENDORED_DIRS = {"_vendor", "_vendored"}
#: Top-level directories that hold no library code worth breaking.
NON_SOURCE_DIRS = {"docs", "doc", "examples", "example", "benchmarks", "bench", "scripts", "tools", "ci"}
NON_SOURCE_FILES = {"setup.py", "conftest.py", "noxfile.py", "tasks.py", "fabfile.py", "__main__.py",
                    "_version.py", "version.py"}


def is_test_path(path: str, test_dirs: Sequence[str] = ()) -> bool:
    """Whether a repository-relative path belongs to the tests (never mutated, never graded).

    Test directories (``tests/``, ``test/``, ``testing/`` at any depth, plus ``test_dirs``),
    ``test_*.py``, ``*_test.py`` and ``conftest.py`` count as tests.
    """
    parts = Path(path).parts
    name = parts[-1] if parts else ""
    if any(p in {"tests", "test", "testing"} for p in parts[:-1]):
        return True
    for d in test_dirs:
        d = d.strip("/")
        if d and (path == d or path.startswith(d + "/")):
            return True
    return name == "conftest.py" or (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py")


def is_source_path(path: str, source_dirs: Sequence[str] = (), test_dirs: Sequence[str] = ()) -> bool:
    """Whether a repository-relative path is a source file a bug may live in (and a fix may touch)."""
    if not path.endswith(".py") or is_test_path(path, test_dirs):
        return False
    parts = Path(path).parts
    if any(p in IGNORED_DIRS or p in VENDORED_DIRS or p.startswith(".") for p in parts[:-1]):
        return False
    if source_dirs:
        # an entry is a package folder, or a single module (``xmltodict.py``) matched exactly
        return any(path.startswith(d.strip("/") + "/") or d in (".", "") or path == d.strip("/")
                   for d in source_dirs)
    return parts[0] not in NON_SOURCE_DIRS and parts[-1] not in NON_SOURCE_FILES


def list_source_files(root: str | Path, source_dirs: Sequence[str] = (), test_dirs: Sequence[str] = ()) -> list[str]:
    """Sorted repository-relative paths of the source files under ``root``."""
    root = Path(root)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS and not d.startswith("."))
        for name in filenames:
            rel = (Path(dirpath) / name).relative_to(root).as_posix()
            if is_source_path(rel, source_dirs, test_dirs):
                out.append(rel)
    return sorted(out)


def copy_tree(src: str | Path, dest: str | Path) -> None:
    """Copy a repository without VCS metadata, caches and build outputs."""
    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True,
                    ignore=lambda d, names: [n for n in names if n in IGNORED_DIRS or n.endswith(".pyc")])
