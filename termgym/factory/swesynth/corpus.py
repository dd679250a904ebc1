"""The bundled SWE-SYNTH corpus: small, real Python projects written for termgym.

Each project is a normal repository folder under :data:`CORPUS_DIR` (``termgym_data/swesynth/toy``) (``README.md``,
``pyproject.toml``, ``pytest.ini``, a top-level package and ``tests/``), pure standard
library, deterministic, and its whole suite runs in about a second with Debian's
``/usr/bin/python3 -m pytest``. The bug factory injects bugs into ``source_dirs`` only;
``test_dirs`` and ``protected_files`` are never mutated and never graded.

:data:`PROJECTS` maps a project name to:

* ``dir`` — folder name under :data:`CORPUS_DIR`;
* ``package`` — the importable package the project ships;
* ``test_command`` — run from the project root, prints per-test results;
* ``source_dirs`` — where bugs may be injected (relative to the project root);
* ``test_dirs`` — the tests, protected;
* ``protected_files`` — configuration files a fix must not need to touch;
* ``description`` — one line for people.
"""

from __future__ import annotations

from pathlib import Path

from termgym_data import SWESYNTH_DIR

CORPUS_DIR: Path = SWESYNTH_DIR / "toy"

# The test-command flags keep a run from writing .pytest_cache into the workspace.
TEST_COMMAND = "python3 -m pytest -q -p no:cacheprovider tests"

PROJECTS: dict[str, dict] = {
    "ledgerly": {
        "dir": "ledgerly",
        "package": "ledgerly",
        "test_command": TEST_COMMAND,
        "source_dirs": ["ledgerly"],
        "test_dirs": ["tests"],
        "protected_files": ["pytest.ini", "pyproject.toml"],
        "description": "Bookkeeping: money arithmetic, double-entry ledger, FIFO inventory, "
                       "discounts and taxes, invoices, reports, bank CSV import.",
    },
    "textkit": {
        "dir": "textkit",
        "package": "textkit",
        "test_command": TEST_COMMAND,
        "source_dirs": ["textkit"],
        "test_dirs": ["tests"],
        "protected_files": ["pytest.ini", "pyproject.toml"],
        "description": "Text tools: markup-to-HTML renderer, template engine with an expression "
                       "language, wrapping, slugs, case conversion, text statistics.",
    },
    "planwise": {
        "dir": "planwise",
        "package": "planwise",
        "test_command": TEST_COMMAND,
        "source_dirs": ["planwise"],
        "test_dirs": ["tests"],
        "protected_files": ["pytest.ini", "pyproject.toml"],
        "description": "Planning data structures: interval sets, priority queue, LRU cache, "
                       "dependency graph, business calendar, job scheduler, ring buffer.",
    },
}


def project_path(name: str) -> Path:
    """The root folder of corpus project ``name``; ``KeyError`` lists the known names."""
    if name not in PROJECTS:
        raise KeyError(f"no corpus project {name!r}; known: {', '.join(sorted(PROJECTS))}")
    return CORPUS_DIR / PROJECTS[name]["dir"]


__all__ = ["CORPUS_DIR", "PROJECTS", "TEST_COMMAND", "project_path"]
