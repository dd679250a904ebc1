"""The one check for tests that need the Docker engine.

CI has a Docker engine and the base image, so a docker test FAILS without them; on a machine that
has none, ``TERMGYM_ALLOW_NO_DOCKER=1`` skips it instead.
"""

from __future__ import annotations

import os

import pytest


def require_docker() -> None:
    """Fail (or skip, with TERMGYM_ALLOW_NO_DOCKER=1) unless the engine and base image are there."""
    from termgym.sandbox.base import BackendUnavailable
    from termgym.sandbox.docker import get_client
    from termgym.sandbox.images import DEFAULT_BASE_IMAGE, image_recipe

    try:
        if image_recipe(get_client(), DEFAULT_BASE_IMAGE) is None:
            raise BackendUnavailable(f"the base image {DEFAULT_BASE_IMAGE} is missing: run `termgym images build-base`")
    except BackendUnavailable as exc:
        if os.environ.get("TERMGYM_ALLOW_NO_DOCKER") == "1":
            pytest.skip(f"docker unavailable (TERMGYM_ALLOW_NO_DOCKER=1): {exc}")
        pytest.fail(f"docker tests need a Docker engine and the base image: {exc}", pytrace=False)
