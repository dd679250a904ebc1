"""SWE-SYNTH: fix a synthetic bug injected into a real Python repository (``termgym/SweSynth-v0``).

* :mod:`.inject` — AST-guided, format-preserving bug injectors, one per bug type;
* :mod:`.validate` — running the tests (junit ids) and the keep rules for candidate bugs;
* :mod:`.report` — user-style bug reports and the no-leak rule;
* :mod:`.generate` — the pipeline from a repository to task folders (``termgym swesynth generate``);
* :mod:`.records` — the on-disk task record; :mod:`.suite` — the task and suite classes;
* :mod:`.breaker`, :mod:`.llm` — the optional LLM breaker and report writer.

The default suite ships in the package (``tasks/``), generated from the bundled corpus.
"""

from __future__ import annotations

from pathlib import Path

from termgym.tasks.swesynth.records import TaskRecord, read_task, write_task
from termgym.tasks.swesynth.suite import (
    BUNDLED_DIR,
    NAMED_SUITES,
    REFUSAL,
    TOY_DIR,
    SweSynthSuite,
    SweSynthTask,
)


def default_suite(path: str | Path | None = None, **options) -> SweSynthSuite:
    """The suite behind ``termgym/SweSynth-v0``: the bundled tasks, or ``path`` (a suite name such
    as ``"toy"`` — ``gym.make("termgym/SweSynth-v0", path="toy")`` — a suite directory, a task folder
    or a records file). ``options`` go to :class:`SweSynthSuite` (``bug_types``,
    ``repos``, ``cache_dir``, ``grade_timeout``)."""
    return SweSynthSuite(path if path is not None else BUNDLED_DIR, **options)


__all__ = ["BUNDLED_DIR", "NAMED_SUITES", "REFUSAL", "TOY_DIR", "SweSynthSuite", "SweSynthTask", "TaskRecord", "default_suite", "read_task",
           "write_task"]
