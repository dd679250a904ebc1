"""Every test here leaves ``$TERMGYM_SWESYNTH_PROJECTS`` as it found it.

``termgym swesynth ... --projects-dir DIR`` adds ``DIR`` to that variable for its own process (so
the sandboxes and workers it starts inherit it); a test that calls the CLI in-process would
otherwise leave an extra project set, with no test environment, to every later test.
"""

from __future__ import annotations

import os

import pytest

from termgym.tasks.swesynth.projects import PROJECTS_PATH_ENV


@pytest.fixture(autouse=True)
def _project_sets_restored():
    before = os.environ.get(PROJECTS_PATH_ENV)
    yield
    if before is None:
        os.environ.pop(PROJECTS_PATH_ENV, None)
    else:
        os.environ[PROJECTS_PATH_ENV] = before
