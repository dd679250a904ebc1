"""Shared fixtures of the SWE-SYNTH grading attacks: the bundled task they attack and its buggy tree."""

from __future__ import annotations

import pytest

from termgym.tasks.swesynth import default_suite
from termgym.tasks.swesynth.task import prepare_workspace

TASK = "ledgerly-03e7642999"  # the bug: Account.normal_side says "Credit" instead of "credit"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("swesynth-cache")


@pytest.fixture(scope="module")
def task(cache):
    return default_suite("toy", cache_dir=cache).load(TASK)


@pytest.fixture(scope="module")
def buggy_tree(task, cache):
    return prepare_workspace(task.record, cache)
