"""SWE-SYNTH: fix a synthetic bug injected into a real Python repository (``termgym/SweSynth-v0``).

The runtime, what ``gym.make`` loads:

* :mod:`.records` — the on-disk task record; :mod:`.store` — compact suite storage;
* :mod:`.suite` and :mod:`.task` — the suite and task classes; :mod:`.projects` — the pinned
  real projects and their provisioned test environments;
* :mod:`.grading` (with its pytest plugin :mod:`.grader_plugin`), :mod:`.selection` — the grade and
  its fast test selection; :mod:`.behaviour` — the behaviour check decided outside the graded process;
* :mod:`.tree`, :mod:`.pyparse` — helpers shared with the factory.

The factory that makes the tasks (bug operators, screening, reports, bundling) is
:mod:`termgym.factory.swesynth`; nothing here imports it.

Two suites ship in ``termgym_data/swesynth``: the default, ``suite/`` (real open-source projects,
compact storage, splits held out by project) and the toy suite ``tasks/`` (``path="toy"``).
"""

from __future__ import annotations

from pathlib import Path

from termgym.tasks.swesynth.records import TaskRecord, read_task, write_task
from termgym.tasks.swesynth.suite import (
    BUNDLED_DIR,
    NAMED_SUITES,
    SUITE_DIR,
    SUITE_V1_DIR,
    SUITE_V2_DIR,
    TOY_DIR,
    SweSynthSuite,
)
from termgym.tasks.swesynth.task import REFUSAL, SweSynthTask


def default_suite(path: str | Path | None = None, **options) -> SweSynthSuite:
    """The suite behind ``termgym/SweSynth-v0``.

    Without ``path``: the default real-project suite (:data:`SUITE_DIR`, the v2 suite
    ``termgym_data/swesynth/suite-v2``) when it is bundled, else the toy suite. ``path`` is a suite
    name (:data:`NAMED_SUITES`: ``"toy"``, the three small projects written for termgym, fast for
    tests — ``gym.make("termgym/SweSynth-v0", path="toy")``; ``"projects"``, the default
    real-project suite; ``"v1"``, termgym 0.2's 1,323-task suite; ``"v2"``) or a suite directory,
    task folder or records file.
    ``options`` go to :class:`SweSynthSuite` (``bug_types``, ``repos``, ``difficulty``, ``fix_size``
    (``"larger"``: no one-token fixes; ``"history"``: release-history bugs only),
    ``cache_dir``, ``grade_timeout``, ``grade_tests``: ``"selected"`` (default, fast grades from the
    coverage map, :mod:`.selection`) or ``"full"``, ``behaviour``: ``"required"``, the bundled suites'
    default, serves only tasks whose grade a behaviour check decides outside the graded process, or
    ``"any"``)."""
    if path is None:
        options.setdefault("behaviour", "required")
        path = SUITE_DIR if (SUITE_DIR / "suite.json").is_file() else TOY_DIR
    return SweSynthSuite(path, **options)


__all__ = ["BUNDLED_DIR", "NAMED_SUITES", "REFUSAL", "SUITE_DIR", "SUITE_V1_DIR", "SUITE_V2_DIR", "TOY_DIR", "SweSynthSuite", "SweSynthTask",
           "TaskRecord", "default_suite", "read_task",
           "write_task"]
