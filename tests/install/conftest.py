"""Fixtures for the install tests: a Docker engine (they fail without one; set
``TERMGYM_ALLOW_NO_DOCKER=1`` to skip them instead) and root for debootstrap."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make fresh_images importable


@pytest.fixture(scope="session")
def docker_client():
    from termgym.sandbox.base import BackendUnavailable
    from termgym.sandbox.docker import get_client

    try:
        client = get_client()
        client.ping()
    except BackendUnavailable as exc:
        if os.environ.get("TERMGYM_ALLOW_NO_DOCKER") == "1":
            pytest.skip(f"docker unavailable (TERMGYM_ALLOW_NO_DOCKER=1): {exc}")
        pytest.fail(f"the install test needs a Docker engine: {exc}", pytrace=False)
    if os.geteuid() != 0:
        pytest.fail("the install test builds a root file system with debootstrap: run it as root", pytrace=False)
    return client
