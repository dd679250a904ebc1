"""Fixtures for the sandbox contract suite: one ``backend`` parameter, ``local`` and ``docker``.

A missing Docker engine or base image FAILS the docker half (CI must run it); set
``TERMGYM_ALLOW_NO_DOCKER=1`` on a machine without Docker to skip it instead.
"""

from __future__ import annotations

import pytest

from termgym.sandbox import Sandbox, SandboxSpec, make_sandbox
from tests.docker_engine import require_docker


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request) -> str:
    if request.param == "docker":
        require_docker()
    return request.param


@pytest.fixture
def docker() -> None:
    """Marks a docker-only test as needing the engine (fails without it, see the module doc)."""
    require_docker()


@pytest.fixture
def make(backend):
    """``make(spec=None, mode="persistent", **options)``: a started sandbox, closed after the test."""
    made: list[Sandbox] = []

    def factory(spec: SandboxSpec | None = None, mode: str = "persistent", start: bool = True, **options) -> Sandbox:
        sandbox = make_sandbox(backend, spec or SandboxSpec(), mode=mode, **options)
        made.append(sandbox)
        if start:
            sandbox.start()
        return sandbox

    yield factory
    for sandbox in made:
        sandbox.close()
