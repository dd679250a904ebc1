"""Nothing outside the workspace reveals the answer (issue 13, item 2).

An agent that finds an installed copy of the project it must fix can diff it against its workspace
and copy the fix; one that finds termgym can read the bundled fix patches or the LIVEWEB world
generator. Each test plays that agent from inside a real sandbox, on both backends, and on the
host's ``/usr`` too (``runtime="host"``), where the host copies really exist.

The host-side copies the tests rely on: Debian's ``python3-more-itertools`` (in the runtime, as a
pytest dependency, and on the host) and, in a private mount namespace, a system-wide termgym
install made by bind-mounting this checkout's package into ``/usr/local/lib/python3*/dist-packages``.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import termgym
from termgym.sandbox import SandboxSpec, make_sandbox
from tests.docker_engine import require_docker

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = Path(termgym.__file__).resolve().parent




@pytest.fixture(params=["local", "local-host", pytest.param("docker", marks=pytest.mark.docker)])
def system(request) -> tuple[str, dict]:
    """(backend, sandbox options): the pinned runtime, the host's /usr, a container."""
    if request.param == "docker":
        require_docker()
        return "docker", {}
    if request.param == "local-host":
        return "local", {"runtime": "host"}
    return "local", {}


@pytest.fixture
def more_itertools_project(tmp_path) -> Path:
    """A workspace holding (a stand-in for) the more-itertools project under repair."""
    project = tmp_path / "more-itertools"
    (project / "more_itertools").mkdir(parents=True)
    (project / "more_itertools" / "__init__.py").write_text("from .more import *  # noqa\n")
    (project / "more_itertools" / "more.py").write_text("def chunked(iterable, n):\n    return 'BUGGY'\n")
    (project / "pyproject.toml").write_text('[project]\nname = "more-itertools"\nversion = "10.1.0"\n')
    return project


def start(system, spec: SandboxSpec):
    backend, options = system
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the host-runtime warning
        box = make_sandbox(backend, spec, **options)
        box.start()
    return box


def test_no_installed_copy_of_the_task_project_is_importable_or_readable(system, more_itertools_project):
    if system[1].get("runtime") == "host":
        assert glob.glob("/usr/lib/python3/dist-packages/more_itertools/more.py"), "the host copy this attack needs"
    box = start(system, SandboxSpec(workdir="/app", copy_dirs={str(more_itertools_project): "/app"}))
    try:
        # from anywhere but the workspace, the distribution does not exist
        out = box.exec("cd / && python3 -c 'import more_itertools' 2>&1; echo rc=$?")
        assert "No module named 'more_itertools'" in out.output and "rc=1" in out.output
        found = box.exec("find / \\( -path /proc -o -path /sys -o -path /dev -o -path /app \\) -prune -o "
                         "\\( -iname 'more_itertools*' -o -iname 'more.py' -o -iname 'more.cpython*' \\) -print 2>/dev/null")
        assert found.output.strip() == "", found.output
        # so there is nothing to diff the workspace against
        diff = box.exec("for d in /usr/lib/python3/dist-packages /usr/local/lib/python3*/dist-packages; do "
                        "diff -r /app/more_itertools $d/more_itertools; done 2>&1")
        assert "No such file or directory" in diff.output and "BUGGY" not in diff.output.replace("/app", "")
        # the agent's own copy still works (and is the one pytest would import)
        assert box.exec("cd /app && python3 -c 'import more_itertools; print(more_itertools.chunked([], 1))'").output \
            == "BUGGY\n"
    finally:
        box.close()


def test_termgym_and_its_task_data_are_not_visible(system):
    box = start(system, SandboxSpec())
    try:
        out = box.exec("python3 -c 'import termgym' 2>&1; echo rc=$?")
        assert "No module named 'termgym'" in out.output and "rc=1" in out.output
        found = box.exec("find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o \\( -name 'fix.patch' "
                         "-o -name 'bug.patch' -o -name 'world.py' -o -iname '*termgym*' \\) -print 2>/dev/null")
        assert found.output.strip() == "", found.output
        # the grep an agent would try for a bundled task's fix
        marker = (PACKAGE_DIR.parent / "termgym_data/swesynth/tasks/ledgerly-03e7642999/fix.patch").read_text().splitlines()[0]
        grep = box.exec(f"grep -rlF -- {marker[:40]!r} /usr/lib/python3* /usr/local /etc /opt /srv /var 2>/dev/null | head -3")
        assert grep.output.strip() == ""
    finally:
        box.close()


_SYSTEM_INSTALL = textwrap.dedent('''
    # In a private mount namespace: make this checkout's termgym a system-wide install under /usr,
    # then look for it from a sandbox running on the host's /usr and from one on the runtime.
    import glob, os, subprocess, sys, warnings
    site = sorted(glob.glob("/usr/local/lib/python3*/dist-packages"))[0]
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", site], check=True)
    os.mkdir(f"{site}/termgym")
    subprocess.run(["mount", "--bind", "-o", "ro", PACKAGE_DIR, f"{site}/termgym"], check=True)
    os.makedirs(f"{site}/termgym-0.1.0.dist-info")
    assert os.path.isfile(f"{site}/termgym/tasks/liveweb/world.py"), "the host install is in place"
    warnings.simplefilter("ignore", RuntimeWarning)
    from termgym.sandbox import SandboxSpec, make_sandbox
    for runtime in ("host", "pinned"):
        with make_sandbox("local", SandboxSpec(), runtime=runtime) as box:
            out = box.exec("python3 -c 'import termgym' 2>&1 | tail -1; ls " + site + "; "
                           "find / \\\\( -path /proc -o -path /sys -o -path /dev \\\\) -prune -o "
                           "\\\\( -name fix.patch -o -name world.py \\\\) -print")
            print(runtime, repr(out.output))
''')


def test_a_system_wide_termgym_install_is_hidden_from_host_runtime_sandboxes():
    script = f"PACKAGE_DIR = {str(PACKAGE_DIR)!r}\n" + _SYSTEM_INSTALL
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, "-c", script],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith(("host ", "pinned ")))
    for runtime in ("host", "pinned"):
        seen = eval(lines[runtime])  # the repr printed above
        assert "No module named 'termgym'" in seen, (runtime, seen)
        assert "termgym" not in seen.replace("No module named 'termgym'", ""), (runtime, seen)
        assert "fix.patch" not in seen and "world.py" not in seen
