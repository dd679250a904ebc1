"""``termgym doctor``: which sandbox backends work on this machine, whether the task runtime is built
and runs, and what to do about what is missing."""

from __future__ import annotations

import argparse
import shutil
import warnings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("doctor", help="check which sandbox backends work here")
    parser.set_defaults(func=run)


def check_local() -> tuple[bool, str]:
    from termgym.sandbox.base import BackendUnavailable, SandboxSpec
    from termgym.sandbox.local import BubblewrapSandbox, cgroups_available
    from termgym.sandbox.runtime import find_runtime

    # bubblewrap itself is checked on the host's /usr when the runtime is not built (its own row says so)
    runtime = None if find_runtime() is not None else "host"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with BubblewrapSandbox(SandboxSpec(), runtime=runtime) as box:
                result = box.exec("echo ok", timeout=20)
    except BackendUnavailable as exc:
        return False, str(exc)
    except Exception as exc:
        return False, f"bubblewrap is installed but a sandbox failed to start: {exc}"
    if result.output.strip() != "ok":
        return False, f"a sandbox started but a command failed: {result.output.strip()}"
    limits = "cgroup v1 memory+pids limits" if cgroups_available() else "rlimits only (no writable cgroup v1)"
    return True, f"bubblewrap sandbox works ({limits})"


def check_runtime() -> tuple[bool, str]:
    """Is the pinned task runtime built, and do its Python and pytest run inside a sandbox?"""
    from termgym.sandbox.base import BackendUnavailable, SandboxSpec
    from termgym.sandbox.local import BubblewrapSandbox
    from termgym.sandbox.runtime import require_runtime, runtime_mode

    try:
        info = require_runtime()
    except BackendUnavailable as exc:
        return False, str(exc)
    rebuild = "rebuild it with `termgym runtime build --force`"
    probe = "python3 -c 'import platform; print(platform.python_version())' && python3 -m pytest --version 2>&1"
    try:
        with BubblewrapSandbox(SandboxSpec(), runtime="pinned") as box:
            result = box.exec(probe, timeout=60)
    except BackendUnavailable as exc:  # no bubblewrap: the runtime itself may be fine
        return True, f"{info.version} built at {info.rootfs} (not run: {exc})"
    except Exception as exc:
        return False, f"{info.version} is built but a sandbox on it failed to start ({exc}); {rebuild}"
    lines = result.output.split()
    if result.exit_code != 0 or not lines or lines[0] != info.python or info.pytest not in result.output:
        return False, (f"{info.version} is built but python3/pytest do not work inside it "
                       f"({result.output.strip()[-300:]!r}); {rebuild}")
    host = " (TERMGYM_RUNTIME=host: sandboxes use this host's /usr instead)" if runtime_mode() == "host" else ""
    return True, f"{info.version}: Python {info.python}, pytest {info.pytest}, {info.size_mb:.0f} MB{host}"


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
    from termgym.sandbox.runtime import current_version

    try:
        labels = client.images.get(BASE_IMAGE).labels or {}
        recipe = labels.get("org.termgym.recipe", "")
        if recipe == current_version():
            image = f"base image {BASE_IMAGE} present (runtime {recipe})"
        else:
            image = (f"base image {BASE_IMAGE} is from runtime {recipe or 'unknown'}, not {current_version()}: "
                     "run `termgym images build-base`")
    except Exception:
        image = f"base image {BASE_IMAGE} missing: run `termgym images build-base`"
    return True, f"Docker engine {version} reachable; {image}"


def check_testenvs() -> tuple[bool, str]:
    """Are the test environments of the bundled SWE-SYNTH projects provisioned here?"""
    from termgym.tasks.swesynth.projects import (
        PROVISION_COMMAND,
        load_projects,
        missing_testenvs,
        served_projects,
        testenv_root,
    )

    try:
        total = len(load_projects())
        served = served_projects()
        missing = missing_testenvs(served)
        factory_only = missing_testenvs(sorted(set(load_projects()) - set(served)))
    except Exception as exc:
        return False, f"cannot read the bundled projects: {exc}"
    if missing:
        return False, (f"{len(missing)} of the {len(served)} SWE-SYNTH projects the default suite serves have no "
                       f"test environment ({', '.join(missing[:6])}{'...' if len(missing) > 6 else ''}): "
                       f"run `{PROVISION_COMMAND}`")
    rest = (f"; {len(factory_only)} of the {total - len(served)} factory-only projects are not "
            f"(`{PROVISION_COMMAND} --all`)" if factory_only else f"; all {total} bundled projects are")
    return True, (f"the test environments of the {len(served)} projects the default suite serves are provisioned "
                  f"in {testenv_root()}{rest}")


def run(args: argparse.Namespace) -> int:
    rows = [("local", *check_local()), ("runtime", *check_runtime()), ("docker", *check_docker()),
            ("testenvs", *check_testenvs())]
    for tool in ("tmux", "git", "python3", "debootstrap"):
        rows.append((tool, shutil.which(tool) is not None, shutil.which(tool) or "not installed"))
    for name, ok, detail in rows:
        mark = "\x1b[32mok\x1b[0m  " if ok else "\x1b[31mno\x1b[0m  "
        print(f"{mark}{name:12} {detail}")
    return 0 if rows[0][1] and rows[1][1] else 1
