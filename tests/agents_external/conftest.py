"""Fixtures for running other projects' agents (mini-swe-agent, Harbor's, CLI agents) on termgym tasks.

The scripted OpenAI-compatible server of the evaluation tests (``tests/evaluate/scripted_model.py``)
stands in for the LLM; the tasks are real bundled SWE-SYNTH tasks in real bubblewrap sandboxes.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent / "evaluate"):  # scripted_agents; the scripted model server and its suite
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")  # mini-swe-agent's import banner
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from GitHub (offline CI)

import scripted_model  # noqa: E402

if shutil.which("bwrap") is None:
    pytest.skip("these tests run agents in bubblewrap sandboxes (apt-get install bubblewrap)",
                allow_module_level=True)


@pytest.fixture
def scripted_server():
    with scripted_model.ScriptedModel(stall_seconds=5.0) as server:
        yield server


@pytest.fixture
def scripted():
    return scripted_model


@pytest.fixture(scope="session")
def swesynth_task():
    """The first bundled SWE-SYNTH task (id and the loaded task, with its oracle fix)."""
    from termgym.tasks.swesynth import default_suite

    suite = default_suite("toy")
    task_id = suite.task_ids("all")[0]
    return suite.load(task_id)
