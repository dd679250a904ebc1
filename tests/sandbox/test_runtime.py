"""The pinned task runtime: versioning, where it lives, what a local sandbox on it sees, the error
without it, the Docker image made from the same tree, records and ``termgym doctor``/``runtime``.

These run against the runtime ``termgym runtime build`` made on this machine (setup builds it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from termgym import CommandTask, ListSuite
from termgym.env import TerminalEnv
from termgym.sandbox import SandboxSpec, make_sandbox
from termgym.sandbox.local import BubblewrapSandbox
from termgym.sandbox.runtime import (
    RUNTIME_PACKAGES,
    RuntimeMissing,
    build_runtime,
    current_version,
    entry_distribution,
    hidden_distributions,
    hidden_entries,
    project_distributions,
    recipe_hash,
    require_runtime,
    runtime_home,
    runtime_mode,
)
from termgym.wrappers.recording import RecordEpisodes, read_episodes

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def runtime():
    """The built runtime; its absence fails (CI builds it in setup) with the command to run."""
    try:
        return require_runtime()
    except RuntimeMissing as exc:
        pytest.fail(str(exc), pytrace=False)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "termgym.cli", *args], capture_output=True, text=True,
                          timeout=180, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


# -- versions and places -------------------------------------------------------------------------


def test_version_is_the_recipe_hash_and_changes_with_the_recipe():
    assert current_version() == f"bookworm-{recipe_hash()}"
    assert recipe_hash() == recipe_hash(RUNTIME_PACKAGES)
    assert recipe_hash(RUNTIME_PACKAGES) != recipe_hash((*RUNTIME_PACKAGES, "make"))
    assert recipe_hash(("a", "b")) == recipe_hash(("b", "a"))  # the order of the list is not content


def test_runtime_home_is_overridable(monkeypatch, tmp_path):
    monkeypatch.setenv("TERMGYM_RUNTIME_DIR", str(tmp_path))
    assert runtime_home() == tmp_path
    monkeypatch.delenv("TERMGYM_RUNTIME_DIR")
    assert runtime_home() == Path("/var/lib/termgym/runtime")  # root (this machine, CI)


def test_unknown_runtime_mode_is_an_error_naming_the_setting(monkeypatch):
    monkeypatch.setenv("TERMGYM_RUNTIME", "hosted")
    with pytest.raises(ValueError, match="TERMGYM_RUNTIME must be one of pinned, host, not 'hosted'"):
        runtime_mode()
    with pytest.raises(ValueError, match="runtime= must be one of"):
        BubblewrapSandbox(SandboxSpec(), runtime="usr")


def test_missing_runtime_names_the_build_command(monkeypatch, tmp_path):
    monkeypatch.setenv("TERMGYM_RUNTIME_DIR", str(tmp_path / "empty"))
    box = BubblewrapSandbox(SandboxSpec())
    with pytest.raises(RuntimeMissing) as err:
        box.start()
    message = str(err.value)
    assert current_version() in message and f"TERMGYM_RUNTIME_DIR={tmp_path / 'empty'} termgym runtime build" in message
    assert "TERMGYM_RUNTIME=host" in message
    box.close()


def test_build_is_a_no_op_when_the_current_version_exists(runtime):
    messages: list[str] = []
    info = build_runtime(log=messages.append)
    assert info.version == runtime.version and messages == [f"runtime {runtime.version} is up to date ({info.rootfs})"]


def test_runtime_json_records_what_is_inside(runtime):
    meta = json.loads((runtime.path / "runtime.json").read_text())
    assert meta["version"] == current_version()
    assert meta["python"].startswith("3.") and meta["pytest"]
    assert meta["packages"]["python3-pytest"].startswith(meta["pytest"])
    assert set(RUNTIME_PACKAGES) <= set(meta["packages"])


# -- a local sandbox on the runtime ---------------------------------------------------------------


def test_local_sandbox_runs_on_the_runtime_not_the_host(runtime):
    with make_sandbox("local", SandboxSpec()) as box:
        assert box.runtime == runtime.version
        out = box.exec("python3 -c 'import platform; print(platform.python_version())'; python3 -m pytest --version 2>&1; "
                       "git --version; tmux -V; curl --version | head -1; cat /etc/debian_version; "
                       "md5sum /etc/ld.so.cache /usr/bin/python3 | cut -d' ' -f1")
        assert out.exit_code == 0, out.output
        lines = out.output.splitlines()
        assert lines[0] == runtime.python and f"pytest {runtime.pytest}" in lines[1]
        assert lines[5] == (runtime.rootfs / "etc/debian_version").read_text().strip()
        import hashlib

        expected = [hashlib.md5((runtime.rootfs / p).read_bytes()).hexdigest() for p in ("etc/ld.so.cache", "usr/bin/python3")]
        assert lines[6:8] == expected
        assert box.exec("touch /usr/bin/x /usr/lib/python3/dist-packages/x").exit_code != 0


def test_host_runtime_is_an_explicit_opt_in_with_a_warning():
    with pytest.warns(RuntimeWarning, match="depends on this machine"):
        import termgym.sandbox.local as local

        local._HOST_WARNED = False
        box = make_sandbox("local", SandboxSpec(), runtime="host")
        box.start()
    try:
        assert box.runtime == "host"
        assert box.exec("md5sum /usr/bin/bash | cut -d' ' -f1").output.strip() == \
            subprocess.run("md5sum /usr/bin/bash | cut -d' ' -f1", shell=True, capture_output=True, text=True).stdout.strip()
    finally:
        box.close()


# -- what is hidden -----------------------------------------------------------------------------


@pytest.mark.parametrize(("entry", "name"), [
    ("more_itertools", "more_itertools"), ("more_itertools-8.10.0.egg-info", "more_itertools"),
    ("pluggy-1.0.0+repack.egg-info", "pluggy"), ("six.py", "six"),
    ("_cffi_backend.cpython-311-x86_64-linux-gnu.so", "_cffi_backend"),
    ("__editable__.termgym-0.1.0.pth", "termgym"), ("__editable___termgym_0_1_0_finder.py", "termgym"),
    ("More.Itertools-10.dist-info", "more_itertools"), ("README.txt", None),
])
def test_entry_distribution(entry, name):
    assert entry_distribution(entry) == name


def test_project_distributions_reads_metadata_and_layout(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "More-Itertools"\n')
    (tmp_path / "src" / "more_itertools").mkdir(parents=True)
    (tmp_path / "src" / "more_itertools" / "__init__.py").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='mi-extra')\n")
    (tmp_path / "conftest.py").write_text("")
    (tmp_path / "helpers.py").write_text("")
    assert project_distributions(tmp_path) == {"more_itertools", "mi_extra", "helpers"}
    spec = SandboxSpec(copy_dirs={str(tmp_path): "/app"}, hidden_packages=("Six",))
    assert hidden_distributions(spec) == {"termgym", "termgym_data", "more_itertools", "mi_extra", "helpers", "six"}


def test_hidden_entries_include_bytecode_of_single_modules(tmp_path):
    for name in ("six.py", "six-1.16.0.egg-info", "sixth", "pytest", "__pycache__"):
        (tmp_path / name).mkdir() if "." not in name or name.endswith("info") else (tmp_path / name).write_text("")
    (tmp_path / "__pycache__" / "six.cpython-311.pyc").write_text("")
    (tmp_path / "__pycache__" / "sixth.cpython-311.pyc").write_text("")
    assert hidden_entries(tmp_path, ["six"]) == ["six-1.16.0.egg-info", "six.py", "__pycache__/six.cpython-311.pyc"]


# -- Docker: the same tree as the base image -------------------------------------------------------


@pytest.mark.docker
def test_docker_image_is_imported_from_the_same_runtime(runtime, tmp_path):
    from termgym.sandbox.docker import DockerSandbox, get_client
    from termgym.sandbox.images import LABEL_RECIPE, import_runtime

    sys.path.insert(0, str(Path(__file__).parent))
    from tests.docker_engine import require_docker

    require_docker()
    client = get_client()
    name = f"termgym/runtime-test-{uuid.uuid4().hex[:8]}:latest"
    try:
        import_runtime(runtime, name, client=client, log=lambda m: None)
        assert client.images.get(name).labels[LABEL_RECIPE] == runtime.version
        with DockerSandbox(SandboxSpec(image=name)) as box:
            assert box.runtime == runtime.version
            out = box.exec("python3 -c 'import platform; print(platform.python_version())'; "
                           "python3 -m pytest --version 2>&1; cat /etc/debian_version")
        with make_sandbox("local", SandboxSpec()) as local_box:
            same = local_box.exec("python3 -c 'import platform; print(platform.python_version())'; "
                                  "python3 -m pytest --version 2>&1; cat /etc/debian_version")
        assert out.exit_code == 0 and out.output == same.output
        # the runtime holds a pytest dependency (more-itertools): a task on that project must not see it
        project = tmp_path / "mi"
        (project / "more_itertools").mkdir(parents=True)
        (project / "more_itertools" / "__init__.py").write_text("")
        with DockerSandbox(SandboxSpec(image=name, workdir="/app", copy_dirs={str(project): "/app"})) as box:
            gone = box.exec("cd / && python3 -c 'import more_itertools' 2>&1; python3 -m pytest --version 2>&1")
        assert "No module named 'more_itertools'" in gone.output and f"pytest {runtime.pytest}" in gone.output
    finally:
        client.images.remove(name, force=True)


def test_runtime_clean_check(runtime):
    from termgym.sandbox.runtime import runtime_has_none_of

    assert runtime_has_none_of(runtime.version, ["termgym", "ledgerly"])
    assert not runtime_has_none_of(runtime.version, ["more-itertools"])  # a pytest dependency in the runtime
    assert not runtime_has_none_of("image:python:3.12", ["termgym"])  # cannot tell: the container cleans up


# -- records and commands -------------------------------------------------------------------------


def test_episode_info_and_record_carry_the_runtime(runtime, tmp_path):
    suite = ListSuite([CommandTask("t", "say hi", grade_command="true")], name="one")
    env = RecordEpisodes(TerminalEnv(suite), tmp_path / "runs")
    try:
        _, info = env.reset(options={"task_id": "t"})
        assert info["runtime"] == runtime.version
        env.step("THOUGHT: done\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```")
    finally:
        env.close()
    records = list(read_episodes(tmp_path / "runs"))
    assert records and records[0]["runtime"] == runtime.version


def test_runtime_cli_show_and_errors(runtime, tmp_path):
    shown = cli("runtime", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["version"] == runtime.version
    listed = cli("runtime", "list")
    assert runtime.version in listed.stdout and "(current)" in listed.stdout
    missing = cli("runtime", "remove", "bookworm-nope")
    assert missing.returncode == 1 and "no runtime 'bookworm-nope'" in missing.stderr
    empty = cli("runtime", "show", env={"TERMGYM_RUNTIME_DIR": str(tmp_path)})
    assert empty.returncode == 1 and "termgym runtime build" in empty.stdout


def test_doctor_checks_the_runtime(runtime, tmp_path):
    ok = cli("doctor")
    row = next(line for line in ok.stdout.splitlines() if "runtime" in line)
    assert "ok" in row and runtime.version in row and f"Python {runtime.python}" in row
    missing = cli("doctor", env={"TERMGYM_RUNTIME_DIR": str(tmp_path)})
    assert missing.returncode == 1
    row = next(line for line in missing.stdout.splitlines() if " runtime " in line)
    assert "no" in row and "termgym runtime build" in row
    local = next(line for line in missing.stdout.splitlines() if " local " in line)
    assert "bubblewrap sandbox works" in local  # bubblewrap itself is fine; only the runtime is missing
