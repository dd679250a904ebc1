"""Pytest hooks that turn skips into failures when ``CI`` is set: a conftest imports them by name.

The trainer-adapter tests skip when their packages are missing (``pytest.importorskip``), which is
right on a developer's machine and wrong in CI, where a broken install would otherwise pass as
"skipped". With ``CI=true`` (or ``1``/``yes``) every skip in the conftest's folder — at collection
(a module-level skip) or in a test — is reported as a failure that names the skip's reason.
"""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    """Whether this run is CI's (``CI=true``, as GitHub Actions and .ci/run set it)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _skip_is_failure(report) -> None:
    if in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which must run every integration test: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skipped test (setup or call) is a failure in CI."""
    outcome = yield
    _skip_is_failure(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A module skipped while collecting (``pytest.importorskip``) is a failure in CI."""
    outcome = yield
    _skip_is_failure(outcome.get_result())
