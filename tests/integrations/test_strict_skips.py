"""In CI a skipped integration test fails: the hooks of strict_skips.py, run on a throwaway test folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

TESTS = {
    "conftest.py": "from strict_skips import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401\n",
    "test_missing_package.py": "import pytest\npytest.importorskip('no_such_package_for_termgym')\n\n"
                               "def test_never_runs():\n    pass\n",
    "test_runtime_skip.py": "import pytest\n\ndef test_skips():\n    pytest.skip('no GPU here')\n\n"
                            "def test_passes():\n    assert True\n",
}


def _run(folder: Path, ci: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(folder)],
                          capture_output=True, text=True, env=env, cwd=folder, timeout=120)


@pytest.fixture
def folder(tmp_path):
    for name, text in TESTS.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_outside_ci_skips_stay_skips(folder):
    result = _run(folder, ci=None)
    assert result.returncode == 0, result.stdout
    assert "1 passed, 2 skipped" in result.stdout


@pytest.mark.parametrize("value", ["true", "1"])
def test_in_ci_a_skipped_test_is_a_failure_naming_its_reason(folder, value):
    (folder / "test_missing_package.py").unlink()
    result = _run(folder, ci=value)
    assert result.returncode == 1, result.stdout
    assert "1 failed, 1 passed" in result.stdout
    assert "skipped in CI, which must run every integration test: Skipped: no GPU here" in result.stdout


def test_in_ci_a_module_skipped_while_collecting_is_an_error(folder):
    result = _run(folder, ci="true")
    assert result.returncode != 0, result.stdout  # pytest stops on the collection error (exit code 2)
    assert "skipped in CI, which must run every integration test" in result.stdout
    assert "no_such_package_for_termgym" in result.stdout
