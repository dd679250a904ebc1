"""The shop project (tests/swesynth_bugs/shop.py), written once per session and checked to pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from termgym.factory.swesynth.validate import run_tests
from tests.swesynth_bugs.shop import TEST_COMMAND, write_project


@pytest.fixture(scope="session")
def shop(tmp_path_factory) -> Path:
    """The clean project; its tests all pass (checked once)."""
    root = write_project(tmp_path_factory.mktemp("shop"))
    result = run_tests(root, TEST_COMMAND, timeout=300)
    assert result.passed and all(o == "passed" for o in result.outcomes.values()), result.output[-2000:]
    return root
