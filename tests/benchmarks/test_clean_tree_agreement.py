"""The clean-tree agreement benchmark on three small unbundled PyPI projects (issue 25, item 2).

idna and jsonpointer have plain ``unittest.TestCase`` suites, six's own code calls ``sys._getframe``:
the grader must report, test for test, what raw pytest reports on their clean trees, in real
sandboxes. The plugin as it was before issue 25 refused all three; run as the grader it must make
the same comparison fail (so the check can fail).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.clean_tree_agreement import (
    OLD_PLUGIN_REV,
    PROJECTS,
    cache_dir,
    compare,
    markdown,
    old_plugin_file,
)

SMALL = ("idna", "jsonpointer", "six")


@pytest.fixture(scope="module")
def root():
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                           "idna==3.7", "-d", str(cache_dir() / "sdists")], capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        pytest.skip(f"PyPI is not reachable here: {proc.stderr.strip()[-200:]}")
    return cache_dir()


@pytest.mark.slow
@pytest.mark.parametrize("name", SMALL)
def test_the_grader_agrees_with_raw_pytest_on_a_clean_tree(root, name):
    project = next(p for p in PROJECTS if p.name == name)
    result = compare(project, root)
    assert not result.error, result.error
    assert result.raw_passed > 10, result
    assert result.agrees, (result.disagreements, result.tamper)
    assert result.grader_passed_of_required == result.raw_passed
    assert f"| {name} " in markdown([result])


@pytest.mark.slow
def test_the_old_refusing_plugin_fails_the_same_comparison(root):
    """Sabotage: the pre-issue-25 plugin (frames and rebound-test checks) refuses idna's unittest suite."""
    project = next(p for p in PROJECTS if p.name == "idna")
    result = compare(project, root, old_plugin=old_plugin_file(OLD_PLUGIN_REV, root))
    assert result.agrees  # the current grader
    assert result.old_tamper and result.old_passed_of_required == 0, result
    assert "the test function was replaced" in result.old_tamper[0]
