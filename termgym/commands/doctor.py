"""``termgym doctor``: which sandbox backends work on this machine, and why not."""

from __future__ import annotations

import argparse
import shutil


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("doctor", help="check which sandbox backends work here")
    parser.set_defaults(func=run)


def check_local() -> tuple[bool, str]:
    from termgym.sandbox.base import BackendUnavailable, SandboxSpec
    from termgym.sandbox.local import BubblewrapSandbox, cgroups_available

    try:
        with BubblewrapSandbox(SandboxSpec()) as box:
            result = box.exec("echo ok", timeout=20)
    except BackendUnavailable as exc:
        return False, str(exc)
    except Exception as exc:
        return False, f"bubblewrap is installed but a sandbox failed to start: {exc}"
    if result.output.strip() != "ok":
        return False, f"a sandbox started but a command failed: {result.output.strip()}"
    limits = "cgroup v1 memory+pids limits" if cgroups_available() else "rlimits only (no writable cgroup v1)"
    return True, f"bubblewrap sandbox works ({limits})"


def check_docker() -> tuple[bool, str]:
    try:
        import docker
    except ImportError:
        return False, "the Docker SDK is missing: pip install 'termgym[docker]'"
    try:
        client = docker.from_env(timeout=5)
        version = client.version().get("Version", "?")
    except Exception as exc:
        return False, (f"no Docker engine answers ({type(exc).__name__}); install docker.io and start dockerd, "
                       "or set DOCKER_HOST")
    try:
        from termgym.sandbox.images import DEFAULT_BASE_IMAGE as BASE_IMAGE
    except Exception:
        BASE_IMAGE = "termgym/base:bookworm"
    try:
        client.images.get(BASE_IMAGE)
        image = f"base image {BASE_IMAGE} present"
    except Exception:
        image = f"base image {BASE_IMAGE} missing: run `termgym images build-base`"
    return True, f"Docker engine {version} reachable; {image}"


def check_swesynth_runtime() -> tuple[bool, str]:
    """Whether SWE-SYNTH grading can run in the local sandbox: its interpreter and pytest."""
    from termgym.sandbox.base import SandboxSpec
    from termgym.sandbox.local import BubblewrapSandbox

    probe = "python3 -c 'import sys, pytest; print(sys.version.split()[0], pytest.__version__)'"
    try:
        with BubblewrapSandbox(SandboxSpec()) as box:
            result = box.exec(probe, timeout=60)
    except Exception as exc:
        return False, f"no local sandbox to check it in: {exc}"
    if result.exit_code != 0:
        return False, ("the sandbox's python3 cannot import pytest, so every SWE-SYNTH grade would be an "
                       f"infrastructure error: {result.output.strip()[-200:]}")
    python, pytest_version = result.output.split()[:2]
    return True, f"SWE-SYNTH tests run in the local sandbox (Python {python}, pytest {pytest_version})"


def run(args: argparse.Namespace) -> int:
    rows = [("local", *check_local()), ("docker", *check_docker())]
    if rows[0][1]:
        rows.append(("swe-synth", *check_swesynth_runtime()))
    for tool in ("tmux", "git", "python3", "debootstrap"):
        rows.append((tool, shutil.which(tool) is not None, shutil.which(tool) or "not installed"))
    for name, ok, detail in rows:
        mark = "\x1b[32mok\x1b[0m  " if ok else "\x1b[31mno\x1b[0m  "
        print(f"{mark}{name:12} {detail}")
    return 0 if rows[0][1] else 1
