"""A pytest plugin that makes a project's property-based tests (Hypothesis) give the same answer on
every run: the same examples in the same order, no time limit per example, no example database.

Ten bundled projects pin behaviour with ``@given`` tests. Under Hypothesis's own defaults such a
test draws fresh random examples on each run, replays failures from a ``.hypothesis/`` folder in the
working tree and fails an example that takes more than 200 ms. A grade, a screened candidate or a
validation run of such a suite therefore depended on chance and on the machine's load: the clean
tree of dpath once failed 6 of its 79 tests with the whole box busy, and h2 had a test deselected
because Hypothesis called it flaky. Maintainers run these suites in CI under Hypothesis's ``ci``
profile for the same reason; this plugin applies its settings to whatever profile the project's
conftest chose, so the project's own example counts and health checks stay as they are:

* ``derandomize=True``: examples come from a seed derived from each test, not from the clock;
* ``deadline=None``: a slow example under load is not a failure;
* ``database=None``: nothing in the tree (the agent's or a previous run's) is replayed;
* the ``too_slow`` health check off: data generation slowed by load is not a failure.

Like the grader's plugin this file runs inside the sandbox and imports nothing from termgym; the
grader (:func:`termgym.tasks.swesynth.grading.run_graded_tests`) and the factory's screen
(:mod:`termgym.factory.swesynth.screen`) load it with ``-p``. It is configuration, not a defence: the
code under test shares the interpreter and could change these settings (a grade is decided outside
the test process anyway: ``docs/security.md``). A project without Hypothesis is left untouched.
"""

import importlib.util

import pytest

PROFILE = "termgym-pinned"


def pin_settings():
    """Register and load :data:`PROFILE` on top of the profile now in force; return its settings,
    or ``None`` when Hypothesis is not installed."""
    if importlib.util.find_spec("hypothesis") is None:
        return None
    from hypothesis import HealthCheck, settings

    current = settings.default
    checks = list(current.suppress_health_check)
    if HealthCheck.too_slow not in checks:
        checks.append(HealthCheck.too_slow)
    settings.register_profile(PROFILE, settings(current, derandomize=True, deadline=None, database=None,
                                                suppress_health_check=checks))
    settings.load_profile(PROFILE)
    return settings.default


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    # trylast: after Hypothesis's own plugin has loaded a --hypothesis-profile and after the
    # project's top-level conftest has registered and loaded its own (their choices are kept).
    pin_settings()
