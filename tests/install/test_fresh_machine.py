"""The README's quick start, run verbatim on a fresh Debian 12 machine (and, with
``TERMGYM_FRESH_MACHINES=all``, a fresh Ubuntu 24.04 one).

Each "machine" is a container from a minimal root file system holding nothing but ``python3`` and
``git`` (debootstrap, then ``docker import``: see :mod:`fresh_images`; the images are kept between
runs and rebuilt only when their recipe changes). The container clones the repository (its
committed ``HEAD``), runs the first command of the README's quick start exactly as written, and the
test checks what the quick start promises: every oracle episode passed and the report exists, with
termgym installed in the project's ``.venv``.

The quick start's sandboxes are bubblewrap sandboxes: unsharing their namespaces and mounting
inside a container needs CAP_SYS_ADMIN, CAP_NET_ADMIN (the loopback of its network namespace) and
no seccomp/AppArmor/masked-/proc confinement (:data:`SANDBOX_CAPABLE`). That is ``--privileged``
minus the capabilities a host may withhold (this CI's Docker host has no CAP_SYS_RESOURCE, so
``--privileged`` itself cannot start). The containers reach the same mirrors and PyPI as this
machine; when this machine trusts a local CA (a TLS-inspecting proxy), its CA bundle is handed to
pip as it would be on such a network.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import fresh_images
import pytest

REPO = Path(__file__).resolve().parents[2]
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def quickstart_tasks() -> int:
    """How many episodes the quick start plays: the default suite's test split, at most its --limit 20."""
    from termgym.tasks.swesynth import default_suite

    return min(20, len(default_suite().task_ids("test")))


#: What bubblewrap needs inside a container.
SANDBOX_CAPABLE = ("--cap-add", "SYS_ADMIN", "--cap-add", "NET_ADMIN", "--security-opt", "seccomp=unconfined",
                   "--security-opt", "apparmor=unconfined", "--security-opt", "systempaths=unconfined")


def readme_quickstart_command(readme: Path = REPO / "README.md") -> str:
    """The first command of the README's quick start block, without its comment."""
    text = readme.read_text(encoding="utf-8")
    try:
        section = text.split("\n## Quick start", 1)[1]
        block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    except IndexError:
        raise AssertionError("README.md has no '## Quick start' section with a ```bash block") from None
    first = next(line for line in block.splitlines() if line.strip())
    return first.split("#", 1)[0].strip()


def test_readme_quickstart_command_is_found():
    assert readme_quickstart_command() == "bash scripts/quickstart.sh"


MACHINES = {"debian-12": fresh_images.build_debian, "ubuntu-24.04": fresh_images.build_ubuntu}
#: ``TERMGYM_FRESH_MACHINES``: which machines to replay the quick start on ("all", or names separated by
#: commas). CI replays it on Debian 12 only: each replay takes 5-10 minutes of a 2-core box (most of it
#: installing and provisioning, then 20 episodes), and CI's run must stay within its time.
MACHINES_ENV = "TERMGYM_FRESH_MACHINES"
DEFAULT_MACHINES = ("debian-12",)


def chosen_machines(value: str | None) -> list[str]:
    """The machines ``TERMGYM_FRESH_MACHINES`` names (unset or empty: :data:`DEFAULT_MACHINES`)."""
    if not value or not value.strip():
        return list(DEFAULT_MACHINES)
    if value.strip() == "all":
        return list(MACHINES)
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in MACHINES]
    if unknown:
        raise ValueError(f"{MACHINES_ENV}={value!r}: unknown machine(s) {unknown}; known: {list(MACHINES)} or 'all'")
    return names


def test_the_machines_to_replay_on_are_chosen_by_name():
    assert chosen_machines(None) == ["debian-12"]
    assert chosen_machines("all") == list(MACHINES)
    assert chosen_machines("ubuntu-24.04, debian-12") == ["ubuntu-24.04", "debian-12"]
    with pytest.raises(ValueError, match="unknown machine"):
        chosen_machines("fedora-40")


@pytest.fixture(scope="session", params=chosen_machines(os.environ.get(MACHINES_ENV)))
def fresh_image(request, docker_client) -> tuple[str, str]:
    started = time.monotonic()
    image = MACHINES[request.param](docker_client)
    print(f"{image} ready in {time.monotonic() - started:.0f} s")
    return request.param, image


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(1800)  # the container's own budget below; a loaded 2-core box passed 600 s (two 10-min runs)
def test_readme_quickstart_on_a_fresh_machine(fresh_image, tmp_path):
    machine, image = fresh_image
    command = readme_quickstart_command()
    # The repository as a clone source the container can read (a worktree's .git points elsewhere).
    subprocess.run(["git", "clone", "--quiet", "--bare", str(REPO), str(tmp_path / "termgym.git")], check=True)
    out = tmp_path / "out"
    out.mkdir()
    script = "\n".join([
        "set -u",
        # fresh indeed: no pip, no venv module, no bubblewrap
        "if python3 -m pip --version >/dev/null 2>&1 || command -v bwrap >/dev/null; then",
        "  echo 'NOT A FRESH MACHINE'; exit 90",
        "fi",
        "git clone -q /src/termgym.git /root/termgym && cd /root/termgym || exit 91",
        f"{command}",
        "rc=$?",
        "cp -r runs/quickstart /out/ 2>/dev/null",
        "test -x .venv/bin/termgym && echo VENV_OK",
        "exit $rc",
    ])
    docker = ["docker", "run", "--rm", *SANDBOX_CAPABLE, "--name", f"termgym-install-test-{tmp_path.name}",
              "-v", f"{tmp_path / 'termgym.git'}:/src/termgym.git:ro", "-v", f"{out}:/out"]
    if HOST_CA_BUNDLE.is_file():
        docker += ["-v", f"{HOST_CA_BUNDLE}:/host-ca.crt:ro", "-e", "PIP_CERT=/host-ca.crt"]
    started = time.monotonic()
    proc = subprocess.run([*docker, image, "bash", "-c", script], capture_output=True, text=True,
                          timeout=1800)
    took = time.monotonic() - started
    log = proc.stdout + proc.stderr
    print(f"`{command}` on a fresh {machine} container took {took:.0f} s\n{log[-3000:]}")
    assert proc.returncode == 0, f"`{command}` failed (exit {proc.returncode}):\n{log[-6000:]}"
    assert "VENV_OK" in proc.stdout, f"no .venv/bin/termgym after the quick start:\n{log[-3000:]}"
    assert "source .venv/bin/activate" in proc.stdout, "setup did not say how to activate the venv"
    summary = json.loads((out / "quickstart" / "summary.json").read_text())
    expected = quickstart_tasks()
    assert expected > 0 and summary["episodes"] == expected and summary["solved"] == expected, (
        f"the quick start solved {summary['solved']} of {summary['episodes']} (errors: {summary['error_types']}, "
        f"ends: {summary['end_reasons']}):\n{log[-4000:]}")
    report = (out / "quickstart" / "report.html").read_text()
    assert "<html" in report.lower() and "SweSynth" in report
