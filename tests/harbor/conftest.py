"""Fixtures for the Harbor tests: tiny task folders written on the fly."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest

BASE = "FROM termgym/base:bookworm\nWORKDIR /app\n"


def write(path: Path, text: str, executable: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    if executable:
        os.chmod(path, 0o755)
    return path


def harbor_task(
    root: Path,
    name: str,
    *,
    toml: str = 'schema_version = "1.1"\n',
    instruction: str = "Create /app/done.txt containing ok.",
    dockerfile: str = BASE,
    test_sh: str = """\
        #!/bin/bash
        if grep -qx ok /app/done.txt 2>/dev/null; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
        """,
    solve_sh: str | None = "#!/bin/bash\necho ok > /app/done.txt\n",
    files: dict[str, str] | None = None,
) -> Path:
    """Write a Harbor task folder and return it."""
    task = root / name
    write(task / "task.toml", toml)
    write(task / "instruction.md", instruction)
    if dockerfile is not None:
        write(task / "environment" / "Dockerfile", dockerfile)
    write(task / "tests" / "test.sh", test_sh, executable=True)
    if solve_sh is not None:
        write(task / "solution" / "solve.sh", solve_sh, executable=True)
    for rel, text in (files or {}).items():
        write(task / rel, text)
    return task


@pytest.fixture
def tasks_root(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    root.mkdir()
    return root


@pytest.fixture
def make_task(tasks_root: Path):
    """``make_task(name, **options)`` writes a Harbor task folder under ``tasks_root``."""
    return lambda name, **kw: harbor_task(tasks_root, name, **kw)


@pytest.fixture
def write_file():
    return write


@pytest.fixture
def local_backend() -> str:
    """The name of the local backend, skipping the test where bubblewrap cannot run."""
    if shutil.which("bwrap") is None or os.geteuid() != 0:
        pytest.skip("the local backend needs bubblewrap, run as root")
    return "local"


@pytest.fixture
def write_task():
    """``write_task(root, name, **options)``: :func:`harbor_task` for a folder of the test's choosing."""
    return harbor_task
